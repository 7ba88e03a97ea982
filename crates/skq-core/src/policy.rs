//! Where an activation goes: the policies of SKQ §3 as one function.
//!
//! * vanilla: the home assigned round-robin at registration;
//! * shared: the one queue;
//! * queue affinity: the worker of the CPU where the source first fired;
//! * CPU affinity: a worker on the CPU that saw the latest readiness,
//!   following the flow when that CPU changes;
//!
//!   (queue and CPU affinity map a CPU hint to a worker through the
//!   topology tree: that CPU, an SMT sibling, the same LLC, the same node,
//!   else spread over all live workers by a per-source salt; `cpumap.rs`)
//! * best of two: the lower expected completion time
//!   `E = t_free + t_avg·n_cur` of two random live workers, where `t_free`
//!   is when the worker's current batch should end: `now` for an idle
//!   worker, `t_ret + t_avg·n_ret` while that is still ahead, and
//!   `now + t_avg` for a worker past it. SKQ's formula clamps the last
//!   case to `now` (a stalled worker is not credited with finishing in the
//!   past), which ties an overdue worker with an idle one; with service
//!   times that vary (exponential, bimodal) a worker past its average is
//!   the likeliest to be in a long event, and the tie queued events behind
//!   it (and woke a thief to fetch them). Expecting one more event's time
//!   is the memoryless estimate;
//! * hybrid: the CPU-affinity choice unless a best-of-two rival's E plus the
//!   cache-miss penalty is still lower. The penalty is charged to the rival,
//!   the side that would pay the cache misses (the paper's meaning).
//!
//! Pinned sources go to their registering worker while it lives.
//!
//! **The worker already awake.** With several pollers per readiness set
//! (`Config::pollers` ≠ 1) the kernel wakes one blocked worker per
//! readiness, and that worker (the harvester, still idle while it
//! activates) may keep the event instead of waking another: under queue
//! and CPU affinity when it is a candidate of the nearest level (it runs on
//! the hinted CPU or as near as the chosen worker), under best of two
//! always (an idle worker's E is the least possible), under hybrid when the
//! local choice is asleep or the harvester's E plus the penalty is lower
//! (a wake-up costs more than the cache misses), under shared always. Only
//! one event per harvest goes this way: the first push claims the
//! harvester's idle bit. Vanilla and pinned sources keep their worker.
//!
//! **The worker that released it.** A redelivery (readiness that came while
//! the source was processed, routed at its release) has one more candidate:
//! the releaser, free by then and with the source's data in its cache. Under
//! best of two it is compared with the sampled pair; under hybrid it is the
//! awake candidate when no harvester is, kept when the local choice is
//! asleep and the releaser's own queue is empty. Before, with the releaser
//! not asleep and the local choice busy, the redelivery was queued behind
//! the busy worker, which woke a thief to fetch it.
//!
//! **High priority harvested.** Readiness that a worker harvests inside its
//! `wait` call ([`Scheduler::activate_harvested`]) finds that worker free:
//! its next fill takes high-priority events before anything queued. Under
//! best of two and hybrid a high-priority source so harvested goes to the
//! harvester while no other worker is idle. Otherwise, with every worker
//! busy (the only time nobody is blocked in the set to take it at once),
//! the choice fell on the local or a sampled worker, and the event waited
//! there for that worker's current event: a whole service time, however
//! high its class (SKQ §6.8's probe grew with load like a regular one).
//! With an idle worker the policy's own choice stands (it prefers the idle),
//! so a burst of high-priority readiness is not piled on one harvester.

use crate::config::Policy;
use crate::rng::FastRng;
use crate::sched::{Origin, Reason, Scheduler};
use crate::slot::{Slot, NONE};
use crate::sync::Ordering;
use crate::types::{Flags, Nanos, WorkerId};

impl Scheduler {
    /// Expected completion time of worker `w`'s queue at `now` (ns): when
    /// its current batch should end, plus `t_avg` per queued event. A
    /// worker past its batch's expected end is expected to need one more
    /// event's time (see the module documentation).
    pub fn expected_completion(&self, w: WorkerId, now: Nanos) -> f64 {
        let l = &self.workers[w].load;
        let t_avg = self.workers[w].t_avg();
        let t_ret = l.t_ret.load(Ordering::Relaxed) as f64;
        let n_ret = l.n_ret.load(Ordering::Relaxed) as f64;
        let n_cur = self.queues[self.qidx(w)].len.load(Ordering::Relaxed) as f64;
        let now = now as f64;
        let batch_end = t_ret + t_avg * n_ret;
        let free_at = if n_ret == 0.0 {
            now
        } else if batch_end > now {
            batch_end
        } else {
            now + t_avg
        };
        free_at + t_avg * n_cur
    }

