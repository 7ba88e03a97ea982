//! The coupling to skq-rt: how tasks and I/O sources become skq events.
//!
//! Everything this crate asks of skq-rt and skq-core goes through this
//! module (and the elastic hook in `runtime.rs`). The workers run skq-rt's
//! `Worker::wait`, which executes skq-core's worker loop.
//!
//! ## The model
//!
//! * **A task is an skq source**: an skq-rt [`VirtualSource`] (no fd: a
//!   slot of skq-core's source table, with the task's class in its flags).
//!   The task's waker (async-task's `schedule`) parks the task's `Runnable`
//!   in the source's [`Entry`] and *activates* the source directly
//!   ([`VirtualSource::activate`]) through the configured policy (best of
//!   two, hybrid, stealing, the two-level queues, `rtshare`, diffusion),
//!   exactly as a harvest activates a socket, with the waking thread's CPU
//!   as the hint under the locality policies; the waking thread wakes the
//!   chosen worker if the activation claimed it idle. The worker that
//!   dequeues the event takes the `Runnable` and polls the task. No system
//!   call is made unless a worker must be woken.
//! * **An I/O source** (socket, listener) is registered once, edge
//!   triggered, through skq-rt's [`Registry`]; its event, delivered to the
//!   worker the policy chose (`SO_INCOMING_CPU`), wakes the tasks waiting on
//!   it.
//! * **A kick** per worker (a virtual source `PINNED` to it) makes that
//!   worker leave its wait to plan a timer that another thread inserted
//!   ahead of its planned wake-up.
//!
//! * **Elastic workers**: a worker parking as surplus moves its timers to
//!   a running worker (`time.rs`); when it rejoins, its heap reopens and its
//!   kick, which parking unpinned, is pinned to it again.
//!
//! ## What is interim
//!
//! * Timers fire only on their own worker, after its waits and between
//!   the events of its batches (`docs/ASYNC.md`).
//!
//! ## Invariants
//!
//! 1. An [`Entry`] is looked up by the source's slot index and believed
//!    only if its stored [`SourceId`] equals the event's (generation check).
//!    A stale event of a reused task source finds either no `Runnable`
//!    (nothing happens) or the new task's, which is scheduled anyway.
//! 2. A task's `Runnable` is stored before its source is activated, and is
//!    taken only by the worker that dequeued the delivery; async-task
//!    calls `schedule` at most once per `Runnable`, so a task is never
//!    polled by two workers at once, and skq's per-source state adds the
//!    same guarantee (a source is processed by one worker at a time; a
//!    wake-up during the poll is redelivered after the worker's release).
//!    This protocol is [`Entry::schedule`] / [`Entry::take_runnable`] in
//!    `slot.rs`, whose loom model (`loom_model.rs`) races it against
//!    skq-core's stealing and foreign wakers.
//! 3. After shutdown `schedule` drops the `Runnable` (and so the future)
//!    instead of queueing it; [`Driver::drain`] drops whatever is stored.
//! 4. A task poll may complete at most [`POLL_BUDGET`] I/O operations;
//!    the next one wakes the task and returns `Pending`, so the task goes
//!    back through skq's queues and the worker's other events run.
//! 5. No lock of this module is held while a waker is woken or a
//!    `Runnable` is run or dropped.

use std::cell::Cell;
use std::io;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use async_task::Runnable;
use skq_core::{Class, SegVec};

use crate::slot::Notify;
use skq_rt::{
    Event, Events, Flags, Interest, Ready, Registered, Registry, Skq, SourceId, VirtualSource,
    Worker,
};

