//! The skq driver: `workers` threads each own a `skq_rt::Worker` of one
//! shared [`Skq`] and loop on `wait()`.
//!
//! * The listener (token [`LISTENER`]) is a source like any other: whichever
//!   worker gets its event accepts until `EAGAIN`, puts each connection in a
//!   free table slot and registers it edge-triggered for `READABLE |
//!   WRITABLE` with token = slot index.
//! * On a connection event the worker runs [`Conn::on_ready`]; if it stopped
//!   early it calls `still_ready`, so the core redelivers the source after
//!   release (possibly to another worker). On close the source is
//!   deregistered, then closed, and the slot returns to the free list.
//! * The table's per-slot lock is uncontended because the core never hands a
//!   source to a second worker while the first is processing it. Every
//!   contended lock is classified once obtained: on a connection's first
//!   event it is the accept race (`accept_races`); anything else would mean a
//!   source was handed to two workers at once (`ownership_violations`, which
//!   the tests require to stay 0). The timeout sweep (only with timeouts
//!   set) also takes slot locks, briefly and without blocking; a contended
//!   lock while a sweep ran (`sweeps` odd, or changed meanwhile) is not
//!   counted.
//! * With a classifier ([`crate::Protocol::classifier`]) a connection's
//!   level follows its requests: after each event the driver hands the
//!   connection's level to the scheduler (`Skq::set_class`, no system
//!   call), which places its next activation by it.
//! * [`SkqDriver::retire_worker`] sets a flag the worker checks between
//!   batches, then rings the worker's retire bell: an eventfd registered
//!   `PINNED` to that worker (token [`retire_token`]), so an idle worker
//!   wakes for it and nobody else does. Waits have no timeout: an idle
//!   worker sleeps until readiness, a wake-up or shutdown (a 20 ms polling
//!   timeout used to wake every idle worker 50 times a second). The worker
//!   then calls `Worker::exit()` and the core hands its queued events to the
//!   others.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use skq_core::{Class, Event, Flags, SourceId};
use skq_rt::{Events, Interest, Skq, Worker};
use skq_sys::eventfd::EventFd;

use crate::config::ServerConfig;
use crate::conn::{Conn, Limits, Outcome};
use crate::notice::Notice;
use crate::protocol::{Cx, Protocol};
use crate::server::{accept_ready, spawn_workers, sweep_one, Common, Running, Sweeper, SCRATCH};
use crate::stats::{SchedulerStats, ServerStats};
use crate::table::Table;

/// Token of the listening socket (connection tokens are table slots).
const LISTENER: u64 = u64::MAX;
/// Token of worker 0's retire bell; worker `w`'s is `RETIRE - w` (workers
/// are at most 64, connection tokens are table slots far below).
const RETIRE: u64 = u64::MAX - 1;

/// The token of worker `w`'s retire bell.
fn retire_token(w: usize) -> u64 {
    RETIRE - w as u64
}

/// The worker whose retire bell `token` is, if it is one.
fn retire_bell_of(token: u64, workers: usize) -> Option<usize> {
    let w = RETIRE.checked_sub(token)?;
    (w < workers as u64).then_some(w as usize)
}

struct Entry<S> {
    stream: TcpStream,
    id: SourceId,
    conn: Conn<S>,
    /// The class last handed to the scheduler.
    class: Class,
    handled: u64,
}

struct Shared<P: Protocol> {
    common: Arc<Common<P>>,
    skq: Arc<Skq>,
    listener: TcpListener,
    table: Table<Entry<P::Session>>,
    retire: Box<[AtomicBool]>,
    /// Per worker: its retire bell (an eventfd) and its registration.
    bells: Box<[(EventFd, SourceId)]>,
    accept_races: AtomicU64,
    ownership_violations: AtomicU64,
    /// Incremented before and after each timeout sweep (odd: sweeping).
    sweeps: AtomicU64,
    batch: usize,
    pin: bool,
    limits: Limits,
}

pub(crate) struct SkqDriver<P: Protocol> {
    shared: Arc<Shared<P>>,
    listener_id: SourceId,
    threads: Vec<JoinHandle<()>>,
    local_addr: SocketAddr,
    /// The resource manager thread (elastic worker count).
    manager: Option<JoinHandle<()>>,
    sweeper: Option<Sweeper>,
    started_ns: u64,
}

