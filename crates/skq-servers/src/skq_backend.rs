//! The RPC server on the skq runtime.
//!
//! `workers` threads each own a `skq_rt::Worker` of one shared [`Skq`] and loop
//! on `wait()`. Sources:
//! * the listener (token [`LISTENER`]): whichever worker gets its event accepts
//!   until `EAGAIN`; each connection is made non-blocking with `TCP_NODELAY`,
//!   put in a free slot of the preallocated connection table and registered
//!   edge-triggered for `READABLE | WRITABLE` with token = slot index;
//! * connections: on an event the worker locks the slot, then
//!   [`Conn::on_ready`] flushes pending replies, reads until `EAGAIN` and serves
//!   up to 32 buffered requests in order. If it stopped early the worker calls
//!   `still_ready`, so the core redelivers the source after release (possibly
//!   to another worker) instead of the handler looping on it. On EOF, an I/O
//!   error or a protocol error the source is deregistered, then closed, and
//!   the slot returns to the free list.
//!
//! **Why the per-connection lock is uncontended.** The core never hands a
//! source to a second worker while the first is processing it (BRIEF §3, the
//! processing state lasts until that worker's next `wait`), so two workers
//! never handle the same slot at once. The lock exists for the two moments
//! outside that guarantee: the acceptor holds it while registering, so an
//! event that fires on another worker before the source id is stored waits for
//! it instead of being lost; and shutdown empties the table. Every `try_lock`
//! failure is classified once the lock is obtained: on a connection's first
//! event it is that accept race (`accept_races` in the scheduler stats);
//! anything else would mean the source was handed to two workers at once and
//! is counted in `ownership_violations`, a live check of the invariant that
//! the tests require to stay at zero.
//!
//! **Priority.** The first class-1 request on a connection re-registers it
//! with `Flags::HIGH_PRIORITY` (`Skq::modify`), so from then on its events
//! come from the workers' high-priority queues (at most `--rtshare` percent
//! of a batch). The flag is never lowered again.
//!
//! **Retiring a worker.** [`SkqServer::retire_worker`] sets a flag that the
//! worker checks between batches; waits use a 20 ms timeout so an idle
//! worker notices it too. The worker then calls `Worker::exit()`, and the core
//! hands its queued events to the others.
//!
//! A stale event (its source already deregistered, the slot possibly reused)
//! is recognised by comparing the event's source id with the slot's and ignored.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use skq_core::{Event, Flags, SourceId};
use skq_rt::{Events, Interest, Skq, Worker};

use crate::conn::{Conn, Outcome};
use crate::server::RpcConfig;
use crate::service::ServiceMode;
use crate::stats::{Counters, SchedulerStats, ServerInfo, ServerStats};

/// Token of the listening socket (connection tokens are table slots).
const LISTENER: u64 = u64::MAX;
/// Per-worker read buffer.
const SCRATCH: usize = 64 * 1024;
/// How often a waiting worker looks at its retire flag.
const RETIRE_POLL: Duration = Duration::from_millis(20);

/// A connection in the table.
struct Entry {
    stream: TcpStream,
    id: SourceId,
    conn: Conn,
    /// Re-registered with `HIGH_PRIORITY` (after its first class-1 request).
    high: bool,
    /// Events handled so far.
    handled: u64,
}

/// State shared by all worker threads.
struct Shared {
    skq: Arc<Skq>,
    listener: TcpListener,
    /// Indexed by token. `None` = free.
    table: Box<[Mutex<Option<Entry>>]>,
    free: Mutex<Vec<usize>>,
    counters: Counters,
    retire: Box<[AtomicBool]>,
    accept_races: AtomicU64,
    ownership_violations: AtomicU64,
    service: ServiceMode,
    /// Most events per `wait()`.
    batch: usize,
}

