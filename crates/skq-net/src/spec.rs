//! The server spec: what serves ([`Mode`]), how the synthetic service is
//! delivered ([`ServiceMode`]) and the scheduling tunables ([`SchedSpec`]),
//! as one value ([`ServerSpec`]) that the bench and every server pass on.
//!
//! **Parsed once, at the edge.** A person types a mode or a tunable in one
//! of two places: a bench configuration file or a server's command-line
//! flags. Both parse it here, into these types, and from then on it travels
//! as the type: the bench hands a server its spec as JSON (`--spec JSON` or
//! `--spec @FILE`, [`ServerSpec::parse_arg`]), the server's flags build the
//! same value, and the server layer ([`crate::ServerConfig`]) and the skq
//! core configuration are derived from it. No mode string is matched after
//! parsing.
//!
//! **Invariants.** A [`Mode`] names a known driver, and for the skq driver a
//! known policy whose steal setting the core accepts (`vanilla+steal` is
//! refused at parse time). Ranges of the tunables that depend on other
//! settings (the worker count, the driver) are checked by
//! [`crate::ServerConfig::validate`], whose errors name the flag. A spec
//! serialises to JSON and reads back equal ([`ServerSpec::to_json`],
//! [`ServerSpec::parse_arg`]); unknown fields are refused.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use skq_core::Policy;

use crate::async_mode::{AsyncRuntime, ASYNC_PREFIX};
use crate::config::Driver;

/// What serves the connections: an skq scheduling policy (with its steal
/// setting) on the skq driver, or a baseline driver without skq.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// The skq driver with a scheduling policy.
    Skq {
        /// The policy.
        policy: Policy,
        /// `Some(true)`: `+steal`; `Some(false)`: `-steal`; `None`: the
        /// policy's default (hybrid steals, the others do not).
        steal: Option<bool>,
    },
    /// One epoll per thread, connections round-robin at accept.
    Epoll1to1,
    /// One epoll set shared by every thread, `EPOLLONESHOT` + re-arm.
    EpollShared,
    /// tokio's multi-thread runtime, requests served inline.
    Tokio,
    /// tokio's multi-thread runtime, requests run with `spawn_blocking`.
    TokioSpawnBlocking,
    /// `async-MODE`: the application's async handler on an async runtime
    /// (skq-async with an skq policy, or tokio); see [`crate::async_mode`].
    Async(AsyncRuntime),
}

impl Default for Mode {
    /// `hybrid`, every server's default.
    fn default() -> Self {
        Mode::Skq {
            policy: Policy::Hybrid,
            steal: None,
        }
    }
}

impl Mode {
    /// The driver that serves this mode.
    pub fn driver(self) -> Driver {
        match self {
            Mode::Skq { .. } => Driver::Skq,
            Mode::Epoll1to1 => Driver::Epoll1to1,
            Mode::EpollShared => Driver::EpollShared,
            Mode::Tokio => Driver::Tokio,
            Mode::TokioSpawnBlocking => Driver::TokioSpawnBlocking,
            Mode::Async(_) => Driver::Async,
        }
    }

    /// The mode a baseline driver means (`Driver::Skq`: the default policy).
    pub fn of_driver(driver: Driver) -> Mode {
        match driver {
            Driver::Skq => Mode::default(),
            Driver::Epoll1to1 => Mode::Epoll1to1,
            Driver::EpollShared => Mode::EpollShared,
            Driver::Tokio => Mode::Tokio,
            Driver::TokioSpawnBlocking => Mode::TokioSpawnBlocking,
            Driver::Async => Mode::Async(AsyncRuntime::default()),
        }
    }

    /// Whether the skq driver serves it (scheduling tunables apply).
    pub fn is_skq(self) -> bool {
        matches!(self, Mode::Skq { .. })
    }

    /// Whether an skq scheduling core runs it (the skq driver, or an
    /// `async-` mode on skq-async): the scheduling tunables apply.
    pub fn has_core(self) -> bool {
        self.core_config(1).is_some()
    }

