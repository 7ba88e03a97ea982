//! Elastic workers and cooperative checkpoints (QStack §3.2: "dynamic
//! detect" and "fastcalldown"), sans-I/O like the rest of the core.
//!
//! * Parking ([`Scheduler::park_worker`]) takes a worker out of the pool the
//!   way exit does: its queue is closed and drained, its queued sources are
//!   routed to live workers, its pinned sources are unpinned and reported.
//!   Unlike exit it keeps the [`WorkerCtx`], so [`Scheduler::rejoin`] can
//!   reopen the queue and put the worker back. A parked worker owns no queue
//!   entries and no sources; the driver must keep its thread asleep (no
//!   timers) until it rejoins. The last live worker never parks.
//! * [`ResourceManager`] decides how many workers should be active. The
//!   driver calls [`ResourceManager::tick`] with the time and the summed busy
//!   time of all workers; once per statistics period it compares demand (busy
//!   time per elapsed time, in workers) with the active count: it grows at
//!   once (to every worker when the active ones are saturated with a
//!   backlog queued), and shrinks
//!   only after `shrink_periods` periods in a row asked for fewer. It never
//!   goes below `min` or above `max`. Workers `0..active` are the active
//!   ones, so the same workers (and CPUs) stay in use.
//! * [`Scheduler::checkpoint`] is for a handler that runs long: it moves the
//!   caller's *queued* events to other workers (waking idle ones), never the
//!   sources of its in-flight batch, which stay BUSY and owned by the
//!   caller. With nothing queued it is one relaxed load.

use crate::config::{ConfigError, Policy, MAX_WORKERS};
use crate::rng::FastRng;
use crate::sched::Scheduler;
use crate::slot::QUEUED;
use crate::sync::{lock, Ordering};
use crate::types::{CoreError, ExitReport, Flags, Nanos, SourceId, WorkerId};
use crate::worker::{Counters, WorkerCtx};

