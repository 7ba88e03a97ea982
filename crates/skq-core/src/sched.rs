//! The scheduler: registration, activation, waits, stealing and worker exit.
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

use crossbeam_utils::CachePadded;

use crate::config::{Config, ConfigError, Policy};
use crate::rng::FastRng;
use crate::slot::{self, Phase, Slot, BUSY, FREE, IDLE, NONE, PENDING, PHASE, QUEUED, STOLEN};
use crate::sync::{lock, AtomicU32, AtomicU64, Mutex, Ordering};
use crate::types::{
    Activation, CoreError, Event, ExitReport, Flags, Migrations, Nanos, Ready, SourceId, WorkerId,
    WorkerStats,
};
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

/// The shared scheduling state of one instance. `Send + Sync`.
pub struct Scheduler {
    pub(crate) cfg: Config,
    pub(crate) slots: Box<[Slot]>,
    free: Mutex<Vec<u32>>,
    next_slot: AtomicU32,
    pub(crate) queues: Box<[CachePadded<QueueShared>]>,
    pub(crate) workers: Box<[WorkerShared]>,
    /// Bit w set: worker w is (about to be) asleep and must be woken.
    idle: CachePadded<AtomicU64>,
    /// Bit w set: worker w has not exited.
    pub(crate) alive: AtomicU64,
    /// CPU → workers running on it.
    pub(crate) cpu_map: Vec<Vec<WorkerId>>,
    rr: AtomicU32,
}