    /// The skq core configuration of this mode for `workers` workers
    /// (`None` for the baselines and `async-tokio`).
    pub fn core_config(
        self,
        workers: usize,
    ) -> Option<Result<skq_core::Config, skq_core::ConfigError>> {
        match self {
            Mode::Skq { policy, steal } | Mode::Async(AsyncRuntime::Skq { policy, steal }) => {
                let mut c = skq_core::Config::new(policy, workers);
                if let Some(s) = steal {
                    c.steal = s;
                }
                Some(c.validate().map(|()| c))
            }
            _ => None,
        }
    }
}

/// Why a mode string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// The string names no mode; `expected` lists what would have been read.
    #[error("unknown mode `{mode}`: expected {expected}")]
    Unknown {
        /// The refused string, whole (with `async-` where it had it).
        mode: String,
        /// The modes accepted at that place, in words.
        expected: &'static str,
    },
    /// A known policy with a setting the core refuses (`vanilla+steal`).
    #[error(transparent)]
    Refused(#[from] skq_core::ConfigError),
}

/// What a mode string may name, for [`ModeError::Unknown`].
const EXPECTED_MODES: &str = "vanilla, shared, queue, cpu, best2 or hybrid (optionally +steal), \
     epoll-1to1, epoll-shared, tokio or tokio-spawn-blocking, or async- before a policy or \
     tokio (async-hybrid, async-tokio)";

impl FromStr for Mode {
    type Err = ModeError;
    /// `vanilla|shared|queue|cpu|best2|hybrid` with optional `+steal` or
    /// `-steal`, `epoll-1to1`, `epoll-shared` (or its older name `epoll`),
    /// `tokio`, `tokio-spawn-blocking`; any of those but the epoll ones after `async-`.
    fn from_str(s: &str) -> Result<Mode, ModeError> {
        if let Some(inner) = s.strip_prefix(ASYNC_PREFIX) {
            return AsyncRuntime::from_inner(s, inner.parse()).map(Mode::Async);
        }
        match s {
            "epoll-1to1" => return Ok(Mode::Epoll1to1),
            "epoll-shared" | "epoll" => return Ok(Mode::EpollShared),
            "tokio" => return Ok(Mode::Tokio),
            "tokio-spawn-blocking" => return Ok(Mode::TokioSpawnBlocking),
            _ => {}
        }
        let (base, steal) = skq_core::split_steal(s);
        let policy: Policy = base.parse().map_err(|_| ModeError::Unknown {
            mode: s.to_string(),
            expected: EXPECTED_MODES,
        })?;
        let mode = Mode::Skq { policy, steal };
        match mode.core_config(1) {
            Some(Err(e)) => Err(ModeError::Refused(e)),
            _ => Ok(mode),
        }
    }
}

impl fmt::Display for Mode {
    /// The form [`Mode::from_str`] reads back (`epoll` reads as `epoll-shared`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Mode::Skq { policy, steal } => {
                let suffix = match steal {
                    Some(true) => "+steal",
                    Some(false) => "-steal",
                    None => "",
                };
                write!(f, "{policy}{suffix}")
            }
            Mode::Async(rt) => rt.fmt(f),
            other => f.write_str(other.driver().name()),
        }
    }
}

impl Serialize for Mode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How a synthetic server delivers the service time a request asks for
/// (the delivery itself lives with the servers that do it, `skq-servers`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceMode {
    /// Busy-wait on the CPU.
    Spin,
    /// Absolute-deadline sleep (time dilation, BRIEF §8); the default.
    #[default]
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

impl FromStr for ServiceMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "spin" => Ok(ServiceMode::Spin),
            "emulate" => Ok(ServiceMode::Emulate),
            other => Err(format!(
                "unknown service mode `{other}`: expected spin or emulate"
            )),
        }
    }
}

