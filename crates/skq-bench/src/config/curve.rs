//! One configuration of the sweep: what serves ([`ServerKind`]), how the
//! service is done ([`ServiceMode`]), where it runs ([`Affinity`]), and the
//! validated [`Curve`] a configuration entry becomes.
//!
//! A configuration's mode and scheduling keys are parsed here, once, into
//! the server spec skq's own servers are handed ([`Curve::server_spec`],
//! skq-net's [`ServerSpec`]); the harness passes it whole (`--spec JSON`),
//! never knob by knob.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use skq_net::config::WorkerList;
use skq_net::{Mode, ServerSpec};
use skq_proto::workload::{ServiceSpec, Workload};

pub use skq_net::ServiceMode;

use super::ConfigEntry;

/// What serves the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// `skq serve rpc --runtime skq --mode MODE`.
    Skq,
    /// `skq serve rpc --mode tokio` or `--mode tokio-spawn-blocking`.
    Tokio,
    /// A plain epoll server with no skq scheduling (BRIEF §10):
    /// `skq serve rpc --mode epoll-1to1` (one epoll per thread, connections
    /// round-robin at accept) or `--mode epoll-shared` (one epoll set, all
    /// threads waiting, ONESHOT + re-arm).
    Epoll,
    /// Debian's memcached.
    Memcached,
    /// Debian's nginx.
    Nginx,
    /// `skq serve kv`: `kv-tpc` (thread-per-core) or `kv-MODE` (shared
    /// architecture on skq mode MODE, e.g. `kv-hybrid`, or the plain epoll
    /// servers `kv-epoll`, `kv-epoll-1to1`, `kv-epoll-shared`).
    Kv,
    /// `skq serve http --mode MODE` for modes `http-MODE`: an skq policy
    /// (`http-hybrid`), a plain epoll server (`http-epoll-1to1`,
    /// `http-epoll-shared`) or tokio (`http-tokio`), serving the same
    /// document root as the nginx peer.
    Http,
    /// `skq serve rocksdb --mode MODE` for modes `rocksdb-MODE`: MODE is an
    /// skq policy, `epoll-1to1`, `epoll-shared`, `tokio` (each request's
    /// RocksDB call inline on a tokio worker thread) or
    /// `tokio-spawn-blocking` (each in `tokio::task::spawn_blocking`, the
    /// honest tokio baseline for blocking calls).
    Rocksdb,
}

impl ServerKind {
    /// The server a `mode` string names.
    pub fn from_mode(mode: &str) -> ServerKind {
        match mode {
            "tokio" | "tokio-spawn-blocking" => ServerKind::Tokio,
            m if EPOLL_MODES.contains(&m) => ServerKind::Epoll,
            "memcached" => ServerKind::Memcached,
            "nginx" => ServerKind::Nginx,
            m if m.starts_with("kv-") => ServerKind::Kv,
            m if m.starts_with("http-") => ServerKind::Http,
            m if m.starts_with("rocksdb-") => ServerKind::Rocksdb,
            _ => ServerKind::Skq,
        }
    }

    /// The load generator protocol it speaks.
    pub fn default_protocol(self) -> &'static str {
        match self {
            ServerKind::Skq | ServerKind::Tokio | ServerKind::Epoll => "rpc",
            ServerKind::Memcached | ServerKind::Kv => "memcached",
            ServerKind::Nginx | ServerKind::Http => "http",
            ServerKind::Rocksdb => "rocksdb",
        }
    }
}

/// The plain epoll servers' modes (`skq serve rpc --mode ...`).
pub const EPOLL_MODES: [&str; 2] = ["epoll-1to1", "epoll-shared"];

/// IO variance of the HTTP server (`skq serve http --io-variance`): a
/// fraction of file reads miss the page cache, for real (`fadvise`) or with
/// an emulated storage latency (`emulate`). SKQ §6.7's disk-backed pages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoSpec {
    /// `fadvise` or `emulate`.
    pub variance: String,
    /// Fraction of reads that miss (0..=1).
    pub miss: f64,
    /// Mean emulated storage latency of a miss (µs; `emulate` only).
    pub latency_us: f64,
}

impl IoSpec {
    /// How every output names it: `io=emulate miss=0.10 latency=exp(1000µs)`.
    pub fn label(&self) -> String {
        match self.variance.as_str() {
            "emulate" => format!(
                "io=emulate miss={:.2} latency=exp({}µs)",
                self.miss, self.latency_us
            ),
            v => format!("io={v} miss={:.2}", self.miss),
        }
    }

