//! Which driver serves a protocol, and with what.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use crate::spec::{Mode, SchedSpec, ServerSpec};

/// Most worker threads (the scheduling core's limit, applied to every driver).
pub const MAX_WORKERS: usize = 64;
/// Largest connection table.
pub const MAX_CONNS: usize = (1 << 24) - 1;
/// Default ceiling of a connection's pending output (bytes): memcached
/// likewise stops processing a connection's commands while its replies
/// cannot be written, with a few hundred KiB of them built.
pub const DEFAULT_MAX_OUTPUT: usize = 256 * 1024;
/// Smallest `max_output` accepted.
pub const MIN_MAX_OUTPUT: usize = 4096;
/// Largest `max_output` accepted.
pub const MAX_MAX_OUTPUT: usize = 1 << 30;

/// How connections are spread over worker threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// skq: every worker shares one `Skq` instance; the scheduling mode
    /// ([`Mode::Skq`]) decides which worker handles each event.
    Skq,
    /// One epoll per thread, each connection assigned round-robin at accept
    /// and never moved, every thread blocking in its own `epoll_wait`: the
    /// memcached/nginx model.
    Epoll1to1,
    /// One epoll set shared by every thread, all blocking in `epoll_wait`,
    /// connections registered `EPOLLONESHOT` and re-armed after each event:
    /// the "Linux floating" 1:N model.
    EpollShared,
    /// tokio's multi-thread work-stealing runtime, one task per connection;
    /// each request is served inline on the worker thread polling the task
    /// (blocking it for the request's whole service).
    Tokio,
    /// The same runtime and tasks, each request's work (the protocol's
    /// `serve`) run with `tokio::task::spawn_blocking` on a blocking pool of
    /// `workers` threads and awaited before the connection's next request:
    /// tokio's documented way to run blocking calls (RocksDB's).
    TokioSpawnBlocking,
    /// An `async-` mode ([`Mode::Async`]): the application's own async
    /// handler on an async runtime. Not one of this layer's drivers (not in
    /// [`Driver::ALL`]): the application starts it.
    Async,
}

impl Driver {
    /// Every driver this layer starts, in the order help texts list them.
    pub const ALL: [Driver; 5] = [
        Driver::Skq,
        Driver::Epoll1to1,
        Driver::EpollShared,
        Driver::Tokio,
        Driver::TokioSpawnBlocking,
    ];

    /// The name used on command lines and in statistics.
    pub fn name(self) -> &'static str {
        match self {
            Driver::Skq => "skq",
            Driver::Epoll1to1 => "epoll-1to1",
            Driver::EpollShared => "epoll-shared",
            Driver::Tokio => "tokio",
            Driver::TokioSpawnBlocking => "tokio-spawn-blocking",
            Driver::Async => "async",
        }
    }

    /// What the driver does with connections and requests, in one sentence
    /// (printed beside results).
    pub fn about(self) -> &'static str {
        match self {
            Driver::Skq => {
                "the skq runtime: every worker shares one Skq instance and the scheduling \
                 policy decides which worker handles each event"
            }
            Driver::Epoll1to1 => {
                "one epoll per thread, connections assigned round-robin at accept and never \
                 moved (the memcached/nginx model)"
            }
            Driver::EpollShared => {
                "one epoll set shared by every thread, connections EPOLLONESHOT and re-armed \
                 after each event"
            }
            Driver::Tokio => {
                "tokio's multi-thread runtime with `workers` worker threads, one task per \
                 connection; each request is served inline on the worker thread that polls the \
                 task, blocking it for the request's whole service"
            }
            Driver::TokioSpawnBlocking => {
                "tokio's multi-thread runtime with `workers` worker threads for the sockets, one \
                 task per connection; each request's work runs in tokio::task::spawn_blocking on \
                 a blocking pool capped at `workers` threads, awaited before the connection's \
                 next request (replies stay in order)"
            }
            Driver::Async => {
                "the application's own async handler on an async runtime (skq-async with an \
                 skq policy, or tokio), one task per connection"
            }
        }
    }
}

