//! What to sweep: the TOML file format, the command-line flags, and the
//! validated [`Sweep`] both turn into.
//!
//! # TOML schema
//!
//! ```toml
//! # Sweep-wide settings; every key is optional (defaults shown).
//! [sweep]
//! loads = [0.2, 0.4, 0.6, 0.75, 0.9]  # offered load, fractions of capacity
//! point_secs = 1.5      # measured seconds per point
//! warmup_secs = 0.5     # discarded seconds before each point
//! slo_factor = 10.0     # SLO = slo_factor × S̄ (S̄ measured, nominal as fallback)
//! stop_p99_factor = 4.0 # a curve stops once p99 > stop_p99_factor × SLO ...
//! stop_rate_ratio = 0.9 # ... or achieved rate < stop_rate_ratio × target
//! cdf_load = 0.5        # the load fraction whose latency CDF the report plots
//! drain_secs = 1.0      # generator waits this long for late replies (stops early when none)
//! retries = 1          # re-measure a point whose generator fell behind (lateness check)
//! baseline = "vanilla"  # the × column's reference: the curve of this mode (or
//!                       # name) in the same group (e.g. "memcached")
//! out = "results/my-run" # output folder (default `results/bench-<timestamp>`)
//!
//! # Defaults for every configuration below (same keys as [[config]]).
//! [defaults]
//! workers = 8
//! service = "emulate"   # spin | emulate
//! mean_us = 500.0       # S̄ of the parametric workloads
//!
//! # A cross product over the defaults: one configuration per
//! # (mode, workload) pair. Optional.
//! [matrix]
//! modes = ["vanilla", "hybrid", "tokio"]
//! workloads = ["exponential", "bimodal-1"]
//! connections = [24, 96, 384]   # optional third axis (default: [defaults])
//!
//! # Explicit configurations, each overriding [defaults]. Optional.
//! [[config]]
//! name = "memcached-4t"      # label in tables and plots (default: mode)
//! mode = "memcached"         # an skq policy ("vanilla", "best2+steal", ...),
//!                            # "tokio", "memcached" or "nginx"
//! workers = 4
//! protocol = "memcached"     # rpc | memcached | http (default by mode)
//! workload = "etc"           # rpc: service-time workload (`--workload`);
//!                            # memcached: key/value mix (`--kv-workload`)
//! capacity_rps = 200000.0    # required when S̄ is unknown (peers)
//! slo_us = 500.0             # required when S̄ is unknown (peers)
//! ```
//!
//! Keys of a configuration (`[defaults]`, `[[config]]`): `name`, `mode`,
//! `workload`, `workers`, `service`, `mean_us`, `scale`, `pin`, `rtshare`,
//! `rtfreq`, `steal_k`, `connections`, `threads`, `protocol`,
//! `capacity_rps`, `slo_us`, `affinity` (`none` or `split`: server and load
//! generator on disjoint halves of the CPUs; default `split`). Unknown keys are errors. Peers (memcached, nginx)
//! always do real work: `service` is ignored for them and reads `spin`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use skq_proto::workload::{ServiceSpec, Workload};

/// What serves the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// `skq serve rpc --runtime skq --mode MODE`.
    Skq,
    /// `skq serve rpc --runtime tokio`.
    Tokio,
    /// Debian's memcached.
    Memcached,
    /// Debian's nginx.
    Nginx,
    /// `skq serve kv`: `kv-tpc` (thread-per-core) or `kv-MODE` (shared
    /// architecture on skq mode MODE, e.g. `kv-hybrid`, or `kv-epoll`).
    Kv,
}

impl ServerKind {
    /// The server a `mode` string names.
    pub fn from_mode(mode: &str) -> ServerKind {
        match mode {
            "tokio" => ServerKind::Tokio,
            "memcached" => ServerKind::Memcached,
            "nginx" => ServerKind::Nginx,
            m if m.starts_with("kv-") => ServerKind::Kv,
            _ => ServerKind::Skq,
        }
    }

