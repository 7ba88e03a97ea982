//! The thread-per-core architecture (Sphinx): shared-nothing workers.
//!
//! - Worker `w` owns the keys with `murmur3_x86_32(key, 0) % workers == w`, in its own
//!   [`Partition`] (log-structured arena of 2 MiB segments, `-m / workers` bytes).
//! - Each worker has its own listening socket on the same address (`SO_REUSEPORT`; the
//!   kernel spreads connections), its own epoll (level-triggered) and its own connections.
//! - A request for a key owned elsewhere is sent over the `(me → owner)` ring (see
//!   [`crate::doorbell`] for the wake-up protocol); the owner executes it and sends the reply
//!   bytes back over `(owner → me)`. The connection reserves a reply slot first, so replies
//!   leave in request order; a multi-key get is split into runs of consecutive keys with the
//!   same owner, one slot per run, and reassembles in key order.
//! - Backpressure: a request is only sent if its ring has room; otherwise the connection
//!   parks the command (for a multi-get, the keys not yet sent) and stops reading until the
//!   ring drains. A connection's output stays under its ceiling: forwarded requests
//!   carry an output budget and may come back in pieces ([`crate::forward`]).
//!   Replies never wait for requests: a
//!   reply that finds its ring full goes to a local overflow queue flushed every loop, so
//!   two workers with full rings towards each other cannot deadlock.
//! - A worker with parked commands or overflow polls (1 ms epoll timeout) instead of sleeping.
//! - Idle timeout (`--idle-timeout`, off by default): with it on, a worker reads the clock
//!   once per loop turn (after its wait; no system call, the vDSO clock) and stamps a
//!   connection it touches when a command arrived or a reply is owed. Every
//!   [`sweep_tick`] it walks its own table and closes the connections that owe nothing
//!   ([`Session::is_quiet`]) and were stamped longer than the timeout ago, counting each
//!   as `idle_kicks`; while it has connections it never sleeps past the next sweep. Only
//!   the owning worker touches a connection, so the sweep needs no lock.
//!
//! ## Borrowing a sleeping worker's partition
//!
//! A forwarded request costs two wake-ups when both workers are idle, as they are at
//! light load: the owner's, to run it, and the requester's, to take the reply back
//! (`docs/KV-PROFILE.md`: at 2 workers, 1.3 voluntary context switches and 0.66 doorbell
//! writes per reply against memcached's 0.86 and none). So, unless `--tpc-strict`, each
//! partition sits behind a lock that its owner holds whenever it is awake and lets go
//! only for the blocking wait that follows a successful [`Doorbell::prepare_sleep`]. A
//! worker with a command for a partition not its own first tries that lock; when it gets
//! it (the owner sleeps), it runs the command there itself, as it would a local one, and
//! the owner is neither sent a message nor woken. When the owner is awake the lock is
//! taken, and the command goes over the ring as before; a busy owner then drains it
//! without a doorbell. So ownership changes hands only between the owner's sleeps, and a
//! partition is never touched by two threads at once.
//!
//! Per-connection order holds: a worker borrows partition `o` only while its own ring
//! towards `o` and its overflow queue towards `o` are empty. The owner runs what it pops
//! from a ring before it lets go of its lock, so every command this connection sent
//! `o` earlier has run, and the lock's release and acquisition order that run before
//! the borrowed one. Replies still leave in request order through the reply slots.
//! The owner re-takes its lock when its wait returns (a borrower holds it for one
//! command, about a microsecond), and publishes its partition's `stats` figures as
//! before; a borrower publishes them for the partition it changed.

use std::collections::VecDeque;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::{ArcMutexGuard, Mutex, RawMutex};

use crate::config::ServerConfig;
use crate::ctx::Ctx;
use crate::forward::{Core, Msg};
use crate::murmur3::murmur3_x86_32;
use crate::ring::{Doorbell, Rings};
use crate::running::{Running, Workers};
use crate::session::{Fill, Session};
use crate::store::{PartStats, Partition};
use skq_sys::epoll::{Epoll, ET, HUP, IN, OUT, RDHUP};
use skq_sys::eventfd::EventFd;
use skq_sys::limits::Accepted;
use skq_sys::{cpu, net};

/// Default messages per ring.
pub const RING_CAPACITY: usize = 1024;
/// Messages taken from one inbound ring per loop turn (fairness between rings and sockets).
const DRAIN_BATCH: usize = 256;
/// Loop turns with ring work a worker may take in a row before it polls its sockets again
/// (fairness between rings and sockets: at most this many × `DRAIN_BATCH` messages per
/// inbound ring between two socket polls).
const RING_TURNS: u32 = 4;

