//! Server configuration, the state every worker shares (counters, clock, connection count),
//! the keyless commands both architectures answer the same way, and the running-server
//! handle used by the CLI and the tests.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;

use crate::exec::Now;
use crate::protocol::{Command, Limits};
use crate::session::Session;
use crate::stats::{write_stats, Counters, StatsInfo, WorkerCounters, VERSION};
use crate::store::PartStats;

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
}

/// State shared by all workers of one server.
pub struct Ctx {
    /// The configuration.
    pub cfg: ServerConfig,
    /// One counter block per worker.
    pub counters: WorkerCounters,
    started: Instant,
    started_unix: i64,
    /// Open connections.
    pub curr_conns: AtomicUsize,
    /// Set once to stop every worker.
    pub shutdown: AtomicBool,
    /// Source of connection tokens' generation numbers.
    pub next_gen: AtomicU64,
}

impl Ctx {
    /// Fresh state for `cfg`.
    pub fn new(cfg: ServerConfig) -> Ctx {
        let started_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let counters = (0..cfg.workers)
            .map(|_| CachePadded::new(Counters::default()))
            .collect();
        Ctx {
            cfg,
            counters,
            started: Instant::now(),
            started_unix,
            curr_conns: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            next_gen: AtomicU64::new(1),
        }
    }

    /// The clock as commands see it (server-relative seconds start at 1).
    pub fn now(&self) -> Now {
        Now {
            rel: self.started.elapsed().as_secs() as u32 + 1,
            started_unix: self.started_unix,
        }
    }

    /// Tries to admit one more connection under `--max-conns`.
    pub fn admit(&self) -> bool {
        let prev = self.curr_conns.fetch_add(1, Ordering::Relaxed);
        if prev >= self.cfg.max_conns {
            self.curr_conns.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Answers the commands that touch no key. `parts` gathers every partition's counters
    /// (it is only called for `stats`). Returns false for key commands.
    pub fn keyless(
        &self,
        worker: usize,
        s: &mut Session,
        cmd: &Command,
        parts: impl FnOnce() -> (Vec<PartStats>, f64),
    ) -> bool {
        match cmd {
            Command::Version => s.reply(format!("VERSION {VERSION}\r\n").as_bytes()),
            Command::MetaNoop => s.reply(b"MN\r\n"),
            Command::Verbosity { noreply } => {
                if !noreply {
                    s.reply(b"OK\r\n");
                }
            }
            Command::Stats { group: None } => {
                let (parts, overhead) = parts();
                let info = StatsInfo {
                    started_unix: self.started_unix,
                    now: self.now().rel,
                    threads: self.cfg.workers,
                    limit_maxbytes: self.cfg.limit_bytes as u64,
                    max_connections: self.cfg.max_conns,
                    curr_connections: self.curr_conns.load(Ordering::Relaxed) as u64,
                    arch: self.cfg.arch.name(),
                    mode: self.cfg.mode.clone(),
                    overhead_per_item: overhead,
                };
                write_stats(s.reply_buf(), &info, &self.counters, &parts);
            }
            Command::Stats { group: Some(g) } => match g.as_slice() {
                b"settings" => {
                    let out = s.reply_buf();
                    let _ = write!(
                        out,
                        "STAT maxbytes {}\r\nSTAT maxconns {}\r\nSTAT num_threads {}\r\nSTAT item_size_max {}\r\nSTAT evictions on\r\nSTAT cas_enabled yes\r\nEND\r\n",
                        self.cfg.limit_bytes, self.cfg.max_conns, self.cfg.workers, self.cfg.limits.max_item_size
                    );
                }
                b"items" | b"slabs" | b"sizes" | b"conns" => s.reply(b"END\r\n"),
                _ => s.reply(b"ERROR\r\n"),
            },
            _ => return false,
        }
        let _ = worker;
        true
    }
}

/// A running server.
pub struct Running {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) threads: Vec<JoinHandle<()>>,
    pub(crate) wake: Box<dyn Fn() + Send + Sync>,
    /// Connections accepted by each worker (tests use it to see which worker got a socket).
    pub accepted: Arc<Vec<CachePadded<AtomicU64>>>,
}

impl Running {
    /// Connections each worker accepted so far.
    pub fn accepted_per_worker(&self) -> Vec<u64> {
        self.accepted
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .collect()
    }

    /// Current counters summed over workers, by memcached name (tests).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Stops every worker and waits for them: listeners close, open connections close.
    pub fn stop(mut self) {
        self.ctx.shutdown.store(true, Ordering::SeqCst);
        (self.wake)();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Starts a server of the configured architecture.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    match cfg.arch {
        Arch::Shared => crate::shared::start(cfg),
        Arch::Tpc => crate::tpc::start(cfg),
    }
}
