//! Scheduling mode, policy and tunables, fixed before the first `wait()`.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// Most workers one instance supports (the idle set is one 64-bit word).
pub const MAX_WORKERS: usize = 64;

/// CPU numbers must be below this (Linux's largest `NR_CPUS`); it bounds the
/// per-CPU hint table the scheduler precomputes.
pub const MAX_CPUS: u32 = 8192;

/// Where one CPU sits in the machine's topology tree (BRIEF's kqdom: NUMA
/// node → last-level cache → core → hardware thread). Ids only need to be
/// equal for CPUs that share the level and distinct otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuPlace {
    /// The logical CPU described.
    pub cpu: u32,
    /// Physical core (CPUs with the same core are SMT siblings).
    pub core: u32,
    /// Last-level cache.
    pub llc: u32,
    /// NUMA node.
    pub node: u32,
}

/// How activations are assigned to worker queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// 1:1 model: a private queue per worker, sources assigned round-robin at
    /// registration and never moved.
    Vanilla,
    /// 1:N model: one queue under one lock; any worker takes any event.
    Shared,
    /// Queue affinity: delivered to the worker of the CPU where the source
    /// first fired, kept there.
    Queue,
    /// CPU affinity: delivered to a worker on the CPU that saw the source's
    /// last readiness (`SO_INCOMING_CPU`), following it when it moves.
    Cpu,
    /// Best of two random workers by expected completion time.
    Best2,
    /// CPU affinity first; a best-of-two rival wins only if it beats the local
    /// choice by more than the cache-miss penalty. Stealing on by default.
    Hybrid,
}

impl Policy {
    /// Every policy, baselines first.
    pub const ALL: [Policy; 6] = [
        Policy::Vanilla,
        Policy::Shared,
        Policy::Queue,
        Policy::Cpu,
        Policy::Best2,
        Policy::Hybrid,
    ];

    /// Lower-case name used on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Vanilla => "vanilla",
            Policy::Shared => "shared",
            Policy::Queue => "queue",
            Policy::Cpu => "cpu",
            Policy::Best2 => "best2",
            Policy::Hybrid => "hybrid",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = ConfigError;
    fn from_str(s: &str) -> Result<Self, ConfigError> {
        Policy::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| ConfigError::UnknownMode(s.to_string()))
    }
}

/// A configuration value the core refuses, worded for a command line.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A numeric option outside its range.
    #[error("--{option} {value} is out of range: allowed {range}")]
    OutOfRange {
        /// Option name without dashes.
        option: &'static str,
        /// The refused value.
        value: String,
        /// The allowed range, e.g. `1..=100`.
        range: &'static str,
    },
    /// A mode string that names no policy.
    #[error("--mode `{0}` is unknown: expected vanilla, shared, queue, cpu, best2 or hybrid, optionally with +steal (e.g. best2+steal)")]
    UnknownMode(String),
    /// `+steal` with a policy that never moves work between queues.
    #[error("{0}+steal is not allowed: {0} never moves work between queues; use queue, cpu, best2 or hybrid with +steal")]
    StealNotAllowed(Policy),
    /// Two settings that cannot go together.
    #[error("{0}")]
    Conflict(String),
}

