//! The state every worker of one cache server shares (configuration,
//! counters, clock, connection count) and the keyless commands both
//! architectures answer the same way.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crossbeam_utils::CachePadded;

use crate::config::ServerConfig;
use crate::exec::Now;
use crate::protocol::Command;
use crate::stats::{write_stats, Counters, StatsInfo, WorkerCounters, VERSION};
use crate::store::PartStats;

/// State shared by all workers of one server.
pub struct Ctx {
    /// The configuration.
    pub cfg: ServerConfig,
    /// One counter block per worker.
    pub counters: WorkerCounters,
    /// The coarse monotonic clock at the start (`monotonic_coarse_ns`): the
    /// cache's clock counts seconds and is read per command, so it reads
    /// the last tick's time rather than the clock hardware.
    started_ns: u64,
    started_unix: i64,
    /// Open connections.
    pub curr_conns: AtomicUsize,
    /// Set once to stop every worker.
    pub shutdown: AtomicBool,
    /// Source of connection tokens' generation numbers.
    pub next_gen: AtomicU64,
    /// Bytes an idle connection holds in user space (set by the
    /// architecture at start; `stats` reports it as `skq_idle_conn_bytes`).
    pub idle_conn_bytes: AtomicUsize,
    /// What the thread-per-core workers have to tell the operator (a worker
    /// left unpinned, a worker whose wait failed), printed by the serve
    /// lifecycle rather than by the library.
    #[cfg(feature = "runtime")]
    pub notices: skq_net::Notices,
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
            started_ns: skq_sys::cpu::monotonic_coarse_ns(),
            started_unix,
            curr_conns: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            next_gen: AtomicU64::new(1),
            idle_conn_bytes: AtomicUsize::new(0),
            #[cfg(feature = "runtime")]
            notices: skq_net::Notices::default(),
        }
    }

    /// The clock as commands see it (server-relative seconds start at 1).
    pub fn now(&self) -> Now {
        Now {
            rel: (self.elapsed_ns() / 1_000_000_000) as u32 + 1,
            started_unix: self.started_unix,
        }
    }

    /// Milliseconds since the server started.
    pub fn now_ms(&self) -> u64 {
        self.elapsed_ns() / 1_000_000
    }

    fn elapsed_ns(&self) -> u64 {
        skq_sys::cpu::monotonic_coarse_ns().saturating_sub(self.started_ns)
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
        out: &mut Vec<u8>,
        cmd: &Command,
        parts: impl FnOnce() -> (Vec<PartStats>, f64),
    ) -> bool {
        match cmd {
            Command::Version => out.extend_from_slice(format!("VERSION {VERSION}\r\n").as_bytes()),
            Command::MetaNoop => out.extend_from_slice(b"MN\r\n"),
            Command::Verbosity { noreply } => {
                if !noreply {
                    out.extend_from_slice(b"OK\r\n");
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
                    arch: self.cfg.arch().name(),
                    mode: self.cfg.mode.to_string(),
                    overhead_per_item: overhead,
                    idle_conn_bytes: self.idle_conn_bytes.load(Ordering::Relaxed),
                };
                write_stats(out, &info, &self.counters, &parts);
            }
            Command::Stats { group: Some(g) } => match g.as_slice() {
                b"settings" => {
                    let _ = write!(
                        out,
                        "STAT maxbytes {}\r\nSTAT maxconns {}\r\nSTAT num_threads {}\r\nSTAT item_size_max {}\r\nSTAT evictions on\r\nSTAT cas_enabled yes\r\nSTAT idle_timeout {}\r\nEND\r\n",
                        self.cfg.limit_bytes, self.cfg.max_conns, self.cfg.workers, self.cfg.limits.max_item_size,
                        self.cfg.idle_timeout.map_or(0, |d| d.as_secs())
                    );
                }
                b"items" | b"slabs" | b"sizes" | b"conns" => out.extend_from_slice(b"END\r\n"),
                // No slab classes, so no class has items to dump; no per-prefix detail is
                // kept, so the dump is empty (`stats detail on|off` stays ERROR).
                g if g.starts_with(b"cachedump ") || g == b"detail dump" => {
                    out.extend_from_slice(b"END\r\n")
                }
                _ => out.extend_from_slice(b"ERROR\r\n"),
            },
            _ => return false,
        }
        true
    }
}