/// The worker owning `key` among `workers`.
pub fn owner(key: &[u8], workers: usize) -> usize {
    murmur3_x86_32(key, 0) as usize % workers
}

/// Partition counters a worker publishes for `stats` on other workers.
#[derive(Default)]
pub(crate) struct Published {
    pub(crate) curr_items: AtomicU64,
    pub(crate) total_items: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) allocated: AtomicU64,
    pub(crate) overhead_bits: AtomicU64,
}

pub(crate) struct Shared {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) rings: Rings<Msg>,
    pub(crate) bells: Vec<Doorbell>,
    pub(crate) published: Vec<CachePadded<Published>>,
    pub(crate) accepted: Arc<Vec<CachePadded<AtomicU64>>>,
    /// One fd held back for refusing connections at the fd limit.
    pub(crate) reserve: skq_sys::limits::FdReserve,
    /// When a worker last returned freed heap to the system ([`crate::trim`]).
    pub(crate) last_trim: AtomicU64,
    /// Partition `w`, locked by worker `w` while it is awake (see the module docs).
    pub(crate) parts: Vec<Arc<Mutex<Partition>>>,
    /// `--tpc-strict`: never borrow a partition.
    pub(crate) strict: bool,
}

/// A worker's hold on its own partition while it is awake.
pub(crate) type Owned = ArcMutexGuard<RawMutex, Partition>;

impl Shared {
    pub(crate) fn stats(&self) -> (Vec<PartStats>, f64) {
        let parts: Vec<PartStats> = self
            .published
            .iter()
            .map(|p| PartStats {
                curr_items: p.curr_items.load(Relaxed),
                total_items: p.total_items.load(Relaxed),
                bytes: p.bytes.load(Relaxed),
                evictions: p.evictions.load(Relaxed),
                allocated: p.allocated.load(Relaxed),
            })
            .collect();
        let overhead = self
            .published
            .iter()
            .map(|p| f64::from_bits(p.overhead_bits.load(Relaxed)))
            .sum::<f64>();
        (parts, overhead / self.published.len() as f64)
    }
}

struct Conn {
    stream: TcpStream,
    session: Session,
    gen: u32,
    interest: u32,
    /// When the connection last had a new command or owed a reply (ms since start;
    /// idle timeout only).
    active_ms: u64,
    /// [`Session::commands`] when `active_ms` was stamped.
    seen: u64,
}

/// How often a worker sweeps for idle connections under `idle`: a quarter of it, between
/// 10 ms and 1 s (as the server layer's timeout sweep).
pub fn sweep_tick(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// The idle sweep's state of one worker.
struct IdleSweep {
    /// The timeout (ms).
    limit_ms: u64,
    tick_ms: u64,
    next_ms: u64,
}

struct Worker {
    core: Core,
    epoll: Epoll,
    listener: TcpListener,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_gen: u32,
    /// Connections whose session parked a command (ring full).
    parked: Vec<u64>,
    /// The read buffer lent to the connection being served (idle sessions hold none).
    read_pool: Vec<u8>,
    trim: crate::trim::IdleTrim,
    /// The clock of this loop turn (ms since start; read only with an idle timeout).
    now_ms: u64,
    idle: Option<IdleSweep>,
}

const LISTENER: u64 = u64::MAX;
const BELL: u64 = u64::MAX - 1;

fn token(idx: usize, gen: u32) -> u64 {
    (u64::from(gen) << 32) | idx as u64
}

/// Starts the thread-per-core server.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    start_with_ring(cfg, RING_CAPACITY)
}

