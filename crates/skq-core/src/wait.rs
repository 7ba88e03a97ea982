//! A worker's side of the scheduler: `wait` (release the previous batch,
//! fill the next one: high priority first within `rtshare`, batch size
//! bounded by `rtfreq`), and the park handshake that makes sleeping safe
//! (see `sched.rs` for why it is done under the queue lock).

use crate::sched::{Scheduler, ALPHA};
use crate::slot::{self, BUSY, IDLE, NONE, PENDING, PHASE, QUEUED, STOLEN};
use crate::sync::{lock, Ordering};
use crate::types::{Event, Nanos, Ready, SourceId, WorkerId};
use crate::worker::{Counters, QueueShared, WorkerCtx};

impl Scheduler {
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
        // By index: `release_one` needs the context, and nothing it does
        // touches the batch.
        for i in 0..ctx.batch.len() {
            let id = ctx.batch[i];
            self.release_one(ctx, id, now);
        }
        ctx.batch.clear();
    }

    fn release_one(&self, ctx: &mut WorkerCtx, id: SourceId, now: Nanos) {
        let s = self.slot_of(id);
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
            let origin = crate::sched::Origin {
                by: Some(ctx.id),
                released: true,
                ..Default::default()
            };
            match self.route_with(id, s, cpu, now, &mut ctx.rng, origin) {
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
        let s = self.slot_of(id);
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
    ///
    /// The look at the lengths is inlined into the caller: most calls on
    /// the way to sleep, and the one after a poller's kept event, find
    /// nothing to take and return without a call.
    #[inline]
    pub fn fill(&self, ctx: &mut WorkerCtx, out: &mut Vec<Event>, max: usize) -> usize {
        let qs = &self.queues[self.qidx(ctx.id)];
        let pq = self.pinned_q.get(ctx.id);
        // Nothing queued (a wait on its way to sleep): no caps to compute.
        if max == 0
            || (qs.len.load(Ordering::Relaxed) == 0
                && pq.map_or(0, |q| q.len.load(Ordering::Relaxed)) == 0)
        {
            return 0;
        }
        self.fill_queued(ctx, out, max, qs, pq.map(|q| &**q))
    }

    /// [`Scheduler::fill`] once a queue of the worker's (`qs`, or its
    /// pinned queue `pq` in shared mode) holds something.
    #[inline(never)]
    fn fill_queued(
        &self,
        ctx: &mut WorkerCtx,
        out: &mut Vec<Event>,
        max: usize,
        qs: &QueueShared,
        pq: Option<&QueueShared>,
    ) -> usize {
        let cap = self.batch_cap(ctx.id, max);
        let high_quota = (cap * self.cfg.rtshare as usize).div_ceil(100).max(1);
        let start = out.len();
        if let Some(pq) = pq {
            // Shared mode: this worker's pinned sources first (only it may
            // run them), high priority before regular.
            if pq.len.load(Ordering::Relaxed) > 0 {
                let mut g = lock(&pq.q);
                while out.len() - start < cap {
                    let (id, high) = match g.high.pop_front() {
                        Some(id) => (id, true),
                        None => match g.regular.pop_front() {
                            Some(id) => (id, false),
                            None => break,
                        },
                    };
                    self.deliver(ctx, id, high, out);
                }
                pq.len.store(g.len() as u64, Ordering::Relaxed);
            }
        }
        if qs.len.load(Ordering::Relaxed) == 0 || out.len() - start >= cap {
            return out.len() - start;
        }
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
    pub(crate) fn deliver(
        &self,
        ctx: &mut WorkerCtx,
        id: SourceId,
        high: bool,
        out: &mut Vec<Event>,
    ) -> bool {
        let s = self.slot_of(id);
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
    ///
    /// With stealing on, a worker sleeps only after a complete steal attempt
    /// ([`Scheduler::steal`]) and only if no queue was pushed since it began
    /// (the push counts are read after a fence that pairs with the one in
    /// `wake_after_push`): work it could steal is never left behind a busy
    /// worker while it sleeps unwoken.
    pub fn prepare_park(&self, ctx: &WorkerCtx) -> bool {
        self.prepare_park_after(ctx, self.cfg.steal)
    }

    /// [`Scheduler::prepare_park`] after a pass that made a complete steal
    /// attempt (`looked`) or none (stealing off, or not in this regime:
    /// `Scheduler::fifo_holds`); only after an attempt are the push counts
    /// compared.
    pub(crate) fn prepare_park_after(&self, ctx: &WorkerCtx, looked: bool) -> bool {
        if ctx.has_wakes() {
            return false;
        }
        let bit = 1u64 << ctx.id;
        if let Some(pq) = self.pinned_q.get(ctx.id) {
            // Shared mode: announce the sleep under the pinned queue's lock
            // (a pinned push sees the bit or we see its entry), then look at
            // the shared queue under its own (a shared push happens after
            // our look and sees the bit, set before it).
            let g = lock(&pq.q);
            if g.len() > 0 {
                return false;
            }
            self.idle.fetch_or(bit, Ordering::AcqRel);
            drop(g);
            let g = lock(&self.queues[0].q);
            if g.len() > 0 {
                drop(g);
                self.unpark(ctx);
                return false;
            }
            return true;
        }
        let qs = &self.queues[self.qidx(ctx.id)];
        // Under the queue lock: a concurrent push either sees our bit or we
        // see its entry (see `push_claim`).
        let g = lock(&qs.q);
        if g.len() > 0 {
            return false;
        }
        self.idle.fetch_or(bit, Ordering::AcqRel);
        drop(g);
        if looked && self.queues.len() > 1 {
            crate::sync::fence(Ordering::SeqCst);
            if ctx.seen_pushes != Some(self.pushes_total()) {
                self.unpark(ctx);
                return false;
            }
        }
        true
    }

    /// Clears the worker's idle bit (after a timeout or wake-up).
    ///
    /// Only the worker sets its own bit, so a load that finds it clear saw
    /// the clear of whoever claimed it (a push, under the pushed queue's
    /// lock, or a kept event: `claim_bit`), and nothing sets it again
    /// before this worker does: the locked RMW is needed only while the bit
    /// is still set. (A harvester that keeps its event has cleared it.)
    /// The acquire load pairs with the claimer's release, as the RMW did.
    pub fn unpark(&self, ctx: &WorkerCtx) {
        let bit = 1u64 << ctx.id;
        if self.idle.load(Ordering::Acquire) & bit != 0 {
            self.idle.fetch_and(!bit, Ordering::SeqCst);
        }
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

    /// Events queued on worker `w`'s queue (in shared mode, the shared
    /// queue plus `w`'s pinned sources).
    pub fn queued(&self, w: WorkerId) -> usize {
        let pinned = self
            .pinned_q
            .get(w)
            .map_or(0, |q| q.len.load(Ordering::Relaxed));
        (self.queues[self.qidx(w)].len.load(Ordering::Relaxed) + pinned) as usize
    }

    /// Whether any worker is currently marked idle.
    pub fn any_idle(&self) -> bool {
        self.idle.load(Ordering::Relaxed) != 0
    }
}
