//! Work stealing (SKQ §4.3, ZygOS): an idle worker picks a random victim with
//! queued work, try-locks its queue and gives up at once if it is busy, scans
//! at most 2·k entries from the front (oldest first) and takes up to k,
//! skipping pinned sources and sources marked STOLEN. Stolen sources move to
//! the front of the thief's own queue with the STOLEN flag set, so a third
//! worker cannot take them again before the thief has processed them; the
//! flag is cleared when the thief releases them. Sources being processed are
//! never in a queue, so they cannot be stolen at all.

use crate::sched::Scheduler;
use crate::slot::{self, PHASE, QUEUED, STOLEN};
use crate::sync::{try_lock, Ordering};
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
    /// One steal attempt for `ctx`; returns how many sources moved to its queue.
    pub fn steal(&self, ctx: &mut WorkerCtx) -> usize {
        match self.try_steal(ctx) {
            Steal::Took(n) => n,
            _ => 0,
        }
    }

    /// One steal attempt, with its outcome.
    pub fn try_steal(&self, ctx: &mut WorkerCtx) -> Steal {
        let me = ctx.id;
        let n = self.queues.len();
        if !self.cfg.steal || n < 2 {
            return Steal::Empty;
        }
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
            let Some(mut g) = try_lock(&vq.q) else {
                return Steal::Busy;
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