impl fmt::Display for ServiceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Scheduling tunables; `None` keeps the core's default. Each is the
/// server flag of the same name (`steal_k` is `--steal-k`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedSpec {
    /// Events taken per steal (1..=8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_k: Option<usize>,
    /// Idle worker's steal retry period (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_retry_us: Option<u64>,
    /// Poller hand-over threshold (µs of processing per event; 0 = always).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promote_min_us: Option<u64>,
    /// Epoll sets the workers are split into (1..=workers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_groups: Option<usize>,
    /// Most workers blocked in one epoll set (0 = every idle worker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pollers: Option<usize>,
    /// Sets of more than this many workers take batches per poll while
    /// events are short (0..=64; 64 = never).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_polls_above: Option<usize>,
    /// Percent of a batch that high-priority events may fill (1..=100).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtshare: Option<u32>,
    /// Target waits per second per worker (0 = off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtfreq: Option<u32>,
    /// Hybrid's cache-miss penalty (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub penalty_ns: Option<u64>,
    /// Most events one `wait()` (skq) or `epoll_wait` (epoll drivers)
    /// returns (1..=1024). Events in a worker's batch cannot be taken by
    /// another worker, so large batches trade tail latency (head-of-line
    /// blocking) for fewer waits.
    pub batch: usize,
    /// Elastic worker count (skq driver): fewest active workers; `None`
    /// keeps all `workers` active. With it, a resource manager parks and
    /// wakes workers between this and `workers` once per statistics period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_workers: Option<usize>,
    /// The resource manager's statistics period (µs; default 20,000).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elastic_period_us: Option<u64>,
    /// How often it looks for a backlog between periods (µs; default 2,000;
    /// keep it within about ten service times).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elastic_backlog_us: Option<u64>,
    /// Priority diffusion: the workers that take batch-class requests
    /// (the others never run them; empty = off). See skq-core's
    /// `priority.rs` for the rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub batch_workers: Vec<usize>,
}

impl SchedSpec {
    /// The first tunable of skq's scheduler set here, by its flag: these
    /// mean nothing to a mode without skq (`batch` applies to the epoll
    /// drivers too; `min_workers` and `batch_workers` have their own
    /// errors).
    pub fn core_tunable_given(&self) -> Option<&'static str> {
        [
            ("--steal-k", self.steal_k.is_some()),
            ("--steal-retry-us", self.steal_retry_us.is_some()),
            ("--promote-min-us", self.promote_min_us.is_some()),
            ("--poll-groups", self.poll_groups.is_some()),
            ("--pollers", self.pollers.is_some()),
            ("--batch-polls-above", self.batch_polls_above.is_some()),
            ("--rtshare", self.rtshare.is_some()),
            ("--rtfreq", self.rtfreq.is_some()),
            ("--penalty-ns", self.penalty_ns.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }
}

/// The tunables of skq's scheduler that every server with an skq mode takes
/// as flags of these names (`steal_k` is `--steal-k`; `skq serve rpc` and
/// `skq serve kv` flatten this struct into their flags) and passes on into
/// its [`SchedSpec`]; `None` keeps the core's default. A mode without skq
/// refuses them ([`crate::InvalidConfig::SchedNeedsSkq`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::Args)]
#[serde(default, deny_unknown_fields)]
pub struct CoreTunables {
    /// Events taken per steal (1..=8).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_k: Option<usize>,
    /// Optional safety-net steal retry period of an idle worker, µs (off by
    /// default: idle workers are woken to steal on demand).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_retry_us: Option<u64>,
    /// A poller that wakes with work of its own wakes a parked follower to
    /// take over the poll only if its processing time per event is at least
    /// this, µs (0 = always, the default; try 20 for uniform µs-scale
    /// handlers: a long one then holds readiness back for its length).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promote_min_us: Option<u64>,
    /// Epoll sets the workers are split into, each polled and harvested by
    /// its own group of workers (1..=workers; 1: one shared set; = workers:
    /// one set per worker, woken directly by the kernel). Default: one set
    /// per worker for `cpu` without stealing when every worker has a CPU of
    /// its own, else one shared set.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_groups: Option<usize>,
    /// Most workers blocked in one epoll set at once (0, the default: every
    /// idle worker, and the one the kernel wakes keeps the event when the
    /// policy allows; 1: leader/follower, one poller that hands the poll to
    /// a parked worker when it leaves to work).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pollers: Option<usize>,
    /// With several pollers: in an epoll set of more than this many workers,
    /// a poller whose events are short (under 20 µs on average) takes every
    /// ready event instead of one, so that the set's lock is not taken once
    /// per event (0..=64; 64: never; default 8).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_polls_above: Option<usize>,
    /// Hybrid's cache-miss penalty in ns.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub penalty_ns: Option<u64>,
}

impl CoreTunables {
    /// Whether every tunable keeps the core's default.
    pub fn is_default(&self) -> bool {
        *self == CoreTunables::default()
    }