    /// The load generator protocol it speaks.
    pub fn default_protocol(self) -> &'static str {
        match self {
            ServerKind::Skq | ServerKind::Tokio => "rpc",
            ServerKind::Memcached | ServerKind::Kv => "memcached",
            ServerKind::Nginx => "http",
        }
    }
}

/// Spin (CPU-bound handler) or emulate (the handler sleeps; BRIEF §8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceMode {
    /// Busy loop for the service time.
    Spin,
    /// Absolute-deadline sleep for the service time.
    Emulate,
}

impl ServiceMode {
    /// `spin` or `emulate`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceMode::Spin => "spin",
            ServiceMode::Emulate => "emulate",
        }
    }
}

impl std::str::FromStr for ServiceMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "spin" => Ok(ServiceMode::Spin),
            "emulate" => Ok(ServiceMode::Emulate),
            _ => bail!("unknown service mode `{s}`; expected spin or emulate"),
        }
    }
}

/// CPU placement of server and load generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Affinity {
    /// Leave placement to the kernel.
    None,
    /// Server on the first half of the CPUs, generator on the rest.
    Split,
}

/// One configuration as written in TOML or built from flags: every field
/// optional so `[defaults]` and `[[config]]` can be merged.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigEntry {
    /// Label (default: the mode).
    pub name: Option<String>,
    /// Policy, `tokio`, `memcached` or `nginx`.
    pub mode: Option<String>,
    /// Workload name for the load generator.
    pub workload: Option<String>,
    /// Server worker threads.
    pub workers: Option<usize>,
    /// `spin` or `emulate`.
    pub service: Option<ServiceMode>,
    /// S̄ (µs) for parametric workloads.
    pub mean_us: Option<f64>,
    /// Emulation scale factor for every class of the workload.
    pub scale: Option<f64>,
    /// Pass `--pin` to the server.
    pub pin: Option<bool>,
    /// `--rtshare` (percent).
    pub rtshare: Option<u32>,
    /// `--rtfreq` (waits/s).
    pub rtfreq: Option<u32>,
    /// `--steal-k`.
    pub steal_k: Option<usize>,
    /// Load connections.
    pub connections: Option<usize>,
    /// Generator threads.
    pub threads: Option<usize>,
    /// Generator protocol.
    pub protocol: Option<String>,
    /// Capacity that load fractions multiply (default workers / S̄).
    pub capacity_rps: Option<f64>,
    /// Fixed SLO (default slo_factor × S̄).
    pub slo_us: Option<f64>,
    /// CPU placement.
    pub affinity: Option<Affinity>,
}

impl ConfigEntry {
    /// `self` with unset fields taken from `base`.
    pub fn over(&self, base: &ConfigEntry) -> ConfigEntry {
        macro_rules! pick {
            ($($f:ident),*) => { ConfigEntry { $($f: self.$f.clone().or_else(|| base.$f.clone())),* } };
        }
        pick!(
            name,
            mode,
            workload,
            workers,
            service,
            mean_us,
            scale,
            pin,
            rtshare,
            rtfreq,
            steal_k,
            connections,
            threads,
            protocol,
            capacity_rps,
            slo_us,
            affinity
        )
    }
}

/// Sweep-wide settings of the TOML `[sweep]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepEntry {
    /// Load fractions.
    pub loads: Option<Vec<f64>>,
    /// Measured seconds per point.
    pub point_secs: Option<f64>,
    /// Warm-up seconds per point.
    pub warmup_secs: Option<f64>,
    /// SLO multiple of S̄.
    pub slo_factor: Option<f64>,
    /// Saturation: p99 above this multiple of the SLO.
    pub stop_p99_factor: Option<f64>,
    /// Saturation: achieved below this fraction of the target.
    pub stop_rate_ratio: Option<f64>,
    /// Load fraction for the CDF plot.
    pub cdf_load: Option<f64>,
    /// Generator drain after the last send.
    pub drain_secs: Option<f64>,
    /// Mode or name of the baseline curve (default `vanilla`).
    pub baseline: Option<String>,
    /// Re-measurements of a point whose generator fell behind.
    pub retries: Option<u32>,
    /// Output folder.
    pub out: Option<PathBuf>,
}

