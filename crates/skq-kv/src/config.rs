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

/// Everything a server needs to start.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Architecture.
    pub arch: Arch,
    /// Listening address (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Worker threads.
    pub workers: usize,
    /// Scheduling mode name for the shared architecture.
    pub mode: String,
    /// Item memory limit in bytes (`-m` × 2^20).
    pub limit_bytes: usize,
    /// Parser limits (item size, line lengths).
    pub limits: Limits,
    /// Maximum simultaneous connections.
    pub max_conns: usize,
    /// Pin worker threads to CPUs (skq modes: the runtime's CPU for the worker; tpc:
    /// worker `w` on the w-th allowed CPU, wrapping).
    pub pin: bool,
    /// Priority rules (`--priority`, see `priority.rs`); empty = none.
    pub priority: Vec<String>,
    /// Priority diffusion: workers that take batch-class requests.
    pub batch_workers: Vec<usize>,
    /// Close a connection that has waited this long for its next command with nothing
    /// pending (memcached's `-o idle_timeout`; counted as `idle_kicks`). `None` (the
    /// default, as in memcached): never.
    pub idle_timeout: Option<Duration>,
}

/// The smallest memory per lock shard (two 2 MiB segments).
pub const MIN_SHARD_BYTES: usize = 2 * crate::arena::SEGMENT_SIZE;
