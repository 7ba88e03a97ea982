//! Work stealing (SKQ §4.3, ZygOS): an idle worker picks a random victim with
//! queued work, try-locks its queue and gives up at once if it is busy, scans
//! at most 2·k entries from the front (oldest first) and takes up to k,
//! skipping pinned sources and sources marked STOLEN. Stolen sources move to
//! the front of the thief's own queue with the STOLEN flag set, so a third
//! worker cannot take them again before the thief has processed them; the
//! flag is cleared when the thief releases them. Sources being processed are
//! never in a queue, so they cannot be stolen at all.
//!
//! **On demand, not on a timer.** An idle worker sleeps until something
//! wakes it; a push that leaves work queued behind a busy worker wakes one
//! idle thief (`Scheduler::wake_after_push`). At most one woken thief
//! searches at a time (`Scheduler::searching`); when its attempt is over it
//! gives the role up, and if it took something while more waits behind busy
//! workers it wakes the next thief (a chain, one wake-up per steal). Before
//! each attempt a thief notes the sum of all queues' push counts; it parks
//! only if that sum is unchanged after it announced its sleep (with the
//! pusher's fence, no push it could steal is missed). So a stealable event
//! waits for at most one wake-up and one steal attempt, unless the victim's
//! lock was held at that moment (the thief then tries again at once, and
//! that second attempt waits for the lock rather than spinning on it).
//!
//! **Not where the kernel's list is the queue.** Where readiness nobody
//! polls stays in the kernel's FIFO (`Scheduler::fifo_holds`: one set every
//! idle worker polls, events of 20 µs or more) an idle worker polls rather
//! than steals and a push behind such a worker wakes no thief: the first
//! worker to free takes the oldest readiness, and a steal would only make
//! the thief busy for an event while newer readiness waits. A worker woken
//! as the thief (holding the search role) steals all the same, since its
//! victim was outside that regime.

use crate::sched::Scheduler;
use crate::slot::{self, PHASE, QUEUED, STOLEN};
use crate::sync::{lock, try_lock, Ordering};
use crate::types::{Flags, SourceId};
use crate::worker::{Counters, WorkerCtx};

/// Outcome of one steal attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Steal {
    /// No other worker had queued work.
    Empty,
    /// The victim's queue was locked; gave up at once.
    Busy,
    /// Scanned, but nothing was stealable (pinned, stolen or stale).
    Nothing,
    /// Took this many sources.
    Took(usize),
}

impl Scheduler {
    /// One steal attempt for `ctx`; returns how many sources moved to its
    /// queue. Gives up the searching role if `ctx` held it, and wakes the
    /// next thief (owed in `ctx`'s wakes) if work is still queued behind a
    /// busy worker.
    pub fn steal(&self, ctx: &mut WorkerCtx) -> usize {
        let me = ctx.id;
        let outcome = self.try_steal(ctx);
        let _ =
            self.searching
                .compare_exchange(me as u64 + 1, 0, Ordering::SeqCst, Ordering::SeqCst);
        match outcome {
            Steal::Took(n) => {
                if self.backlog_behind_busy(me) {
                    if let Some(v) = self.wake_thief(!(1u64 << me)) {
                        Counters::add(&self.workers[v].counters.wakeups, 1);
                        ctx.wakes.push(v);
                    }
                }
                n
            }
            _ => 0,
        }
    }

    /// Sum of every queue's push count (see `QueueShared::pushes`).
    pub(crate) fn pushes_total(&self) -> u64 {
        self.queues
            .iter()
            .map(|q| q.pushes.load(Ordering::SeqCst))
            .sum()
    }

    /// Whether a worker other than `me` is busy with a batch while events
    /// wait in its queue.
    pub(crate) fn backlog_behind_busy(&self, me: usize) -> bool {
        (0..self.queues.len()).any(|v| {
            v != me
                && self.queues[v].len.load(Ordering::Relaxed) > 0
                && self.workers[v].load.n_ret.load(Ordering::Relaxed) > 0
        })
    }

    /// One steal attempt, with its outcome.
    pub fn try_steal(&self, ctx: &mut WorkerCtx) -> Steal {
        let me = ctx.id;
        let n = self.queues.len();
        let blocked = std::mem::take(&mut ctx.steal_blocked);
        if !self.cfg.steal || n < 2 {
            return Steal::Empty;
        }
        // Noted before the scan: a push after this point is either seen by
        // the scan or makes `prepare_park` refuse to sleep.
        ctx.seen_pushes = Some(self.pushes_total());
        let start = ctx.rng.below(n);
        let Some(victim) = (0..n)
            .map(|i| (start + i) % n)
            .find(|&v| v != me && self.queues[v].len.load(Ordering::Relaxed) > 0)
        else {
            return Steal::Empty;
        };
        let k = self.cfg.steal_k;
        let mut taken: [(SourceId, bool); 8] = [(SourceId(0), false); 8];
        let mut nt = 0;
        {
            let vq = &self.queues[victim];
            // A first attempt gives up at once on a locked queue; the
            // attempt after it waits for the lock, so a thief whose victim
            // holds its lock while preempted sleeps on the lock instead of
            // spinning through its time slice (loom found the spin).
            let mut g = if blocked {
                lock(&vq.q)
            } else {
                let Some(g) = try_lock(&vq.q) else {
                    // Not a complete look: the caller must not sleep on it.
                    ctx.seen_pushes = None;
                    ctx.steal_blocked = true;
                    return Steal::Busy;
                };
                g
            };
            let mut budget = 2 * k;
            for high in [true, false] {
                let dq = if high { &mut g.high } else { &mut g.regular };
                let mut i = 0;
                while i < dq.len() && budget > 0 && nt < k {
                    budget -= 1;
                    let id = dq[i];
                    let s = self.slot_of(id);
                    let mut cur = s.state.load(Ordering::Acquire);
                    let mut take = false;
                    loop {
                        if slot::gen_of(cur) != id.gen() || cur & PHASE != QUEUED {
                            // Stale entry (deregistered): drop it while here.
                            dq.remove(i);
                            break;
                        }
                        if cur & STOLEN != 0
                            || s.flags().contains(Flags::PINNED)
                            || !self.may_steal(me, s)
                        {
                            break;
                        }
                        match s.cas(cur, cur | STOLEN) {
                            Ok(_) => {
                                take = true;
                                break;
                            }
                            Err(x) => cur = x,
                        }
                    }
                    if take {
                        dq.remove(i);
                        taken[nt] = (id, high);
                        nt += 1;
                    } else if slot::gen_of(cur) == id.gen() && cur & PHASE == QUEUED {
                        i += 1;
                    }
                }
            }
            vq.len.store(g.len() as u64, Ordering::Relaxed);
        }
        if nt == 0 {
            return Steal::Nothing;
        }
        // Front of our own queue, original order kept.
        for &(id, high) in taken[..nt].iter().rev() {
            if !self.push(self.qidx(me), id, high, true) {
                // We are exiting: hand them back to the victim.
                self.push(victim, id, high, false);
            }
        }
        for &(id, _) in &taken[..nt] {
            self.slot_of(id).last.store(me as u32, Ordering::Relaxed);
        }
        let c = &self.workers[me].counters;
        Counters::bump(&c.steals_made, nt as u64);
        Counters::add(&c.mig_steal, nt as u64);
        Counters::add(&self.workers[victim].counters.steals_suffered, nt as u64);
        Steal::Took(nt)
    }
}
