//! A worker's handle and its wait loop.
//!
//! `wait` does, in order: release the previous batch (redeliveries wake
//! their new owners); if no worker is blocked in `epoll_wait`, harvest
//! readiness without blocking; take a batch from the own queue; steal if
//! allowed and empty; otherwise sleep. A sleeping worker either becomes *the*
//! poller (blocks in `epoll_wait` on the shared epoll fd, so readiness is
//! harvested the moment it arrives) or, if another worker already polls,
//! parks on its own condition variable until someone queues work for it.
//! A poller that leaves with work to do promotes a parked follower, so there
//! is always a poller while any worker is idle (leader/follower).

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use skq_core::{Event, ExitReport, WorkerCtx, WorkerId};

use crate::sys::cpu::monotonic_ns;
use crate::{Skq, NONE};

/// A buffer of events filled by [`Worker::wait`].
#[derive(Debug)]
pub struct Events {
    pub(crate) inner: Vec<Event>,
    cap: usize,
}

impl Events {
    /// Room for at most `cap` events per wait (at least 1).
    pub fn with_capacity(cap: usize) -> Events {
        let cap = cap.max(1);
        Events {
            inner: Vec::with_capacity(cap),
            cap,
        }
    }

    /// The events of the last wait.
    pub fn iter(&self) -> std::slice::Iter<'_, Event> {
        self.inner.iter()
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the last wait returned nothing.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Capacity per wait.
    pub fn capacity(&self) -> usize {
        self.cap
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Event;
    type IntoIter = std::slice::Iter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.inner.iter()
    }
}

/// One worker thread's handle. Not `Sync`: exactly one thread waits on it.
/// Dropping it without [`Worker::exit`] exits it (its work is rescheduled).
pub struct Worker {
    skq: Arc<Skq>,
    ctx: Option<WorkerCtx>,
    ep_buf: Vec<skq_sys::epoll::Event>,
    wakes: Vec<WorkerId>,
    /// Whether this thread's `checkpoint()` context is installed.
    installed: bool,
}

impl Worker {
    pub(crate) fn new(skq: Arc<Skq>, ctx: WorkerCtx) -> Worker {
        Worker {
            skq,
            ctx: Some(ctx),
            ep_buf: Vec::with_capacity(256),
            wakes: Vec::new(),
            installed: false,
        }
    }

    /// This worker's index.
    pub fn id(&self) -> WorkerId {
        self.ctx.as_ref().map_or(usize::MAX, |c| c.id())
    }

    /// The shared instance.
    pub fn skq(&self) -> &Arc<Skq> {
        &self.skq
    }

    /// The worker's parts, borrowed separately: the shared instance (no
    /// `Arc` clone on the wait path: its reference count is one cache line
    /// every worker would bounce), its context, epoll buffer and owed wakes.
    fn parts(
        &mut self,
    ) -> (
        &Skq,
        &mut WorkerCtx,
        &mut Vec<skq_sys::epoll::Event>,
        &mut Vec<WorkerId>,
    ) {
        let Worker {
            skq,
            ctx,
            ep_buf,
            wakes,
            ..
        } = self;
        (
            skq,
            ctx.as_mut().expect("worker used after exit"),
            ep_buf,
            wakes,
        )
    }

