//! Time: [`sleep`], [`sleep_until`], [`timeout`], [`interval`].
//!
//! Each worker owns a timer structure (a map ordered by deadline, then by
//! insertion). A worker's wait timeout is its earliest deadline; after
//! each wait it fires every timer whose deadline has passed, in deadline
//! order (ties in insertion order), before running the batch. A timer is
//! inserted in the heap of the worker polling the [`Sleep`] (from a
//! non-worker thread: a worker chosen round-robin); a timer inserted from
//! another thread ahead of the worker's planned wake-up kicks that worker so
//! it plans again.
//!
//! Invariants: an entry is in exactly one heap until it fires (removed and
//! woken) or its [`Sleep`] is dropped or reset (removed, not woken); a
//! `Sleep` completes only once its deadline has passed on the monotonic
//! clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub use std::time::Instant;

use crate::driver::lock;
use crate::runtime::{Handle, Shared};

type Key = (Instant, u64);

#[derive(Default)]
struct HeapState {
    entries: BTreeMap<Key, Waker>,
    seq: u64,
    /// The deadline the owner's current wait ends at (`None`: no timer).
    planned: Option<Instant>,
    /// Whether the owner is in (or about to enter) its wait.
    waiting: bool,
}

/// The timer structures of every worker of a runtime.
pub(crate) struct Timers {
    heaps: Box<[Mutex<HeapState>]>,
    rr: AtomicUsize,
}

impl Timers {
    pub(crate) fn new(workers: usize) -> Timers {
        Timers {
            heaps: (0..workers).map(|_| Mutex::default()).collect(),
            rr: AtomicUsize::new(0),
        }
    }

    /// Worker `w` is about to wait: how long, at most.
    pub(crate) fn plan(&self, w: usize, now: Instant) -> Option<Duration> {
        let mut g = lock(&self.heaps[w]);
        let next = g.entries.keys().next().map(|k| k.0);
        g.planned = next;
        g.waiting = true;
        next.map(|d| d.saturating_duration_since(now))
    }

    /// Worker `w` returned from its wait: wakes its expired timers in order.
    pub(crate) fn fire(&self, w: usize, now: Instant) {
        let due = {
            let mut g = lock(&self.heaps[w]);
            g.waiting = false;
            match g.entries.keys().next() {
                Some(k) if k.0 <= now => {
                    let rest = g.entries.split_off(&(now, u64::MAX));
                    std::mem::replace(&mut g.entries, rest)
                }
                _ => return,
            }
        };
        for (_, waker) in due {
            waker.wake();
        }
    }

    /// Drops every timer (shutdown).
    pub(crate) fn clear(&self) {
        for h in self.heaps.iter() {
            let old = std::mem::take(&mut lock(h).entries);
            drop(old);
        }
    }

    fn insert(&self, shared: &Shared, deadline: Instant, waker: Waker) -> (usize, Key) {
        let w = shared
            .driver
            .current_worker()
            .unwrap_or_else(|| self.rr.fetch_add(1, Ordering::Relaxed) % self.heaps.len());
        let (key, kick) = {
            let mut g = lock(&self.heaps[w]);
            g.seq += 1;
            let key = (deadline, g.seq);
            g.entries.insert(key, waker);
            let earlier = g.planned.is_none_or(|p| deadline < p);
            let kick = g.waiting && earlier;
            if kick {
                g.planned = Some(deadline);
            }
            (key, kick)
        };
        if kick {
            shared.driver.kick(w);
        }
        (w, key)
    }

    /// Replaces the waker of a pending entry; false if it already fired.
    fn update(&self, w: usize, key: Key, waker: &Waker) -> bool {
        let mut g = lock(&self.heaps[w]);
        match g.entries.get_mut(&key) {
            Some(old) => {
                if !old.will_wake(waker) {
                    *old = waker.clone();
                }
                true
            }
            None => false,
        }
    }

    fn remove(&self, w: usize, key: Key) {
        let old = lock(&self.heaps[w]).entries.remove(&key);
        drop(old);
    }
}

/// A future completing at a deadline. Created by [`sleep`] and
/// [`sleep_until`]; binds to the runtime it is first polled on (or created
/// on).
pub struct Sleep {
    deadline: Instant,
    handle: Option<Handle>,
    entry: Option<(usize, Key)>,
}

/// Completes after `duration`.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// Completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        handle: Handle::try_current(),
        entry: None,
    }
}

impl Sleep {
    #[cfg(feature = "hyper")]
    pub(crate) fn with_handle(handle: Handle, deadline: Instant) -> Sleep {
        Sleep {
            deadline,
            handle: Some(handle),
            entry: None,
        }
    }

    /// The deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Moves the deadline (the sleep may be polled again after completing).
    pub fn reset(&mut self, deadline: Instant) {
        self.cancel();
        self.deadline = deadline;
    }

    fn cancel(&mut self) {
        if let (Some((w, key)), Some(h)) = (self.entry.take(), &self.handle) {
            h.shared.timers.remove(w, key);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let this = &mut *self;
        let handle = this.handle.get_or_insert_with(|| {
            Handle::try_current()
                .expect("skq_async::time::Sleep polled outside an skq-async runtime")
        });
        let shared = handle.shared.clone();
        match this.entry {
            Some((w, key)) if shared.timers.update(w, key, cx.waker()) => {}
            _ => {
                this.entry = Some(
                    shared
                        .timers
                        .insert(&shared, this.deadline, cx.waker().clone()),
                )
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl std::fmt::Debug for Sleep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// The error of a [`timeout`] whose deadline passed first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("deadline has elapsed")]
pub struct Elapsed;

/// A future with a deadline; see [`timeout`].
pub struct Timeout<F> {
    fut: F,
    sleep: Sleep,
}

/// Runs `fut` for at most `duration`: `Err(Elapsed)` if it had not
/// completed by then (it is dropped with the `Timeout`).
pub fn timeout<F: Future>(duration: Duration, fut: F) -> Timeout<F> {
    Timeout {
        fut,
        sleep: sleep(duration),
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `fut` is structurally pinned: it is never moved out of
        // `self` nor exposed unpinned, and `Timeout` has no `Drop` impl.
        // `sleep` is `Unpin` and not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above, `fut` stays where the pinned `self` put it.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        if let Poll::Ready(v) = fut.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        Pin::new(&mut this.sleep).poll(cx).map(|()| Err(Elapsed))
    }
}

/// Ticks every `period`; see [`interval`].
#[derive(Debug)]
pub struct Interval {
    next: Instant,
    period: Duration,
    sleep: Sleep,
}

/// An interval whose first tick completes at once and the following ones
/// every `period` after it. A tick that is late is delivered at once and the
/// schedule is kept (the next ticks catch up, tokio's `Burst`).
///
/// # Panics
/// If `period` is zero.
pub fn interval(period: Duration) -> Interval {
    assert!(!period.is_zero(), "interval: the period must be above zero");
    let now = Instant::now();
    Interval {
        next: now,
        period,
        sleep: sleep_until(now),
    }
}

impl Interval {
    /// Waits for the next tick; returns its scheduled instant.
    pub async fn tick(&mut self) -> Instant {
        std::future::poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        std::task::ready!(Pin::new(&mut self.sleep).poll(cx));
        let t = self.next;
        self.next = t + self.period;
        self.sleep.reset(self.next);
        Poll::Ready(t)
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }
}