/// Like [`start`] with a chosen ring capacity (tests use tiny rings to exercise backpressure).
pub fn start_with_ring(cfg: ServerConfig, ring_capacity: usize) -> anyhow::Result<Running> {
    crate::trim::static_mmap_threshold();
    let n = cfg.workers;
    let per_worker = cfg.limit_bytes / n;
    anyhow::ensure!(
        per_worker >= crate::config::MIN_SHARD_BYTES,
        "-m {}: thread-per-core needs at least 4 MiB (two 2 MiB segments) per worker; use -m {} or more with --workers {n}",
        cfg.limit_bytes >> 20,
        (crate::config::MIN_SHARD_BYTES * n) >> 20
    );
    // The first listener picks the port (when 0 was asked for); the others join it.
    let first = net::listen(cfg.addr, true)
        .map_err(|e| anyhow::anyhow!("--addr {}: cannot listen: {e}", cfg.addr))?;
    let addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..n {
        listeners.push(net::listen(addr, true)?);
    }
    let cfg_max_item = cfg.limits.max_item_size;
    let idle_timeout = cfg.idle_timeout;
    let strict = cfg.mode == crate::config::KvMode::TpcStrict;
    let ctx = Arc::new(Ctx::new(cfg));
    let accepted: Arc<Vec<_>> = Arc::new(
        (0..n)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    // An idle connection costs its slot in a worker's table (the session
    // included; its read buffer is lent per event).
    ctx.idle_conn_bytes
        .store(std::mem::size_of::<Option<Conn>>(), Relaxed);
    let shared = Arc::new(Shared {
        reserve: skq_sys::limits::FdReserve::new()?,
        ctx: ctx.clone(),
        rings: Rings::new(n, ring_capacity),
        bells: (0..n)
            .map(|_| EventFd::new().map(Doorbell::new))
            .collect::<Result<_, _>>()?,
        published: (0..n)
            .map(|_| CachePadded::new(Published::default()))
            .collect(),
        accepted: accepted.clone(),
        last_trim: AtomicU64::new(0),
        parts: (0..n)
            .map(|_| {
                Arc::new(Mutex::new(
                    Partition::new(per_worker).with_max_item(cfg_max_item),
                ))
            })
            .collect(),
        strict,
    });
    let mut threads = Vec::new();
    for (me, listener) in listeners.into_iter().enumerate() {
        let epoll = Epoll::new()?;
        epoll.add(listener.as_raw_fd(), IN, LISTENER)?;
        // Edge-triggered: each doorbell write is reported once, so the
        // worker never reads the eventfd (one system call per wake-up saved;
        // the counter would need 2^64 writes to saturate).
        epoll.add(shared.bells[me].efd.as_raw_fd(), IN | ET, BELL)?;
        let core = Core {
            me,
            n,
            shared: shared.clone(),
            // Held from here on, except while the worker sleeps.
            part: shared.parts[me].lock_arc(),
            overflow: (0..n).map(|_| VecDeque::new()).collect(),
            token: 0,
        };
        core.publish();
        let mut w = Worker {
            core,
            epoll,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            next_gen: 1,
            parked: Vec::new(),
            read_pool: Vec::new(),
            trim: Default::default(),
            now_ms: 0,
            idle: idle_timeout.map(|d| IdleSweep {
                limit_ms: d.as_millis() as u64,
                tick_ms: sweep_tick(d).as_millis() as u64,
                next_ms: 0,
            }),
        };
        threads.push(
            std::thread::Builder::new()
                .name(format!("kv-tpc-{me}"))
                .spawn(move || w.run())?,
        );
    }
    let wake = shared.clone();
    Ok(Running {
        addr,
        ctx,
        workers: Workers::Threads {
            threads,
            wake: Box::new(move || {
                wake.bells
                    .iter()
                    .for_each(|b| crate::doorbell::Wake::notify(&b.efd))
            }),
        },
        accepted,
        tick: None,
    })
}

impl Worker {
    fn run(&mut self) {
        let mut events = Vec::with_capacity(64);
        let shared = self.core.shared.clone();
        let me = self.core.me;
        if shared.ctx.cfg.pin {
            if let Err(e) = cpu::pin_to_nth_allowed_cpu(me) {
                #[cfg(feature = "runtime")]
                shared.ctx.notices.push(skq_net::Notice::PinFailed {
                    worker: me,
                    error: e,
                });
                #[cfg(not(feature = "runtime"))]
                let _ = e; // the loom build has no operator to tell
            }
        }
        // Ring turns in a row without looking at the sockets.
        let mut ring_turns = 0;
        while !shared.ctx.shutdown.load(SeqCst) {
            let mut busy = self.drain_rings();
            busy |= self.core.flush_overflow();
            busy |= self.retry_parked();
            if busy && ring_turns < RING_TURNS {
                // Ring work was done: look at the rings again before the
                // sockets. Usually they are empty by then and the worker goes
                // straight to its sleeping wait, which also harvests the
                // sockets, saving a zero-timeout poll per forwarded message.
                ring_turns += 1;
                self.trim.worked = true;
                continue;
            }
            ring_turns = 0;
            self.core.publish();
            let waiting =
                !self.parked.is_empty() || self.core.overflow.iter().any(|o| !o.is_empty());
            let sleeping = !busy && !waiting && shared.bells[me].prepare_sleep();
            let timeout = if busy {
                Some(Duration::ZERO)
            } else if waiting {
                Some(Duration::from_millis(1))
            } else if sleeping {
                self.trim.on_idle(&shared.last_trim, shared.ctx.now_ms())
            } else {
                Some(Duration::ZERO)
            };
            let timeout = self.until_sweep(timeout);
            self.trim.worked |= busy || !events.is_empty();
            let timeout_ns = timeout.map(|t| t.as_nanos() as u64);
            let res = if sleeping && !shared.strict {
                // Asleep, the partition may be borrowed (module docs); it is
                // taken back before anything else.
                let epoll = &self.epoll;
                ArcMutexGuard::unlocked(&mut self.core.part, || {
                    epoll.wait_ns(&mut events, timeout_ns)
                })
            } else {
                self.epoll.wait_ns(&mut events, timeout_ns)
            };
            if sleeping {
                // Reset the doorbell before draining the rings (next turn of the loop).
                shared.bells[me].woke();
            }
            if let Err(e) = res {
                #[cfg(feature = "runtime")]
                shared.ctx.notices.push(skq_net::Notice::WaitFailed {
                    worker: me,
                    call: "epoll_wait",
                    error: e,
                });
                #[cfg(not(feature = "runtime"))]
                let _ = e; // the loom build has no operator to tell
                return;
            }
            if self.idle.is_some() {
                self.now_ms = shared.ctx.now_ms();
            }
            for ev in events.iter().copied() {
                match ev.u64 {
                    LISTENER => self.accept(),
                    // Edge-triggered, never read: the rings are drained next turn.
                    BELL => {}
                    t => self.serve(t, ev.events),
                }
            }
            self.sweep_idle();
        }
    }

    /// `timeout` shortened, with an idle timeout and connections open, so the worker
    /// wakes for its next sweep.
    fn until_sweep(&self, timeout: Option<Duration>) -> Option<Duration> {
        let Some(idle) = &self.idle else {
            return timeout;
        };
        if self.conns.len() == self.free.len() {
            return timeout; // nothing to sweep
        }
        let left = Duration::from_millis(idle.next_ms.saturating_sub(self.now_ms));
        Some(timeout.map_or(left, |t| t.min(left)))
    }

    /// Closes the connections idle for the timeout, when a sweep is due.
    fn sweep_idle(&mut self) {
        let now = self.now_ms;
        let Some(idle) = self.idle.as_mut().filter(|i| now >= i.next_ms) else {
            return;
        };
        idle.next_ms = now + idle.tick_ms;
        let limit = idle.limit_ms;
        let mut kicked = 0;
        for idx in 0..self.conns.len() {
            let expired = self.conns[idx].as_ref().is_some_and(|c| {
                c.session.is_quiet()
                    && c.session.commands() == c.seen
                    && now.saturating_sub(c.active_ms) >= limit
            });
            if expired {
                self.close(idx);
                kicked += 1;
            }
        }
        if kicked > 0 {
            self.core.shared.ctx.counters[self.core.me]
                .idle_kicks
                .fetch_add(kicked, Relaxed);
        }
    }

    /// Handles messages from other workers; returns whether there were any.
    fn drain_rings(&mut self) -> bool {
        let mut any = false;
        let shared = self.core.shared.clone();
        let me = self.core.me;
        for src in (0..self.core.n).filter(|&s| s != me) {
            let q = shared.rings.queue(src, me);
            for _ in 0..DRAIN_BATCH {
                let Some(msg) = q.pop() else { break };
                any = true;
                if let Some((conn, seq, data, retry)) = self.core.serve_remote(msg) {
                    if let Some(idx) = self.lookup(conn) {
                        self.conns[idx]
                            .as_mut()
                            .expect("looked up")
                            .session
                            .complete(seq, data, retry);
                        self.update(idx);
                    }
                }
            }
        }
        any
    }

    fn retry_parked(&mut self) -> bool {
        let parked = std::mem::take(&mut self.parked);
        let before = parked.len();
        for t in parked {
            if let Some(idx) = self.lookup(t) {
                self.update(idx);
            }
        }
        self.parked.len() < before
    }

    fn lookup(&self, t: u64) -> Option<usize> {
        let idx = (t & 0xffff_ffff) as usize;
        let conn = self.conns.get(idx)?.as_ref()?;
        (token(idx, conn.gen) == t).then_some(idx)
    }

    fn accept(&mut self) {
        let ctx = self.core.shared.ctx.clone();
        let c = &ctx.counters[self.core.me];
        loop {
            let listener = &self.listener;
            let got = self.core.shared.reserve.accept(
                || listener.accept().map(|(s, _)| s),
                |refused| {
                    let _ = std::io::Write::write_all(
                        &mut &refused,
                        b"ERROR Too many open connections\r\n",
                    );
                },
            );
            let stream = match got {
                Ok(Accepted::Conn(s)) => s,
                Ok(Accepted::Refused) => {
                    // Out of fds: the waiting connection was taken with the reserve fd
                    // and closed, counted, rather than left stuck in the backlog.
                    c.rejected_connections.fetch_add(1, Relaxed);
                    c.skq_rejected_fd_limit.fetch_add(1, Relaxed);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if skq_sys::limits::is_fd_exhaustion(&e) => {
                    // The reserve is spent (something else holds every fd): back off so
                    // the level-triggered listener does not spin.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    return;
                }
                Err(_) => return, // WouldBlock: wait for the next readiness
            };
            if !ctx.admit() {
                c.rejected_connections.fetch_add(1, Relaxed);
                let _ =
                    std::io::Write::write_all(&mut &stream, b"ERROR Too many open connections\r\n");
                continue;
            }
            let _ = stream.set_nonblocking(true);
            let _ = stream.set_nodelay(true);
            let idx = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let gen = self.next_gen;
            self.next_gen = self.next_gen.wrapping_add(1).max(1);
            if self
                .epoll
                .add(stream.as_raw_fd(), IN | RDHUP, token(idx, gen))
                .is_err()
            {
                ctx.curr_conns.fetch_sub(1, Relaxed);
                self.free.push(idx);
                continue;
            }
            self.conns[idx] = Some(Conn {
                stream,
                session: Session::new(ctx.cfg.limits),
                gen,
                interest: IN | RDHUP,
                active_ms: self.now_ms,
                seen: 0,
            });
            c.total_connections.fetch_add(1, Relaxed);
            self.core.shared.accepted[self.core.me].fetch_add(1, SeqCst);
        }
    }

    fn serve(&mut self, t: u64, events: u32) {
        let Some(idx) = self.lookup(t) else { return };
        let conn = self.conns[idx].as_mut().expect("looked up");
        if events & HUP != 0 {
            return self.close(idx);
        }
        if events & (IN | RDHUP) != 0 && conn.session.wants_read() {
            conn.session.borrow_read_buffer(&mut self.read_pool);
            match conn.session.fill(&mut conn.stream, events & RDHUP != 0) {
                Ok(Fill::Read(n) | Fill::Full(n)) => {
                    self.core.shared.ctx.counters[self.core.me]
                        .bytes_read
                        .fetch_add(n as u64, Relaxed);
                }
                Ok(Fill::Eof) => {}
                Err(_) => return self.close(idx),
            }
        }
        self.update(idx);
    }

    /// Parses what can be parsed, writes what can be written, and fixes the epoll interest
    /// (or closes the connection).
    fn update(&mut self, idx: usize) {
        let Some(conn) = self.conns[idx].as_mut() else {
            return;
        };
        self.core.token = token(idx, conn.gen);
        let shared = self.core.shared.clone();
        let c = &shared.ctx.counters[self.core.me];
        let mut ring_wait = !self.core.resume(&mut conn.session);
        match conn.session.pump(&mut self.core, &mut conn.stream) {
            Ok(n) => {
                c.bytes_written.fetch_add(n as u64, Relaxed);
            }
            Err(_) => return self.close(idx),
        }
        // Writing may have freed room for an open slot's retry.
        ring_wait |= !self.core.resume(&mut conn.session);
        if conn.session.finished() {
            if conn.session.violation.is_some() {
                c.skq_protocol_closes.fetch_add(1, Relaxed);
            }
            return self.close(idx);
        }
        if conn.session.is_parked() || ring_wait {
            self.parked.push(self.core.token);
        }
        let mut interest = 0;
        if conn.session.wants_read() {
            interest |= IN | RDHUP;
        }
        if conn.session.wants_write() {
            interest |= OUT;
        }
        if interest != conn.interest {
            if self
                .epoll
                .modify(conn.stream.as_raw_fd(), interest, self.core.token)
                .is_err()
            {
                return self.close(idx);
            }
            conn.interest = interest;
        }
        if self.idle.is_some() && (conn.session.commands() != conn.seen || !conn.session.is_quiet())
        {
            conn.seen = conn.session.commands();
            conn.active_ms = self.now_ms;
        }
        conn.session.settle(&mut self.read_pool);
    }

    fn close(&mut self, idx: usize) {
        if let Some(conn) = self.conns[idx].take() {
            let _ = self.epoll.delete(conn.stream.as_raw_fd());
            self.core.shared.ctx.curr_conns.fetch_sub(1, Relaxed);
            self.free.push(idx);
        }
    }
}
