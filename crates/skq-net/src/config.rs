//! Which driver serves a protocol, and with what.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

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
    /// ([`SchedOptions::mode`]) decides which worker handles each event.
    Skq,
    /// One epoll per thread, each connection assigned round-robin at accept
    /// and never moved, every thread blocking in its own `epoll_wait`: the
    /// memcached/nginx model.
    Epoll1to1,
    /// One epoll set shared by every thread, all blocking in `epoll_wait`,
    /// connections registered `EPOLLONESHOT` and re-armed after each event:
    /// the "Linux floating" 1:N model.
    EpollShared,
    /// tokio's multi-thread work-stealing runtime, one task per connection.
    Tokio,
}

impl Driver {
    /// Every driver, in the order help texts list them.
    pub const ALL: [Driver; 4] = [
        Driver::Skq,
        Driver::Epoll1to1,
        Driver::EpollShared,
        Driver::Tokio,
    ];

    /// The name used on command lines and in statistics.
    pub fn name(self) -> &'static str {
        match self {
            Driver::Skq => "skq",
            Driver::Epoll1to1 => "epoll-1to1",
            Driver::EpollShared => "epoll-shared",
            Driver::Tokio => "tokio",
        }
    }

    /// The driver a `--mode` value names: `epoll-1to1`, `epoll-shared` (or
    /// its older name `epoll`), `tokio`; anything else is an skq scheduling
    /// mode, validated later by the core.
    pub fn of_mode(mode: &str) -> Driver {
        match mode {
            "epoll-1to1" => Driver::Epoll1to1,
            "epoll-shared" | "epoll" => Driver::EpollShared,
            "tokio" => Driver::Tokio,
            _ => Driver::Skq,
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
                format!("unknown runtime `{s}`: expected skq, epoll-1to1, epoll-shared or tokio")
            })
    }
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Scheduling options of the skq driver; `None` keeps the core's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedOptions {
    /// Policy with optional `+steal` (`vanilla`, `shared`, `queue`, `cpu`, `best2`, `hybrid`).
    pub mode: String,
    /// Events taken per steal (1..=8).
    pub steal_k: Option<usize>,
    /// Idle worker's steal retry period (µs).
    pub steal_retry_us: Option<u64>,
    /// Poller hand-over threshold (µs of processing per event; 0 = always).
    pub promote_min_us: Option<u64>,
    /// Epoll sets the workers are split into (1..=workers).
    pub poll_groups: Option<usize>,
    /// Most workers blocked in one epoll set (0 = every idle worker).
    pub pollers: Option<usize>,
    /// Percent of a batch that high-priority events may fill (1..=100).
    pub rtshare: Option<u32>,
    /// Target waits per second per worker (0 = off).
    pub rtfreq: Option<u32>,
    /// Hybrid's cache-miss penalty (ns).
    pub penalty_ns: Option<u64>,
    /// Most events one `wait()` (skq) or `epoll_wait` (epoll drivers)
    /// returns (1..=1024). Events in a worker's batch cannot be taken by
    /// another worker, so large batches trade tail latency (head-of-line
    /// blocking) for fewer waits.
    pub batch: usize,
    /// Elastic worker count (skq driver): fewest active workers; `None`
    /// keeps all `workers` active. With it, a resource manager parks and
    /// wakes workers between this and `workers` once per statistics period.
    pub min_workers: Option<usize>,
    /// The resource manager's statistics period (µs; default 20,000).
    pub elastic_period_us: Option<u64>,
    /// How often it looks for a backlog between periods (µs; default 2,000;
    /// keep it within about ten service times).
    pub elastic_backlog_us: Option<u64>,
    /// Priority diffusion: the workers that take batch-class requests
    /// (the others never run them; empty = off). See skq-core's
    /// `priority.rs` for the rule.
    pub batch_workers: Vec<usize>,
}