/// Token of a worker's kick.
const KICK: u64 = 0;
/// Token of a task source.
const TASK: u64 = 1;
/// Token of an I/O source.
const IO: u64 = 2;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of our locks leaves consistent data (every
    // critical section is a few moves), so poisoning is ignored.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    /// The driver (its address) and worker index of this thread, if it is
    /// a worker.
    static WORKER: Cell<(usize, usize)> = const { Cell::new((0, usize::MAX)) };
    /// The source of the task being polled on this thread.
    static TASK_ID: Cell<Option<SourceId>> = const { Cell::new(None) };
    /// I/O operations the task being polled may still complete in this poll
    /// (`u32::MAX` outside a task poll: no budget).
    static BUDGET: Cell<u32> = const { Cell::new(u32::MAX) };
    /// Events of this worker's current batch still to dispatch after the
    /// one being dispatched.
    static BATCH_LEFT: Cell<usize> = const { Cell::new(0) };
    /// Set while this worker dispatches the I/O event that ends its batch:
    /// the tasks it wakes are activated with `activate_next` (they take the
    /// event's place at the front of this worker's queue).
    static WAKE_NEXT: Cell<bool> = const { Cell::new(false) };
    /// Whether the events left in this worker's batch are all I/O events
    /// (they only wake tasks; no task of the batch runs after this event).
    static REST_IO: Cell<bool> = const { Cell::new(true) };
    /// Set while this worker dispatches an I/O event whose first woken task
    /// may run within the event ([`Driver::dispatch`]): the runtime's skq
    /// (its address) and, once a task of that runtime was woken, the task,
    /// whose notification is then held back.
    static RUN_NOW: Cell<(usize, Option<SourceId>)> = const { Cell::new((0, None)) };
}

/// Records how many events of the worker's batch follow the one about to
/// be dispatched, and whether they are all I/O events (the worker loop
/// calls it before each dispatch).
pub(crate) fn set_batch_left(n: usize, rest_io: bool) {
    BATCH_LEFT.with(|b| b.set(n));
    REST_IO.with(|r| r.set(rest_io));
}

/// Whether the event runs a task (the others, I/O readiness and kicks,
/// only wake tasks).
pub(crate) fn runs_a_task(ev: &Event) -> bool {
    ev.token == TASK
}

/// Whether this thread is a worker of any runtime.
pub(crate) fn on_worker_thread() -> bool {
    WORKER.with(|w| w.get().1 != usize::MAX)
}

/// This thread's worker index (of whichever runtime it works for).
pub(crate) fn worker_index() -> Option<usize> {
    let w = WORKER.with(|w| w.get().1);
    (w != usize::MAX).then_some(w)
}

/// The task being polled on this thread.
pub(crate) fn current_task() -> Option<SourceId> {
    TASK_ID.with(|t| t.get())
}

/// A source slot's runtime side (`slot.rs`): task or I/O source.
type Slot = crate::slot::Slot<VirtualSource, IoState>;
/// One entry per skq source slot (indexed like the core's table).
type Entry = crate::slot::Entry<VirtualSource, IoState>;

impl Notify for VirtualSource {
    fn notify(&self) {
        // The first task of this runtime that an I/O event wakes while its
        // worker may run it at once: left for the worker (its `Runnable` is
        // already in the slot), not activated.
        let held = RUN_NOW.with(|r| match r.get() {
            (skq, None) if skq != 0 && skq == Arc::as_ptr(self.skq()) as usize => {
                r.set((skq, Some(self.id())));
                true
            }
            _ => false,
        });
        if held {
            return;
        }
        // Queued, coalesced or deferred, the task runs after this call; a
        // stale activation (the task's source was dropped meanwhile) has
        // nothing left to run.
        let _ = if WAKE_NEXT.with(|n| n.get()) {
            self.activate_next()
        } else {
            self.activate()
        };
    }
}

/// Ready I/O operations one task may complete per poll before it is made
/// to yield (tokio's cooperative budget has the same size).
pub(crate) const POLL_BUDGET: u32 = 128;

/// Spends one unit of the polled task's budget; false when it is spent
/// (the caller then yields: wakes the task and returns `Pending`).
fn spend_budget() -> bool {
    BUDGET.with(|b| match b.get() {
        0 => false,
        u32::MAX => true,
        n => {
            b.set(n - 1);
            true
        }
    })
}

/// Wakers of one I/O source, per direction.
#[derive(Default)]
pub(crate) struct IoState {
    pub(crate) read: Dir,
    pub(crate) write: Dir,
}