    /// The server's arguments.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--io-variance".to_string(),
            self.variance.clone(),
            "--io-miss".into(),
            self.miss.to_string(),
        ];
        if self.variance == "emulate" {
            a.extend([
                "--io-latency-us".into(),
                self.latency_us.to_string(),
                "--io-dist".into(),
                "exp".into(),
            ]);
        }
        a
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
    /// What skq's own servers (rpc, http, rocksdb; not kv) are handed as
    /// `--spec`: the mode parsed, `workers`, `service` and `pin` as above,
    /// and the scheduling keys each server takes (rpc: all; http:
    /// `steal_k`, `batch`; rocksdb: `steal_k`). `None` for the peers and kv.
    #[serde(default)]
    pub server_spec: Option<ServerSpec>,
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
    /// IO variance (http modes only).
    #[serde(default)]
    pub io: Option<IoSpec>,
    /// Cross-check the curve with `wrk` (http servers and nginx).
    #[serde(default)]
    pub wrk: bool,
    /// RocksDB front end: database directory.
    #[serde(default)]
    pub db_dir: String,
    /// RocksDB front end: records preloaded.
    #[serde(default)]
    pub db_keys: u64,
    /// RocksDB front end: the generator's `--db-dilate`.
    #[serde(default)]
    pub dilate: f64,
    /// Priority experiment traffic and diffusion (SKQ §6.8, QStack).
    #[serde(default)]
    pub prio: PrioritySpec,
    /// Elastic worker count and fluctuating load (issue 15).
    #[serde(default)]
    pub elastic: ElasticSpec,
}

/// A time-varying rate on the generator, fixed at every load point of a
/// curve (the server's elastic settings, `min_workers` and
/// `elastic_period_us`, are checked here and travel in the server spec).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ElasticSpec {
    /// The generator's `--rate-profile`; the point's rate is its base rate.
    pub rate_profile: Option<String>,
    /// The generator's `--interval-ms`, also the period at which the
    /// harness samples the server's CPU time.
    pub interval_ms: Option<u64>,
}

impl ElasticSpec {
    fn from_entry(e: &ConfigEntry, name: &str, server: ServerKind, workers: usize) -> Result<Self> {
        let ctx = |key: &str| format!("configuration `{name}`: `{key}`");
        if let Some(m) = e.min_workers {
            if server != ServerKind::Skq {
                bail!(
                    "{}: only skq modes of the RPC server have an elastic worker count",
                    ctx("min_workers")
                );
            }
            if !(1..=workers).contains(&m) {
                bail!(
                    "{}: {m} is out of range 1..=workers ({workers})",
                    ctx("min_workers")
                );
            }
        }
        if let Some(p) = e.elastic_period_us {
            if e.min_workers.is_none() {
                bail!(
                    "{}: needs `min_workers` (an elastic worker count)",
                    ctx("elastic_period_us")
                );
            }
            if p == 0 {
                bail!("{}: must be positive", ctx("elastic_period_us"));
            }
        }
        if let Some(r) = &e.rate_profile {
            r.parse::<skq_proto::profile::RateProfile>()
                .map_err(|m| anyhow::anyhow!("{}: {m}", ctx("rate_profile")))?;
        }
        if e.interval_ms == Some(0) {
            bail!("{}: must be positive", ctx("interval_ms"));
        }
        Ok(ElasticSpec {
            rate_profile: e.rate_profile.clone(),
            interval_ms: e.interval_ms.or(e.rate_profile.as_ref().map(|_| 1000)),
        })
    }
}

/// The priority experiments' extra traffic and server setting, fixed at
/// every load point of a curve.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioritySpec {
    /// Probe client rate (req/s), 0 = none.
    pub probe_rps: f64,
    /// Whether the probe is the high-priority client (else a regular probe).
    pub probe_high: bool,
    /// Connections the probe's rate is split over.
    pub probe_connections: usize,
    /// Best-effort (class 2) rate (req/s), 0 = none.
    pub batch_rps: f64,
    /// Best-effort connections.
    pub batch_connections: usize,
    /// Best-effort service (µs).
    pub batch_service_us: f64,
}

