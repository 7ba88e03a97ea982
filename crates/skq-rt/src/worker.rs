//! A worker's handle and the executor of its wait loop.
//!
//! What a worker does next (deliver, harvest on the way, block in
//! `epoll_wait` as the poller, park as a follower, park as elastic surplus)
//! is decided by skq-core's worker loop (`Scheduler::next_step`, whose
//! module docs give the protocol); `Worker::wait` executes each step with
//! the shared epoll fd, its eventfd doorbell and the worker's parker, and
//! wakes the workers the core names, by the means it names.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use skq_core::{Done, Event, ExitReport, Readiness, Step, WorkerCtx, WorkerId};

use crate::sys::cpu::monotonic_ns;
use crate::Skq;

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

/// What a worker's elastic hook ([`Worker::on_elastic`]) is told, on the
/// worker's own thread, inside [`Worker::wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElasticEvent {
    /// The worker left the pool as elastic surplus and is about to sleep:
    /// its queued work and pinned sources have gone to other workers, and
    /// no new activation chooses it. Whatever else it owns (a runtime's
    /// timers) should move now; it sleeps until it is wanted again.
    Parking,
    /// The worker is back in the pool (or the instance is shutting down):
    /// its queue is open again. Sources it had registered `PINNED` were
    /// unpinned when it parked; the hook may pin them again
    /// ([`crate::VirtualSource::modify`]).
    Rejoined,
}

/// The hook a runtime built on [`Worker`] installs to follow its worker's
/// elastic parking ([`Worker::on_elastic`]).
type ElasticHook = Box<dyn FnMut(ElasticEvent) + Send>;

/// [`Worker::parts`].
type Parts<'a> = (
    &'a Skq,
    &'a mut WorkerCtx,
    &'a mut Vec<skq_sys::epoll::Event>,
    &'a mut Vec<WorkerId>,
    &'a mut Option<ElasticHook>,
    Option<&'a skq_sys::signal::PollMask>,
);

/// One worker thread's handle. Not `Sync`: exactly one thread waits on it.
/// Dropping it without [`Worker::exit`] exits it (its work is rescheduled).
pub struct Worker {
    skq: Arc<Skq>,
    ctx: Option<WorkerCtx>,
    ep_buf: Vec<skq_sys::epoll::Event>,
    wakes: Vec<WorkerId>,
    /// Whether this thread's `checkpoint()` context is installed.
    installed: bool,
    hook: Option<ElasticHook>,
    /// How the blocking polls let the wake-up signal in, for the thread
    /// armed as `.0` (`THREAD_ARMED`); looked up again when the worker
    /// runs on another thread (`Worker::poll_mask`).
    mask: Option<(u64, skq_sys::signal::PollMask)>,
}

impl Worker {
    pub(crate) fn new(skq: Arc<Skq>, ctx: WorkerCtx) -> Worker {
        Worker {
            skq,
            ctx: Some(ctx),
            ep_buf: Vec::with_capacity(256),
            wakes: Vec::new(),
            installed: false,
            hook: None,
            mask: None,
        }
    }

