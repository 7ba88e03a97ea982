//! What a cache server is started with: its architecture and limits.

use std::net::SocketAddr;
use std::time::Duration;

use crate::protocol::Limits;

/// Which architecture serves the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    /// One store shared by all workers behind sharded locks.
    Shared,
    /// Thread-per-core: keys partitioned across workers, requests forwarded over rings.
    Tpc,
}

impl Arch {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Shared => "shared",
            Arch::Tpc => "tpc",
        }
    }
}

/// What serves the cache: the architecture and, for the shared store, the
/// driver of the server layer. Parsed once, where a person types it
/// (`--arch`/`--mode`, or a kv spec's `mode`: `tpc` or any
/// [`skq_net::Mode`]), and passed on as this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvMode {
    /// Thread-per-core partitions (`--arch tpc`): a command for another worker's key
    /// goes over the rings, or, when that worker sleeps, runs on its partition in the
    /// worker that read it (`tpc.rs`, "Borrowing a sleeping worker's partition").
    Tpc,
    /// Thread-per-core that always forwards over the rings, even to a sleeping worker
    /// (`--arch tpc --tpc-strict`; the architecture as the Sphinx paper runs it).
    TpcStrict,
    /// One store shared by all workers, served by a driver of skq-net: an
    /// skq policy, `epoll-1to1`, `epoll-shared`, `tokio` or
    /// `tokio-spawn-blocking` (not an `async-` mode).
    #[cfg(feature = "runtime")]
    Shared(skq_net::Mode),
}

impl KvMode {
    /// The architecture this mode runs.
    pub fn arch(self) -> Arch {
        match self {
            KvMode::Tpc | KvMode::TpcStrict => Arch::Tpc,
            #[cfg(feature = "runtime")]
            KvMode::Shared(_) => Arch::Shared,
        }
    }

    /// Whether an skq scheduling core serves it (priority rules and batch
    /// workers need one).
    pub fn has_core(self) -> bool {
        match self {
            KvMode::Tpc | KvMode::TpcStrict => false,
            #[cfg(feature = "runtime")]
            KvMode::Shared(m) => m.is_skq(),
        }
    }
}

impl std::fmt::Display for KvMode {
    /// `tpc`, or the shared store's mode as [`skq_net::Mode`] prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvMode::Tpc => f.write_str("tpc"),
            KvMode::TpcStrict => f.write_str("tpc-strict"),
            #[cfg(feature = "runtime")]
            KvMode::Shared(m) => m.fmt(f),
        }
    }
}

impl std::str::FromStr for KvMode {
    type Err = String;
    /// `tpc`, `tpc-strict`, or a mode of the shared store (`hybrid`, `epoll-1to1`, ...).
    fn from_str(s: &str) -> Result<KvMode, String> {
        match s {
            "tpc" => Ok(KvMode::Tpc),
            "tpc-strict" => Ok(KvMode::TpcStrict),
            #[cfg(feature = "runtime")]
            _ => match s.parse::<skq_net::Mode>().map_err(|e| match e {
                // The cache's own list: it has modes the server layer does
                // not (tpc) and lacks others (async-).
                skq_net::ModeError::Unknown { .. } => format!(
                    "unknown mode `{s}`: expected tpc, tpc-strict, an skq policy (vanilla, \
                     shared, queue, cpu, best2 or hybrid, optionally +steal), epoll-1to1, \
                     epoll-shared, tokio or tokio-spawn-blocking"
                ),
                skq_net::ModeError::Refused(why) => why.to_string(),
            })? {
                skq_net::Mode::Async(_) => Err(format!(
                    "mode `{s}`: the cache has no async handler; it serves on an skq \
                     policy, epoll-1to1, epoll-shared, tokio or tokio-spawn-blocking"
                )),
                m => Ok(KvMode::Shared(m)),
            },
            #[cfg(not(feature = "runtime"))]
            _ => Err(format!(
                "mode `{s}`: built without the `runtime` feature, only `tpc` and `tpc-strict` serve"
            )),
        }
    }
}

/// Everything a server needs to start.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Listening address (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Worker threads.
    pub workers: usize,
    /// What serves: thread-per-core, or the shared store on a driver.
    pub mode: KvMode,
    /// Item memory limit in bytes (`-m` × 2^20).
    pub limit_bytes: usize,
    /// Parser limits (item size, line lengths).
    pub limits: Limits,
    /// Maximum simultaneous connections.
    pub max_conns: usize,
    /// Pin worker threads to CPUs (skq modes: the runtime's CPU for the worker; tpc:
    /// worker `w` on the w-th allowed CPU, wrapping).
    pub pin: bool,
    /// Priority rules (`--priority`, parsed once by the CLI; see
    /// `priority.rs`); empty = none.
    #[cfg(feature = "runtime")]
    pub priority: crate::priority::Rules,
    /// Priority diffusion: workers that take batch-class requests.
    pub batch_workers: Vec<usize>,
    /// skq's scheduler tunables (`--poll-groups`, `--pollers`, ...): the
    /// shared store on an skq mode only.
    #[cfg(feature = "runtime")]
    pub sched: skq_net::CoreTunables,
    /// Close a connection that has waited this long for its next command with nothing
    /// pending (memcached's `-o idle_timeout`; counted as `idle_kicks`). `None` (the
    /// default, as in memcached): never.
    pub idle_timeout: Option<Duration>,
    /// Keep every CPU the server may run on from idling longer than this:
    /// a thread per CPU sleeping it in a loop (`--idle-tick-us`; `crate::tick`).
    /// `None` (the default): no such threads.
    pub idle_tick: Option<Duration>,
}

impl ServerConfig {
    /// The architecture [`ServerConfig::mode`] runs.
    pub fn arch(&self) -> Arch {
        self.mode.arch()
    }
}

/// The periods `--idle-tick-us` (and a spec's `idle_tick_us`) accepts, µs.
pub const IDLE_TICK_US: std::ops::RangeInclusive<u64> = 100..=100_000;

/// The smallest memory per lock shard (two 2 MiB segments).
pub const MIN_SHARD_BYTES: usize = 2 * crate::arena::SEGMENT_SIZE;

#[cfg(all(test, feature = "runtime"))]
mod tests {
    use super::KvMode;

    #[test]
    fn an_unknown_mode_names_the_cache_s_modes() {
        assert_eq!("tpc".parse::<KvMode>(), Ok(KvMode::Tpc));
        let e = "fastest".parse::<KvMode>().unwrap_err();
        assert!(e.starts_with("unknown mode `fastest`"), "{e}");
        assert!(
            e.contains("tpc-strict") && e.contains("epoll-shared"),
            "{e}"
        );
        assert!(!e.contains("async"), "the cache has no async modes: {e}");
        let e = "async-hybrid".parse::<KvMode>().unwrap_err();
        assert!(e.contains("no async handler"), "{e}");
        // The policy's own checks still speak.
        let e = "vanilla+steal".parse::<KvMode>().unwrap_err();
        assert!(e.contains("not allowed"), "{e}");
    }
}