impl FromStr for Driver {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Driver::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown runtime `{s}`: expected skq, epoll-1to1, epoll-shared, tokio or \
                     tokio-spawn-blocking"
                )
            })
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--batch-workers` list such as `6,7` or `4-7`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerList(pub Vec<usize>);

impl FromStr for WorkerList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        skq_core::parse_cpu_list(s)
            .map(|v| WorkerList(v.into_iter().map(|w| w as usize).collect()))
            .map_err(|_| format!("`{}` is not a worker list (e.g. 6,7 or 4-7)", s.trim()))
    }
}

/// How long a connection may wait in each state before the server closes
/// it (counted as `timeouts` in the statistics). `None`: no limit (the
/// default for all three, as memcached's `idle_timeout` is off by default).
/// A connection is in exactly one state at a time:
/// * **send**: replies wait for the peer to read them; the clock restarts
///   whenever bytes are written (nginx's `send_timeout`);
/// * **request**: part of a request has arrived; the whole request must
///   arrive within the limit, counted from its first byte, however slowly
///   the rest trickles in (nginx's `client_header_timeout`). A fresh
///   connection waits for its first request under this limit too when it
///   is set (as nginx does), else under the idle limit;
/// * **idle**: between requests, nothing buffered or pending (nginx's
///   `keepalive_timeout`, memcached's `idle_timeout`).
///
/// Limits are checked by a sweep every [`Timeouts::tick`], so a connection
/// is closed between its limit and its limit plus one tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// Between requests.
    pub idle: Option<Duration>,
    /// From a request's first byte to its last (and a fresh connection's
    /// wait for its first request).
    pub request: Option<Duration>,
    /// Without any write progress while replies are pending.
    pub send: Option<Duration>,
}

impl Timeouts {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.idle.is_some() || self.request.is_some() || self.send.is_some()
    }

    /// How often the sweep looks: a quarter of the shortest limit, between
    /// 10 ms and 1 s.
    pub fn tick(&self) -> Duration {
        [self.idle, self.request, self.send]
            .into_iter()
            .flatten()
            .min()
            .map_or(Duration::from_secs(1), |d| d / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1))
    }

    /// A `--FLAG SECONDS` value: positive seconds, or 0 for no limit.
    pub fn parse_secs(flag: &'static str, secs: f64) -> Result<Option<Duration>, InvalidConfig> {
        if secs == 0.0 {
            Ok(None)
        } else if secs.is_finite() && secs > 0.0 && secs <= 1e6 {
            Ok(Some(Duration::from_secs_f64(secs)))
        } else {
            Err(InvalidConfig::Seconds { flag, secs })
        }
    }
}

/// Why a [`ServerConfig`] (or a `--FLAG SECONDS` value) was refused. Its
/// one-line message names the command-line flag and the value, as a server
/// CLI reports it (`--workers 0 is out of range: allowed 1..=64`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidConfig {
    /// `workers` is outside 1..=[`MAX_WORKERS`].
    #[error("--workers {0} is out of range: allowed 1..={MAX_WORKERS}")]
    Workers(usize),
    /// `max_conns` is outside 1..=[`MAX_CONNS`].
    #[error("--max-conns {0} is out of range: allowed 1..={MAX_CONNS}")]
    MaxConns(usize),
    /// `max_output` is outside [`MIN_MAX_OUTPUT`]..=[`MAX_MAX_OUTPUT`].
    #[error("--max-output {0} is out of range: allowed {MIN_MAX_OUTPUT}..={MAX_MAX_OUTPUT}")]
    MaxOutput(usize),
    /// A timeout (`idle`, `request` or `send`) of zero; `None` means no limit.
    #[error("the {0} timeout must be positive (None = no limit)")]
    ZeroTimeout(&'static str),
    /// `sched.batch` is outside 1..=1024.
    #[error("--batch {0} is out of range: allowed 1..=1024")]
    Batch(usize),
    /// Batch workers (priority diffusion) with a driver other than skq.
    #[error("--batch-workers needs the skq driver: {0} has no priority diffusion")]
    BatchWorkersNeedSkq(Driver),
    /// The skq core refused the mode or a tunable (its message names the flag).
    #[error("{0}")]
    Core(skq_core::ConfigError),
    /// `min_workers` is outside 1..=`workers`.
    #[error("--min-workers {min} is out of range: allowed 1..={workers} (--workers)")]
    MinWorkers {
        /// The value given.
        min: usize,
        /// The worker count, its upper bound.
        workers: usize,
    },
    /// An elastic worker count with a driver other than skq (or skq-async).
    #[error("--min-workers needs an skq mode; {0} has a fixed worker count")]
    MinWorkersNeedSkq(Driver),
    /// A tunable of skq's scheduler (`--steal-k`, `--poll-groups`, ...) with a
    /// mode that has none: it would be ignored.
    #[error("{flag} tunes skq's scheduler; --mode {mode} has none (a baseline without skq): leave it out or pick an skq mode")]
    SchedNeedsSkq {
        /// The flag given.
        flag: &'static str,
        /// The mode's name.
        mode: String,
    },
    /// A statistics period of zero.
    #[error("--elastic-period-us 0 is out of range: allowed 1..")]
    ZeroElasticPeriod,
    /// A backlog check period of zero.
    #[error("--elastic-backlog-us 0 is out of range: allowed 1..")]
    ZeroElasticBacklog,
    /// A `--FLAG SECONDS` value that is neither 0 nor positive seconds up to 10⁶.
    #[error("--{flag} {secs}: not a number of seconds in 0..=1000000 (0 = no limit)")]
    Seconds {
        /// The flag, without its dashes.
        flag: &'static str,
        /// The value given.
        secs: f64,
    },
}

/// Everything a driver needs besides the protocol.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free port).
    pub addr: SocketAddr,
    /// The driver and, for skq, the scheduling policy.
    pub mode: Mode,
    /// Worker threads (1..=64).
    pub workers: usize,
    /// skq scheduling tunables (the batch size applies to the epoll drivers too).
    pub sched: SchedSpec,
    /// Pin worker threads (skq: to the runtime's CPU for each worker, which
    /// its locality decisions assume; others: thread i to the i-th allowed CPU).
    pub pin: bool,
    /// Most connections served at once; more are accepted and closed at once.
    pub max_conns: usize,
    /// How the application delivers service, for the statistics (`spin`, `emulate`, `-`).
    pub service_label: String,
    /// Ceiling of a connection's pending output (bytes): once this much
    /// waits to be written, the driver serves none of that connection's
    /// input until the socket drains. One reply may pass it (the protocol
    /// bounds its replies, or produces long ones in pieces with
    /// [`crate::Cx::resume_later`]), so a connection holds at most about
    /// this plus its largest reply piece.
    pub max_output: usize,
    /// Idle, request and send timeouts (all off by default).
    pub timeouts: Timeouts,
}

impl ServerConfig {
    /// Defaults: 127.0.0.1 on a free port, `driver` (skq: hybrid), 65,536
    /// connections.
    pub fn new(driver: Driver, workers: usize) -> Self {
        ServerConfig::with_mode(Mode::of_driver(driver), workers)
    }

    /// Like [`ServerConfig::new`], for a mode.
    pub fn with_mode(mode: Mode, workers: usize) -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            mode,
            workers,
            sched: SchedSpec::default(),
            pin: false,
            max_conns: 65_536,
            service_label: "-".into(),
            max_output: DEFAULT_MAX_OUTPUT,
            timeouts: Timeouts::default(),
        }
    }

    /// The server layer's configuration for a spec (the spec's service is
    /// the application's: it becomes the statistics' label).
    pub fn from_spec(spec: &ServerSpec) -> Self {
        let mut c = ServerConfig::with_mode(spec.mode, spec.workers);
        c.sched = spec.sched.clone();
        c.pin = spec.pin;
        c.service_label = spec.service.to_string();
        c
    }

    /// The driver the mode names.
    pub fn driver(&self) -> Driver {
        self.mode.driver()
    }

    /// Checks every option; the error names the option and its range.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if !(1..=MAX_WORKERS).contains(&self.workers) {
            return Err(InvalidConfig::Workers(self.workers));
        }
        if !(1..=MAX_CONNS).contains(&self.max_conns) {
            return Err(InvalidConfig::MaxConns(self.max_conns));
        }
        if !(MIN_MAX_OUTPUT..=MAX_MAX_OUTPUT).contains(&self.max_output) {
            return Err(InvalidConfig::MaxOutput(self.max_output));
        }
        let t = &self.timeouts;
        for (which, d) in [("idle", t.idle), ("request", t.request), ("send", t.send)] {
            if d.is_some_and(|d| d.is_zero()) {
                return Err(InvalidConfig::ZeroTimeout(which));
            }
        }
        if !(1..=1024).contains(&self.sched.batch) {
            return Err(InvalidConfig::Batch(self.sched.batch));
        }
        if !self.mode.has_core() && !self.sched.batch_workers.is_empty() {
            return Err(InvalidConfig::BatchWorkersNeedSkq(self.driver()));
        }
        if !self.mode.has_core() {
            if let Some(flag) = self.sched.core_tunable_given() {
                return Err(InvalidConfig::SchedNeedsSkq {
                    flag,
                    mode: self.mode.to_string(),
                });
            }
        }
        if self.mode.has_core() {
            self.core_config().map_err(InvalidConfig::Core)?;
        }
        if let Some(min) = self.sched.min_workers {
            if !(1..=self.workers).contains(&min) {
                return Err(InvalidConfig::MinWorkers {
                    min,
                    workers: self.workers,
                });
            }
            if !self.mode.has_core() {
                return Err(InvalidConfig::MinWorkersNeedSkq(self.driver()));
            }
        }
        if self.sched.elastic_period_us == Some(0) {
            return Err(InvalidConfig::ZeroElasticPeriod);
        }
        if self.sched.elastic_backlog_us == Some(0) {
            return Err(InvalidConfig::ZeroElasticBacklog);
        }
        Ok(())
    }

    /// The skq core configuration: the mode's policy, the tunables applied
    /// on top, capacity for the listener, one retire bell per worker (the
    /// skq driver's) and `max_conns` connections.
    /// Worker CPUs are left to the runtime (topology spread order), which
    /// `pin` then follows. A baseline mode has none: an error naming it.
    pub fn core_config(&self) -> Result<skq_core::Config, skq_core::ConfigError> {
        let s = &self.sched;
        let mut c = self.mode.core_config(self.workers).ok_or_else(|| {
            skq_core::ConfigError::Conflict(format!(
                "--mode {}: not an skq mode, no scheduling core",
                self.mode
            ))
        })??;
        if let Some(k) = s.steal_k {
            c.steal_k = k;
        }
        if let Some(us) = s.steal_retry_us {
            c.steal_retry_ns = us.saturating_mul(1_000);
        }
        if let Some(us) = s.promote_min_us {
            c.promote_min_ns = us.saturating_mul(1_000);
        }
        if let Some(p) = s.pollers {
            c.pollers = p;
        }
        if let Some(n) = s.batch_polls_above {
            c.batch_polls_above = n;
        }
        if let Some(g) = s.poll_groups {
            c.poll_groups = g;
        }
        if let Some(v) = s.rtshare {
            c.rtshare = v;
        }
        if let Some(v) = s.rtfreq {
            c.rtfreq = v;
        }
        if let Some(v) = s.penalty_ns {
            c.penalty_ns = v;
        }
        for &w in &s.batch_workers {
            if w >= self.workers {
                return Err(skq_core::ConfigError::Conflict(format!(
                    "--batch-workers names worker {w} but there are only {} workers (0..{})",
                    self.workers, self.workers
                )));
            }
            c.batch_workers |= 1u64 << w;
        }
        c.capacity = self.max_conns + 1 + self.workers;
        c.validate()?;
        Ok(c)
    }

    /// The resource manager's settings, when the worker count is elastic.
    pub fn elastic_config(&self) -> Option<skq_core::ElasticConfig> {
        let min = self.sched.min_workers?;
        let mut e = skq_core::ElasticConfig::new(min, self.workers);
        if let Some(us) = self.sched.elastic_period_us {
            e.period_ns = us.saturating_mul(1_000);
        }
        if let Some(us) = self.sched.elastic_backlog_us {
            e.backlog_check_ns = us.saturating_mul(1_000);
        }
        Some(e)
    }

    /// The mode reported in statistics: the skq mode's canonical name, or the driver's.
    pub fn mode_name(&self) -> String {
        match (self.mode, self.mode.core_config(self.workers)) {
            (Mode::Async(_), Some(Ok(c))) => {
                format!("{}{}", crate::async_mode::ASYNC_PREFIX, c.mode_name())
            }
            (_, Some(Ok(c))) => c.mode_name(),
            _ => self.mode.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_name_their_driver() {
        let driver = |m: &str| m.parse::<Mode>().unwrap().driver();
        assert_eq!(driver("epoll-1to1"), Driver::Epoll1to1);
        assert_eq!(driver("epoll"), Driver::EpollShared);
        assert_eq!(driver("tokio"), Driver::Tokio);
        assert_eq!(driver("hybrid"), Driver::Skq);
        assert_eq!("epoll-shared".parse::<Driver>(), Ok(Driver::EpollShared));
        assert!("uring"
            .parse::<Driver>()
            .unwrap_err()
            .contains("epoll-1to1"));
    }

    #[test]
    fn elastic_options_map_to_the_resource_manager() {
        let mut c = ServerConfig::with_mode(Mode::default(), 8);
        assert_eq!(c.elastic_config(), None, "fixed by default");
        c.sched.min_workers = Some(2);
        c.sched.elastic_period_us = Some(5_000);
        c.sched.elastic_backlog_us = Some(100);
        let e = c.elastic_config().unwrap();
        assert_eq!(
            (e.min, e.max, e.period_ns, e.backlog_check_ns),
            (2, 8, 5_000_000, 100_000)
        );
        c.validate().unwrap();
        c.sched.min_workers = Some(9);
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--min-workers 9"));
        let mut t = ServerConfig::with_mode(Mode::Tokio, 8);
        t.sched.min_workers = Some(2);
        assert!(t
            .validate()
            .unwrap_err()
            .to_string()
            .contains("needs an skq mode"));
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let mut c = ServerConfig::with_mode(Mode::default(), 0);
        assert_eq!(c.validate(), Err(InvalidConfig::Workers(0)));
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "--workers 0 is out of range: allowed 1..=64"
        );
        c.workers = 2;
        c.sched.batch = 0;
        assert!(c.validate().unwrap_err().to_string().contains("--batch 0"));
        c.sched.batch = 1;
        c.sched.steal_k = Some(9);
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--steal-k 9"));
        c.sched.steal_k = None;
        c.mode = Mode::Tokio;
        c.sched.batch_workers = vec![1];
        assert_eq!(
            c.validate(),
            Err(InvalidConfig::BatchWorkersNeedSkq(Driver::Tokio))
        );
        let c = ServerConfig::with_mode(Mode::Epoll1to1, 2);
        assert_eq!(c.mode_name(), "epoll-1to1");
        c.validate().unwrap();
    }

    #[test]
    fn a_scheduler_tunable_with_a_baseline_mode_is_refused() {
        for mode in [Mode::Tokio, Mode::Epoll1to1] {
            let mut c = ServerConfig::with_mode(mode, 2);
            c.sched.poll_groups = Some(2);
            let e = c.validate().unwrap_err();
            assert!(
                matches!(
                    &e,
                    InvalidConfig::SchedNeedsSkq {
                        flag: "--poll-groups",
                        ..
                    }
                ),
                "{e}"
            );
            assert!(e.to_string().contains(&format!("--mode {mode}")), "{e}");
            c.sched.poll_groups = None;
            c.sched.rtshare = Some(50);
            assert!(c
                .validate()
                .unwrap_err()
                .to_string()
                .starts_with("--rtshare"));
            c.sched.rtshare = None;
            c.validate().unwrap();
        }
        let mut c = ServerConfig::with_mode("hybrid".parse().unwrap(), 2);
        c.sched.poll_groups = Some(2);
        c.validate().unwrap();
    }
}