    /// Sets these tunables in `s`, leaving its other fields as they are.
    pub fn apply(&self, s: &mut SchedSpec) {
        s.steal_k = self.steal_k;
        s.steal_retry_us = self.steal_retry_us;
        s.promote_min_us = self.promote_min_us;
        s.poll_groups = self.poll_groups;
        s.pollers = self.pollers;
        s.batch_polls_above = self.batch_polls_above;
        s.penalty_ns = self.penalty_ns;
    }

    /// The flag of the first tunable set, if any.
    pub fn first_given(&self) -> Option<&'static str> {
        let mut s = SchedSpec::default();
        self.apply(&mut s);
        s.core_tunable_given()
    }
}

impl Default for SchedSpec {
    fn default() -> Self {
        SchedSpec {
            steal_k: None,
            steal_retry_us: None,
            promote_min_us: None,
            poll_groups: None,
            pollers: None,
            batch_polls_above: None,
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

/// What a server runs as: mode, workers, service, pinning and scheduling
/// tunables. The bench builds it from a configuration entry and passes it
/// as `--spec JSON`; a server's flags build the same value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// The driver and, for skq, the policy.
    pub mode: Mode,
    /// Worker threads (1..=64).
    pub workers: usize,
    /// Synthetic service delivery (servers without one ignore it).
    #[serde(default)]
    pub service: ServiceMode,
    /// Pin worker threads to CPUs.
    #[serde(default)]
    pub pin: bool,
    /// Scheduling tunables.
    #[serde(default)]
    pub sched: SchedSpec,
}

/// Why a `--spec` value was refused: one line naming the field.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// `@FILE` could not be read.
    #[error("--spec @{path}: cannot read it: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The JSON does not describe a spec; `field` is the path of the
    /// offending field (`sched.steal_k`), `.` for the whole value.
    #[error("--spec: field `{field}`: {message}")]
    Field {
        /// Dotted path of the field.
        field: String,
        /// serde's message, with line and column.
        message: String,
    },
}

impl ServerSpec {
    /// A spec with every tunable at its default.
    pub fn new(mode: Mode, workers: usize) -> ServerSpec {
        ServerSpec {
            mode,
            workers,
            service: ServiceMode::default(),
            pin: false,
            sched: SchedSpec::default(),
        }
    }

    /// A `--spec` value: JSON text, or `@FILE` holding it.
    pub fn parse_arg(arg: &str) -> Result<ServerSpec, SpecError> {
        parse_spec_arg(arg)
    }

    /// Reads the JSON form; the error names the offending field.
    pub fn from_json(text: &str) -> Result<ServerSpec, SpecError> {
        spec_from_json(text)
    }

    /// The JSON form (one line), as `--spec` takes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a spec always serialises")
    }
}

/// Reads a `--spec` value of any server's spec type: JSON text, or
/// `@FILE` holding it. The error names the offending field.
pub fn parse_spec_arg<T: serde::de::DeserializeOwned>(arg: &str) -> Result<T, SpecError> {
    match arg.strip_prefix('@') {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
                path: path.to_string(),
                source,
            })?;
            spec_from_json(&text)
        }
        None => spec_from_json(arg),
    }
}

/// Reads a spec's JSON form; the error names the offending field (its
/// dotted path, `.` for the whole value).
pub fn spec_from_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, SpecError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let spec: T = serde_path_to_error::deserialize(&mut de).map_err(|e| SpecError::Field {
        field: e.path().to_string(),
        message: e.inner().to_string(),
    })?;
    de.end().map_err(|e| SpecError::Field {
        field: ".".into(),
        message: e.to_string(),
    })?;
    Ok(spec)
}