    /// E with queue length as tie-breaker (before any t_avg is known every E
    /// equals `now`).
    fn better(&self, a: WorkerId, b: WorkerId, now: Nanos) -> WorkerId {
        let (ea, eb) = (
            self.expected_completion(a, now),
            self.expected_completion(b, now),
        );
        if ea < eb || (ea == eb && self.queued(a) <= self.queued(b)) {
            a
        } else {
            b
        }
    }

    /// A uniformly random live worker.
    pub(crate) fn random_live(&self, rng: &mut FastRng) -> Option<WorkerId> {
        let n = self.cfg.workers;
        let start = rng.below(n);
        (0..n).map(|i| (start + i) % n).find(|&w| self.is_alive(w))
    }

    /// Best of two random live workers (distinct when two are alive).
    pub(crate) fn best_of_two(&self, rng: &mut FastRng, now: Nanos) -> Option<WorkerId> {
        let a = self.random_live(rng)?;
        let n = self.cfg.workers;
        let b = if n > 1 {
            let start = a + 1 + rng.below(n - 1);
            (0..n - 1)
                .map(|i| (start + i) % n)
                .find(|&w| w != a && self.is_alive(w))
                .unwrap_or(a)
        } else {
            a
        };
        Some(self.better(a, b, now))
    }

    /// Index of a slot in the table (spreads sources over a CPU's workers).
    fn slot_index(&self, s: &Slot) -> u32 {
        s.index.load(Ordering::Relaxed)
    }

    /// The worker for a CPU hint on `cpu`, through the topology tree (see
    /// `cpumap.rs`): `home` wins if it is a live candidate of the nearest
    /// level, else the `salt`-th candidate. `None` only with no live worker.
    #[inline]
    fn worker_on_cpu(
        &self,
        cpu: u32,
        prefer: Option<WorkerId>,
        home: u32,
        salt: u32,
    ) -> Option<WorkerId> {
        let sticky = (home != NONE).then_some(home as usize);
        let alive = self.alive.load(Ordering::Acquire);
        self.cpu_map
            .route_preferring(cpu, prefer, sticky, salt, alive)
            .map(|(w, _)| w)
    }

    /// The harvesting worker `by`, if it may keep the event it activates:
    /// several pollers share its set and it is still idle (no earlier event
    /// of this harvest claimed it).
    #[inline]
    pub(crate) fn awake_idle(&self, by: Option<WorkerId>) -> Option<WorkerId> {
        by.filter(|&h| {
            self.cfg.pollers != 1
                && h < self.cfg.workers
                && self.idle.load(Ordering::Relaxed) & (1u64 << h) != 0
                && self.is_alive(h)
        })
    }

    /// The worker `by` that just released a source ready again
    /// (`released`), if it is alive: it is free now, its E is its own
    /// queue's, and keeping the source costs no wake-up.
    #[inline]
    fn releaser(&self, by: Option<WorkerId>, released: bool) -> Option<WorkerId> {
        by.filter(|&r| released && r < self.cfg.workers && self.is_alive(r))
    }

    /// The harvester `by` for a high-priority source it harvested inside
    /// its `wait` call (`harvest`), if it is alive and no other worker is
    /// idle ("High priority harvested" above).
    #[inline]
    fn high_harvester(&self, s: &Slot, by: Option<WorkerId>, harvest: bool) -> Option<WorkerId> {
        by.filter(|&h| {
            harvest
                && h < self.cfg.workers
                && s.flags().contains(Flags::HIGH_PRIORITY)
                && self.idle.load(Ordering::Relaxed) & !(1u64 << h) == 0
                && self.is_alive(h)
        })
    }

    /// Whether worker `w` is idle (asleep or about to be): waking it costs a
    /// wake-up.
    #[inline]
    fn asleep(&self, w: WorkerId) -> bool {
        self.idle.load(Ordering::Relaxed) & (1u64 << w) != 0
    }

