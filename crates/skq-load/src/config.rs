//! What one load point is: [`LoadConfig`], the library form of `skq load`'s flags.
//!
//! Settings that only one protocol reads travel inside that protocol's
//! variant of [`ProtocolConfig`] (the key-value mix with memcached, the path
//! with HTTP, the key space with RocksDB), so a config cannot carry settings
//! its protocol ignores; settings every protocol shares (rate, connections,
//! service time, the extra clients) sit on [`LoadConfig`] itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use skq_proto::workload::{ServiceSpec, Workload};

use crate::protocol::memcached::KvSpec;
use crate::protocol::Protocol;
use crate::schedule::ScheduleKind;

/// Fault injection for tests: the sending thread sleeps `pause` after every
/// `every` sends, so the schedule is deliberately missed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stall {
    /// Sends between pauses.
    pub every: u64,
    /// Length of each pause.
    pub pause: Duration,
}

/// Spin window (µs) of a generator thread that has a CPU to itself: long
/// enough that the thread almost never lets its virtual CPU halt between
/// sends (a halted vCPU is woken by the host up to milliseconds late).
pub const SPIN_DEDICATED_US: u64 = 2_000;
/// Spin window (µs) of a generator thread sharing its CPUs with the server:
/// short, so spinning takes little from the server.
pub const SPIN_SHARED_US: u64 = 100;

/// Default `--db-keys`: records in the RocksDB front end's database.
pub const DB_KEYS_DEFAULT: u64 = 10_000_000;

/// The wire protocol of a load point, with the settings only it uses.
#[derive(Clone, Debug, PartialEq)]
pub enum ProtocolConfig {
    /// skq RPC: requests carry the service time drawn from
    /// [`LoadConfig::service`].
    Rpc,
    /// memcached text protocol.
    Memcached {
        /// Key-value mix.
        kv: KvSpec,
        /// Set every key once before the run so gets hit.
        prefill: bool,
    },
    /// HTTP/1.1 GET with keep-alive.
    Http {
        /// Path requested.
        path: String,
    },
    /// The RocksDB front end: ZippyDB GET/PUT/SEEK.
    Rocksdb {
        /// Records in the database (the ZippyDB key space).
        keys: u64,
        /// Each request asks for this many times its operation's modelled
        /// cost (`skq_proto::zippydb::CostModel::MEASURED`) of extra emulated
        /// service; 0 = none.
        dilate: f64,
    },
}

impl ProtocolConfig {
    /// Which protocol this is (its `--protocol` name: [`Protocol::name`]).
    pub fn kind(&self) -> Protocol {
        match self {
            ProtocolConfig::Rpc => Protocol::Rpc,
            ProtocolConfig::Memcached { .. } => Protocol::Memcached,
            ProtocolConfig::Http { .. } => Protocol::Http,
            ProtocolConfig::Rocksdb { .. } => Protocol::Rocksdb,
        }
    }

    /// The key-value mix, for memcached.
    pub fn kv(&self) -> Option<&KvSpec> {
        match self {
            ProtocolConfig::Memcached { kv, .. } => Some(kv),
            _ => None,
        }
    }
}

/// A protocol with the library's default settings (those of
/// [`LoadConfig::new`]): the `sphinx-ro` mix (30-byte keys, 200-byte values,
/// 10,000 keys) prefilled, path `/`, [`DB_KEYS_DEFAULT`] records without
/// dilation. (The CLI's default mix is `etc`: `--kv-workload`.)
impl From<Protocol> for ProtocolConfig {
    fn from(p: Protocol) -> ProtocolConfig {
        match p {
            Protocol::Rpc => ProtocolConfig::Rpc,
            Protocol::Memcached => ProtocolConfig::Memcached {
                kv: KvSpec::named("sphinx-ro", 30, 200, 1.0, 10_000).expect("valid default"),
                prefill: true,
            },
            Protocol::Http => ProtocolConfig::Http { path: "/".into() },
            Protocol::Rocksdb => ProtocolConfig::Rocksdb {
                keys: DB_KEYS_DEFAULT,
                dilate: 0.0,
            },
        }
    }
}

/// Connections beside the regular ones that share one rate: the latency
/// probe, the high-priority client, the best-effort (batch) client.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Client {
    /// Connections (the rate is split over them).
    pub connections: usize,
    /// Total rate (requests/s).
    pub rate: f64,
}

/// The best-effort (batch, class 2) client: its connections and rate, and
/// the service time each of its requests asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batch {
    /// Connections and total rate (0 = no batch client).
    pub client: Client,
    /// Service time each best-effort request asks for (µs).
    pub service_us: f64,
}

