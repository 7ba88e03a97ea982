//! The scheduler's shared state, registration and activation (routing a
//! source that became ready onto the chosen worker's queue). Waiting and
//! parking live in `wait.rs`, worker exit and counters in `exit.rs`, the
//! policies in `policy.rs` and `cpumap.rs`, stealing in `steal.rs`.
//!
//! One [`Scheduler`] is shared by all workers. Per-worker queues each sit
//! under their own mutex; per-source state is one atomic word (see
//! `slot.rs`). No operation ever holds two queue locks, so there is no lock
//! order to get wrong: a thief removes from the victim under the victim's
//! lock, drops it, then pushes onto its own queue under its own lock.
//!
//! Sleep/wake protocol (no lost wake-up, BRIEF §7 inv. 1 and 4): a worker
//! about to sleep checks its queue and sets its bit in the idle mask while
//! holding its queue's lock; a pusher appends and tests-and-clears that bit
//! while holding the same lock. Mutual exclusion orders the two, so either
//! the sleeper sees the work or the pusher sees the sleeper and wakes it.
//! The hot path (push) pays no fence for this; loom checks the protocol.

use std::collections::HashSet;

use crossbeam_utils::CachePadded;

use crate::config::{Config, ConfigError, Policy};
use crate::cpumap::CpuMap;
use crate::rng::FastRng;
use crate::segvec::SegVec;
use crate::slot::{self, Phase, Slot, FREE, IDLE, NONE, PENDING, PHASE, QUEUED};
use crate::sync::{lock, AtomicU32, AtomicU64, Mutex, Ordering};
use crate::types::{Activation, CoreError, Flags, Nanos, Ready, SourceId, WorkerId};
use crate::worker::{Counters, QueueShared, WorkerCtx, WorkerShared};

/// EWMA weight of the newest per-event processing time (SKQ: α = 0.05).
pub const ALPHA: f64 = 0.05;

/// Why a source moved; `None` when it did not or the move is not a migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    CpuFollow,
    Balance,
    Exit,
}

/// Where a routing comes from ([`Scheduler::route_with`]).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Origin {
    /// The migration reason to count instead of the policy's (an exit).
    pub(crate) forced: Option<Reason>,
    /// The worker harvesting the readiness, which may keep it (`policy.rs`).
    pub(crate) by: Option<WorkerId>,
    /// `by` activates from inside the last event of its batch and will be
    /// free next ([`Scheduler::activate_next`]).
    pub(crate) next: bool,
    /// `by` just released the source (it became ready again while `by`
    /// processed it) and is free now: it is a candidate with its true E
    /// (`policy.rs`, "The worker already awake").
    pub(crate) released: bool,
    /// `by` harvests its readiness set inside a `wait` call and is free
    /// now ([`Scheduler::activate_harvested`]): a high-priority source
    /// goes to it under the balancing policies (`policy.rs`).
    pub(crate) harvest: bool,
}

/// The shared scheduling state of one instance. `Send + Sync`.
pub struct Scheduler {
    pub(crate) cfg: Config,
    /// The source table: allocated a segment at a time as sources register.
    pub(crate) slots: SegVec<Slot>,
    free: Mutex<Vec<u32>>,
    pub(crate) next_slot: AtomicU32,
    /// Per worker: indices of the sources it registered `PINNED`, so its
    /// exit visits those and nothing else (not the whole table).
    pub(crate) pinned: Box<[Mutex<HashSet<u32>>]>,
    pub(crate) queues: Box<[CachePadded<QueueShared>]>,
    /// Shared mode only (else empty): per worker, the `PINNED` sources it
    /// registered, queued for it alone. Everything else shares one queue.
    /// Same handshake as the other queues: pushed under its lock with the
    /// owner's idle bit claimed there (`push_pinned`).
    pub(crate) pinned_q: Box<[CachePadded<QueueShared>]>,
    pub(crate) workers: Box<[WorkerShared]>,
    /// Bit w set: worker w is (about to be) asleep and must be woken.
    pub(crate) idle: CachePadded<AtomicU64>,
    /// Bit w set: worker w has not exited and is not parked.
    pub(crate) alive: AtomicU64,
    /// Bit w set: worker w is parked (`elastic.rs`) and may rejoin.
    pub(crate) parked: AtomicU64,
    /// CPU hint → candidate workers, through the topology tree.
    pub(crate) cpu_map: CpuMap,
    rr: AtomicU32,
    /// The idle worker woken to steal and not yet done looking (its id + 1),
    /// or 0: at most one thief searches at a time (`steal.rs`).
    pub(crate) searching: CachePadded<AtomicU64>,
    /// The worker loop's shared state (poller, followers, elastic target,
    /// shutdown): `worker_loop.rs`.
    pub(crate) lp: crate::worker_loop::LoopShared,
}