pub(crate) fn start<P: Protocol>(
    cfg: &ServerConfig,
    common: Arc<Common<P>>,
) -> io::Result<SkqDriver<P>> {
    let core = cfg
        .core_config()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let skq = Skq::new(core).map_err(|e| io::Error::other(e.to_string()))?;
    let listener = skq_sys::net::listen(cfg.addr, false)?;
    let local_addr = listener.local_addr()?;
    let listener_id = skq.register(
        listener.as_raw_fd(),
        LISTENER,
        Interest::READABLE,
        Flags::NONE,
        None,
    )?;
    let bells = (0..cfg.workers)
        .map(|w| {
            let bell = EventFd::new()?;
            let id = skq.register(
                bell.as_raw_fd(),
                retire_token(w),
                Interest::READABLE,
                Flags::PINNED,
                Some(w),
            )?;
            Ok((bell, id))
        })
        .collect::<io::Result<Box<[_]>>>()?;
    let shared = Arc::new(Shared {
        common,
        skq,
        listener,
        table: Table::new(cfg.max_conns),
        retire: (0..cfg.workers).map(|_| AtomicBool::new(false)).collect(),
        bells,
        accept_races: AtomicU64::new(0),
        ownership_violations: AtomicU64::new(0),
        sweeps: AtomicU64::new(0),
        batch: cfg.sched.batch,
        pin: cfg.pin,
        limits: Limits::of(cfg),
    });
    shared.common.idle_conn_bytes.store(
        Table::<Entry<P::Session>>::slot_bytes() + Skq::bytes_per_source(),
        Ordering::Relaxed,
    );
    let started_ns = skq_sys::cpu::monotonic_ns();
    let threads = spawn_workers(cfg.workers, "skq", &shared, worker_main)?;
    let manager = match cfg.elastic_config() {
        Some(e) => Some(skq_rt::spawn_resource_manager(&shared.skq, e)?),
        None => None,
    };
    let sweeper = match cfg.timeouts {
        t if t.any() => {
            let s = shared.clone();
            Some(Sweeper::start(
                t.tick(),
                s.common.notices.clone(),
                move |now| {
                    s.sweeps.fetch_add(1, Ordering::SeqCst);
                    s.table
                        .try_for_each(|e| sweep_one(&e.stream, &mut e.conn, now, &t));
                    s.sweeps.fetch_add(1, Ordering::SeqCst);
                },
            )?)
        }
        _ => None,
    };
    Ok(SkqDriver {
        shared,
        listener_id,
        threads,
        local_addr,
        manager,
        sweeper,
        started_ns,
    })
}

impl<P: Protocol> SkqDriver<P> {
    fn snapshot(&self) -> ServerStats {
        let s = &self.shared;
        let sched = SchedulerStats {
            accept_races: s.accept_races.load(Ordering::Relaxed),
            ownership_violations: s.ownership_violations.load(Ordering::Relaxed),
            ..SchedulerStats::of(&s.skq, self.started_ns)
        };
        s.common
            .snapshot(Some(sched), s.table.memory_bytes() + s.skq.table_bytes())
    }
}

impl<P: Protocol> Running for SkqDriver<P> {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn stats(&self) -> ServerStats {
        self.snapshot()
    }

    fn retire_worker(&self, i: usize) -> io::Result<()> {
        let flag = self.shared.retire.get(i).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("retire_worker: no worker {i}"),
            )
        })?;
        flag.store(true, Ordering::Release);
        // Wakes the worker if it sleeps; a busy one sees the flag (or the
        // bell) after its batch.
        self.shared.bells[i].0.notify()
    }

    fn shutdown(self: Box<Self>) -> ServerStats {
        let mut me = *self;
        if let Some(sw) = me.sweeper.take() {
            sw.stop();
        }
        me.shared.skq.shutdown();
        if let Some(m) = me.manager.take() {
            if m.join().is_err() {
                me.shared.common.notices.push(Notice::ManagerPanicked);
            }
        }
        for t in std::mem::take(&mut me.threads) {
            if t.join().is_err() {
                me.shared.common.notices.push(Notice::WorkerPanicked);
            }
        }
        let stats = me.snapshot();
        let s = &me.shared;
        s.table.drain(|e| {
            let _ = s.skq.deregister(e.id, e.stream.as_raw_fd());
        });
        let _ = s.skq.deregister(me.listener_id, s.listener.as_raw_fd());
        for (bell, id) in s.bells.iter() {
            let _ = s.skq.deregister(*id, bell.as_raw_fd());
        }
        stats
    }
}