/// One direction: an event counter, changed only under the waker lock, the
/// counter's value when the direction was last seen drained, and the waker
/// to call at the next event.
///
/// Why no wake-up is lost: [`Dir::poll_op`] reads the counter, tries the
/// system call, and on `EAGAIN` stores its waker under the lock *only if
/// the counter did not move*; an event bumps the counter and takes the
/// waker under the same lock. So an edge arriving after the snapshot is
/// either seen by the check (the call is retried) or finds the waker.
///
/// Why a drained direction skips the call: `EAGAIN`, or a stream read or
/// write that moved fewer bytes than asked, shows the socket's queue empty
/// (or full) at that instant, and any change after it raises a new edge
/// that bumps the counter. Until then the next call could only return
/// `EAGAIN`, so [`Dir::poll_op`] stores its waker without making it (hyper,
/// for one, polls a read again after every request it parses and after
/// every reply it writes; without this each such poll was an `EAGAIN`
/// system call, two per request). The snapshot is taken before the call,
/// so an edge that lands during the call leaves the direction ready. After
/// a hang-up or error event the direction is never taken for drained: a
/// read that stops short of a queued end of stream leaves that end for the
/// next read, and its edge has already passed.
pub(crate) struct Dir {
    seq: AtomicU64,
    /// `seq` when the direction was last seen drained ([`NOT_DRAINED`]:
    /// never): the direction is known empty while the two are equal.
    drained: AtomicU64,
    /// A hang-up or error event was seen: every poll makes its call.
    hung_up: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

/// [`Dir::drained`] before any operation has seen the direction drained.
const NOT_DRAINED: u64 = u64::MAX;

impl Default for Dir {
    fn default() -> Dir {
        Dir {
            seq: AtomicU64::new(0),
            drained: AtomicU64::new(NOT_DRAINED),
            hung_up: AtomicBool::new(false),
            waker: Mutex::new(None),
        }
    }
}

impl Dir {
    /// Runs `op` until it does not return `WouldBlock`, or arranges to be
    /// woken at this direction's next readiness event.
    pub(crate) fn poll_op<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_inner(cx, op, |_| false)
    }

    /// [`Dir::poll_op`] for a stream read or write of `want` bytes: one that
    /// moves fewer (but some) leaves the direction drained.
    pub(crate) fn poll_stream(
        &self,
        cx: &mut Context<'_>,
        want: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_inner(cx, op, |n| *n > 0 && *n < want)
    }