/// The `[matrix]` table: cross product over `[defaults]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixEntry {
    /// Modes.
    pub modes: Vec<String>,
    /// Workloads (default: the `[defaults]` workload).
    #[serde(default)]
    pub workloads: Vec<String>,
    /// Connection counts (default: the `[defaults]` count).
    #[serde(default)]
    pub connections: Vec<usize>,
}

/// A whole TOML file.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// `[sweep]`.
    #[serde(default)]
    pub sweep: SweepEntry,
    /// `[defaults]`.
    #[serde(default)]
    pub defaults: ConfigEntry,
    /// `[matrix]`.
    pub matrix: Option<MatrixEntry>,
    /// `[[config]]`.
    #[serde(default)]
    pub config: Vec<ConfigEntry>,
}

impl SweepFile {
    /// Parses TOML text; errors name the file's line and key.
    pub fn parse(text: &str) -> Result<SweepFile> {
        toml::from_str(text).map_err(|e| {
            // One line: "line L, column C: message".
            let at = e.span().map_or_else(String::new, |r| {
                let before = &text[..r.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.chars().rev().take_while(|&c| c != '\n').count() + 1;
                format!("line {line}, column {col}: ")
            });
            anyhow::anyhow!("{at}{}", e.message().trim_end())
        })
    }

    /// The configurations the file lists: the matrix first, then `[[config]]`.
    pub fn entries(&self) -> Vec<ConfigEntry> {
        let mut out = Vec::new();
        if let Some(m) = &self.matrix {
            let workloads: Vec<Option<String>> = if m.workloads.is_empty() {
                vec![None]
            } else {
                m.workloads.iter().cloned().map(Some).collect()
            };
            let conns: Vec<Option<usize>> = if m.connections.is_empty() {
                vec![None]
            } else {
                m.connections.iter().copied().map(Some).collect()
            };
            for w in &workloads {
                for &c in &conns {
                    for mode in &m.modes {
                        let e = ConfigEntry {
                            mode: Some(mode.clone()),
                            workload: w.clone(),
                            connections: c,
                            ..Default::default()
                        };
                        out.push(e.over(&self.defaults));
                    }
                }
            }
        }
        out.extend(self.config.iter().map(|c| c.over(&self.defaults)));
        out
    }
}

/// One fully specified configuration: one curve of the sweep.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// Label.
    pub name: String,
    /// Server kind (derived from `mode`).
    pub server: ServerKind,
    /// Mode string (`vanilla`, `best2+steal`, `tokio`, `memcached`, ...).
    pub mode: String,
    /// Workload name.
    pub workload: String,
    /// Worker threads.
    pub workers: usize,
    /// Service mode.
    pub service: ServiceMode,
    /// S̄ argument (µs) given to the generator for parametric workloads.
    pub mean_us: f64,
    /// Emulation scale.
    pub scale: f64,
    /// `--pin`.
    pub pin: bool,
    /// `--rtshare`.
    pub rtshare: Option<u32>,
    /// `--rtfreq`.
    pub rtfreq: Option<u32>,
    /// `--steal-k`.
    pub steal_k: Option<usize>,
    /// Load connections.
    pub connections: usize,
    /// Generator threads.
    pub threads: usize,
    /// Generator protocol.
    pub protocol: String,
    /// Nominal mean service time (µs), None when unknown (peers).
    pub nominal_service_us: Option<f64>,
    /// Requests/s that load fraction 1.0 means.
    pub capacity_rps: f64,
    /// Fixed SLO (µs), overriding slo_factor × S̄.
    pub slo_us: Option<f64>,
    /// CPU placement.
    pub affinity: Affinity,
}