    /// Releases the previous batch and returns the next one (at most
    /// `events.capacity()` events). Blocks until work arrives, `timeout`
    /// passes (then `Ok(0)`), or the instance shuts down (`Ok(0)`).
    ///
    /// Elastic workers: a worker whose index is at or above
    /// [`Skq::set_active`]'s target parks inside this call (sleeping through
    /// `timeout`) until it is wanted again or the instance shuts down.
    pub fn wait(&mut self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        if !self.installed {
            self.installed = true;
            crate::elastic::install(&self.skq, self.id());
        }
        let (skq, ctx, ep_buf, wakes) = self.parts();
        let core = &skq.core;
        let me = ctx.id();
        let bit = 1u64 << me;
        let start = monotonic_ns();
        core.release(ctx, start);
        flush_wakes(skq, ctx, wakes);
        events.inner.clear();
        let deadline = timeout.map(|t| start.saturating_add(t.as_nanos() as u64));
        // A lone worker has nobody to steal from. Idle thieves are woken on
        // demand (skq-core's `wake_after_push`); `steal_retry_ns` is an
        // optional safety-net timer, off (0) by default.
        let steal = core.config().steal && core.config().workers > 1;
        let retry = core.config().steal_retry_ns;
        // Whether this call already harvested (as the poller).
        let mut harvested = false;
        loop {
            if skq.is_shutdown() {
                core.record_return(ctx, monotonic_ns(), 0);
                return Ok(0);
            }
            if me >= skq.target.load(Ordering::Relaxed) && skq.park_until_wanted(ctx, wakes) {
                continue;
            }
            let cap = events.cap;
            let mut n = core.fill(ctx, &mut events.inner, cap);
            if n == 0 && steal && core.steal(ctx) > 0 {
                n = core.fill(ctx, &mut events.inner, cap);
            }
            if n > 0 {
                // About to work while nobody is blocked in epoll_wait:
                // harvest on the way (one non-blocking harvester at a time),
                // so readiness that arrived meanwhile is scheduled (possibly
                // onto other workers) while this batch runs. Skipped when
                // this call has just harvested as the poller, and when there
                // is nothing to run (the worker is about to poll anyway):
                // one epoll_wait per wake-up instead of two.
                if !harvested
                    && skq.poller.load(Ordering::Acquire) == NONE
                    && !skq.harvesting.swap(true, Ordering::AcqRel)
                {
                    let r = harvest(skq, ctx, ep_buf, Some(0));
                    skq.harvesting.store(false, Ordering::Release);
                    r?;
                }
                core.record_return(ctx, monotonic_ns(), n);
                return Ok(n);
            }
            let now = monotonic_ns();
            if deadline.is_some_and(|d| now >= d) {
                core.record_return(ctx, now, 0);
                return Ok(0);
            }
            if !core.prepare_park(ctx) {
                continue;
            }
            let mut sleep = deadline.map(|d| d - now);
            // The optional retry timer, only while another worker is busy:
            // parked workers' queues stay empty (a push wakes its target).
            if steal && retry > 0 && core.others_busy(me) {
                sleep = Some(sleep.map_or(retry, |s| s.min(retry)));
            }
            if skq
                .poller
                .compare_exchange(NONE, me, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                let r = harvest(skq, ctx, ep_buf, sleep);
                skq.woke();
                skq.poller.store(NONE, Ordering::SeqCst);
                core.unpark(ctx);
                r?;
                harvested = true;
                if core.has_work(me) {
                    // Leaving to work: a parked follower takes over polling.
                    skq.promote_follower(me);
                }
            } else {
                skq.sleepers.fetch_or(bit, Ordering::SeqCst);
                // The poller may have left after our CAS failed: re-check.
                if skq.poller.load(Ordering::SeqCst) != NONE && !skq.is_shutdown() {
                    skq.parkers[me].park(sleep);
                    skq.woke();
                }
                skq.sleepers.fetch_and(!bit, Ordering::SeqCst);
                core.unpark(ctx);
            }
        }
    }

    /// Releases the previous batch now (before the next `wait`).
    pub fn release(&mut self) {
        let (skq, ctx, _, wakes) = self.parts();
        skq.core.release(ctx, monotonic_ns());
        flush_wakes(skq, ctx, wakes);
    }

    /// Says the handler of `ev` stopped before `EAGAIN`: the source is
    /// redelivered after release even if no new readiness arrives.
    pub fn still_ready(&mut self, ev: &Event) {
        let (skq, ctx, _, _) = self.parts();
        skq.core.still_ready(ctx, ev.source);
    }

    /// Leaves the pool: queued and in-flight work goes to other workers;
    /// pinned sources are unpinned and listed in the report.
    pub fn exit(mut self) -> ExitReport {
        self.do_exit()
    }

    fn do_exit(&mut self) -> ExitReport {
        let Some(ctx) = self.ctx.take() else {
            return ExitReport::default();
        };
        let me = ctx.id();
        if self.installed {
            crate::elastic::uninstall(&self.skq, me);
        }
        let report = self.skq.core.exit(ctx, monotonic_ns());
        for &w in &report.wakes {
            self.skq.wake(w, me);
        }
        // If we were the only one awake, somebody must poll now.
        self.skq.promote_follower(me);
        report
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.ctx.is_some() {
            let _ = self.do_exit();
        }
    }
}

/// Wakes every worker `ctx` owes a wake-up (redeliveries at release).
fn flush_wakes(skq: &Skq, ctx: &mut WorkerCtx, wakes: &mut Vec<WorkerId>) {
    let me = ctx.id();
    ctx.drain_wakes_into(wakes);
    for w in wakes.drain(..) {
        skq.wake(w, me);
    }
}

/// Non-blocking (timeout 0) or blocking harvest of the shared epoll fd.
fn harvest(
    skq: &Skq,
    ctx: &mut WorkerCtx,
    ep_buf: &mut Vec<skq_sys::epoll::Event>,
    timeout_ns: Option<u64>,
) -> io::Result<()> {
    if skq.epoll.wait_ns(ep_buf, timeout_ns)? > 0 {
        let me = ctx.id();
        skq.activate_all(ep_buf.as_mut_slice(), me, ctx.rng());
    }
    Ok(())
}