/// Everything that shapes scheduling, fixed before the first `wait()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Assignment policy.
    pub policy: Policy,
    /// Number of workers, 1..=64.
    pub workers: usize,
    /// Work stealing by idle workers (not with vanilla or shared).
    pub steal: bool,
    /// Most sources stolen per attempt, 1..=8 (scan at most 2×k).
    pub steal_k: usize,
    /// Optional safety-net retry of an idle stealing worker, ns (0 = off, the
    /// default, else 10 µs ..= 100 ms). Idle workers steal on demand: a push
    /// that leaves work queued behind a busy worker wakes one idle thief
    /// (`sched.rs`), so no periodic wake-up is needed for work conservation.
    pub steal_retry_ns: u64,
    /// Leader/follower: a poller that wakes with work of its own hands the
    /// poll to a parked follower (a wake-up) only if its processing time
    /// per event (EWMA) is at least this many ns; below it, it keeps no
    /// follower awake for the short while it works, and readiness arriving
    /// meanwhile is harvested by the next worker to finish an event (ns;
    /// 0, the default, always hands over). Opt-in: a cheaper loop for
    /// handlers of uniform µs-scale cost, but one long event after short
    /// ones (a blocking handler) leaves readiness unharvested for its whole
    /// length while followers sleep.
    pub promote_min_ns: u64,
    /// Readiness sets the workers are split into (0..=workers): each set is
    /// polled and harvested by its own group of workers (`worker_loop.rs`;
    /// skq-rt keeps an epoll set per group, the simulator models them).
    /// G = workers gives every worker its own set. 0, the default, lets the
    /// policy choose when the scheduler is built
    /// ([`Config::effective_poll_groups`]): one set per worker for `cpu`
    /// without stealing when every worker has a CPU of its own, else one
    /// shared set.
    pub poll_groups: usize,
    /// Most workers blocked in one readiness set at once (0 = every idle
    /// worker of the set's group; 1 = leader/follower). With one, an idle
    /// worker that cannot poll parks, and a poller leaving to work wakes a
    /// parked one to poll in its place: a second wake-up per request at low
    /// load. With more, the kernel wakes one blocked worker per readiness,
    /// which keeps that event when the policy allows it (it is awake, on its
    /// own CPU), and a worker blocked in the set is woken for work pushed to
    /// it by a targeted doorbell (skq-rt: a thread-directed signal that only
    /// `epoll_pwait2` unblocks). In a set of more than
    /// [`Config::batch_polls_above`] workers, a poller whose events are
    /// short takes every ready event and hands on what it does not keep.
    /// See `worker_loop.rs`.
    pub pollers: usize,
    /// With several pollers per set: in a set of more than this many
    /// workers, a poller whose events are short (its mean under
    /// [`crate::KERNEL_FIFO_MIN_NS`]) takes every ready event rather than
    /// one, so that the set's lock is not taken once per event (0..=64;
    /// 64: never). Default [`crate::ONE_EVENT_POLLS_MAX_SET`] (8), where
    /// the simulator and this project's measurements agree
    /// (docs/ARCHITECTURE.md, "Batches from a set of more than 8 workers").
    pub batch_polls_above: usize,
    /// Most high-priority events per batch, percent of the buffer, 1..=100.
    pub rtshare: u32,
    /// Target waits per second per worker; 0 = unlimited batches.
    pub rtfreq: u32,
    /// Hybrid's cache-miss penalty charged to a non-local rival, ns (≤ 1 ms).
    pub penalty_ns: u64,
    /// Most live sources, 1..=2^24. A limit, not a preallocation: the
    /// source table grows a segment of 1,024 slots at a time as sources
    /// register (about 40 bytes a slot).
    pub capacity: usize,
    /// CPU each worker runs on, for locality (empty: worker w on CPU w).
    pub worker_cpus: Vec<u32>,
    /// The machine's topology, one entry per CPU that may report a hint
    /// (empty: unknown). A CPU hint goes to a worker on that CPU, else on an
    /// SMT sibling, else under the same last-level cache, else on the same
    /// node, else to any live worker by a per-source salt (see `cpumap.rs`).
    pub cpu_topology: Vec<CpuPlace>,
    /// Runtime only: activations served from a socket's cached CPU hint
    /// before asking the kernel again (`SO_INCOMING_CPU`), 1..=4096; 1 asks
    /// on every activation.
    pub hint_refresh: u32,
    /// Seed for scheduling randomness.
    pub seed: u64,
    /// Priority diffusion: bit w set = worker w runs batch-class sources
    /// and the others never do (0 = off; see `priority.rs`).
    pub batch_workers: u64,
}

/// Default [`Config::promote_min_ns`]: 0, always hand the poll over, so
/// readiness never waits behind a long event while a follower sleeps. (About
/// 20 µs, what the hand-over costs on a VM, is the value to try for uniform
/// µs-scale handlers.)
pub const DEFAULT_PROMOTE_MIN_NS: u64 = 0;