impl PrioritySpec {
    fn from_entry(e: &ConfigEntry, name: &str, server: ServerKind) -> Result<PrioritySpec> {
        let ctx = |key: &str| format!("configuration `{name}`: `{key}`");
        let probe_rps = e.probe_rps.unwrap_or(0.0);
        if !(probe_rps.is_finite() && probe_rps >= 0.0) {
            bail!("{}: {probe_rps} must be >= 0", ctx("probe_rps"));
        }
        let probe_high = match e.probe_class.as_deref().unwrap_or("regular") {
            "regular" => false,
            "high" => true,
            other => bail!(
                "{}: `{other}` is unknown: expected regular or high",
                ctx("probe_class")
            ),
        };
        let batch_rps = e.batch_rps.unwrap_or(0.0);
        if !(batch_rps.is_finite() && batch_rps >= 0.0) {
            bail!("{}: {batch_rps} must be >= 0", ctx("batch_rps"));
        }
        let batch_service_us = e.batch_service_us.unwrap_or(10_000.0);
        if !(batch_service_us.is_finite() && batch_service_us > 0.0) {
            bail!(
                "{}: {batch_service_us} must be positive",
                ctx("batch_service_us")
            );
        }
        if e.batch_workers.as_ref().is_some_and(|w| !w.is_empty()) && server != ServerKind::Skq {
            bail!(
                "{}: priority diffusion needs an skq mode",
                ctx("batch_workers")
            );
        }
        Ok(PrioritySpec {
            probe_rps,
            probe_high,
            probe_connections: e.probe_connections.unwrap_or(8).clamp(1, 1024),
            batch_rps,
            batch_connections: e.batch_connections.unwrap_or(4).max(1),
            batch_service_us,
        })
    }
}