    fn poll_inner<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut() -> io::Result<R>,
        short: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        // Cooperative budget: a task whose I/O is always ready (a fast peer,
        // a socket at end of stream) would otherwise hold its worker.
        if !spend_budget() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        loop {
            let seen = self.seq.load(Ordering::Acquire);
            let r = if self.drained.load(Ordering::Relaxed) == seen
                && !self.hung_up.load(Ordering::Acquire)
            {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                op()
            };
            match r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained.store(seen, Ordering::Relaxed);
                    let mut w = lock(&self.waker);
                    if self.seq.load(Ordering::Acquire) != seen {
                        continue;
                    }
                    match &*w {
                        Some(old) if old.will_wake(cx.waker()) => {}
                        _ => *w = Some(cx.waker().clone()),
                    }
                    return Poll::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Ok(v) => {
                    if short(&v) {
                        self.drained.store(seen, Ordering::Relaxed);
                    }
                    return Poll::Ready(Ok(v));
                }
                r => return Poll::Ready(r),
            }
        }
    }

    /// A hang-up or error event: from now on every poll makes its call.
    fn hang_up(&self) {
        self.hung_up.store(true, Ordering::Release);
        self.bump();
    }

    fn bump(&self) {
        let w = {
            let mut g = lock(&self.waker);
            self.seq.fetch_add(1, Ordering::Release);
            g.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    fn take_waker(&self) -> Option<Waker> {
        lock(&self.waker).take()
    }
}

impl IoState {
    fn wake(&self, ready: Ready) {
        if ready.is_closed() {
            self.read.hang_up();
            self.write.hang_up();
            return;
        }
        if ready.is_readable() {
            self.read.bump();
        }
        if ready.is_writable() {
            self.write.bump();
        }
    }
}

/// The skq side of one runtime.
pub(crate) struct Driver {
    skq: Arc<Skq>,
    registry: Registry,
    entries: SegVec<Entry>,
    kicks: Box<[OnceLock<VirtualSource>]>,
    shutdown: AtomicBool,
}

impl Driver {
    pub(crate) fn new(cfg: skq_core::Config) -> Result<Driver, skq_rt::Error> {
        let workers = cfg.workers;
        let capacity = cfg.capacity;
        let skq = Skq::new(cfg)?;
        Ok(Driver {
            registry: skq.registry(),
            skq,
            entries: SegVec::new(capacity),
            kicks: (0..workers).map(|_| OnceLock::new()).collect(),
            shutdown: AtomicBool::new(false),
        })
    }

    /// This thread's worker index if it is one of this driver's workers.
    pub(crate) fn current_worker(&self) -> Option<usize> {
        let (d, w) = WORKER.with(|w| w.get());
        (d == self as *const Driver as usize && w != usize::MAX).then_some(w)
    }

    pub(crate) fn skq(&self) -> &Arc<Skq> {
        &self.skq
    }

    pub(crate) fn workers(&self) -> usize {
        self.kicks.len()
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Takes worker `w`'s handle (call once per worker, before its thread).
    pub(crate) fn take_worker(&self, w: usize) -> Worker {
        self.skq.worker(w)
    }

    /// First steps of a worker thread: pinning (if asked) and the kick.
    pub(crate) fn start_worker(&self, worker: &Worker, pin: bool) -> io::Result<()> {
        let me = worker.id();
        if pin {
            self.skq.pin_current_thread(me).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("pinning worker {me} to its CPU failed: {e}"),
                )
            })?;
        }
        let kick = worker.virtual_source(KICK, Flags::PINNED)?;
        let _ = self.kicks[me].set(kick);
        WORKER.with(|w| w.set((self as *const Driver as usize, me)));
        Ok(())
    }

    /// Wakes worker `w` (see the module doc: the kick).
    pub(crate) fn kick(&self, w: usize) {
        if self.current_worker() == Some(w) {
            return;
        }
        if let Some(k) = self.kicks.get(w).and_then(|k| k.get()) {
            let _ = k.activate();
        }
    }

    /// Worker `w` rejoined after parking as elastic surplus: parking
    /// unpinned its kick (skq-core unpins a parked worker's `PINNED`
    /// sources), so it is pinned to `w` again.
    pub(crate) fn repin_kick(&self, w: usize) {
        if let Some(k) = self.kicks.get(w).and_then(|k| k.get()) {
            let _ = k.modify(KICK, Flags::PINNED);
        }
    }

    /// One wait of worker `worker`: the next batch, or `Ok(false)` at shutdown.
    pub(crate) fn wait(
        &self,
        worker: &mut Worker,
        events: &mut Events,
        timeout: Option<Duration>,
    ) -> io::Result<bool> {
        worker.wait(events, timeout)?;
        Ok(!self.skq.is_shutdown())
    }

    /// Handles one delivered event on the worker thread.
    pub(crate) fn dispatch(&self, ev: &Event) {
        match ev.token {
            // The kick's delivery itself made the worker leave its wait.
            KICK => {}
            TASK => self.run_task(ev.source),
            IO => {
                let io = self.entry(ev.source).and_then(|e| match &*e.lock() {
                    Slot::Io { id, io } if *id == ev.source => Some(io.clone()),
                    _ => None,
                });
                if let Some(io) = io {
                    // The last event of the batch: the tasks it wakes run
                    // next on this worker rather than wake another one
                    // (skq-core's `activate_next`; locality policies only).
                    let last = BATCH_LEFT.with(|b| b.get()) == 0;
                    WAKE_NEXT.with(|n| n.set(last));
                    // When skq would deliver the first task this event
                    // wakes as this worker's very next work anyway, it runs
                    // here, within the event: the same order, without a
                    // pass through skq's queue and back (skq-core's
                    // `Scheduler::next_is_immediate`).
                    let now = self.current_worker().is_some_and(|w| {
                        self.skq
                            .core()
                            .next_is_immediate(w, last, REST_IO.with(|r| r.get()))
                    });
                    let skq = if now {
                        Arc::as_ptr(&self.skq) as usize
                    } else {
                        0
                    };
                    RUN_NOW.with(|r| r.set((skq, None)));
                    io.wake(ev.ready);
                    let (_, held) = RUN_NOW.with(|r| r.replace((0, None)));
                    let run = held.and_then(|id| {
                        if self.class_of(id) == Class::Regular {
                            return Some(id);
                        }
                        // Its class orders it (priority, batch workers):
                        // through skq after all, as it would have gone.
                        if let Some(e) = self.entry(id) {
                            e.notify(id);
                        }
                        None
                    });
                    WAKE_NEXT.with(|n| n.set(false));
                    if let Some(id) = run {
                        self.run_task(id);
                    }
                }
            }
            _ => {}
        }
    }

    /// Polls task `id` once if its `Runnable` is here (`None`: a stale or
    /// spurious delivery).
    fn run_task(&self, id: SourceId) {
        let runnable = self.entry(id).and_then(|e| e.take_runnable(id));
        if let Some(r) = runnable {
            TASK_ID.with(|t| t.set(Some(id)));
            BUDGET.with(|b| b.set(POLL_BUDGET));
            // The future is wrapped in a panic catcher (task.rs): `run`
            // does not unwind.
            r.run();
            TASK_ID.with(|t| t.set(None));
            BUDGET.with(|b| b.set(u32::MAX));
        }
    }

    fn entry(&self, id: SourceId) -> Option<&Entry> {
        self.entries.get(id.index() as usize)
    }

    fn set_entry(&self, id: SourceId, slot: Slot) {
        let e = self
            .entries
            .ensure(id.index() as usize)
            .expect("the core checked the index against the capacity");
        let old = std::mem::replace(&mut *e.lock(), slot);
        drop(old);
    }

    /// Frees `id`'s entry if it still belongs to `id`.
    fn clear_entry(&self, id: SourceId) {
        if let Some(e) = self.entry(id) {
            let old = {
                let mut g = e.lock();
                let mine = match &*g {
                    Slot::Task { id: i, .. } | Slot::Io { id: i, .. } => *i == id,
                    Slot::Free => false,
                };
                if mine {
                    std::mem::take(&mut *g)
                } else {
                    Slot::Free
                }
            };
            drop(old);
        }
    }

    /// Whether the task being polled on this thread should yield at an
    /// async checkpoint (`crate::checkpoint`): never off this driver's
    /// workers or outside a task poll; when the task's poll budget is spent
    /// (a checkpoint spends one unit); otherwise after skq-rt's own
    /// checkpoint (which harvests readiness nobody else is harvesting and
    /// hands this worker's queued events to idle workers, per the policy),
    /// only if work still waits for this worker: queued events, or events
    /// left in its current batch.
    pub(crate) fn checkpoint_should_yield(&self) -> bool {
        let Some(me) = self.current_worker() else {
            return false;
        };
        if current_task().is_none() {
            return false;
        }
        if !spend_budget() {
            return true;
        }
        skq_rt::checkpoint();
        BATCH_LEFT.with(|b| b.get()) > 0 || self.skq.core().queued(me) > 0
    }

    // ------------------------------------------------------------ tasks

    /// A task source of `class`: a virtual source (no fd).
    pub(crate) fn register_task(&self, class: Class) -> io::Result<SourceId> {
        let ev = self
            .skq
            .virtual_source(TASK, class.apply(Flags::NONE))
            .map_err(|e| io::Error::new(e.kind(), format!("spawn: {e}")))?;
        let id = ev.id();
        self.set_entry(
            id,
            Slot::Task {
                id,
                runnable: None,
                ev: Arc::new(ev),
            },
        );
        Ok(id)
    }

    /// The task's future was dropped: its source is deregistered (when the
    /// last waker that is activating it right now lets go of it).
    pub(crate) fn deregister_task(&self, id: SourceId) {
        self.clear_entry(id);
    }

    /// async-task's `schedule` for task `id` (the protocol is
    /// [`Entry::schedule`]'s, `slot.rs`).
    pub(crate) fn schedule(&self, id: SourceId, runnable: Runnable) {
        match self.entry(id) {
            Some(e) if !self.is_shutdown() => e.schedule(id, runnable),
            _ => drop(runnable),
        }
    }

    /// Sets the class of task `id` for its next activation.
    pub(crate) fn set_class(&self, id: SourceId, class: Class) -> bool {
        self.skq.set_class(id, class).unwrap_or(false)
    }

    /// The class of task `id` now.
    pub(crate) fn class_of(&self, id: SourceId) -> Class {
        self.skq.core().class_of(id)
    }

    // ------------------------------------------------------------ I/O

    /// Registers an owned, non-blocking fd source for both directions.
    pub(crate) fn register_io<S: AsFd>(
        &self,
        source: S,
        interest: Interest,
    ) -> io::Result<(Registered<S>, Arc<IoState>)> {
        let reg = self
            .registry
            .register(source, IO, interest, Flags::NONE)
            .map_err(io::Error::from)?;
        let io = Arc::new(IoState::default());
        self.set_entry(
            reg.id(),
            Slot::Io {
                id: reg.id(),
                io: io.clone(),
            },
        );
        Ok((reg, io))
    }

    /// Forgets an I/O source's wakers (before its registration is dropped).
    pub(crate) fn forget_io(&self, id: SourceId) {
        self.clear_entry(id);
    }

    // ------------------------------------------------------------ shutdown

    /// Stops the workers' waits (first step of shutdown).
    pub(crate) fn shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        self.skq.shutdown();
    }

    /// Drops every stored `Runnable` and I/O waker (after the workers left).
    pub(crate) fn drain(&self) {
        for (_, e) in self.entries.iter() {
            let (runnable, io) = match &mut *e.lock() {
                Slot::Task { runnable, .. } => (runnable.take(), None),
                Slot::Io { io, .. } => (None, Some(io.clone())),
                Slot::Free => (None, None),
            };
            drop(runnable);
            if let Some(io) = io {
                let r = io.read.take_waker();
                let w = io.write.take_waker();
                drop((r, w));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell as StdCell;
    use std::task::Waker;

    /// Runs one `poll_stream` of `want` bytes whose call would return `r`;
    /// gives the poll's result and whether the call was made.
    fn poll(dir: &Dir, want: usize, r: io::Result<usize>) -> (Poll<io::Result<usize>>, bool) {
        let called = StdCell::new(false);
        let mut r = Some(r);
        let mut cx = Context::from_waker(Waker::noop());
        let p = dir.poll_stream(&mut cx, want, || {
            called.set(true);
            r.take().expect("one call per poll")
        });
        (p, called.get())
    }

    fn would_block() -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }

    #[test]
    fn a_short_transfer_leaves_the_direction_drained_until_the_next_event() {
        let d = Dir::default();
        // A full transfer says nothing about what is left: the next poll calls.
        assert!(matches!(poll(&d, 8, Ok(8)), (Poll::Ready(Ok(8)), true)));
        // A short one drained the queue: the next poll waits without a call.
        assert!(matches!(poll(&d, 8, Ok(3)), (Poll::Ready(Ok(3)), true)));
        let (p, called) = poll(&d, 8, Ok(8));
        assert!(p.is_pending() && !called);
        assert!(
            lock(&d.waker).is_some(),
            "the waker waits for the next edge"
        );
        // The edge takes the waker, and the next poll calls again.
        d.bump();
        assert!(lock(&d.waker).is_none());
        assert!(matches!(poll(&d, 8, Ok(5)), (Poll::Ready(Ok(5)), true)));
    }

    #[test]
    fn would_block_and_end_of_stream() {
        let d = Dir::default();
        let (p, called) = poll(&d, 8, would_block());
        assert!(p.is_pending() && called);
        // Known drained: no second call until an event.
        let (p, called) = poll(&d, 8, Ok(1));
        assert!(p.is_pending() && !called);
        d.bump();
        // End of stream (0 bytes) is not a short transfer: it stays ready.
        assert!(matches!(poll(&d, 8, Ok(0)), (Poll::Ready(Ok(0)), true)));
        assert!(matches!(poll(&d, 8, Ok(0)), (Poll::Ready(Ok(0)), true)));
        // Errors pass through and do not drain.
        let (p, _) = poll(&d, 8, Err(io::ErrorKind::ConnectionReset.into()));
        assert!(matches!(p, Poll::Ready(Err(_))));
        assert!(poll(&d, 8, Ok(8)).1);
    }

    #[test]
    fn after_a_hang_up_every_poll_makes_its_call() {
        // The peer's end of stream arrived (and its event passed) before a
        // read that stopped short of it: the next read must still be made,
        // no further edge will come.
        let d = Dir::default();
        d.hang_up();
        assert!(matches!(poll(&d, 8, Ok(3)), (Poll::Ready(Ok(3)), true)));
        assert!(matches!(poll(&d, 8, Ok(0)), (Poll::Ready(Ok(0)), true)));
        let (p, called) = poll(&d, 8, would_block());
        assert!(p.is_pending() && called);
        assert!(poll(&d, 8, Ok(1)).1);
    }

    #[test]
    fn an_edge_during_the_call_keeps_the_direction_ready() {
        let d = Dir::default();
        let mut cx = Context::from_waker(Waker::noop());
        // The event lands while the call runs (after the snapshot).
        let p = d.poll_stream(&mut cx, 8, || {
            d.bump();
            Ok(2)
        });
        assert!(matches!(p, Poll::Ready(Ok(2))));
        assert!(poll(&d, 8, Ok(8)).1, "the data of that edge is read");
        // Same for EAGAIN: the edge is seen by the check and the call retried.
        let first = StdCell::new(true);
        let p = d.poll_stream(&mut cx, 8, || {
            if first.replace(false) {
                d.bump();
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(4)
            }
        });
        assert!(matches!(p, Poll::Ready(Ok(4))));
    }
}