impl Curve {
    /// Builds and validates a curve; `cpus` is the machine's CPU count (spin
    /// capacity cannot exceed it). Errors name the configuration and key.
    pub fn from_entry(e: &ConfigEntry, cpus: usize) -> Result<Curve> {
        let mode = e.mode.clone().unwrap_or_else(|| "vanilla".into());
        let name = e.name.clone().unwrap_or_else(|| mode.clone());
        let ctx = |key: &str| format!("configuration `{name}`: `{key}`");
        let server = ServerKind::from_mode(&mode);
        if server == ServerKind::Skq && !valid_mode(&mode) {
            bail!("{}: unknown mode `{mode}`; expected a policy (vanilla, shared, queue, cpu, best2, hybrid, optionally +steal), tokio, memcached, nginx, kv-tpc or kv-MODE", ctx("mode"));
        }
        let workers = e.workers.unwrap_or(8);
        if !(1..=64).contains(&workers) {
            bail!("{}: {workers} is out of range 1..=64", ctx("workers"));
        }
        // Peers do their real work: `service` (often inherited from
        // [defaults] or --service) does not apply to them.
        let service = match server {
            ServerKind::Memcached | ServerKind::Nginx | ServerKind::Kv => ServiceMode::Spin,
            _ => e.service.unwrap_or(ServiceMode::Emulate),
        };
        let mean_us = e.mean_us.unwrap_or(500.0);
        if !(mean_us.is_finite() && mean_us > 0.0) {
            bail!(
                "{}: {mean_us} must be a positive number of microseconds",
                ctx("mean_us")
            );
        }
        let scale = e.scale.unwrap_or(1.0);
        if !(scale.is_finite() && scale > 0.0) {
            bail!("{}: {scale} must be positive", ctx("scale"));
        }
        let protocol = e
            .protocol
            .clone()
            .unwrap_or_else(|| server.default_protocol().into());
        let default_workload = match protocol.as_str() {
            "rpc" => "exponential",
            "memcached" => "etc",
            _ => "default",
        };
        let workload = e
            .workload
            .clone()
            .unwrap_or_else(|| default_workload.into());
        let nominal_service_us = if protocol == "rpc" {
            // `priority` is exponential service plus a high-priority client.
            let w: Workload = match workload.as_str() {
                "priority" => Workload::Exponential,
                name => name
                    .parse()
                    .map_err(|m: String| anyhow::anyhow!("{}: {m}, priority", ctx("workload")))?,
            };
            let spec = ServiceSpec {
                workload: w,
                mean_ns: mean_us * 1000.0,
                scale,
            };
            Some(spec.mean() / 1000.0)
        } else {
            None
        };
        let capacity_rps = match (e.capacity_rps, nominal_service_us) {
            (Some(c), _) if c.is_finite() && c > 0.0 => c,
            (Some(c), _) => bail!("{}: {c} must be positive", ctx("capacity_rps")),
            (None, Some(s)) => {
                let effective = if service == ServiceMode::Spin {
                    workers.min(cpus.max(1))
                } else {
                    workers
                };
                effective as f64 * 1e6 / s
            }
            (None, None) => bail!(
                "{}: required for protocol `{protocol}` (no mean service time to derive it from)",
                ctx("capacity_rps")
            ),
        };
        if nominal_service_us.is_none() && e.slo_us.is_none() {
            bail!(
                "{}: required for protocol `{protocol}` (no mean service time to derive it from)",
                ctx("slo_us")
            );
        }
        // Split by default: measured on the 2-core VM (2026-11-22), emulated
        // 8-worker runs failed the generator's lateness check at most points
        // with shared CPUs and passed it at every point with the generator on
        // its own CPU (the sleeping workers need little CPU).
        let affinity = e.affinity.unwrap_or(match service {
            ServiceMode::Spin => Affinity::Split,
            ServiceMode::Emulate => Affinity::Split,
        });
        Ok(Curve {
            name,
            server,
            mode,
            workload,
            workers,
            service,
            mean_us,
            scale,
            pin: e.pin.unwrap_or(false),
            rtshare: e.rtshare,
            rtfreq: e.rtfreq,
            steal_k: e.steal_k,
            connections: e.connections.unwrap_or(64).max(1),
            threads: e.threads.unwrap_or(1).max(1),
            protocol,
            nominal_service_us,
            capacity_rps,
            slo_us: e.slo_us,
            affinity,
        })
    }