/// Splits a mode's steal suffix: `best2+steal` → (`best2`, Some(true)),
/// `hybrid-steal` → (`hybrid`, Some(false)), `cpu` → (`cpu`, None).
pub fn split_steal(mode: &str) -> (&str, Option<bool>) {
    if let Some(b) = mode.strip_suffix("+steal") {
        (b, Some(true))
    } else if let Some(b) = mode.strip_suffix("-steal") {
        (b, Some(false))
    } else {
        (mode, None)
    }
}

/// Default [`Config::pollers`]: every idle worker blocks in its group's set.
pub const DEFAULT_POLLERS: usize = 0;

impl Config {
    /// A configuration with the paper's defaults (hybrid turns stealing on).
    pub fn new(policy: Policy, workers: usize) -> Config {
        Config {
            policy,
            workers,
            steal: policy == Policy::Hybrid,
            steal_k: 1,
            steal_retry_ns: 0,
            promote_min_ns: DEFAULT_PROMOTE_MIN_NS,
            poll_groups: 0,
            pollers: DEFAULT_POLLERS,
            batch_polls_above: crate::ONE_EVENT_POLLS_MAX_SET as usize,
            rtshare: 100,
            rtfreq: 0,
            penalty_ns: 500,
            capacity: 1 << 20,
            worker_cpus: Vec::new(),
            cpu_topology: Vec::new(),
            hint_refresh: 16,
            seed: 0x5eed,
            batch_workers: 0,
        }
    }