impl Default for SchedOptions {
    fn default() -> Self {
        SchedOptions {
            mode: "hybrid".into(),
            steal_k: None,
            steal_retry_us: None,
            promote_min_us: None,
            poll_groups: None,
            pollers: None,
            rtshare: None,
            rtfreq: None,
            penalty_ns: None,
            batch: 1,
            min_workers: None,
            elastic_period_us: None,
            elastic_backlog_us: None,
            batch_workers: Vec::new(),
        }
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
    /// An elastic worker count with a driver other than skq.
    #[error("--min-workers needs an skq mode; {0} has a fixed worker count")]
    MinWorkersNeedSkq(Driver),
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
    /// The driver.
    pub driver: Driver,
    /// Worker threads (1..=64).
    pub workers: usize,
    /// skq scheduling options (the batch size applies to the epoll drivers too).
    pub sched: SchedOptions,
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
    /// Defaults: 127.0.0.1 on a free port, hybrid, 65,536 connections.
    pub fn new(driver: Driver, workers: usize) -> Self {
        ServerConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            driver,
            workers,
            sched: SchedOptions::default(),
            pin: false,
            max_conns: 65_536,
            service_label: "-".into(),
            max_output: DEFAULT_MAX_OUTPUT,
            timeouts: Timeouts::default(),
        }
    }

    /// A configuration from a `--mode` value (see [`Driver::of_mode`]).
    pub fn with_mode(mode: &str, workers: usize) -> Self {
        let mut c = ServerConfig::new(Driver::of_mode(mode), workers);
        c.sched.mode = mode.to_string();
        c
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
        if self.driver != Driver::Skq && !self.sched.batch_workers.is_empty() {
            return Err(InvalidConfig::BatchWorkersNeedSkq(self.driver));
        }
        if self.driver == Driver::Skq {
            self.core_config().map_err(InvalidConfig::Core)?;
        }
        if let Some(min) = self.sched.min_workers {
            if !(1..=self.workers).contains(&min) {
                return Err(InvalidConfig::MinWorkers {
                    min,
                    workers: self.workers,
                });
            }
            if self.driver != Driver::Skq {
                return Err(InvalidConfig::MinWorkersNeedSkq(self.driver));
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

    /// The skq core configuration: the mode parsed by the core, the tunables
    /// applied on top, capacity for the listener plus `max_conns`
    /// connections. Worker CPUs are left to the runtime (topology spread
    /// order), which `pin` then follows.
    pub fn core_config(&self) -> Result<skq_core::Config, skq_core::ConfigError> {
        let s = &self.sched;
        let mut c = skq_core::Config::parse_mode(&s.mode, self.workers)?;
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
        c.capacity = self.max_conns + 1;
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
        match self.driver {
            Driver::Skq => self
                .core_config()
                .map_or_else(|_| self.sched.mode.clone(), |c| c.mode_name()),
            d => d.name().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_name_their_driver() {
        assert_eq!(Driver::of_mode("epoll-1to1"), Driver::Epoll1to1);
        assert_eq!(Driver::of_mode("epoll"), Driver::EpollShared);
        assert_eq!(Driver::of_mode("tokio"), Driver::Tokio);
        assert_eq!(Driver::of_mode("hybrid"), Driver::Skq);
        assert_eq!("epoll-shared".parse::<Driver>(), Ok(Driver::EpollShared));
        assert!("uring"
            .parse::<Driver>()
            .unwrap_err()
            .contains("epoll-1to1"));
    }

    #[test]
    fn elastic_options_map_to_the_resource_manager() {
        let mut c = ServerConfig::with_mode("hybrid", 8);
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
        let mut t = ServerConfig::with_mode("tokio", 8);
        t.sched.min_workers = Some(2);
        assert!(t
            .validate()
            .unwrap_err()
            .to_string()
            .contains("needs an skq mode"));
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let mut c = ServerConfig::with_mode("hybrid", 0);
        assert_eq!(c.validate(), Err(InvalidConfig::Workers(0)));
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "--workers 0 is out of range: allowed 1..=64"
        );
        c.workers = 2;
        c.sched.batch = 0;
        assert!(c.validate().unwrap_err().to_string().contains("--batch 0"));
        c.sched.batch = 1;
        c.sched.mode = "fastest".into();
        assert!(c.validate().is_err());
        let c = ServerConfig::with_mode("epoll-1to1", 2);
        assert_eq!(c.mode_name(), "epoll-1to1");
        c.validate().unwrap();
    }
}