impl FromStr for ServerSpec {
    type Err = String;
    /// [`ServerSpec::parse_arg`], for clap.
    fn from_str(s: &str) -> Result<ServerSpec, String> {
        ServerSpec::parse_arg(s).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print_back() {
        for s in [
            "vanilla",
            "shared",
            "queue",
            "cpu",
            "best2",
            "hybrid",
            "best2+steal",
            "hybrid-steal",
            "cpu+steal",
            "epoll-1to1",
            "epoll-shared",
            "tokio",
            "tokio-spawn-blocking",
        ] {
            let m: Mode = s.parse().unwrap();
            assert_eq!(m.to_string(), s);
        }
        assert_eq!("epoll".parse::<Mode>(), Ok(Mode::EpollShared));
        assert_eq!("tokio".parse::<Mode>().unwrap().driver(), Driver::Tokio);
        assert_eq!(
            "best2+steal".parse::<Mode>(),
            Ok(Mode::Skq {
                policy: Policy::Best2,
                steal: Some(true)
            })
        );
        let e = "fastest".parse::<Mode>().unwrap_err();
        assert!(
            matches!(&e, ModeError::Unknown { mode, .. } if mode == "fastest"),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.starts_with("unknown mode `fastest`"), "{e}");
        assert!(e.contains("async-hybrid"), "the async modes are named: {e}");
        let e = "vanilla+steal".parse::<Mode>().unwrap_err();
        assert!(matches!(e, ModeError::Refused(_)), "{e:?}");
        assert!(
            e.to_string().starts_with("vanilla+steal is not allowed"),
            "{e}"
        );
    }

    #[test]
    fn a_spec_round_trips_through_json() {
        let mut s = ServerSpec::new("best2+steal".parse().unwrap(), 8);
        s.service = ServiceMode::Spin;
        s.pin = true;
        s.sched.steal_k = Some(2);
        s.sched.pollers = Some(1);
        s.sched.poll_groups = Some(2);
        s.sched.batch_workers = vec![6, 7];
        s.sched.min_workers = Some(2);
        let json = s.to_json();
        assert!(json.contains(r#""mode":"best2+steal""#), "{json}");
        assert!(!json.contains("rtshare"), "unset tunables stay out: {json}");
        assert_eq!(ServerSpec::parse_arg(&json).unwrap(), s);
        let minimal = ServerSpec::parse_arg(r#"{"mode":"tokio","workers":4}"#).unwrap();
        assert_eq!(minimal, ServerSpec::new(Mode::Tokio, 4));
    }

    #[test]
    fn a_spec_file_is_read() {
        let path = std::env::temp_dir().join(format!("skq-spec-{}.json", std::process::id()));
        let s = ServerSpec::new(Mode::Epoll1to1, 3);
        std::fs::write(&path, s.to_json()).unwrap();
        let arg = format!("@{}", path.display());
        assert_eq!(arg.parse::<ServerSpec>(), Ok(s));
        std::fs::remove_file(&path).unwrap();
        let e = ServerSpec::parse_arg(&arg).unwrap_err().to_string();
        assert!(
            e.starts_with("--spec @") && e.contains("cannot read"),
            "{e}"
        );
    }

    #[test]
    fn bad_specs_name_the_field() {
        let err = |j: &str| ServerSpec::parse_arg(j).unwrap_err().to_string();
        let e = err(r#"{"mode":"hybrid","workers":2,"sched":{"steal_k":"two"}}"#);
        assert!(
            e.starts_with("--spec: field `sched.steal_k`: invalid type"),
            "{e}"
        );
        let e = err(r#"{"mode":"fastest","workers":2}"#);
        assert!(
            e.starts_with("--spec: field `mode`: unknown mode `fastest`"),
            "{e}"
        );
        let e = err(r#"{"mode":"hybrid","workers":2,"sched":{"stealk":2}}"#);
        assert!(e.contains("field `sched.stealk`: unknown field"), "{e}");
        let e = err(r#"{"mode":"hybrid"}"#);
        assert!(e.contains("missing field `workers`"), "{e}");
        let e = err(r#"{"mode":"hybrid","workers":2,"service":"sleep"}"#);
        assert!(
            e.starts_with("--spec: field `service`: unknown variant"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1);
        let e = err(r#"{"mode":"hybrid","workers":2} x"#);
        assert!(e.contains("trailing characters"), "{e}");
    }
}