impl Scheduler {
    /// Parks worker `ctx`: its batch is released, its queued work and pinned
    /// sources are handled exactly as at [`Scheduler::exit`], but the worker
    /// can [`Scheduler::rejoin`]. Refused (`BadWorker`) for a worker that is
    /// not live, and for the last live worker (somebody must run the work).
    pub fn park_worker(&self, ctx: &mut WorkerCtx, now: Nanos) -> Result<ExitReport, CoreError> {
        let bit = 1u64 << ctx.id;
        let mut cur = self.alive.load(Ordering::SeqCst);
        loop {
            if cur & bit == 0 || cur & !bit == 0 {
                return Err(CoreError::BadWorker(ctx.id));
            }
            match self
                .alive
                .compare_exchange(cur, cur & !bit, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
        self.parked.fetch_or(bit, Ordering::SeqCst);
        Ok(self.leave(ctx, now))
    }

    /// Puts a parked worker back: its queue reopens before it becomes
    /// eligible, so the first activation routed to it finds an open queue.
    /// Returns false if `ctx` was not parked.
    pub fn rejoin(&self, ctx: &mut WorkerCtx) -> bool {
        let bit = 1u64 << ctx.id;
        if self.parked.load(Ordering::SeqCst) & bit == 0 {
            return false;
        }
        let qs = &self.queues[self.qidx(ctx.id)];
        {
            let mut g = lock(&qs.q);
            g.alive = true;
        }
        if let Some(pq) = self.pinned_q.get(ctx.id) {
            lock(&pq.q).alive = true;
        }
        self.parked.fetch_and(!bit, Ordering::SeqCst);
        self.alive.fetch_or(bit, Ordering::SeqCst);
        true
    }

    /// Whether worker `w` is parked (left the pool, may rejoin).
    pub fn is_parked(&self, w: WorkerId) -> bool {
        w < self.cfg.workers && self.parked.load(Ordering::Acquire) & (1u64 << w) != 0
    }

    /// Workers live now (neither parked nor exited).
    pub fn live_workers(&self) -> usize {
        self.alive.load(Ordering::Acquire).count_ones() as usize
    }

    /// A cooperative checkpoint for a long handler on worker `ctx` (see
    /// [`Scheduler::checkpoint_as`]).
    pub fn checkpoint(&self, ctx: &mut WorkerCtx, now: Nanos) -> usize {
        self.checkpoint_as(ctx.id, now, &mut ctx.rng, &mut ctx.wakes)
    }

    /// The checkpoint for worker `me`, with its random stream and wake list
    /// passed separately (a runtime calls it from inside a handler, where the
    /// worker's context is borrowed by the wait loop). With nothing queued on
    /// `me` it returns 0 after one relaxed load. Otherwise every queued,
    /// unpinned event of `me` moves to the better of two other live workers
    /// (idle ones are claimed and listed in `wakes`); in shared mode, where
    /// the one queue is everyone's, an idle worker is woken instead. Sources
    /// in `me`'s in-flight batch are untouched. Returns the events moved
    /// (shared mode: 1 if a worker was woken).
    pub fn checkpoint_as(
        &self,
        me: WorkerId,
        now: Nanos,
        rng: &mut FastRng,
        wakes: &mut Vec<WorkerId>,
    ) -> usize {
        let qs = &self.queues[self.qidx(me)];
        if qs.len.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        if self.cfg.policy == Policy::Shared || self.queues.len() == 1 {
            return match self.claim_idle(!(1u64 << me)) {
                Some(v) => {
                    Counters::add(&self.workers[v].counters.wakeups, 1);
                    wakes.push(v);
                    1
                }
                None => 0,
            };
        }
        let others = self.alive.load(Ordering::Acquire) & !(1u64 << me);
        if others == 0 {
            return 0;
        }
        let mut moving: Vec<(SourceId, bool)> = Vec::new();
        {
            let mut g = lock(&qs.q);
            for high in [true, false] {
                let dq = if high { &mut g.high } else { &mut g.regular };
                dq.retain(|&id| {
                    let s = self.slot_of(id);
                    if s.load_if(id, QUEUED).is_none() {
                        return false; // stale: drop it while here
                    }
                    if s.flags().contains(Flags::PINNED) {
                        return true;
                    }
                    moving.push((id, high));
                    false
                });
            }
            qs.len.store(g.len() as u64, Ordering::Relaxed);
        }
        let mut moved = 0;
        for (i, &(id, high)) in moving.iter().enumerate() {
            let target = self.other_than(me, rng, now).and_then(|w| {
                let wake = self.push_claim(self.qidx(w), id, high, false)?;
                Some((w, wake))
            });
            match target {
                Some((w, claimed)) => {
                    moved += 1;
                    let s = self.slot_of(id);
                    s.last.store(w as u32, Ordering::Relaxed);
                    Counters::add(&self.workers[w].counters.mig_balance, 1);
                    if let Some(v) = self.wake_after_push(w, claimed) {
                        wakes.push(v);
                    }
                }
                None => {
                    // Nobody else can take it (they parked meanwhile): put
                    // this and the rest back, in their order.
                    let mut g = lock(&qs.q);
                    for &(id, high) in &moving[i..] {
                        let dq = if high { &mut g.high } else { &mut g.regular };
                        dq.push_back(id);
                    }
                    qs.len.store(g.len() as u64, Ordering::Relaxed);
                    break;
                }
            }
        }
        moved
    }

    /// The better (lower expected completion) of two random live workers
    /// other than `me`.
    fn other_than(&self, me: WorkerId, rng: &mut FastRng, now: Nanos) -> Option<WorkerId> {
        let n = self.cfg.workers;
        let alive = self.alive.load(Ordering::Acquire) & !(1u64 << me);
        if alive == 0 {
            return None;
        }
        let pick = |rng: &mut FastRng| {
            let start = rng.below(n);
            (0..n)
                .map(|i| (start + i) % n)
                .find(|&w| alive & (1u64 << w) != 0)
        };
        let a = pick(rng)?;
        let b = pick(rng).unwrap_or(a);
        let (ea, eb) = (
            self.expected_completion(a, now),
            self.expected_completion(b, now),
        );
        Some(if eb < ea { b } else { a })
    }

    /// Events queued on all queues now (relaxed reads).
    pub fn queued_total(&self) -> usize {
        self.queues
            .iter()
            .map(|q| q.len.load(Ordering::Relaxed) as usize)
            .sum()
    }

    /// Whether `id` sits on a queue now (for tests and introspection).
    pub fn is_queued(&self, id: SourceId) -> bool {
        self.slots
            .get(id.index() as usize)
            .is_some_and(|s| s.load_if(id, QUEUED).is_some())
    }
}

/// Settings of the resource manager.
#[derive(Clone, Debug, PartialEq)]
pub struct ElasticConfig {
    /// Fewest active workers (at least 1).
    pub min: usize,
    /// Most active workers (at most the scheduler's worker count).
    pub max: usize,
    /// Statistics period: how often demand is measured and acted on (ns).
    pub period_ns: Nanos,
    /// Busy fraction the active workers should run at: demand / target_util
    /// workers are wanted.
    pub target_util: f64,
    /// Busy fraction at or above which the active workers count as
    /// saturated (their busy time no longer shows the demand): grow to `max`.
    pub surge_util: f64,
    /// Periods in a row that must ask for fewer workers before shrinking.
    pub shrink_periods: u32,
    /// Shrinking aims at this busy fraction (below `target_util`: the gap is
    /// a hysteresis band, so a demand near a boundary does not flap).
    pub shrink_util: f64,
    /// Between periods, a backlog of this many queued events per active
    /// worker grows to `max` at once ([`ResourceManager::backlog`]); 0: off.
    pub backlog_per_worker: usize,
    /// How often the driver should look at the backlog (ns).
    pub backlog_check_ns: Nanos,
}

impl ElasticConfig {
    /// Between `min` and `max` workers, 20 ms periods, 75 % target busy
    /// fraction (60 % when shrinking), saturation at 90 %, shrink after 5
    /// periods (100 ms) in a
    /// row ask for fewer, to as many as the busiest of them needed: short
    /// periods measure few requests at low load, and one noisy low period
    /// must not take away a worker the load still needs.
    pub fn new(min: usize, max: usize) -> ElasticConfig {
        ElasticConfig {
            min,
            max,
            period_ns: 20_000_000,
            target_util: 0.75,
            surge_util: 0.9,
            shrink_periods: 5,
            shrink_util: 0.6,
            backlog_per_worker: 4,
            backlog_check_ns: 2_000_000,
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Conflict(m));
        if self.min == 0 || self.min > self.max {
            return bad(format!(
                "elastic workers: need 1 <= min ({}) <= max ({})",
                self.min, self.max
            ));
        }
        if self.max > MAX_WORKERS {
            return bad(format!(
                "elastic workers: max {} above {MAX_WORKERS}",
                self.max
            ));
        }
        if self.period_ns == 0 {
            return bad("elastic workers: the period must be positive".into());
        }
        let unit = |x: f64| x > 0.0 && x <= 1.0;
        let ok = unit(self.target_util)
            && unit(self.surge_util)
            && unit(self.shrink_util)
            && self.shrink_util <= self.target_util;
        if !ok {
            return bad(
                "elastic workers: utilisations must be in (0, 1], shrink_util <= target_util"
                    .into(),
            );
        }
        Ok(())
    }
}

/// One period's measurement and what it led to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// End of the period (driver's clock).
    pub at: Nanos,
    /// Demand measured over the period, in busy workers (NaN for a growth
    /// between periods on a backlog, [`ResourceManager::backlog`]).
    pub demand: f64,
    /// Active workers decided for the next period.
    pub active: usize,
}

/// Decides the active worker count from measured busy time (no I/O, time
/// passed in, so the simulator runs it unchanged).
#[derive(Clone, Debug)]
pub struct ResourceManager {
    cfg: ElasticConfig,
    active: usize,
    last: Option<(Nanos, u64)>,
    low_streak: u32,
    low_target: usize,
}

impl ResourceManager {
    /// Starts with `max` workers active (so a server that starts under load
    /// is not starved while the first period is measured).
    pub fn new(cfg: ElasticConfig) -> Result<ResourceManager, ConfigError> {
        cfg.validate()?;
        Ok(ResourceManager {
            active: cfg.max,
            cfg,
            last: None,
            low_streak: 0,
            low_target: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &ElasticConfig {
        &self.cfg
    }

    /// Workers that should be active now (workers `0..active`).
    pub fn active(&self) -> usize {
        self.active
    }

    /// Between periods: with `queued` events waiting and at least
    /// `backlog_per_worker` of them per active worker, grows to `max` at once
    /// and returns the new count (a load step must not wait for the period
    /// to end: every request that arrives meanwhile queues). The next
    /// period's measurement then says how many are needed.
    pub fn backlog(&mut self, queued: usize) -> Option<usize> {
        let per = self.cfg.backlog_per_worker;
        if per == 0 || self.active >= self.cfg.max || queued < per * self.active {
            return None;
        }
        self.active = self.cfg.max;
        self.low_streak = 0;
        Some(self.active)
    }

    /// Feeds the time, the busy time summed over all workers since the start
    /// (any monotonic counter, e.g. the sum of `WorkerStats::busy_ns`) and
    /// the events queued now. Returns a decision once a period has passed
    /// since the last one. Saturation (busy fraction at or above
    /// `surge_util`) with a backlog (at least one queued event per active
    /// worker) grows to `max` at once: the busy time of saturated workers
    /// no longer shows how much more is wanted. Saturation without a backlog
    /// is a burst the active workers absorbed: it only asks for
    /// demand / `target_util` workers like any other period.
    pub fn tick(&mut self, now: Nanos, busy_ns: u64, queued: usize) -> Option<Decision> {
        let Some((t0, b0)) = self.last else {
            self.last = Some((now, busy_ns));
            return None;
        };
        if now < t0 + self.cfg.period_ns {
            return None;
        }
        self.last = Some((now, busy_ns));
        let demand = busy_ns.saturating_sub(b0) as f64 / (now - t0) as f64;
        let util = demand / self.active as f64;
        let clamp = |x: f64| (x.ceil() as usize).clamp(self.cfg.min, self.cfg.max);
        let mut want = clamp(demand / self.cfg.target_util);
        if util >= self.cfg.surge_util && queued >= self.active {
            want = self.cfg.max;
        }
        if want < self.active {
            // Inside the hysteresis band: keep what we have.
            want = clamp(demand / self.cfg.shrink_util).min(self.active);
        }
        if want > self.active {
            self.active = want;
            self.low_streak = 0;
        } else if want < self.active {
            self.low_target = if self.low_streak == 0 {
                want
            } else {
                self.low_target.max(want)
            };
            self.low_streak += 1;
            if self.low_streak >= self.cfg.shrink_periods {
                self.active = self.low_target;
                self.low_streak = 0;
            }
        } else {
            self.low_streak = 0;
        }
        Some(Decision {
            at: now,
            demand,
            active: self.active,
        })
    }
}