/// A running skq server.
pub struct SkqServer {
    shared: Arc<Shared>,
    listener_id: SourceId,
    threads: Vec<JoinHandle<()>>,
    info: ServerInfo,
    local_addr: SocketAddr,
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl SkqServer {
    /// Creates the instance, binds, registers the listener and starts the workers.
    pub fn start(cfg: &RpcConfig) -> io::Result<Self> {
        let core = cfg
            .core_config()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let info = ServerInfo::new(cfg, core.mode_name());
        let skq = Skq::new(core).map_err(other)?;
        let listener = skq_sys::net::listen(cfg.addr, false)?;
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let listener_id = skq.register(
            listener.as_raw_fd(),
            LISTENER,
            Interest::READABLE,
            Flags::NONE,
            None,
        )?;
        let shared = Arc::new(Shared {
            skq,
            listener,
            table: (0..cfg.max_conns).map(|_| Mutex::new(None)).collect(),
            free: Mutex::new((0..cfg.max_conns).rev().collect()),
            counters: Counters::new(cfg.workers),
            retire: (0..cfg.workers).map(|_| AtomicBool::new(false)).collect(),
            accept_races: AtomicU64::new(0),
            ownership_violations: AtomicU64::new(0),
            service: cfg.service,
            batch: cfg.sched.batch.clamp(1, 1024),
        });
        let mut threads = Vec::with_capacity(cfg.workers);
        for w in 0..cfg.workers {
            let shared = shared.clone();
            let pin = cfg.pin;
            let t = std::thread::Builder::new()
                .name(format!("skq-rpc-{w}"))
                .spawn(move || worker_main(&shared, w, pin))?;
            threads.push(t);
        }
        Ok(SkqServer {
            shared,
            listener_id,
            threads,
            info,
            local_addr,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Current counters, with the scheduler's own.
    pub fn stats(&self) -> ServerStats {
        SkqServer::stats_of(&self.shared, &self.info)
    }

    /// Asks worker `i` to call `Worker::exit()` after its current batch.
    pub fn retire_worker(&self, i: usize) -> io::Result<()> {
        let flag = self.shared.retire.get(i).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("retire_worker: no worker {i}"),
            )
        })?;
        flag.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Stops the workers, then deregisters and closes every socket.
    pub fn shutdown(self) -> ServerStats {
        self.shared.skq.shutdown();
        for t in self.threads {
            if t.join().is_err() {
                eprintln!("warning: an skq-rpc worker panicked");
            }
        }
        let stats = SkqServer::stats_of(&self.shared, &self.info);
        let s = &self.shared;
        for slot in s.table.iter() {
            let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(e) = taken {
                let _ = s.skq.deregister(e.id, e.stream.as_raw_fd());
            }
        }
        let _ = s.skq.deregister(self.listener_id, s.listener.as_raw_fd());
        stats
    }

    fn stats_of(shared: &Shared, info: &ServerInfo) -> ServerStats {
        let sched = SchedulerStats {
            per_worker: shared.skq.stats().iter().map(worker_stats_json).collect(),
            imbalance: shared.skq.imbalance(),
            accept_races: shared.accept_races.load(Ordering::Relaxed),
            ownership_violations: shared.ownership_violations.load(Ordering::Relaxed),
        };
        shared.counters.snapshot(info, Some(sched))
    }
}

fn worker_stats_json(s: &skq_core::WorkerStats) -> serde_json::Value {
    serde_json::to_value(s).unwrap_or(serde_json::Value::Null)
}

fn worker_main(shared: &Shared, w: usize, pin: bool) {
    if pin {
        // The runtime's CPU for worker w (its locality decisions assume it).
        if let Err(e) = shared.skq.pin_current_thread(w) {
            eprintln!("warning: could not pin worker {w}: {e}");
        }
    }
    shared.service.prepare_thread();
    let mut worker = shared.skq.worker(w);
    let mut events = Events::with_capacity(shared.batch);
    let mut scratch = vec![0u8; SCRATCH];
    loop {
        if shared.retire[w].load(Ordering::Relaxed) {
            let report = worker.exit();
            if !report.stranded.is_empty() {
                eprintln!(
                    "warning: worker {w} left {} sources with no worker to run them",
                    report.stranded.len()
                );
            }
            return;
        }
        match worker.wait(&mut events, Some(RETIRE_POLL)) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("error: worker {w}: wait failed: {e}");
                return;
            }
        }
        if shared.skq.is_shutdown() {
            return;
        }
        for ev in events.iter() {
            if ev.token == LISTENER {
                accept_all(shared, &worker);
            } else {
                on_connection(shared, &mut worker, ev, &mut scratch);
            }
        }
    }
}