impl Curve {
    /// Builds and validates a curve; `cpus` is the machine's CPU count (spin
    /// capacity cannot exceed it). Errors name the configuration and key.
    pub fn from_entry(e: &ConfigEntry, cpus: usize) -> Result<Curve> {
        let mode = e.mode.clone().unwrap_or_else(|| "vanilla".into());
        let name = e.name.clone().unwrap_or_else(|| mode.clone());
        let ctx = |key: &str| format!("configuration `{name}`: `{key}`");
        let server = ServerKind::from_mode(&mode);
        // The mode skq's own server is handed, in its one spelling (the
        // older alias `epoll` is refused here, as before).
        let inner = match server {
            ServerKind::Skq | ServerKind::Tokio | ServerKind::Epoll => Some(mode.as_str()),
            ServerKind::Http => mode.strip_prefix("http-"),
            ServerKind::Rocksdb => mode.strip_prefix("rocksdb-"),
            ServerKind::Memcached | ServerKind::Nginx | ServerKind::Kv => None,
        };
        let server_mode = match inner.map(|m| (m, m.parse::<Mode>())) {
            None => None,
            Some((m, Ok(parsed))) if parsed.to_string() == m => Some(parsed),
            Some(_) => bail!("{}: unknown mode `{mode}`; expected a policy (vanilla, shared, queue, cpu, best2, hybrid, optionally +steal), epoll-1to1, epoll-shared, tokio, tokio-spawn-blocking, async-MODE, async-tokio, memcached, nginx, kv-tpc, kv-MODE, http-MODE or rocksdb-MODE", ctx("mode")),
        };
        if matches!(server_mode, Some(Mode::Async(_))) && server != ServerKind::Skq {
            bail!(
                "{}: `{mode}`: only the rpc server has an async handler (async-MODE, async-tokio)",
                ctx("mode")
            );
        }
        let io = io_spec(e, server).map_err(|m| anyhow::anyhow!("{}: {m}", ctx("io_variance")))?;
        if let Some(b) = e.batch {
            if !(1..=1024).contains(&b) {
                bail!("{}: {b} is out of range 1..=1024", ctx("batch"));
            }
            let skq_mode = matches!(server, ServerKind::Skq | ServerKind::Http)
                && server_mode.is_some_and(Mode::is_skq);
            if !skq_mode {
                bail!(
                    "{}: only skq modes of the rpc and http servers take a batch size (`{mode}` does not)",
                    ctx("batch")
                );
            }
        }
        let wrk = e.wrk.unwrap_or(false);
        if wrk && !matches!(server, ServerKind::Http | ServerKind::Nginx) {
            bail!(
                "{}: the wrk cross-check speaks HTTP: only http-MODE and nginx curves take it",
                ctx("wrk")
            );
        }
        let dilate = e.dilate.unwrap_or(0.0);
        if !(dilate.is_finite() && dilate >= 0.0) {
            bail!("{}: {dilate} must be >= 0", ctx("dilate"));
        }
        let workers = e.workers.unwrap_or(8);
        if !(1..=64).contains(&workers) {
            bail!("{}: {workers} is out of range 1..=64", ctx("workers"));
        }
        // Peers do their real work: `service` (often inherited from
        // [defaults] or --service) does not apply to them.
        let service = match server {
            ServerKind::Memcached | ServerKind::Nginx | ServerKind::Kv | ServerKind::Http => {
                ServiceMode::Spin
            }
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
            "http" => "page-640B",
            "rocksdb" => "zippydb",
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
        let prio = PrioritySpec::from_entry(e, &name, server)?;
        let elastic = ElasticSpec::from_entry(e, &name, server, workers)?;
        let batch_workers = match e.batch_workers.as_deref() {
            None | Some("") => Vec::new(),
            Some(w) => {
                w.parse::<WorkerList>()
                    .map_err(|m| anyhow::anyhow!("{}: {m}", ctx("batch_workers")))?
                    .0
            }
        };
        let pin = e.pin.unwrap_or(false);
        let server_spec = server_mode.map(|m| {
            let mut spec = ServerSpec::new(m, workers);
            spec.service = service;
            spec.pin = pin;
            let s = &mut spec.sched;
            s.steal_k = e.steal_k;
            if server == ServerKind::Rocksdb {
                return spec;
            }
            s.batch = e.batch.unwrap_or(1);
            if server == ServerKind::Http {
                return spec;
            }
            s.rtshare = e.rtshare;
            s.rtfreq = e.rtfreq;
            s.batch_workers = batch_workers;
            s.min_workers = e.min_workers;
            s.elastic_period_us = e.elastic_period_us;
            if server == ServerKind::Skq {
                s.pollers = e.pollers;
                s.poll_groups = e.poll_groups;
            }
            spec
        });
        Ok(Curve {
            server_spec,
            elastic,
            prio,
            name,
            server,
            mode,
            workload,
            workers,
            service,
            mean_us,
            scale,
            pin,
            connections: e.connections.unwrap_or(64).max(1),
            threads: e.threads.unwrap_or(1).max(1),
            protocol,
            nominal_service_us,
            capacity_rps,
            slo_us: e.slo_us,
            affinity,
            io,
            wrk,
            db_dir: e
                .db_dir
                .clone()
                .unwrap_or_else(|| "/dev/shm/skq-rocksdb".into()),
            db_keys: e.db_keys.unwrap_or(10_000_000),
            dilate,
        })
    }

    /// The service label every output carries: `spin`, `emulate`, or for
    /// an http curve with IO variance `spin+io=emulate miss=0.10 ...`.
    pub fn service_label(&self) -> String {
        match &self.io {
            Some(io) => format!("{}+{}", self.service.as_str(), io.label()),
            None => self.service.as_str().to_string(),
        }
    }

    /// The key of the group of curves that share a plot and a baseline:
    /// same workload, workers, connections, service mode and protocol.
    pub fn group(&self) -> String {
        format!(
            "{} · {} workers · {} conns · {} · {}",
            self.workload,
            self.workers,
            self.connections,
            self.service_label(),
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

/// The IO variance an entry asks for: `None` for `none` or no key; an error
/// for a bad value or for a server that is not `http-MODE` (nginx reads
/// through the page cache as it always does).
fn io_spec(e: &ConfigEntry, server: ServerKind) -> std::result::Result<Option<IoSpec>, String> {
    let variance = e.io_variance.as_deref().unwrap_or("none");
    if variance == "none" {
        if e.io_miss.is_some() || e.io_latency_us.is_some() {
            return Err(
                "io_miss and io_latency_us need io_variance = \"fadvise\" or \"emulate\"".into(),
            );
        }
        return Ok(None);
    }
    if !matches!(variance, "fadvise" | "emulate") {
        return Err(format!(
            "unknown IO variance `{variance}`; expected none, fadvise or emulate"
        ));
    }
    if server != ServerKind::Http {
        return Err("only http-MODE servers take IO variance".into());
    }
    let miss = e.io_miss.unwrap_or(0.1);
    if !(0.0..=1.0).contains(&miss) {
        return Err(format!("io_miss {miss} is out of range 0..=1"));
    }
    let latency_us = e.io_latency_us.unwrap_or(1000.0);
    if !(latency_us.is_finite() && latency_us >= 0.0) {
        return Err(format!(
            "io_latency_us {latency_us} must be a non-negative number"
        ));
    }
    Ok(Some(IoSpec {
        variance: variance.into(),
        miss,
        latency_us,
    }))
}