/// How the generator keeps its schedule, and the bound its lateness check
/// holds it to.
#[derive(Clone, Debug, PartialEq)]
pub struct Keeping {
    /// Send-lateness p99 above which the lateness check fails (µs).
    pub max_lateness_us: f64,
    /// Spin (instead of sleeping) this long before each send (µs); `None`:
    /// [`SPIN_DEDICATED_US`] when a generator thread has a CPU of its own
    /// and no `rt_priority`, else [`SPIN_SHARED_US`] (see `worker.rs` for
    /// why: a real-time thread spinning through most of each second is
    /// throttled by the kernel).
    pub spin_us: Option<u64>,
    /// Run generator threads at this `SCHED_FIFO` priority (needs root or
    /// CAP_SYS_NICE); keeps a busy machine from delaying sends.
    pub rt_priority: Option<i32>,
    /// Pin generator thread `t` to `cpus[t % cpus.len()]` (empty = no pinning).
    pub cpus: Vec<u32>,
    /// Test hook: deliberately stall the sender.
    pub stall: Option<Stall>,
    /// Test hook: stall the sender as the host does, unseen by the loop
    /// until it reads the clock again, so the pauses count as the
    /// machine's stalls (the hook `stall` is the generator's own).
    pub host_stall: Option<Stall>,
    /// Test hook: stall before every `every`-th read (of a socket `epoll`
    /// reported readable), so that read's data waits at least `pause`.
    pub read_stall: Option<Stall>,
    /// Read-lag p99 above which the read-lag check fails (µs), unless it is
    /// within [`crate::checks::READ_LAG_SHARE`] of the latency p99: the time
    /// from the kernel's receive stamp of a read's data to the generator
    /// reading it, which every reply's latency includes.
    pub max_read_lag_us: f64,
    /// Events taken per `epoll_wait` ([`DEFAULT_POLL_EVENTS`]).
    pub poll_events: usize,
    /// Time reads against the kernel's receive stamps (`recvmsg` with
    /// `SO_TIMESTAMPNS`) for the read-lag check; off: plain `read(2)`, no
    /// check (to measure what the check costs, or on a kernel without
    /// stamps).
    pub read_stamps: bool,
    /// End the run when its warm-up ends, measuring nothing, if the
    /// machine's stalls ([`crate::worker`]'s `STALL_NS`) took more than this
    /// many ms per second of warm-up from a generator thread's loop (`None`:
    /// never). `skq bench` uses it to wait out a host that holds the
    /// generator's CPU instead of measuring through it.
    pub abort_if_warmup_stalled_ms_per_s: Option<f64>,
}

/// Events a generator thread takes per `epoll_wait`. When the loop still
/// dropped the events it had not handled by the time a send fell due, and
/// polled their sockets again, 256 made a thread over hundreds of
/// connections at 100k+ req/s read replies up to 100 ms late while its sends
/// kept schedule; 32 cut most of that. Since the loop keeps those events
/// and handles them first, the size matters little (`docs/MEASUREMENT.md`,
/// "Fewer events per poll" and "Read lag").
pub const DEFAULT_POLL_EVENTS: usize = 32;

impl Default for Keeping {
    fn default() -> Self {
        Keeping {
            max_lateness_us: 50.0,
            spin_us: None,
            rt_priority: None,
            cpus: Vec::new(),
            stall: None,
            host_stall: None,
            read_stall: None,
            max_read_lag_us: 50.0,
            poll_events: DEFAULT_POLL_EVENTS,
            read_stamps: true,
            abort_if_warmup_stalled_ms_per_s: None,
        }
    }
}

/// What a run writes or keeps beside its result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    /// HdrHistogram interval log of the regular latency (1 s intervals).
    pub hdr_log: Option<PathBuf>,
    /// Show a progress bar (only drawn on a terminal).
    pub progress: bool,
    /// Write a trace of every send later than 50 µs, with what the thread
    /// did before it, to this file (`.T` appended per thread with several).
    pub trace_late: Option<PathBuf>,
    /// Keep a record of every regular request (for `--validate`'s replay).
    pub keep_requests: bool,
}

/// Everything that defines one measured load point.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Wire protocol, with its own settings.
    pub protocol: ProtocolConfig,
    /// Offered load of the regular connections (requests/s).
    pub rate: f64,
    /// Measured seconds.
    pub duration: Duration,
    /// Warm-up, discarded.
    pub warmup: Duration,
    /// How long to wait for outstanding replies after the last send.
    pub drain: Duration,
    /// Regular connections.
    pub connections: usize,
    /// Generator threads.
    pub threads: usize,
    /// Service-time distribution requested in RPC headers.
    pub service: ServiceSpec,
    /// Workload name for the report (`priority` adds a high-priority client).
    pub workload_label: String,
    /// Arrival process.
    pub schedule: ScheduleKind,
    /// Dedicated latency-probe connections (0 connections = none).
    pub probe: Client,
    /// The high-priority client (rate 0 = none; at least one connection).
    pub high_priority: Client,
    /// The best-effort client (rate 0 = none).
    pub batch: Batch,
    /// What the server does for service (`spin`, `emulate`, ...), for the report.
    pub service_mode_label: String,
    /// Random seed.
    pub seed: u64,
    /// How the generator keeps its schedule and judges whether it did
    /// (`skq load --help`: schedule keeping).
    pub keeping: Keeping,
    /// What a run writes or keeps beside its result.
    pub output: Output,
    /// Offered rate changing over the run (`--rate-profile`), if any.
    pub rate_profile: Option<std::sync::Arc<crate::profile::RateProfile>>,
    /// Length of the per-interval series (`--interval-ms`); with a rate
    /// profile and no value, 1 s.
    pub interval: Option<Duration>,
}