    /// Installs the hook told when this worker parks as elastic surplus and
    /// when it rejoins ([`ElasticEvent`]; it replaces an earlier one). It
    /// runs on the worker's thread inside [`Worker::wait`], with no lock of
    /// skq's held; it may activate sources and wake workers.
    pub fn on_elastic(&mut self, hook: impl FnMut(ElasticEvent) + Send + 'static) {
        self.hook = Some(Box::new(hook));
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
    /// every worker would bounce), its context, epoll buffer, owed wakes,
    /// elastic hook and poll mask (`Worker::poll_mask`).
    fn parts(&mut self) -> Parts<'_> {
        let Worker {
            skq,
            ctx,
            ep_buf,
            wakes,
            hook,
            mask,
            ..
        } = self;
        (
            skq,
            ctx.as_mut().expect("worker used after exit"),
            ep_buf,
            wakes,
            hook,
            mask.as_ref().map(|(_, m)| m),
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
        self.poll_mask()?;
        let (skq, ctx, ep_buf, wakes, hook, poll_mask) = self.parts();
        let core = &skq.core;
        let me = ctx.id();
        let start = monotonic_ns();
        let deadline = timeout.map(|t| start.saturating_add(t.as_nanos() as u64));
        let mut call = core.begin_wait(ctx, start, deadline, Readiness::Polled);
        let cap = events.cap;
        let mut done = Done::Begin;
        // The first step runs at `start` (one clock read fewer per wait).
        let mut now = start;
        // What to do next is skq-core's decision (`Scheduler::next_step`);
        // this loop only executes it with epoll, the doorbell and parkers.
        loop {
            let step = core.next_step(ctx, &mut call, done, now, &mut events.inner, cap);
            if done == Done::Rejoined {
                skq.adopt_orphans(); // this worker's group may live again
                if let Some(h) = hook {
                    h(ElasticEvent::Rejoined);
                }
            }
            flush_wakes(skq, ctx, wakes);
            // The clock read of a harvest that activated something.
            let mut stamped = None;
            done = match step {
                Step::Deliver(n) => return Ok(n),
                Step::Return => {
                    events.inner.clear();
                    return Ok(0);
                }
                Step::Harvest | Step::Poll(_) => {
                    let (timeout, done) = match step {
                        Step::Poll(t) => (t, Done::Polled),
                        _ => (Some(0), Done::Harvested),
                    };
                    // How much a blocking poll takes is the core's call
                    // (`WaitCall::poll_max`: the whole batch once a source
                    // is high priority); a harvest on the way takes all.
                    let max = match step {
                        Step::Poll(_) => call.poll_max(),
                        _ => usize::MAX,
                    };
                    match harvest(skq, ctx, ep_buf, timeout, max, poll_mask) {
                        Ok(t) => stamped = t,
                        Err(e) => {
                            core.abort_wait(ctx, &mut call, monotonic_ns());
                            flush_wakes(skq, ctx, wakes);
                            events.inner.clear();
                            return Err(e);
                        }
                    }
                    done
                }
                Step::Park(t) => {
                    skq.parkers[me].park(t);
                    Done::Woke
                }
                Step::Surplus => {
                    skq.adopt_orphans(); // its group may have no live worker now
                    if let Some(h) = hook {
                        h(ElasticEvent::Parking);
                    }
                    while !core.wanted(me) {
                        skq.parkers[me].park(None);
                    }
                    Done::Rejoined
                }
                Step::Wake => Done::Woke,
            };
            now = stamped.unwrap_or_else(monotonic_ns);
        }
    }

    /// With several pollers per set: makes `self.mask` say how this
    /// thread's blocking polls let the wake-up signal in. The thread is
    /// armed for it (`WakeSignal::arm_here`, which a thread may repeat),
    /// and its id recorded for this worker before it can join the pollers,
    /// so a targeted wake-up reaches it. Done once per thread the worker
    /// runs on: every later wait reads one thread-local word (the mask
    /// itself, a signal set on other architectures, is not copied per
    /// wait).
    fn poll_mask(&mut self) -> io::Result<()> {
        let Some(sig) = self.skq.wake_signal else {
            return Ok(());
        };
        let armed = THREAD_ARMED.get();
        if armed != 0 && self.mask.as_ref().is_some_and(|&(a, _)| a == armed) {
            return Ok(());
        }
        let mask = sig.arm_here()?;
        let armed = if armed != 0 {
            armed
        } else {
            let n = ARMED_THREADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            THREAD_ARMED.set(n);
            n
        };
        if let Some(t) = self.skq.tids.get(self.id()) {
            t.store(
                skq_sys::signal::thread_id(),
                std::sync::atomic::Ordering::Release,
            );
        }
        self.mask = Some((armed, mask));
        Ok(())
    }

    /// Releases the previous batch now (before the next `wait`).
    pub fn release(&mut self) {
        let (skq, ctx, _, wakes, _, _) = self.parts();
        skq.core.release(ctx, monotonic_ns());
        flush_wakes(skq, ctx, wakes);
    }

    /// Says the handler of `ev` stopped before `EAGAIN`: the source is
    /// redelivered after release even if no new readiness arrives.
    pub fn still_ready(&mut self, ev: &Event) {
        let (skq, ctx, _, _, _, _) = self.parts();
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
        self.skq.adopt_orphans();
        for &w in &report.wakes {
            self.skq.wake(w, me);
        }
        // If we were the only one awake, somebody must poll now.
        if let Some(f) = self.skq.core.follower(me) {
            self.skq.wake(f, me);
        }
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

thread_local! {
    /// A number no other thread of the process had, given when this thread
    /// was first armed for the wake-up signal (0: not armed): what a
    /// worker's cached poll mask is checked against (a thread id may be
    /// reused after its thread exits).
    static THREAD_ARMED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Threads armed so far (the source of `THREAD_ARMED`'s numbers).
static ARMED_THREADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Wakes every worker `ctx` owes a wake-up (redeliveries at release).
fn flush_wakes(skq: &Skq, ctx: &mut WorkerCtx, wakes: &mut Vec<WorkerId>) {
    // Most steps owe nothing: no moving of empty vectors then.
    if !ctx.has_wakes() {
        return;
    }
    let me = ctx.id();
    ctx.drain_wakes_into(wakes);
    for w in wakes.drain(..) {
        skq.wake(w, me);
    }
}

/// Non-blocking (timeout 0) or blocking harvest of the worker's group's
/// epoll set (the shared one with one poll group), of at most `max`
/// events; a blocking one with several pollers is one that the wake-up
/// signal ends (`poll_mask`, `Epoll::wait_wakeable`). Returns the clock read that
/// stamped the activations, if it found any (the loop's next `now`).
fn harvest(
    skq: &Skq,
    ctx: &mut WorkerCtx,
    ep_buf: &mut Vec<skq_sys::epoll::Event>,
    timeout_ns: Option<u64>,
    max: usize,
    poll_mask: Option<&skq_sys::signal::PollMask>,
) -> io::Result<Option<u64>> {
    let set = &skq.sets[skq.core.poll_group(ctx.id())];
    let n = match poll_mask {
        Some(mask) if timeout_ns != Some(0) => set.wait_wakeable(ep_buf, timeout_ns, max, mask)?,
        _ => set.wait_ns(ep_buf, timeout_ns)?,
    };
    if n > 0 {
        let me = ctx.id();
        return Ok(Some(skq.activate_all(ep_buf.as_mut_slice(), me, ctx.rng())));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// A worker whose blocking polls take the wake-up signal (several
    /// pollers per set) records the thread it waits on; moved to another
    /// thread, its next wait arms that thread and records its id, so
    /// targeted wake-ups follow it, while further waits on one thread
    /// reuse what the first one looked up.
    #[test]
    fn a_worker_moved_to_another_thread_records_that_thread_for_its_wake_ups() {
        let skq = Skq::new(skq_core::Config::parse_mode("hybrid", 2).unwrap()).unwrap();
        assert!(
            skq.wake_signal.is_some(),
            "hybrid's shared set takes targeted wake-ups"
        );
        let short = Some(Duration::from_millis(2));
        let on_a_thread = move |mut w: Worker, waits: usize| {
            std::thread::spawn(move || {
                let mut ev = Events::with_capacity(4);
                let mut armed = Vec::new();
                for _ in 0..waits {
                    assert_eq!(w.wait(&mut ev, short).unwrap(), 0);
                    armed.push(w.mask.as_ref().map(|m| m.0));
                }
                (w, armed, skq_sys::signal::thread_id())
            })
            .join()
            .unwrap()
        };
        let (w, armed_a, tid_a) = on_a_thread(skq.worker(0), 3);
        assert_eq!(skq.tids[0].load(Ordering::Relaxed), tid_a);
        assert!(armed_a[0].is_some_and(|a| a != 0), "{armed_a:?}");
        assert!(armed_a.iter().all(|&a| a == armed_a[0]), "{armed_a:?}");
        let (_w, armed_b, tid_b) = on_a_thread(w, 2);
        assert_eq!(skq.tids[0].load(Ordering::Relaxed), tid_b);
        // The first thread exited, so the second may have its id again;
        // its arming number is its own.
        assert!(
            armed_b[0].is_some_and(|b| Some(b) != armed_a[0]),
            "{armed_a:?} {armed_b:?}"
        );
        assert_eq!(armed_b[0], armed_b[1]);
    }
}
