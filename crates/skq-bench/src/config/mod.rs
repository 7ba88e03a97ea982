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
//! stop_rate_ratio = 0.9 # ... or achieved rate < stop_rate_ratio × the rate sent
//! cdf_load = 0.5        # the load fraction whose latency CDF the report plots
//! drain_secs = 1.0      # generator waits this long for late replies (stops early when none)
//! retries = 1          # re-measure a point whose generator fell behind (lateness check)
//!                       # or whose server the host delayed (emulated service overshot)
//! crossing_attempts = 3 # a point over the SLO below one that met it, or though most of its seconds met it: measured 3 times, median kept
//! baseline = "vanilla"  # the × column's reference: the curve of this mode (or
//!                       # name) in the same group (e.g. "memcached")
//! out = "results/my-run" # output folder (default `results/bench-<timestamp>`)
//! rss = "off"           # emulated RSS (BRIEF §8): "off", "all" (every CPU the
//!                       # harness may use) or a CPU list ("0,1", "0-3");
//!                       # the built-in default sweep uses "all"
//! rss_migrate_ms = 500  # move flows every N ms while a point runs (needs
//!                       # rss with two CPUs or more; default: never)
//! disturbed_above = 0.05 # mark a point disturbed when processes outside
//!                       # the run used more CPUs than this over it
//!                       # (`crate::disturbance`; default 0.05)
//! seed = 7              # the run's seed: each load's arrival schedule and
//!                       # request mix derive from it (default: `skq bench`
//!                       # draws one at random and prints it)
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
//!                            # "epoll-1to1", "epoll-shared", "tokio",
//!                            # "tokio-spawn-blocking", "memcached",
//!                            # "nginx", "kv-tpc", "kv-MODE"
//!                            # or "http-MODE" (skq serve http)
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
//! `rtfreq`, `steal_k`, `poll_groups`, `pollers`, `batch_polls_above` (these
//! six tune skq's scheduler and reach skq modes only: all six the rpc
//! server's, `steal_k`, `poll_groups`, `pollers` and `batch_polls_above` the
//! cache's `kv-MODE`; a baseline or `kv-tpc`
//! curve of the same `[defaults]` runs without them), `idle_tick_us` (the
//! cache's `--idle-tick-us`, `kv-tpc` and `kv-MODE` only), `connections`, `threads`, `protocol`,
//! `capacity_rps`, `slo_us`, `affinity` (`none` or `split`: server and load
//! generator on disjoint halves of the CPUs; default `split`), `batch`
//! (`--batch` of skq modes), and for `http-MODE` servers `io_variance`
//! (`none`, `fadvise` or `emulate`), `io_miss` (fraction of reads that miss
//! the page cache, default 0.1) and `io_latency_us` (mean emulated storage
//! latency, exponential, default 1000), and `wrk = true` (http servers and
//! nginx: after the curve, `wrk` drives the server closed-loop with the
//! curve's connections and its figures sit beside the curve's in every
//! summary), and for nginx `nginx_tcp_nopush` (default `true`, as nginx's
//! guide for static files advises; `false` turns it off, which removes a tail
//! of tens of ms under open-loop keep-alive load, see docs/RESULTS.md).
//! Unknown keys are errors. Peers (memcached, nginx) and the
//! cache and web servers always do real work: `service` is ignored for them
//! and reads `spin` (plus the IO variance, when set).
//!
//! # Emulated RSS
//!
//! With `rss` on, the harness creates a network namespace of its own
//! ([`skq_sys::netns::RpsNamespace`]) whose loopback spreads flows over the
//! chosen CPUs with Receive Packet Steering, and runs every server and load
//! generator of the sweep inside it: each connection's packets are then
//! processed on a CPU picked by its flow hash, as a multi-queue NIC's RSS
//! would, instead of on the sender's CPU. With `rss_migrate_ms = N` the mask
//! is rewritten every N ms while a point runs, alternating between the whole
//! set and one of its CPUs in turn (`0,1` → `0` → `0,1` → `1` → ...), so
//! about half the flows change CPU at every rewrite (flow migration); each
//! point starts from the whole set. Where the machine refuses namespaces
//! the sweep runs without, and every output says so (see [`crate::rss`]).