impl LoadConfig {
    /// Defaults matching the CLI: RPC, exponential S̄ = 500 µs, 64
    /// connections, 1 thread, 5 s after 1 s warm-up, Poisson.
    pub fn new(addr: SocketAddr, rate: f64) -> LoadConfig {
        LoadConfig {
            addr,
            protocol: ProtocolConfig::Rpc,
            rate,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            drain: Duration::from_secs(2),
            connections: 64,
            threads: 1,
            service: ServiceSpec::new(Workload::Exponential, 500_000.0),
            workload_label: "exponential".into(),
            schedule: ScheduleKind::Poisson,
            probe: Client {
                connections: 0,
                rate: 0.0,
            },
            high_priority: Client {
                connections: 1,
                rate: 0.0,
            },
            batch: Batch {
                client: Client {
                    connections: 4,
                    rate: 0.0,
                },
                service_us: 10_000.0,
            },
            service_mode_label: "unknown".into(),
            seed: 1,
            keeping: Keeping::default(),
            output: Output::default(),
            rate_profile: None,
            interval: None,
        }
    }

    /// Checks the values that the type system does not; the error names the flag.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64, flag: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{flag} must be a positive number, got {v}"))
            }
        };
        pos(self.rate, "--rate")?;
        pos(self.duration.as_secs_f64(), "--duration")?;
        if self.connections == 0 {
            return Err("--connections must be at least 1".into());
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(format!("--threads must be 1..=1024, got {}", self.threads));
        }
        if self.probe.connections > 0 {
            pos(
                self.probe.rate,
                "--probe-rate (required with --probe-connections)",
            )?;
        }
        let hp_rate = self.high_priority.rate;
        if !(hp_rate.is_finite() && hp_rate >= 0.0) {
            return Err(format!("--high-priority-rate must be >= 0, got {hp_rate}"));
        }
        let Batch { client, service_us } = self.batch;
        if !(client.rate.is_finite() && client.rate >= 0.0) {
            return Err(format!("--batch-rate must be >= 0, got {}", client.rate));
        }
        if client.rate > 0.0 {
            if client.connections == 0 {
                return Err("--batch-connections must be at least 1 with --batch-rate".into());
            }
            if !(service_us.is_finite() && (0.0..=4e6).contains(&service_us)) {
                return Err(format!(
                    "--batch-service-us must be 0..=4000000, got {service_us}"
                ));
            }
            if self.protocol != ProtocolConfig::Rpc {
                return Err("--batch-rate needs --protocol rpc (its class byte)".into());
            }
        }
        if let Some(l) = self.keeping.abort_if_warmup_stalled_ms_per_s {
            if !(l.is_finite() && (0.0..=1000.0).contains(&l)) {
                return Err(format!(
                    "--abort-if-warmup-stalled must be 0..=1000 ms per second, got {l}"
                ));
            }
            if self.warmup < std::time::Duration::from_millis(100) {
                return Err(
                    "--abort-if-warmup-stalled needs a warm-up of at least 0.1 s (--warmup)".into(),
                );
            }
        }
        if let Some(p) = self.keeping.rt_priority {
            if !(1..=99).contains(&p) {
                return Err(format!("--rt-priority must be 1..=99, got {p}"));
            }
        }
        if let Some(bad) = self
            .keeping
            .cpus
            .iter()
            .find(|&&c| c >= skq_sys::cpu::MAX_CPUS)
        {
            return Err(format!("--cpus: CPU {bad} is out of range"));
        }
        if !(self.service.scale.is_finite() && self.service.scale > 0.0) {
            return Err(format!(
                "--scale must be a positive number, got {}",
                self.service.scale
            ));
        }
        if let ProtocolConfig::Rocksdb { dilate, .. } = self.protocol {
            check_db_dilate(dilate)?;
        }
        if !(self.service.mean_ns.is_finite() && self.service.mean_ns >= 0.0) {
            return Err(format!(
                "--mean-us must be >= 0, got {}",
                self.service.mean_ns / 1e3
            ));
        }
        Ok(())
    }
}

/// `--db-dilate` must be a finite number >= 0.
pub(crate) fn check_db_dilate(dilate: f64) -> Result<(), String> {
    if dilate.is_finite() && dilate >= 0.0 {
        Ok(())
    } else {
        Err(format!("--db-dilate must be >= 0, got {dilate}"))
    }
}