    /// The key of the group of curves that share a plot and a baseline:
    /// same workload, workers, connections, service mode and protocol.
    pub fn group(&self) -> String {
        format!(
            "{} · {} workers · {} conns · {} · {}",
            self.workload,
            self.workers,
            self.connections,
            self.service.as_str(),
            self.protocol
        )
    }

    /// File-name-safe identifier (`best2-steal_bimodal-1_w8_c64_emulate`).
    pub fn slug(&self) -> String {
        let raw = format!(
            "{}_{}_w{}_c{}_{}",
            self.name,
            self.workload,
            self.workers,
            self.connections,
            self.service.as_str()
        );
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }
}

/// Whether `mode` is a policy name with optional `+steal`.
fn valid_mode(mode: &str) -> bool {
    let base = mode.strip_suffix("+steal").unwrap_or(mode);
    matches!(
        base,
        "vanilla" | "shared" | "queue" | "cpu" | "best2" | "hybrid"
    ) && !(mode.ends_with("+steal") && matches!(base, "vanilla" | "shared"))
}

/// Validated sweep-wide settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Load fractions, ascending.
    pub loads: Vec<f64>,
    /// Measured seconds per point.
    pub point_secs: f64,
    /// Warm-up seconds per point.
    pub warmup_secs: f64,
    /// SLO = slo_factor × S̄.
    pub slo_factor: f64,
    /// Saturation: p99 > stop_p99_factor × SLO.
    pub stop_p99_factor: f64,
    /// Saturation: achieved < stop_rate_ratio × target.
    pub stop_rate_ratio: f64,
    /// Load fraction whose CDF the report plots.
    pub cdf_load: f64,
    /// Seconds the generator waits for outstanding replies after its last
    /// send (`skq load --drain`); it stops earlier once all are in.
    pub drain_secs: f64,
    /// Mode or name of the curve each group's ratios are taken against.
    #[serde(default = "default_baseline")]
    pub baseline: String,
    /// A point whose generator failed its lateness check is measured again
    /// up to this many times (the least late attempt is kept).
    #[serde(default)]
    pub retries: u32,
}

fn default_baseline() -> String {
    "vanilla".into()
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            loads: vec![0.2, 0.4, 0.6, 0.75, 0.9],
            point_secs: 1.5,
            warmup_secs: 0.5,
            slo_factor: 10.0,
            stop_p99_factor: 4.0,
            stop_rate_ratio: 0.9,
            cdf_load: 0.5,
            drain_secs: 1.0,
            baseline: default_baseline(),
            retries: 1,
        }
    }
}