impl Scheduler {
    /// Builds an instance; refuses an invalid configuration.
    pub fn new(mut cfg: Config) -> Result<Scheduler, ConfigError> {
        cfg.validate()?;
        cfg.poll_groups = cfg.effective_poll_groups();
        let n = cfg.workers;
        let nq = if cfg.policy == Policy::Shared { 1 } else { n };
        let cpu_map = CpuMap::new(&cfg);
        let slots = SegVec::new(cfg.capacity);
        // Under loom every slot is built up front: the lazy path is std's
        // `OnceLock`, which loom does not model.
        #[cfg(loom)]
        for i in 0..cfg.capacity {
            slots.ensure(i);
        }
        Ok(Scheduler {
            slots,
            pinned: (0..n).map(|_| Mutex::new(HashSet::new())).collect(),
            free: Mutex::new(Vec::new()),
            next_slot: AtomicU32::new(0),
            queues: (0..nq)
                .map(|_| CachePadded::new(QueueShared::new()))
                .collect(),
            pinned_q: (0..if nq == 1 && n > 1 { n } else { 0 })
                .map(|_| CachePadded::new(QueueShared::new()))
                .collect(),
            workers: (0..n).map(|_| WorkerShared::new()).collect(),
            idle: CachePadded::new(AtomicU64::new(0)),
            alive: AtomicU64::new(if n == 64 { u64::MAX } else { (1u64 << n) - 1 }),
            parked: AtomicU64::new(0),
            cpu_map,
            rr: AtomicU32::new(0),
            searching: CachePadded::new(AtomicU64::new(0)),
            lp: crate::worker_loop::LoopShared::new(n, cfg.poll_groups, cfg.pollers),
            cfg,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// How CPU hints map to workers (precomputed from the configuration).
    pub fn cpu_map(&self) -> &CpuMap {
        &self.cpu_map
    }

    /// The per-thread context of worker `id`; create it once per worker.
    pub fn worker(&self, id: WorkerId) -> WorkerCtx {
        assert!(id < self.cfg.workers, "worker {id} out of range");
        WorkerCtx::new(id, self.cfg.seed)
    }

    /// An activation context for a thread that is not a worker (an acceptor,
    /// a timer thread, a simulator's arrival process).
    pub fn activator_rng(&self, salt: u64) -> FastRng {
        FastRng::new(self.cfg.seed ^ salt.rotate_left(17) ^ 0xA5A5)
    }

    #[inline]
    pub(crate) fn qidx(&self, w: WorkerId) -> usize {
        if self.queues.len() == 1 {
            0
        } else {
            w
        }
    }

    #[inline]
    pub(crate) fn is_alive(&self, w: usize) -> bool {
        w < self.cfg.workers && self.alive.load(Ordering::Acquire) & (1u64 << w) != 0
    }

    #[inline]
    fn slot(&self, id: SourceId) -> Option<&Slot> {
        self.slots.get(id.index() as usize)
    }

    /// The slot of a source known to be registered (it was queued or
    /// delivered, so its segment exists).
    #[inline]
    pub(crate) fn slot_of(&self, id: SourceId) -> &Slot {
        self.slots
            .get(id.index() as usize)
            .expect("a queued source's slot exists")
    }

    /// Slots allocated so far (the table grows a segment at a time).
    pub fn slots_allocated(&self) -> usize {
        self.slots.allocated()
    }

    /// Bytes one source adds to the table.
    pub fn slot_bytes() -> usize {
        std::mem::size_of::<Slot>()
    }

    /// Bytes the source table holds now.
    pub fn table_bytes(&self) -> usize {
        self.slots.memory_bytes()
    }

    /// Next live worker in round-robin order.
    pub(crate) fn round_robin(&self) -> Option<WorkerId> {
        let n = self.cfg.workers;
        for _ in 0..n {
            let w = self.rr.fetch_add(1, Ordering::Relaxed) as usize % n;
            if self.is_alive(w) {
                return Some(w);
            }
        }
        None
    }

    // ---------------------------------------------------------------- registration

    /// Registers a source. `registrar` is the worker registering it (the
    /// target of `PINNED`); `None` from a non-worker thread.
    pub fn register(
        &self,
        token: u64,
        flags: Flags,
        registrar: Option<WorkerId>,
    ) -> Result<SourceId, CoreError> {
        if let Some(r) = registrar {
            if !self.is_alive(r) {
                return Err(CoreError::BadWorker(r));
            }
        }
        if flags.contains(Flags::PINNED) && registrar.is_none() {
            return Err(CoreError::BadWorker(usize::MAX));
        }
        self.note_flags(flags);
        let idx = match lock(&self.free).pop() {
            Some(i) => i,
            None => {
                let i = self.next_slot.fetch_add(1, Ordering::Relaxed);
                if i as usize >= self.slots.capacity() {
                    self.next_slot.fetch_sub(1, Ordering::Relaxed);
                    return Err(CoreError::Full(self.slots.capacity()));
                }
                i
            }
        };
        let s = self
            .slots
            .ensure(idx as usize)
            .expect("index below capacity");
        s.index.store(idx, Ordering::Relaxed);
        if flags.contains(Flags::PINNED) {
            if let Some(r) = registrar {
                lock(&self.pinned[r]).insert(idx);
            }
        }
        s.token.store(token, Ordering::Relaxed);
        s.flags.store(flags.0, Ordering::Relaxed);
        s.registrar
            .store(registrar.map_or(NONE, |r| r as u32), Ordering::Relaxed);
        // Vanilla assigns round-robin. Locality policies start a source at its
        // registering worker (the natural home of a pipe or user event, which
        // carry no CPU hint); sockets move on with their first CPU hint.
        let home = match self.cfg.policy {
            Policy::Vanilla => self.round_robin().map_or(NONE, |w| w as u32),
            Policy::Queue | Policy::Cpu | Policy::Hybrid => registrar.map_or(NONE, |r| r as u32),
            Policy::Shared | Policy::Best2 => NONE,
        };
        s.home.store(home, Ordering::Relaxed);
        s.last.store(NONE, Ordering::Relaxed);
        s.cpu.store(NONE, Ordering::Relaxed);
        s.homed.store(0, Ordering::Relaxed);
        let gen = slot::gen_of(s.state.load(Ordering::Acquire));
        // Release: publishes token/flags/home to whoever next CASes the word.
        s.state.store(slot::word(gen, IDLE), Ordering::Release);
        Ok(SourceId::new(idx, gen))
    }

    /// Changes a source's token and flags.
    pub fn modify(&self, id: SourceId, token: u64, flags: Flags) -> Result<(), CoreError> {
        let s = self.slot(id).ok_or(CoreError::Stale)?;
        if s.phase(id) == Phase::Free {
            return Err(CoreError::Stale);
        }
        if flags.contains(Flags::PINNED) && s.registrar.load(Ordering::Relaxed) == NONE {
            return Err(CoreError::BadWorker(usize::MAX));
        }
        self.note_flags(flags);
        let was = s.flags().contains(Flags::PINNED);
        s.token.store(token, Ordering::Relaxed);
        s.flags.store(flags.0, Ordering::Relaxed);
        let now = flags.contains(Flags::PINNED);
        if was != now {
            let r = s.registrar.load(Ordering::Relaxed) as usize;
            if let Some(set) = self.pinned.get(r) {
                let mut set = lock(set);
                if now {
                    set.insert(id.index());
                } else {
                    set.remove(&id.index());
                }
            }
        }
        Ok(())
    }

    /// Deregisters a source. Queued entries become stale and are dropped when
    /// reached; an in-flight delivery is simply not released.
    pub fn deregister(&self, id: SourceId) -> Result<(), CoreError> {
        let s = self.slot(id).ok_or(CoreError::Stale)?;
        let mut cur = s.state.load(Ordering::Acquire);
        loop {
            if slot::gen_of(cur) != id.gen() || cur & PHASE == FREE {
                return Err(CoreError::Stale);
            }
            let new = slot::word(id.gen().wrapping_add(1), FREE);
            match s.cas(cur, new) {
                Ok(_) => break,
                Err(w) => cur = w,
            }
        }
        if s.flags().contains(Flags::PINNED) {
            let r = s.registrar.load(Ordering::Relaxed) as usize;
            if let Some(set) = self.pinned.get(r) {
                lock(set).remove(&id.index());
            }
        }
        lock(&self.free).push(id.index());
        Ok(())
    }

    /// Where `id` is in its life.
    pub fn phase(&self, id: SourceId) -> Phase {
        self.slot(id).map_or(Phase::Free, |s| s.phase(id))
    }

    /// The worker the policy keeps `id` with (its locality home: the
    /// registrar, the worker of its CPU hint, or vanilla's round-robin
    /// choice), if it has one and is registered. A driver with one
    /// readiness set per poll group moves the source's registration to its
    /// home's set when the two differ, so the kernel wakes the home
    /// directly.
    pub fn home_of(&self, id: SourceId) -> Option<WorkerId> {
        let s = self.slot(id)?;
        if s.phase(id) == Phase::Free {
            return None;
        }
        let home = s.home.load(Ordering::Relaxed);
        (home != crate::slot::NONE).then_some(home as usize)
    }

    // ---------------------------------------------------------------- activation

    /// Readiness arrived for `id`. `cpu` is the CPU that saw it
    /// (`SO_INCOMING_CPU`, or the harvesting thread's CPU), if known.
    pub fn activate(
        &self,
        id: SourceId,
        ready: Ready,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
    ) -> Activation {
        self.activate_by(id, ready, cpu, now, rng, None)
    }

    /// [`Scheduler::activate`] by worker `by`, harvesting its readiness
    /// set: when it harvests as one of several pollers (still idle), the
    /// policy may give the event to it rather than wake another worker
    /// (`policy.rs`). `None` is an activation from anywhere else.
    pub fn activate_by(
        &self,
        id: SourceId,
        ready: Ready,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
        by: Option<WorkerId>,
    ) -> Activation {
        let origin = Origin {
            by,
            ..Origin::default()
        };
        self.activate_with(id, ready, cpu, now, rng, origin)
    }

    /// [`Scheduler::activate_by`] for readiness that worker `by` harvests
    /// from its set inside a `wait` call (the drivers' `Step::Harvest` and
    /// `Step::Poll`): `by` is free now and takes high-priority events
    /// before anything queued, so under `best2` and `hybrid` a
    /// high-priority source goes to it rather than behind a busy worker's
    /// current event (`policy.rs`, "High priority harvested").
    /// Otherwise the same as [`Scheduler::activate_by`].
    pub fn activate_harvested(
        &self,
        id: SourceId,
        ready: Ready,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
        by: WorkerId,
    ) -> Activation {
        let origin = Origin {
            by: Some(by),
            harvest: true,
            ..Origin::default()
        };
        self.activate_with(id, ready, cpu, now, rng, origin)
    }

    /// [`Scheduler::activate`] by worker `by` from inside the last event
    /// of its batch (an async runtime's I/O event waking the task that
    /// waits on it): the source takes the place of that event, at the
    /// front of `by`'s queue, under the locality policies (`cpu`, `queue`,
    /// `hybrid`). The policy chose `by` for the event, and the task is the
    /// rest of the event's work; queued behind the work that arrived
    /// meanwhile, a request would wait twice, and handed to another worker
    /// it would cost a wake-up and a hop. No wake-up is made, not even a
    /// thief's (`by` is running and takes it next); the source stays
    /// stealable there, and diffusion applies.
    /// Under the other policies this is [`Scheduler::activate_by`].
    pub fn activate_next(
        &self,
        id: SourceId,
        ready: Ready,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
        by: WorkerId,
    ) -> Activation {
        let origin = Origin {
            by: Some(by),
            next: true,
            ..Origin::default()
        };
        self.activate_with(id, ready, cpu, now, rng, origin)
    }

    /// Whether an activation by `by` (`next`: through
    /// [`Scheduler::activate_next`]) may read its `now`: only best-of-two
    /// and hybrid compare expected completion times, and neither compares
    /// for a lone worker or for a source its running worker keeps. A caller
    /// may skip the clock read when this is false and pass 0; should the
    /// keeping worker exit in between, the choice made with 0 still prefers
    /// the idle and the short queues (`policy.rs`), and only the rare
    /// activation that raced the exit sees it.
    pub fn activation_reads_clock(&self, next: bool, by: Option<WorkerId>) -> bool {
        if self.lone() {
            return false;
        }
        match self.cfg.policy {
            Policy::Best2 => true,
            Policy::Hybrid => self.keeper(next, by).is_none(),
            _ => false,
        }
    }

    /// Whether a source that worker `by` activates now, from inside an
    /// event of its batch, would be the next work `by` does after that
    /// event. Never once a source was high priority (high-priority work
    /// queued or harvested at the next wait would go first). Otherwise when
    /// - `last`, the event ends the batch, and `by` keeps the source (a
    ///   locality policy): [`Scheduler::activate_next`] puts it at the front
    ///   of `by`'s queue, ahead of whatever waits there; or
    /// - `by` is the only worker, nothing waits in its queue, and
    ///   `last` or `rest_only_activates`: the events left in the batch do no
    ///   work of their own but activate sources (an async runtime's I/O
    ///   events waking tasks), each of which then queues behind this one.
    ///
    /// An async runtime may then run a woken task within the event instead
    /// of queueing it and taking it back out: the same order, one pass
    /// through the queues fewer.
    pub fn next_is_immediate(&self, by: WorkerId, last: bool, rest_only_activates: bool) -> bool {
        if self.prioritized() {
            return false;
        }
        (last && self.keeper(true, Some(by)).is_some())
            || (self.lone() && (last || rest_only_activates) && self.queued(by) == 0)
    }

    /// The worker that keeps a source it activates through
    /// [`Scheduler::activate_next`] (`next`): `by`, under the locality
    /// policies, while it is alive.
    fn keeper(&self, next: bool, by: Option<WorkerId>) -> Option<WorkerId> {
        by.filter(|&b| {
            next && matches!(
                self.cfg.policy,
                Policy::Cpu | Policy::Queue | Policy::Hybrid
            ) && b < self.cfg.workers
                && self.is_alive(b)
        })
    }

    fn activate_with(
        &self,
        id: SourceId,
        ready: Ready,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
        origin: Origin,
    ) -> Activation {
        let Some(s) = self.slot(id) else {
            return Activation::Stale;
        };
        if let Some(c) = cpu {
            s.cpu.store(c, Ordering::Relaxed);
        }
        let mut cur = s.state.load(Ordering::Acquire);
        loop {
            if slot::gen_of(cur) != id.gen() {
                return Activation::Stale;
            }
            let (new, outcome) = match cur & PHASE {
                FREE => return Activation::Stale,
                IDLE => (slot::with_ready(slot::word(id.gen(), QUEUED), ready), None),
                QUEUED => (slot::with_ready(cur, ready), Some(Activation::Coalesced)),
                _ => (
                    slot::with_ready(cur | PENDING, ready),
                    Some(Activation::Deferred),
                ),
            };
            if new == cur {
                if let Some(o) = outcome {
                    return o;
                }
            }
            match s.cas(cur, new) {
                Ok(_) => {
                    if let Some(o) = outcome {
                        return o;
                    }
                    break;
                }
                Err(w) => cur = w,
            }
        }
        // IDLE -> QUEUED won: this call must push it on exactly one queue.
        match self.route_with(id, s, cpu, now, rng, origin) {
            Some((worker, wake)) => Activation::Queued { worker, wake },
            // No live worker: leave it QUEUED-in-transit-nowhere? Never: put it
            // back to IDLE with its readiness so a later activation retries.
            None => {
                self.park_orphan(id, s);
                Activation::Deferred
            }
        }
    }

    /// With every worker gone, return a won QUEUED state to IDLE.
    pub(crate) fn park_orphan(&self, id: SourceId, s: &Slot) {
        let mut cur = s.state.load(Ordering::Acquire);
        while slot::gen_of(cur) == id.gen() && cur & PHASE == QUEUED {
            match s.cas(cur, slot::word(id.gen(), IDLE)) {
                Ok(_) => break,
                Err(w) => cur = w,
            }
        }
    }

    /// Chooses a worker for a source that just became QUEUED and pushes it
    /// (`origin` says who asks). Returns (queue owner, worker to wake).
    pub(crate) fn route_with(
        &self,
        id: SourceId,
        s: &Slot,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
        origin: Origin,
    ) -> Option<(WorkerId, Option<WorkerId>)> {
        let Origin {
            forced, by, next, ..
        } = origin;
        // The activating worker keeps the source (`activate_next`).
        let mut keep = self.keeper(next, by);
        let kept = keep.is_some();
        let high = s.flags().contains(Flags::HIGH_PRIORITY);
        if !self.pinned_q.is_empty() && s.flags().contains(Flags::PINNED) {
            let r = s.registrar.load(Ordering::Relaxed);
            if r != NONE && self.is_alive(r as usize) {
                if let Some(claimed) = self.push_pinned(r as usize, id, high) {
                    s.last.store(r, Ordering::Relaxed);
                    let wake = claimed.then_some(r as usize);
                    if let Some(v) = wake {
                        Counters::add(&self.workers[v].counters.wakeups, 1);
                    }
                    return Some((r as usize, wake));
                }
            }
            // The registrar left: `leave` unpins its sources; share it.
        }
        for _ in 0..=self.cfg.workers {
            let (w, reason) = match keep.take() {
                Some(b) => (b, None),
                None => self.choose(s, cpu, now, rng, origin)?,
            };
            let w = self.diffuse(s, w);
            // The harvester keeps the event it was woken for: into its hand,
            // not through its queue (`worker_loop.rs`, "The kept event").
            if origin.harvest && Some(w) == by && !high {
                if let Some(first) = self.hand_takes(w, id) {
                    self.note_route(s, w, forced.or(reason));
                    return Some((self.qidx(w), first.then_some(w)));
                }
            }
            // Only the kept source goes to the front, and only while its
            // worker is the one chosen (diffusion may move it).
            let front = kept && Some(w) == by;
            if let Some(claimed) = self.push_claim(self.qidx(w), id, high, front) {
                self.note_route(s, w, forced.or(reason));
                let wake = if self.cfg.policy == Policy::Shared {
                    self.wake_shared(by)
                } else if front {
                    // The kept source runs next on `w`, which is running:
                    // no thief is woken for it.
                    claimed.then_some(w)
                } else {
                    self.wake_after_push(w, claimed)
                };
                return Some((self.qidx(w), wake));
            }
            // The chosen worker exited between choice and push: choose again.
        }
        None
    }

    /// Accounting of a route to `w`: the slot's last worker and, when the
    /// flow moved, the migration counter of `reason`. A plain load and
    /// store (no locked RMW on the activation path); a racing update just
    /// miscounts.
    #[inline]
    fn note_route(&self, s: &Slot, w: WorkerId, reason: Option<Reason>) {
        let last = s.last.load(Ordering::Relaxed);
        s.last.store(w as u32, Ordering::Relaxed);
        if self.cfg.policy != Policy::Shared && last != NONE && last as usize != w {
            let c = &self.workers[w].counters;
            match reason {
                Some(Reason::CpuFollow) => Counters::add(&c.mig_cpu, 1),
                Some(Reason::Balance) => Counters::add(&c.mig_balance, 1),
                Some(Reason::Exit) => Counters::add(&c.mig_exit, 1),
                None => {}
            }
        }
    }

    /// Worker `w`, harvesting in its blocking poll with an open hand,
    /// keeps source `id` (QUEUED, on no queue) in it. The first event it
    /// keeps claims its own idle bit, as a push onto its queue would:
    /// `None` (nothing changed) when its hand is shut or full, or when
    /// another push claimed the bit first; otherwise whether this was the
    /// claim (the poll's one wake-up, counted here). Only `w`'s thread calls
    /// this (its harvest), and no `prepare_park` of `w` runs meanwhile, so
    /// the claim needs no queue lock.
    #[inline]
    fn hand_takes(&self, w: WorkerId, id: SourceId) -> Option<bool> {
        let hand = &self.workers[w].hand;
        let len = hand.len.load(Ordering::Relaxed);
        if len >= hand.room.load(Ordering::Relaxed) {
            return None;
        }
        let first = len == 0;
        if first {
            if !self.claim_bit(w) {
                return None;
            }
            Counters::bump(&self.workers[w].counters.kept, 1);
        }
        hand.ids[len].store(id.as_u64(), Ordering::Relaxed);
        hand.len.store(len + 1, Ordering::Relaxed);
        Some(first)
    }

    /// Clears worker `w`'s idle bit; true if this call cleared it (the
    /// caller then owes `w` its wake-up, or is `w`). The plain load first
    /// spares a locked RMW when the bit is clear already.
    #[inline]
    fn claim_bit(&self, w: WorkerId) -> bool {
        let bit = 1u64 << w;
        self.idle.load(Ordering::Relaxed) & bit != 0
            && self.idle.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }

    /// Pushes onto queue `q`; false if its owner has exited.
    pub(crate) fn push(&self, q: usize, id: SourceId, high: bool, front: bool) -> bool {
        self.push_claim(q, id, high, front).is_some()
    }

    /// Pushes onto queue `q` and, under the same lock, claims the idle bit of
    /// `claim` (the worker that owns the queue). Returns None if the queue's
    /// owner exited, else whether `claim` was idle and must be woken.
    ///
    /// The park handshake is done under the queue lock: `prepare_park` sets
    /// the idle bit and checks the length while holding it, so either it sees
    /// this push or this push sees its bit. No fence on the hot path.
    pub(crate) fn push_claim(
        &self,
        q: usize,
        id: SourceId,
        high: bool,
        front: bool,
    ) -> Option<bool> {
        // Shared mode: any idle worker, chosen after the push. Otherwise the
        // queue's owner, also when it is the only worker (one queue, but
        // not a shared one): an activation from outside the workers (a
        // direct activation, skq-rt's virtual sources) must claim it.
        let claim = (self.cfg.policy != Policy::Shared).then_some(q);
        self.push_onto(&self.queues[q], id, high, front, claim)
    }

    /// Pushes onto `qs` and, under the same lock, claims the idle bit of
    /// `claim` if given. None if the queue is closed, else whether `claim`
    /// was idle and must be woken.
    fn push_onto(
        &self,
        qs: &QueueShared,
        id: SourceId,
        high: bool,
        front: bool,
        claim: Option<WorkerId>,
    ) -> Option<bool> {
        let mut g = lock(&qs.q);
        if !g.alive {
            return None;
        }
        let dq = if high { &mut g.high } else { &mut g.regular };
        if front {
            dq.push_front(id);
        } else {
            dq.push_back(id);
        }
        qs.len.store(g.len() as u64, Ordering::Relaxed);
        qs.pushes
            .store(qs.pushes.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let claimed = claim.is_some_and(|w| self.claim_bit(w));
        drop(g);
        Some(claimed)
    }

    /// Shared mode: pushes a pinned source onto its registrar `r`'s own
    /// queue, claiming `r`'s idle bit under that queue's lock (as
    /// [`Scheduler::push_claim`] does). None if `r`'s queue is closed.
    pub(crate) fn push_pinned(&self, r: WorkerId, id: SourceId, high: bool) -> Option<bool> {
        self.push_onto(&self.pinned_q[r], id, high, false, Some(r))
    }

    /// Shared mode, after a push on the one queue: claims an idle worker
    /// to wake, the harvester `by` first when it may keep the event
    /// (`policy.rs`).
    fn wake_shared(&self, by: Option<WorkerId>) -> Option<WorkerId> {
        let first = self.awake_idle(by).and_then(|h| self.claim_idle(1u64 << h));
        let woken = first.or_else(|| self.claim_idle(u64::MAX));
        if let Some(v) = woken {
            Counters::add(&self.workers[v].counters.wakeups, 1);
        }
        woken
    }

    /// After pushing on `w`'s queue (`claimed`: its idle bit was taken by
    /// the push): the worker to wake, if any.
    ///
    /// **Stealing on demand.** When `w` is busy with a batch, what was just
    /// pushed waits behind it: with stealing on, one idle worker is woken to
    /// steal it, unless a thief is already searching (at most one at a time;
    /// a thief that finds more than it takes wakes the next, `steal.rs`).
    /// Nothing else wakes a thief: an idle server makes no wake-ups. The
    /// fence pairs with the one in [`Scheduler::prepare_park`]: either this
    /// push sees a thief's idle bit, or the thief sees this push.
    pub(crate) fn wake_after_push(&self, w: WorkerId, claimed: bool) -> Option<WorkerId> {
        let woken = if self.cfg.policy == Policy::Shared {
            self.claim_idle(u64::MAX)
        } else if claimed {
            Some(w)
        } else if self.workers[w].load.n_ret.load(Ordering::Relaxed) > 0 {
            Counters::add(&self.workers[w].counters.queued_behind, 1);
            if self.cfg.steal && !self.fifo_holds(w) {
                crate::sync::fence(Ordering::SeqCst);
                self.wake_thief(!(1u64 << w))
            } else {
                None
            }
        } else {
            None
        };
        if let Some(v) = woken {
            Counters::add(&self.workers[v].counters.wakeups, 1);
        }
        woken
    }

    /// Claims an idle worker among `allowed` as the one searching thief, if
    /// none searches yet.
    pub(crate) fn wake_thief(&self, allowed: u64) -> Option<WorkerId> {
        if self.idle.load(Ordering::SeqCst) & allowed == 0 {
            return None;
        }
        // u64::MAX reserves the searcher's place while an idle one is picked.
        if self
            .searching
            .compare_exchange(0, u64::MAX, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return None;
        }
        let v = self.claim_idle(allowed);
        self.searching
            .store(v.map_or(0, |v| v as u64 + 1), Ordering::SeqCst);
        v
    }

    /// Clears and returns one idle worker among `allowed`.
    pub(crate) fn claim_idle(&self, allowed: u64) -> Option<WorkerId> {
        let mut m = self.idle.load(Ordering::Acquire);
        loop {
            let cand = m & allowed;
            if cand == 0 {
                return None;
            }
            let b = cand.trailing_zeros();
            match self.idle.compare_exchange(
                m,
                m & !(1u64 << b),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Some(b as usize),
                Err(x) => m = x,
            }
        }
    }
}