mod curve;
mod parts;
mod settings;

use std::path::PathBuf;

use anyhow::Result;
use serde::Deserialize;

use crate::rss::RssSpec;

pub use curve::{Affinity, Curve, LoadSpec, ServerKind, ServerSetup, ServiceMode};
pub use parts::{ElasticSpec, HttpSpec, IoSpec, PrioritySpec, RocksdbSpec};
pub use settings::{Settings, Sweep};

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
    /// `--poll-groups` (skq modes of the RPC server and of the cache).
    pub poll_groups: Option<usize>,
    /// `--pollers` (skq modes of the RPC server and of the cache).
    pub pollers: Option<usize>,
    /// `--batch-polls-above` (skq modes of the RPC server and of the cache).
    pub batch_polls_above: Option<usize>,
    /// The cache's `--idle-tick-us` (kv modes only).
    pub idle_tick_us: Option<u64>,
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
    /// `--batch` for skq modes of the rpc and http servers.
    pub batch: Option<usize>,
    /// IO variance of an http server: `none`, `fadvise` or `emulate`.
    pub io_variance: Option<String>,
    /// Fraction of file reads that miss the page cache (default 0.1).
    pub io_miss: Option<f64>,
    /// Mean emulated storage latency of a miss (µs, default 1000).
    pub io_latency_us: Option<f64>,
    /// Cross-check the curve with wrk (http servers and nginx).
    pub wrk: Option<bool>,
    /// nginx: `tcp_nopush` (default on, as its static-content guide advises).
    pub nginx_tcp_nopush: Option<bool>,
    /// RocksDB front end (`rocksdb-MODE`): the preloaded database directory.
    pub db_dir: Option<String>,
    /// RocksDB front end: records preloaded (the generator's key space).
    pub db_keys: Option<u64>,
    /// RocksDB front end: the generator's `--db-dilate`, extra emulated
    /// service per request as a multiple of its operation's modelled cost.
    pub dilate: Option<f64>,
    /// Rate (req/s) of a light probe client, fixed at every load point
    /// (not scaled with the load): SKQ §6.8's probe.
    pub probe_rps: Option<f64>,
    /// The probe's class: `regular` (its latency is `probe_latency`) or
    /// `high` (the generator's high-priority client, RPC class 1).
    pub probe_class: Option<String>,
    /// Connections the probe's rate is split over (default 8).
    pub probe_connections: Option<usize>,
    /// Rate (req/s) of best-effort clients (RPC class 2), fixed at every
    /// load point: QStack's co-located long work.
    pub batch_rps: Option<f64>,
    /// Best-effort connections.
    pub batch_connections: Option<usize>,
    /// Service each best-effort request asks for (µs).
    pub batch_service_us: Option<f64>,
    /// The server's `--batch-workers` (priority diffusion), e.g. `6,7`.
    pub batch_workers: Option<String>,
    /// Elastic worker count: the server's `--min-workers` (skq modes of the
    /// RPC server; `workers` is the maximum).
    pub min_workers: Option<usize>,
    /// The resource manager's period, `--elastic-period-us` (needs `min_workers`).
    pub elastic_period_us: Option<u64>,
    /// Cooperative checkpoints: the RPC server's `--checkpoint-us` (skq
    /// modes, MODE or async-MODE): a request's service loop calls the
    /// runtime's checkpoint every this many µs.
    pub checkpoint_us: Option<u64>,
    /// The generator's `--rate-profile` (`steps=...`, `diurnal=...`, `bursts=...`).
    pub rate_profile: Option<String>,
    /// The generator's `--interval-ms`: per-interval series (and the
    /// server CPU sampling period).
    pub interval_ms: Option<u64>,
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
            poll_groups,
            pollers,
            batch_polls_above,
            idle_tick_us,
            connections,
            threads,
            protocol,
            capacity_rps,
            slo_us,
            affinity,
            batch,
            io_variance,
            io_miss,
            io_latency_us,
            wrk,
            nginx_tcp_nopush,
            db_dir,
            db_keys,
            dilate,
            probe_rps,
            probe_class,
            probe_connections,
            batch_rps,
            batch_connections,
            batch_service_us,
            batch_workers,
            min_workers,
            elastic_period_us,
            checkpoint_us,
            rate_profile,
            interval_ms
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
    /// Re-measurements of a point whose generator fell behind or whose
    /// server the host delayed.
    pub retries: Option<u32>,
    /// See [`Settings::crossing_attempts`].
    pub crossing_attempts: Option<u32>,
    /// Emulated RSS: off, all or a CPU list.
    pub rss: Option<RssSpec>,
    /// Flow migration period (ms) under emulated RSS.
    pub rss_migrate_ms: Option<u64>,
    /// Disturbance (CPUs used outside the run) above which a point is
    /// marked disturbed (default 0.05).
    pub disturbed_above: Option<f64>,
    /// The run's seed (see [`Settings::seed`]).
    pub seed: Option<u64>,
    /// The host gate: before each measurement of a point, wait while a
    /// probe finds more than this many of 200 sleeps late on a CPU of the
    /// run ([`crate::hostgate`]). Off when absent.
    pub host_gate: Option<u32>,
    /// Longest wait of the host gate before a point, seconds (default 120).
    pub host_gate_wait_s: Option<f64>,
    /// Under the host gate, the generator ends a start at the end of its
    /// warm-up when the machine's stalls took more than this many ms per
    /// second of it (default 10; 0 turns it off).
    pub host_gate_warmup_ms_per_s: Option<f64>,
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