/// Accepts until `EAGAIN`, registering each connection.
fn accept_all(shared: &Shared, worker: &Worker) {
    loop {
        let stream = match shared.listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            // EMFILE and friends: the next connection attempt brings a new edge.
            Err(e) => {
                eprintln!("warning: accept failed: {e}");
                return;
            }
        };
        if stream.set_nonblocking(true).is_err() || stream.set_nodelay(true).is_err() {
            continue; // already reset by the peer
        }
        let Some(slot) = shared.free.lock().unwrap_or_else(|p| p.into_inner()).pop() else {
            shared.counters.conns.rejected();
            continue;
        };
        let mut guard = shared.table[slot].lock().unwrap_or_else(|p| p.into_inner());
        let fd = stream.as_raw_fd();
        let registered = shared.skq.register(
            fd,
            slot as u64,
            Interest::READABLE | Interest::WRITABLE,
            Flags::NONE,
            Some(worker.id()),
        );
        match registered {
            Ok(id) => {
                *guard = Some(Entry {
                    stream,
                    id,
                    conn: Conn::new(),
                    high: false,
                    handled: 0,
                });
                shared.counters.conns.accepted();
            }
            Err(e) => {
                drop(guard);
                eprintln!("warning: could not register a connection: {e}");
                shared.counters.conns.rejected();
                shared
                    .free
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(slot);
            }
        }
    }
}

/// Handles one event of the connection in slot `ev.token`.
fn on_connection(shared: &Shared, worker: &mut Worker, ev: &Event, scratch: &mut [u8]) {
    let Some(slot) = shared.table.get(ev.token as usize) else {
        return;
    };
    let (mut guard, contended) = match slot.try_lock() {
        Ok(g) => (g, false),
        Err(TryLockError::WouldBlock) => (slot.lock().unwrap_or_else(|p| p.into_inner()), true),
        Err(TryLockError::Poisoned(p)) => (p.into_inner(), false),
    };
    let Some(entry) = guard.as_mut().filter(|e| e.id == ev.source) else {
        return;
    };
    if contended {
        let counter = if entry.handled == 0 {
            &shared.accept_races
        } else {
            &shared.ownership_violations
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    entry.handled += 1;
    let counters = &shared.counters.workers[worker.id()];
    counters.record_event();
    let outcome = entry
        .conn
        .on_ready(&mut entry.stream, shared.service, scratch, counters);
    if entry.conn.high_priority_seen() && !entry.high && !matches!(outcome, Outcome::Close(_)) {
        // QStack-style classification: a client that sends class-1 requests
        // gets its connection's future events from the high-priority queues.
        entry.high = true;
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = shared.skq.modify(
            entry.id,
            entry.stream.as_raw_fd(),
            ev.token,
            interest,
            Flags::HIGH_PRIORITY,
        ) {
            eprintln!("warning: could not raise a connection's priority: {e}");
        }
    }
    match outcome {
        Outcome::Idle => {}
        Outcome::Blocked => counters.record_blocked(),
        Outcome::More => worker.still_ready(ev),
        Outcome::Close(why) => {
            let e = guard.take().expect("entry checked above");
            // Deregister before close, so the fd number cannot be reused under a live registration.
            if let Err(err) = shared.skq.deregister(e.id, e.stream.as_raw_fd()) {
                eprintln!("warning: deregister failed: {err}");
            }
            drop(e);
            drop(guard);
            shared
                .free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(ev.token as usize);
            shared.counters.conns.closed(why);
        }
    }
}