    /// Locality choice (queue or CPU affinity), updating the slot's home.
    fn local_choice(
        &self,
        s: &Slot,
        cpu: Option<u32>,
        follow: bool,
        prefer: Option<WorkerId>,
    ) -> Option<(WorkerId, Option<Reason>)> {
        let home = s.home.load(Ordering::Relaxed);
        let home_alive = home != NONE && self.is_alive(home as usize);
        let homed = s.homed.load(Ordering::Relaxed) != 0;
        let (w, reason) = match (cpu, home_alive) {
            // CPU affinity follows every hint; queue affinity takes the first
            // one (where the source first fired) and keeps it. Only a home
            // chosen by an earlier hint is sticky within a CPU's workers; a
            // registrar's provisional home is not.
            (Some(c), _) if follow || !homed || !home_alive => {
                let sticky = if homed { home } else { NONE };
                let w = self.worker_on_cpu(c, prefer, sticky, self.slot_index(s))?;
                if !homed {
                    s.homed.store(1, Ordering::Relaxed);
                }
                // Moving to the awake harvester at the same level is no
                // migration of the flow: it did not change CPU.
                let moved = homed && home_alive && w != home as usize && Some(w) != prefer;
                (w, moved.then_some(Reason::CpuFollow))
            }
            (_, true) => (home as usize, None),
            (_, false) => (self.round_robin()?, (home != NONE).then_some(Reason::Exit)),
        };
        if w as u32 != home {
            let reason = if home != NONE && !home_alive {
                Some(Reason::Exit)
            } else {
                reason
            };
            s.home.store(w as u32, Ordering::Relaxed);
            return Some((w, reason));
        }
        Some((w, reason))
    }

    /// Picks the worker for a source about to be queued (`origin`: who
    /// asks, `Scheduler::route_with`).
    pub(crate) fn choose(
        &self,
        s: &Slot,
        cpu: Option<u32>,
        now: Nanos,
        rng: &mut FastRng,
        origin: Origin,
    ) -> Option<(WorkerId, Option<Reason>)> {
        let Origin {
            by,
            released,
            harvest,
            ..
        } = origin;
        if s.flags().contains(Flags::PINNED) {
            let r = s.registrar.load(Ordering::Relaxed);
            if r != NONE && self.is_alive(r as usize) {
                return Some((r as usize, None));
            }
        }
        if self.lone() {
            // Nothing to choose between (`worker_loop.rs`).
            return self.is_alive(0).then_some((0, None));
        }
        match self.cfg.policy {
            Policy::Shared => Some((self.random_live(rng)?, None)),
            Policy::Vanilla => {
                let home = s.home.load(Ordering::Relaxed);
                if home != NONE && self.is_alive(home as usize) {
                    Some((home as usize, None))
                } else {
                    let w = self.round_robin()?;
                    s.home.store(w as u32, Ordering::Relaxed);
                    Some((w, Some(Reason::Exit)))
                }
            }
            Policy::Queue => self.local_choice(s, cpu, false, self.awake_idle(by)),
            Policy::Cpu => self.local_choice(s, cpu, true, self.awake_idle(by)),
            Policy::Best2 | Policy::Hybrid if self.high_harvester(s, by, harvest).is_some() => {
                Some((by?, Some(Reason::Balance)))
            }
            Policy::Best2 => {
                let pick = match (self.awake_idle(by), self.releaser(by, released)) {
                    (Some(h), _) => h,
                    (None, Some(r)) => self.better(r, self.best_of_two(rng, now)?, now),
                    (None, None) => self.best_of_two(rng, now)?,
                };
                Some((pick, Some(Reason::Balance)))
            }
            Policy::Hybrid => {
                let awake = self.awake_idle(by).or(self.releaser(by, released));
                let (local, reason) = self.local_choice(s, cpu, true, awake)?;
                if let Some(h) =
                    awake.filter(|&h| h != local && self.asleep(local) && self.queued(h) == 0)
                {
                    // Both idle: the awake one takes it rather than waking
                    // the local one (a wake-up costs more than the penalty).
                    return Some((h, Some(Reason::Balance)));
                }
                // An awake idle harvester is the least-loaded rival there is.
                let rival = match awake {
                    Some(h) => h,
                    None => self.best_of_two(rng, now)?,
                };
                // The rival is often the local choice itself (an idle
                // harvester on the flow's CPU): nothing to compare then.
                if rival == local {
                    return Some((local, reason));
                }
                let penalty = self.cfg.penalty_ns as f64;
                let (e_rival, e_local) = (
                    self.expected_completion(rival, now),
                    self.expected_completion(local, now),
                );
                if e_rival + penalty < e_local {
                    Some((rival, Some(Reason::Balance)))
                } else {
                    Some((local, reason))
                }
            }
        }
    }
}
