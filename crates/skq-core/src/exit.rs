//! Worker exit (its queued work re-routed, its pinned sources unpinned and
//! reported, nothing lost) and the counters read by drivers.

use crate::sched::{Reason, Scheduler};
use crate::slot::{self, Slot, FREE, PHASE, QUEUED};
use crate::sync::{lock, AtomicU64, Ordering};
use crate::types::{ExitReport, Flags, Migrations, Nanos, SourceId, WorkerId, WorkerStats};
use crate::worker::WorkerCtx;

impl Scheduler {
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
                    wakeups: r(&c.wakeups) + r(&c.kept),
                    queued_behind_busy: r(&c.queued_behind),
                    high_served: r(&c.high_served),
                    busy_ns: r(&c.busy_ns),
                    t_avg_ns: self.workers[w].t_avg(),
                    queued: if self.qidx(w) == w || w == 0 {
                        self.queued(w)
                    } else {
                        0
                    },
                    exited: !self.is_alive(w) && !self.is_parked(w),
                    parked: self.is_parked(w),
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
        let bit = 1u64 << ctx.id;
        self.alive.fetch_and(!bit, Ordering::SeqCst);
        self.parked.fetch_and(!bit, Ordering::SeqCst);
        self.leave(&mut ctx, now)
    }

    /// The part of leaving shared by exit and parking (`elastic.rs`): the
    /// caller has already cleared `ctx`'s alive bit.
    pub(crate) fn leave(&self, ctx: &mut WorkerCtx, now: Nanos) -> ExitReport {
        let me = ctx.id;
        let bit = 1u64 << me;
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
        if let Some(pq) = self.pinned_q.get(me) {
            // Shared mode: this worker's pinned queue closes with it; its
            // sources are unpinned below and go to the shared queue.
            let mut g = lock(&pq.q);
            g.alive = false;
            drained.extend(g.high.drain(..));
            drained.extend(g.regular.drain(..));
            pq.len.store(0, Ordering::Relaxed);
        }
        self.release(ctx, now);
        for id in drained {
            let s = self.slot_of(id);
            if s.load_if(id, QUEUED).is_none() {
                continue;
            }
            self.unpin_if_mine(id, s, me, &mut report);
            match self.route_with(
                id,
                s,
                None,
                now,
                &mut ctx.rng,
                crate::sched::Origin {
                    forced: Some(Reason::Exit),
                    ..Default::default()
                },
            ) {
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
        // Pinned sources of this worker that were idle or elsewhere: only
        // those it registered pinned are visited, never the whole table.
        let mine: Vec<u32> = lock(&self.pinned[me]).drain().collect();
        for i in mine {
            report.visited += 1;
            let s = self
                .slots
                .get(i as usize)
                .expect("a pinned source's slot exists");
            let w = s.state.load(Ordering::Acquire);
            if w & PHASE == FREE {
                continue;
            }
            let id = SourceId::new(i, slot::gen_of(w));
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