    /// Parses a mode such as `hybrid`, `best2+steal` or `hybrid-steal`
    /// (hybrid without stealing) into a configuration with defaults.
    pub fn parse_mode(s: &str, workers: usize) -> Result<Config, ConfigError> {
        let (base, steal) = split_steal(s);
        let policy: Policy = base
            .parse()
            .map_err(|_| ConfigError::UnknownMode(s.into()))?;
        let mut cfg = Config::new(policy, workers);
        if let Some(st) = steal {
            cfg.steal = st;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// The readiness sets the scheduler builds: [`Config::poll_groups`] when
    /// it is set, else the policy's choice. `cpu` without stealing gets one
    /// set per worker when `worker_cpus` gives every worker a CPU of its
    /// own: a flow's CPU then names one worker, which the kernel can wake
    /// directly, while a shared set wakes any idle worker and, when that is
    /// not the flow's, adds a hand-over and a targeted wake-up (memcached on
    /// skq at 2 threads: CPU per request 1.19–1.21× stock on one set,
    /// 0.94–0.99× on per-worker sets, medians of four runs; `docs/C-API.md`).
    /// With several workers on a CPU the shared set is kept: it lets any
    /// idle worker of the flow's CPU take the event, which per-worker sets
    /// would forbid (max load at SLO 0.95–1.01× epoll-shared on one set,
    /// 0.41–0.62× on per-worker sets; `crates/skq-bench/examples/cpu-sets.toml`). An
    /// unknown placement (empty `worker_cpus`) keeps the shared set.
    pub fn effective_poll_groups(&self) -> usize {
        if self.poll_groups != 0 {
            return self.poll_groups;
        }
        let mut seen = std::collections::HashSet::new();
        let own_cpus =
            !self.worker_cpus.is_empty() && self.worker_cpus.iter().all(|&c| seen.insert(c));
        if self.policy == Policy::Cpu && !self.steal && self.workers > 1 && own_cpus {
            self.workers
        } else {
            1
        }
    }

    /// The mode as [`Config::parse_mode`] reads it back.
    pub fn mode_name(&self) -> String {
        let default_steal = self.policy == Policy::Hybrid;
        match (self.steal, default_steal) {
            (true, false) => format!("{}+steal", self.policy),
            (false, true) => format!("{}-steal", self.policy),
            _ => self.policy.to_string(),
        }
    }

    /// Checks every value; the error names the option and its allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        fn range<T: PartialOrd + fmt::Display>(
            option: &'static str,
            v: T,
            lo: T,
            hi: T,
            text: &'static str,
        ) -> Result<(), ConfigError> {
            if v < lo || v > hi {
                return Err(ConfigError::OutOfRange {
                    option,
                    value: v.to_string(),
                    range: text,
                });
            }
            Ok(())
        }
        range("workers", self.workers, 1, MAX_WORKERS, "1..=64")?;
        range("steal-k", self.steal_k, 1, 8, "1..=8")?;
        if self.steal_retry_ns != 0 {
            range(
                "steal-retry-us",
                self.steal_retry_ns / 1000,
                10,
                100_000,
                "0 (off) or 10..=100000",
            )?;
        }
        range(
            "promote-min-us",
            self.promote_min_ns / 1000,
            0,
            1_000_000,
            "0..=1000000",
        )?;
        range(
            "poll-groups",
            self.poll_groups,
            0,
            self.workers.max(1),
            "0 (the policy's choice) or 1..=workers",
        )?;
        range(
            "pollers",
            self.pollers,
            0,
            self.workers.max(1),
            "0 (every idle worker) or 1..=workers",
        )?;
        range(
            "batch-polls-above",
            self.batch_polls_above,
            0,
            64,
            "0..=64 (64: never)",
        )?;
        range("rtshare", self.rtshare, 1, 100, "1..=100")?;
        range("rtfreq", self.rtfreq, 0, 1_000_000, "0..=1000000")?;
        range("penalty-ns", self.penalty_ns, 0, 1_000_000, "0..=1000000")?;
        range("capacity", self.capacity, 1, 1 << 24, "1..=16777216")?;
        range("hint-refresh", self.hint_refresh, 1, 4096, "1..=4096")?;
        if self.steal && matches!(self.policy, Policy::Vanilla | Policy::Shared) {
            return Err(ConfigError::StealNotAllowed(self.policy));
        }
        crate::priority::validate_diffusion(self)?;
        if !self.worker_cpus.is_empty() && self.worker_cpus.len() != self.workers {
            return Err(ConfigError::Conflict(format!(
                "worker_cpus lists {} CPUs for {} workers",
                self.worker_cpus.len(),
                self.workers
            )));
        }
        if let Some(&c) = self.worker_cpus.iter().find(|&&c| c >= MAX_CPUS) {
            return Err(ConfigError::Conflict(format!(
                "worker_cpus names CPU {c}: CPU numbers must be below {MAX_CPUS}"
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for p in &self.cpu_topology {
            if p.cpu >= MAX_CPUS {
                return Err(ConfigError::Conflict(format!(
                    "cpu_topology describes CPU {}: CPU numbers must be below {MAX_CPUS}",
                    p.cpu
                )));
            }
            if !seen.insert(p.cpu) {
                return Err(ConfigError::Conflict(format!(
                    "cpu_topology describes CPU {} twice",
                    p.cpu
                )));
            }
        }
        Ok(())
    }

    /// CPU of worker `w` for locality decisions.
    pub fn cpu_of(&self, w: usize) -> u32 {
        self.worker_cpus.get(w).copied().unwrap_or(w as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_modes_and_names_them_back() {
        for s in [
            "vanilla",
            "shared",
            "queue",
            "cpu+steal",
            "best2+steal",
            "hybrid",
            "hybrid-steal",
        ] {
            assert_eq!(Config::parse_mode(s, 4).unwrap().mode_name(), s);
        }
        assert!(Config::parse_mode("hybrid", 4).unwrap().steal);
        assert!(!Config::parse_mode("best2", 4).unwrap().steal);
    }

    #[test]
    fn refuses_bad_values_with_one_clear_line() {
        let e = Config::parse_mode("fastest", 4).unwrap_err().to_string();
        assert!(e.contains("--mode `fastest` is unknown"), "{e}");
        let mut c = Config::new(Policy::Cpu, 4);
        c.rtshare = 0;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "--rtshare 0 is out of range: allowed 1..=100"
        );
        c.rtshare = 100;
        c.steal_k = 9;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .starts_with("--steal-k 9"));
        c.steal_k = 1;
        c.hint_refresh = 0;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "--hint-refresh 0 is out of range: allowed 1..=4096"
        );
        c.hint_refresh = 16;
        let place = CpuPlace {
            cpu: 3,
            core: 3,
            llc: 0,
            node: 0,
        };
        c.cpu_topology = vec![place, place];
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "cpu_topology describes CPU 3 twice"
        );
        assert!(Config::parse_mode("vanilla+steal", 2).is_err());
        assert!(Config::parse_mode("cpu", 65)
            .unwrap_err()
            .to_string()
            .contains("--workers 65"));
    }
}