fn worker_main<P: Protocol>(shared: &Shared<P>, w: usize) {
    if shared.pin {
        // The runtime's CPU for worker w (its locality decisions assume it).
        if let Err(error) = shared.skq.pin_current_thread(w) {
            shared
                .common
                .notices
                .push(Notice::PinFailed { worker: w, error });
        }
    }
    shared.common.proto.prepare_worker(w);
    let mut worker = shared.skq.worker(w);
    let mut events = Events::with_capacity(shared.batch);
    let mut scratch = vec![0u8; SCRATCH];
    loop {
        if shared.retire[w].load(Ordering::Acquire) {
            let report = worker.exit();
            if !report.stranded.is_empty() {
                shared.common.notices.push(Notice::Stranded {
                    worker: w,
                    sources: report.stranded.len(),
                });
            }
            return;
        }
        match worker.wait(&mut events, None) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                shared.common.notices.push(Notice::WaitFailed {
                    worker: w,
                    call: "wait",
                    error,
                });
                return;
            }
        }
        if shared.skq.is_shutdown() {
            return;
        }
        for ev in events.iter() {
            if ev.token == LISTENER {
                accept_all(shared, &worker);
            } else if let Some(b) = retire_bell_of(ev.token, shared.bells.len()) {
                // The flag is read at the top of the loop. A bell whose
                // worker exited first (its pin dropped) may reach another
                // worker, which only resets it.
                shared.bells[b].0.drain();
            } else {
                on_connection(shared, &mut worker, ev, &mut scratch);
            }
        }
    }
}

/// Accepts until `EAGAIN`, registering each connection.
fn accept_all<P: Protocol>(shared: &Shared<P>, worker: &Worker) {
    let w = worker.id();
    for stream in accept_ready(&shared.listener, &shared.common, w) {
        let Some(stream) = shared.common.admit(w, stream) else {
            continue;
        };
        let Some(slot) = shared.table.reserve() else {
            shared.common.refuse_admitted(w, &stream);
            continue;
        };
        let mut guard = shared.table.lock(slot);
        let registered = shared.skq.register(
            stream.as_raw_fd(),
            slot as u64,
            Interest::READABLE | Interest::WRITABLE,
            Flags::NONE,
            Some(w),
        );
        match registered {
            Ok(id) => {
                *guard = Some(Entry {
                    stream,
                    id,
                    conn: Conn::with_limits(shared.common.open_session(w), shared.limits),
                    class: Class::Regular,
                    handled: 0,
                });
            }
            Err(e) => {
                drop(guard);
                shared.common.notices.push(Notice::RegisterFailed(e));
                shared.common.refuse_admitted(w, &stream);
                shared.table.release(slot);
            }
        }
    }
}

/// Handles one event of the connection in slot `ev.token`.
fn on_connection<P: Protocol>(
    shared: &Shared<P>,
    worker: &mut Worker,
    ev: &Event,
    scratch: &mut [u8],
) {
    let sweeps = shared.sweeps.load(Ordering::SeqCst);
    let Some((mut guard, contended)) = shared.table.lock_observed(ev.token as usize) else {
        return;
    };
    // A stale event (source deregistered, slot maybe reused) is ignored.
    let Some(entry) = guard.as_mut().filter(|e| e.id == ev.source) else {
        return;
    };
    let swept = sweeps & 1 == 1 || shared.sweeps.load(Ordering::SeqCst) != sweeps;
    if contended && !swept {
        let counter = if entry.handled == 0 {
            &shared.accept_races
        } else {
            &shared.ownership_violations
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    entry.handled += 1;
    let w = worker.id();
    let counters = &shared.common.counters.workers[w];
    counters.record_event();
    let mut cx = Cx::new(w, counters);
    let cfg = shared.skq.config();
    if cfg.diffusion() && !cfg.is_batch_worker(w) {
        cx.refuse_batch();
    }
    let proto = &*shared.common.proto;
    let hup = ev.ready.contains(skq_core::Ready::HUP);
    let outcome = entry
        .conn
        .on_ready(proto, &mut entry.stream, scratch, &mut cx, hup);
    // The connection's level follows its requests (`classify.rs`): it
    // governs the next activation. Only the scheduler's flags change.
    let level = entry.conn.level();
    if level != entry.class && !matches!(outcome, Outcome::Close(_)) {
        entry.class = level;
        if let Err(e) = shared.skq.set_class(entry.id, level) {
            shared.common.notices.push(Notice::ClassFailed(e));
        }
    }
    match outcome {
        Outcome::Idle => {}
        Outcome::Blocked => counters.record_blocked(),
        Outcome::More => worker.still_ready(ev),
        Outcome::Close(why) => {
            let e = guard.take().expect("entry checked above");
            // Deregister before close, so the fd number cannot be reused
            // under a live registration.
            if let Err(err) = shared.skq.deregister(e.id, e.stream.as_raw_fd()) {
                shared.common.notices.push(Notice::DeregisterFailed(err));
            }
            drop(e.stream);
            drop(guard);
            shared.table.release(ev.token as usize);
            shared.common.closed(w, why, e.conn.session);
        }
    }
}