/// The built-in default: the RPC server with 8 workers, emulated exponential
/// and bimodal-1 service with S̄ = 500 µs: two skq policies, the two plain
/// epoll servers and tokio, ratios against [`DEFAULT_BASELINE`].
pub const DEFAULT_MODES: [&str; 5] = ["hybrid", "cpu", "epoll-1to1", "epoll-shared", "tokio"];
/// Workloads of the built-in default.
pub const DEFAULT_WORKLOADS: [&str; 2] = ["exponential", "bimodal-1"];
/// The built-in default's baseline: one epoll per thread, connections
/// round-robin at accept (the memcached/nginx model).
pub const DEFAULT_BASELINE: &str = "epoll-1to1";

/// Offered loads of the built-in default. 0.85 sits between 0.75 and 0.9,
/// where the p99 of every server here jumps from ~4 ms to 34–173 ms: without
/// it, max load at SLO is interpolated across that gap and reads ≈ 0.75–0.8
/// of N/S̄ (0.88–0.95 of M/G/8) for any server that meets the SLO at 0.75
/// (2026-12-03, docs/RESULTS.md "Pooled over the day's six runs, and a finer
/// grid near the knee").
pub const DEFAULT_LOADS: [f64; 6] = [0.2, 0.4, 0.6, 0.75, 0.85, 0.9];

/// Measured seconds per point of the built-in default (files that do not
/// set `point_secs` get 1.5). At 0.75–0.85 consecutive latencies are
/// correlated (lag-1 0.3–0.65) and the independence check thins the series
/// until ~100 samples remain: a 1.5-s window can only thin to a stride of
/// about 128, an 8-s one to 512, so at 1.5 s some decisive point fails that
/// check in nearly every run. On the quiet evening of 2026-12-04, 0 of 5
/// default runs at 1.5 s passed `--strict` and 3 of 4 at 8 s did (one with
/// no point measured again; docs/results/quiet-2026-12-04e). The price is
/// time: about eight minutes instead of two and a half (`--point-secs 1.5`
/// for the short sweep).
pub const DEFAULT_POINT_SECS: f64 = 8.0;

/// The built-in default sweep as a [`SweepFile`] (flags override it), with
/// emulated RSS over every CPU.
pub fn default_file() -> SweepFile {
    SweepFile {
        sweep: SweepEntry {
            baseline: Some(DEFAULT_BASELINE.into()),
            rss: Some(RssSpec::All),
            loads: Some(DEFAULT_LOADS.to_vec()),
            point_secs: Some(DEFAULT_POINT_SECS),
            ..SweepEntry::default()
        },
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
