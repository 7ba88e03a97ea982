//! The shared architecture: one store for all workers, split into lock shards by
//! MurmurHash3 of the key, so any worker can serve any connection.
//!
//! Two I/O drivers serve it:
//! - [`crate::shared_rt`] (every skq mode: `vanilla`, `shared`, `queue`, `cpu`, `best2`,
//!   `hybrid`, `+steal` variants): the skq runtime decides which worker handles a
//!   connection's readiness;
//! - [`crate::shared_epoll`] (`--mode epoll`): no runtime, one epoll instance shared by all
//!   workers with `EPOLLONESHOT` — plain Linux, a baseline.

use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use crate::exec::{apply, get_one};
use crate::murmur3::murmur3_x86_32;
use crate::protocol::Command;
use crate::server::{Ctx, Running, ServerConfig};
use crate::session::{Dispatch, Fill, Handler, Session};
use crate::store::{PartStats, Partition};

/// `--mode` value selecting the plain-epoll driver.
pub const EPOLL_MODE: &str = "epoll";

/// Starts the shared-architecture server with the driver `cfg.mode` selects.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    if cfg.mode == EPOLL_MODE {
        return crate::shared_epoll::start(cfg);
    }
    #[cfg(feature = "runtime")]
    return crate::shared_rt::start(cfg);
    #[cfg(not(feature = "runtime"))]
    anyhow::bail!(
        "--mode {}: built without the skq runtime (feature `runtime`); use --mode epoll",
        cfg.mode
    )
}

/// Admits a freshly accepted connection or refuses it with memcached's message.
/// Returns the stream, non-blocking with `TCP_NODELAY`, when admitted.
pub fn admit(ctx: &Ctx, worker: usize, stream: TcpStream) -> Option<TcpStream> {
    let c = &ctx.counters[worker];
    if !ctx.admit() {
        c.rejected_connections.fetch_add(1, Ordering::Relaxed);
        let _ = std::io::Write::write_all(&mut &stream, b"ERROR Too many open connections\r\n");
        return None;
    }
    let _ = stream.set_nonblocking(true);
    let _ = stream.set_nodelay(true);
    c.total_connections.fetch_add(1, Ordering::Relaxed);
    Some(stream)
}

/// The smallest memory per lock shard (two 2 MiB segments).
pub const MIN_SHARD_BYTES: usize = 2 * crate::arena::SEGMENT_SIZE;
const MAX_SHARDS: usize = 16;

/// The store: partitions behind mutexes.
pub struct SharedStore {
    shards: Vec<Mutex<Partition>>,
}

impl SharedStore {
    /// Splits `limit_bytes` into up to 16 shards of at least [`MIN_SHARD_BYTES`], each
    /// enforcing the item size limit `max_item_size` on append/prepend.
    pub fn new(limit_bytes: usize, max_item_size: usize) -> SharedStore {
        let n = (limit_bytes / (2 * MIN_SHARD_BYTES)).clamp(1, MAX_SHARDS);
        SharedStore {
            shards: (0..n)
                .map(|_| Mutex::new(Partition::new(limit_bytes / n).with_max_item(max_item_size)))
                .collect(),
        }
    }

    /// The shard owning `key`, locked.
    pub fn lock(&self, key: &[u8]) -> MutexGuard<'_, Partition> {
        let i = murmur3_x86_32(key, 0) as usize % self.shards.len();
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of lock shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Every shard's counters and the mean overhead per item.
    pub fn stats(&self) -> (Vec<PartStats>, f64) {
        let mut parts = Vec::new();
        let mut overhead = 0.0;
        for s in &self.shards {
            let p = s.lock().unwrap_or_else(|p| p.into_inner());
            parts.push(p.stats());
            overhead += p.overhead_per_item();
        }
        (parts, overhead / self.shards.len() as f64)
    }

    /// `flush_all` on every shard.
    pub fn flush_all(&self, delay: u32, now: u32) {
        for s in &self.shards {
            s.lock()
                .unwrap_or_else(|p| p.into_inner())
                .flush_all(delay, now);
        }
    }
}

/// Executes commands against the shared store.
pub struct SharedHandler<'a> {
    /// Server state.
    pub ctx: &'a Ctx,
    /// The store.
    pub store: &'a SharedStore,
    /// This worker's index (selects its counter block).
    pub worker: usize,
}

impl Handler for SharedHandler<'_> {
    fn handle(&mut self, s: &mut Session, cmd: Command) -> Dispatch {
        let c = &self.ctx.counters[self.worker];
        let now = self.ctx.now();
        match &cmd {
            Command::Get { keys, cas, touch } => {
                let out = s.reply_buf();
                for k in keys {
                    get_one(&mut self.store.lock(k), k, *cas, *touch, now, c, out);
                }
                out.extend_from_slice(b"END\r\n");
            }
            Command::FlushAll { delay, noreply } => {
                c.cmd_flush.fetch_add(1, Ordering::Relaxed);
                self.store.flush_all(*delay as u32, now.rel);
                if !noreply {
                    s.reply(b"OK\r\n");
                }
            }
            _ => {
                let store = self.store;
                if !self.ctx.keyless(self.worker, s, &cmd, || store.stats()) {
                    let key = cmd.key().expect("remaining commands carry one key");
                    apply(&mut store.lock(key), &cmd, now, c, s.reply_buf());
                }
            }
        }
        Dispatch::Done
    }
}

/// What one service step on a connection asks of its caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    /// Close the connection (EOF, I/O error or protocol violation; the
    /// violation is already counted).
    pub close: bool,
    /// The read stopped because the session's input buffer was full, so
    /// bytes may remain in the socket.
    pub full: bool,
}

/// One service step of the shared architecture, the same for both drivers
/// (skq runtime and plain epoll): read what the socket has if `read` and the
/// session wants input, execute every complete command against the store,
/// write the replies, and count bytes and protocol closes.
pub(crate) fn serve_step(
    ctx: &Ctx,
    store: &SharedStore,
    worker: usize,
    session: &mut Session,
    stream: &mut TcpStream,
    read: bool,
) -> Step {
    let c = &ctx.counters[worker];
    let mut ok = true;
    let mut full = false;
    if read && session.wants_read() {
        match session.fill(stream) {
            Ok(Fill::Read(n)) => {
                c.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
            }
            Ok(Fill::Full(n)) => {
                c.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
                full = true;
            }
            Ok(Fill::Eof) => {}
            Err(_) => ok = false,
        }
    }
    if ok {
        let mut h = SharedHandler { ctx, store, worker };
        match session.pump(&mut h, stream) {
            Ok(n) => {
                c.bytes_written.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(_) => ok = false,
        }
    }
    let close = !ok || session.finished();
    if close && session.violation.is_some() {
        c.skq_protocol_closes.fetch_add(1, Ordering::Relaxed);
    }
    Step { close, full }
}