impl Settings {
    /// Defaults overridden by a `[sweep]` table, validated.
    pub fn from_entry(e: &SweepEntry) -> Result<Settings> {
        let d = Settings::default();
        let mut loads = e.loads.clone().unwrap_or(d.loads);
        if loads.is_empty()
            || loads
                .iter()
                .any(|l| !(l.is_finite() && *l > 0.0 && *l <= 4.0))
        {
            bail!("`loads`: {loads:?} must be non-empty fractions of capacity in (0, 4]");
        }
        loads.sort_by(f64::total_cmp);
        loads.dedup();
        let s = Settings {
            loads,
            point_secs: e.point_secs.unwrap_or(d.point_secs),
            warmup_secs: e.warmup_secs.unwrap_or(d.warmup_secs),
            slo_factor: e.slo_factor.unwrap_or(d.slo_factor),
            stop_p99_factor: e.stop_p99_factor.unwrap_or(d.stop_p99_factor),
            stop_rate_ratio: e.stop_rate_ratio.unwrap_or(d.stop_rate_ratio),
            cdf_load: e.cdf_load.unwrap_or(d.cdf_load),
            drain_secs: e.drain_secs.unwrap_or(d.drain_secs),
            baseline: e.baseline.clone().unwrap_or(d.baseline),
            retries: e.retries.unwrap_or(d.retries),
        };
        if s.retries > 5 {
            bail!("`retries`: {} is too many; at most 5", s.retries);
        }
        let positive = |v: f64, key: &str| -> Result<()> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                bail!("`{key}`: {v} must be a positive number")
            }
        };
        positive(s.point_secs, "point_secs")?;
        positive(s.slo_factor, "slo_factor")?;
        positive(s.stop_p99_factor, "stop_p99_factor")?;
        positive(s.cdf_load, "cdf_load")?;
        for (v, key) in [(s.warmup_secs, "warmup_secs"), (s.drain_secs, "drain_secs")] {
            if !(v.is_finite() && v >= 0.0) {
                bail!("`{key}`: {v} must be zero or positive");
            }
        }
        if !(0.0..=1.0).contains(&s.stop_rate_ratio) {
            bail!(
                "`stop_rate_ratio`: {} must be within 0..=1",
                s.stop_rate_ratio
            );
        }
        Ok(s)
    }
}

/// A validated sweep: settings plus curves, in run order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Sweep-wide settings.
    pub settings: Settings,
    /// One curve per configuration.
    pub curves: Vec<Curve>,
}

impl Sweep {
    /// Validates a parsed file. Curve names must be unique within a group.
    pub fn from_file(f: &SweepFile, cpus: usize) -> Result<Sweep> {
        let settings = Settings::from_entry(&f.sweep)?;
        let curves = f
            .entries()
            .iter()
            .map(|e| Curve::from_entry(e, cpus))
            .collect::<Result<Vec<_>>>()?;
        if curves.is_empty() {
            bail!("no configurations: give `[matrix]` or `[[config]]` entries (or --modes)");
        }
        for (i, c) in curves.iter().enumerate() {
            if curves[..i]
                .iter()
                .any(|o| o.name == c.name && o.group() == c.group())
            {
                bail!(
                    "configuration `{}` appears twice for {}; give one a distinct `name`",
                    c.name,
                    c.group()
                );
            }
        }
        Ok(Sweep { settings, curves })
    }

    /// Reads and validates a TOML file.
    pub fn load(path: &std::path::Path, cpus: usize) -> Result<(Sweep, Option<PathBuf>)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--config {}", path.display()))?;
        let f = SweepFile::parse(&text).with_context(|| format!("--config {}", path.display()))?;
        let out = f.sweep.out.clone();
        Ok((
            Sweep::from_file(&f, cpus).with_context(|| format!("--config {}", path.display()))?,
            out,
        ))
    }
}

/// The built-in default: the RPC server with 8 workers, emulated exponential
/// and bimodal-1 service with S̄ = 500 µs, six configurations.
pub const DEFAULT_MODES: [&str; 6] = ["vanilla", "shared", "cpu", "best2+steal", "hybrid", "tokio"];
/// Workloads of the built-in default.
pub const DEFAULT_WORKLOADS: [&str; 2] = ["exponential", "bimodal-1"];

/// The built-in default sweep as a [`SweepFile`] (flags override it).
pub fn default_file() -> SweepFile {
    SweepFile {
        sweep: SweepEntry::default(),
        defaults: ConfigEntry {
            workers: Some(8),
            service: Some(ServiceMode::Emulate),
            mean_us: Some(500.0),
            ..Default::default()
        },
        matrix: Some(MatrixEntry {
            modes: DEFAULT_MODES.iter().map(|s| s.to_string()).collect(),
            workloads: DEFAULT_WORKLOADS.iter().map(|s| s.to_string()).collect(),
            connections: Vec::new(),
        }),
        config: Vec::new(),
    }
}