impl Scheduler {
    /// Builds an instance; refuses an invalid configuration.
    pub fn new(cfg: Config) -> Result<Scheduler, ConfigError> {
        cfg.validate()?;
        let n = cfg.workers;
        let nq = if cfg.policy == Policy::Shared { 1 } else { n };
        let max_cpu = (0..n).map(|w| cfg.cpu_of(w)).max().unwrap_or(0) as usize;
        let mut cpu_map = vec![Vec::new(); max_cpu + 1];
        for w in 0..n {
            cpu_map[cfg.cpu_of(w) as usize].push(w);
        }
        Ok(Scheduler {
            slots: (0..cfg.capacity).map(|_| Slot::new()).collect(),
            free: Mutex::new(Vec::new()),
            next_slot: AtomicU32::new(0),
            queues: (0..nq)
                .map(|_| CachePadded::new(QueueShared::new()))
                .collect(),
            workers: (0..n).map(|_| WorkerShared::new()).collect(),
            idle: CachePadded::new(AtomicU64::new(0)),
            alive: AtomicU64::new(if n == 64 { u64::MAX } else { (1u64 << n) - 1 }),
            cpu_map,
            rr: AtomicU32::new(0),
            cfg,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
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
        let idx = match lock(&self.free).pop() {
            Some(i) => i,
            None => {
                let i = self.next_slot.fetch_add(1, Ordering::Relaxed);
                if i as usize >= self.slots.len() {
                    self.next_slot.fetch_sub(1, Ordering::Relaxed);
                    return Err(CoreError::Full(self.slots.len()));
                }
                i
            }
        };
        let s = &self.slots[idx as usize];
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
        s.token.store(token, Ordering::Relaxed);
        s.flags.store(flags.0, Ordering::Relaxed);
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
        lock(&self.free).push(id.index());
        Ok(())
    }

    /// Where `id` is in its life.
    pub fn phase(&self, id: SourceId) -> Phase {
        self.slot(id).map_or(Phase::Free, |s| s.phase(id))
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
        match self.route(id, s, cpu, now, rng) {
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
    fn park_orphan(&self, id: SourceId, s: &Slot) {
        let mut cur = s.state.load(Ordering::Acquire);
        while slot::gen_of(cur) == id.gen() && cur & PHASE == QUEUED {
            match s.cas(cur, slot::word(id.gen(), IDLE)) {
                Ok(_) => break,
                Err(w) => cur = w,
            }
        }
    }

    /// Chooses a worker for a source that just became QUEUED and pushes it.
    /// Returns (queue owner, worker to wake).
    fn route(
        &self,
        id: SourceId,
        s: &Slot,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
    ) -> Option<(WorkerId, Option<WorkerId>)> {
        self.route_with(id, s, cpu, now, rng, None)
    }

    pub(crate) fn route_with(
        &self,
        id: SourceId,
        s: &Slot,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
        forced: Option<Reason>,
    ) -> Option<(WorkerId, Option<WorkerId>)> {
        let high = s.flags().contains(Flags::HIGH_PRIORITY);
        for _ in 0..=self.cfg.workers {
            let (w, reason) = self.choose(s, cpu, now, rng)?;
            if let Some(claimed) = self.push_claim(self.qidx(w), id, high, false) {
                // Accounting only: a plain load and store (no locked RMW on
                // the activation path); a racing update just miscounts.
                let last = s.last.load(Ordering::Relaxed);
                s.last.store(w as u32, Ordering::Relaxed);
                if self.cfg.policy != Policy::Shared && last != NONE && last as usize != w {
                    let c = &self.workers[w].counters;
                    match forced.or(reason) {
                        Some(Reason::CpuFollow) => Counters::add(&c.mig_cpu, 1),
                        Some(Reason::Balance) => Counters::add(&c.mig_balance, 1),
                        Some(Reason::Exit) => Counters::add(&c.mig_exit, 1),
                        None => {}
                    }
                }
                return Some((self.qidx(w), self.wake_after_push(w, claimed)));
            }
            // The chosen worker exited between choice and push: choose again.
        }
        None
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
    fn push_claim(&self, q: usize, id: SourceId, high: bool, front: bool) -> Option<bool> {
        let qs = &self.queues[q];
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
        let claimed = if self.queues.len() == 1 {
            false // shared mode: any idle worker, chosen after the push
        } else {
            let bit = 1u64 << q;
            self.idle.load(Ordering::Relaxed) & bit != 0
                && self.idle.fetch_and(!bit, Ordering::AcqRel) & bit != 0
        };
        drop(g);
        Some(claimed)
    }

    /// After pushing on `w`'s queue (`claimed`: its idle bit was taken by
    /// the push): the worker to wake, if any.
    fn wake_after_push(&self, w: WorkerId, claimed: bool) -> Option<WorkerId> {
        let woken = if self.cfg.policy == Policy::Shared {
            self.claim_idle(u64::MAX)
        } else if claimed {
            Some(w)
        } else if self.cfg.steal
            && self.queues[w].len.load(Ordering::Relaxed) >= 2
            && self.idle.load(Ordering::Relaxed) & !(1u64 << w) != 0
        {
            // A backlog is forming on a busy worker: wake an idle one to steal
            // (a hint; idle thieves also retry every steal_retry_ns).
            self.claim_idle(!(1u64 << w))
        } else {
            None
        };
        if let Some(v) = woken {
            Counters::add(&self.workers[v].counters.wakeups, 1);
        }
        woken
    }

    /// Clears and returns one idle worker among `allowed`.
    fn claim_idle(&self, allowed: u64) -> Option<WorkerId> {
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

    // ---------------------------------------------------------------- waiting

    /// A worker's `wait()`: releases its previous batch, then fills `out`
    /// (cleared first) with at most `max` events from its own queues, stealing
    /// if stealing is on and they are empty. Returns the number delivered.
    pub fn wait(&self, ctx: &mut WorkerCtx, now: Nanos, out: &mut Vec<Event>, max: usize) -> usize {
        self.release(ctx, now);
        out.clear();
        let mut n = self.fill(ctx, out, max);
        if n == 0 && self.cfg.steal && self.steal(ctx) > 0 {
            n = self.fill(ctx, out, max);
        }
        self.record_return(ctx, now, n);
        n
    }

    /// Records a wait's return of `n` events at `now`: the start of the next
    /// processing interval. [`Scheduler::wait`] calls it; drivers that
    /// compose `release`/`fill`/`steal` themselves call it once per wait.
    pub fn record_return(&self, ctx: &mut WorkerCtx, now: Nanos, n: usize) {
        ctx.t_ret = now;
        ctx.n_ret = n;
        let l = &self.workers[ctx.id].load;
        l.t_ret.store(now, Ordering::Relaxed);
        l.n_ret.store(n as u64, Ordering::Relaxed);
        Counters::bump(&self.workers[ctx.id].counters.delivered, n as u64);
    }

    /// Releases the worker's in-flight batch (done implicitly by `wait`).
    /// Sources that became ready meanwhile are queued again; the workers to
    /// wake accumulate in `ctx.take_wakes()`.
    pub fn release(&self, ctx: &mut WorkerCtx, now: Nanos) {
        let w = &self.workers[ctx.id];
        if ctx.n_ret > 0 && now >= ctx.t_ret {
            let elapsed = now - ctx.t_ret;
            let per = elapsed as f64 / ctx.n_ret as f64;
            let old = w.t_avg();
            let t_avg = if old == 0.0 {
                per
            } else {
                old + ALPHA * (per - old)
            };
            w.load.t_avg.store(t_avg.to_bits(), Ordering::Relaxed);
            Counters::bump(&w.counters.busy_ns, elapsed);
        }
        ctx.n_ret = 0;
        w.load.n_ret.store(0, Ordering::Relaxed);
        let mut batch = std::mem::take(&mut ctx.batch);
        for id in batch.drain(..) {
            self.release_one(ctx, id, now);
        }
        ctx.batch = batch;
    }

    fn release_one(&self, ctx: &mut WorkerCtx, id: SourceId, now: Nanos) {
        let s = &self.slots[id.index() as usize];
        let mut cur = s.state.load(Ordering::Acquire);
        loop {
            if slot::gen_of(cur) != id.gen() || cur & PHASE != BUSY {
                return; // deregistered while in flight
            }
            let keep_ready = cur & !(slot::PHASE | PENDING | STOLEN) & !(u64::MAX << 32);
            let new = if cur & PENDING != 0 {
                slot::word(id.gen(), QUEUED | keep_ready)
            } else {
                slot::word(id.gen(), IDLE)
            };
            match s.cas(cur, new) {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
        if cur & PENDING != 0 {
            let cpu = Some(s.cpu.load(Ordering::Relaxed)).filter(|&c| c != NONE);
            match self.route(id, s, cpu, now, &mut ctx.rng) {
                Some((_, Some(v))) => ctx.wakes.push(v),
                Some((_, None)) => {}
                None => self.park_orphan(id, s),
            }
        }
    }

    /// Marks a source of the current batch as still having data (the handler
    /// stopped before `EAGAIN`): it is redelivered after release.
    pub fn still_ready(&self, ctx: &mut WorkerCtx, id: SourceId) {
        if !ctx.batch.contains(&id) {
            return;
        }
        let s = &self.slots[id.index() as usize];
        let mut cur = s.state.load(Ordering::Acquire);
        while slot::gen_of(cur) == id.gen() && cur & PHASE == BUSY {
            let new = slot::with_ready(cur | PENDING, Ready::READABLE);
            if new == cur {
                return;
            }
            match s.cas(cur, new) {
                Ok(_) => return,
                Err(x) => cur = x,
            }
        }
    }

    /// Batch size limit from `rtfreq`: about 1 / (t_avg · rtfreq) events.
    pub(crate) fn batch_cap(&self, w: WorkerId, max: usize) -> usize {
        if self.cfg.rtfreq == 0 {
            return max;
        }
        let t_avg = self.workers[w].t_avg();
        if t_avg <= 0.0 {
            return max;
        }
        let cap = 1e9 / (t_avg * self.cfg.rtfreq as f64);
        (cap.floor() as usize).clamp(1, max.max(1))
    }

    /// Moves up to `max` events from the worker's own queues into `out` and
    /// its in-flight batch: high priority first, at most `rtshare`% of the
    /// batch, then regular; leftover room takes further high-priority events
    /// (work conserving). Returns how many were added.
    pub fn fill(&self, ctx: &mut WorkerCtx, out: &mut Vec<Event>, max: usize) -> usize {
        if max == 0 {
            return 0;
        }
        let cap = self.batch_cap(ctx.id, max);
        let high_quota = (cap * self.cfg.rtshare as usize).div_ceil(100).max(1);
        let qs = &self.queues[self.qidx(ctx.id)];
        if qs.len.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        let start = out.len();
        let mut high_n = 0u64;
        let mut g = lock(&qs.q);
        let q = &mut *g;
        while out.len() - start < high_quota.min(cap) {
            let Some(id) = q.high.pop_front() else { break };
            if self.deliver(ctx, id, true, out) {
                high_n += 1;
            }
        }
        while out.len() - start < cap {
            let Some(id) = q.regular.pop_front() else {
                break;
            };
            self.deliver(ctx, id, false, out);
        }
        while out.len() - start < cap {
            let Some(id) = q.high.pop_front() else { break };
            if self.deliver(ctx, id, true, out) {
                high_n += 1;
            }
        }
        qs.len.store(q.len() as u64, Ordering::Relaxed);
        drop(g);
        Counters::bump(&self.workers[ctx.id].counters.high_served, high_n);
        out.len() - start
    }

    /// QUEUED -> BUSY for a popped entry; false for a stale entry.
    fn deliver(&self, ctx: &mut WorkerCtx, id: SourceId, high: bool, out: &mut Vec<Event>) -> bool {
        let s = &self.slots[id.index() as usize];
        let mut cur = s.state.load(Ordering::Acquire);
        loop {
            if slot::gen_of(cur) != id.gen() || cur & PHASE != QUEUED {
                return false;
            }
            let new = slot::word(id.gen(), BUSY | (cur & STOLEN));
            match s.cas(cur, new) {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
        s.last.store(ctx.id as u32, Ordering::Relaxed);
        out.push(Event {
            token: s.token.load(Ordering::Relaxed),
            source: id,
            ready: slot::ready_of(cur),
            high,
        });
        ctx.batch.push(id);
        true
    }

    // ---------------------------------------------------------------- parking

    /// Announces that worker `ctx` is about to sleep. Returns false (and stays
    /// awake) if work is already visible; otherwise the worker may sleep until
    /// woken. Pair with [`Scheduler::unpark`] after waking.
    pub fn prepare_park(&self, ctx: &WorkerCtx) -> bool {
        if ctx.has_wakes() {
            return false;
        }
        let bit = 1u64 << ctx.id;
        let qs = &self.queues[self.qidx(ctx.id)];
        // Under the queue lock: a concurrent push either sees our bit or we
        // see its entry (see `push_claim`).
        let g = lock(&qs.q);
        if g.len() > 0 {
            return false;
        }
        self.idle.fetch_or(bit, Ordering::AcqRel);
        drop(g);
        true
    }

    /// Clears the worker's idle bit (after a timeout or wake-up).
    pub fn unpark(&self, ctx: &WorkerCtx) {
        self.idle.fetch_and(!(1u64 << ctx.id), Ordering::SeqCst);
    }

    /// Whether a live worker other than `me` is busy (not parked): only a
    /// busy worker's queue can grow without waking anyone, so only then is
    /// there reason for an idle thief to look again later. A push to a
    /// parked worker wakes it instead.
    pub fn others_busy(&self, me: WorkerId) -> bool {
        let alive = self.alive.load(Ordering::Acquire);
        let idle = self.idle.load(Ordering::Acquire);
        alive & !idle & !(1u64 << me) != 0
    }

    /// Whether worker `w`'s queue holds anything.
    pub fn has_work(&self, w: WorkerId) -> bool {
        self.queued(w) > 0
    }

    /// Events queued on worker `w`'s queue (the shared queue in shared mode).
    pub fn queued(&self, w: WorkerId) -> usize {
        self.queues[self.qidx(w)].len.load(Ordering::Relaxed) as usize
    }

    /// Whether any worker is currently marked idle.
    pub fn any_idle(&self) -> bool {
        self.idle.load(Ordering::Relaxed) != 0
    }

    // ---------------------------------------------------------------- stats

    /// Counters of every worker.
    pub fn stats(&self) -> Vec<WorkerStats> {
        (0..self.cfg.workers)
            .map(|w| {
                let c = &self.workers[w].counters;
                let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
                WorkerStats {
                    delivered: r(&c.delivered),
                    steals_made: r(&c.steals_made),
                    steals_suffered: r(&c.steals_suffered),
                    migrations: Migrations {
                        cpu_follow: r(&c.mig_cpu),
                        balance: r(&c.mig_balance),
                        steal: r(&c.mig_steal),
                        exit: r(&c.mig_exit),
                    },
                    wakeups: r(&c.wakeups),
                    high_served: r(&c.high_served),
                    busy_ns: r(&c.busy_ns),
                    t_avg_ns: self.workers[w].t_avg(),
                    queued: if self.qidx(w) == w || w == 0 {
                        self.queued(w)
                    } else {
                        0
                    },
                    exited: !self.is_alive(w),
                }
            })
            .collect()
    }

    /// The paper's imbalance figure: (busiest − least busy) / busiest
    /// processing time over all workers that ever ran; 0 when idle.
    pub fn imbalance(&self) -> f64 {
        imbalance_of(&self.stats())
    }

    /// Exits worker `ctx`: its in-flight batch is released, its queued
    /// sources are rescheduled to live workers, and its pinned sources are
    /// unpinned (so nothing is lost) and listed in the report.
    pub fn exit(&self, mut ctx: WorkerCtx, now: Nanos) -> ExitReport {
        let me = ctx.id;
        let bit = 1u64 << me;
        self.alive.fetch_and(!bit, Ordering::SeqCst);
        self.idle.fetch_and(!bit, Ordering::SeqCst);
        let mut report = ExitReport::default();
        let mut drained = Vec::new();
        let last_alive = self.alive.load(Ordering::SeqCst) == 0;
        // Per-worker queues die with their worker; the shared queue lives on
        // unless this was the last worker.
        if self.queues.len() > 1 || last_alive {
            let qs = &self.queues[self.qidx(me)];
            let mut g = lock(&qs.q);
            g.alive = false;
            drained.extend(g.high.drain(..));
            drained.extend(g.regular.drain(..));
            qs.len.store(g.len() as u64, Ordering::Relaxed);
        }
        self.release(&mut ctx, now);
        for id in drained {
            let s = &self.slots[id.index() as usize];
            if s.load_if(id, QUEUED).is_none() {
                continue;
            }
            self.unpin_if_mine(id, s, me, &mut report);
            match self.route_with(id, s, None, now, &mut ctx.rng, Some(Reason::Exit)) {
                Some((_, wake)) => {
                    report.rescheduled += 1;
                    report.wakes.extend(wake);
                }
                None => {
                    // Keep it queued where it was so nothing is lost, and say so.
                    let qs = &self.queues[self.qidx(me)];
                    let mut g = lock(&qs.q);
                    g.regular.push_back(id);
                    qs.len.store(g.len() as u64, Ordering::Relaxed);
                    report.stranded.push((id, s.token.load(Ordering::Relaxed)));
                }
            }
        }
        // Pinned sources of this worker that were idle or elsewhere.
        let used = (self.next_slot.load(Ordering::Acquire) as usize).min(self.slots.len());
        for (i, s) in self.slots[..used].iter().enumerate() {
            let w = s.state.load(Ordering::Acquire);
            if w & PHASE == FREE {
                continue;
            }
            let id = SourceId::new(i as u32, slot::gen_of(w));
            self.unpin_if_mine(id, s, me, &mut report);
        }
        report.wakes.append(&mut ctx.wakes);
        report
    }

    fn unpin_if_mine(&self, id: SourceId, s: &Slot, me: WorkerId, report: &mut ExitReport) {
        let f = s.flags();
        if f.contains(Flags::PINNED) && s.registrar.load(Ordering::Relaxed) == me as u32 {
            s.flags.store(f.0 & !Flags::PINNED.0, Ordering::Relaxed);
            report.unpinned.push((id, s.token.load(Ordering::Relaxed)));
        }
    }
}

/// (max − min) / max of busy time over workers with any busy time.
pub fn imbalance_of(stats: &[WorkerStats]) -> f64 {
    let busy: Vec<u64> = stats.iter().map(|s| s.busy_ns).collect();
    let max = busy.iter().copied().max().unwrap_or(0);
    let min = busy.iter().copied().min().unwrap_or(0);
    if max == 0 {
        0.0
    } else {
        (max - min) as f64 / max as f64
    }
}
