//! Time: [`sleep`], [`sleep_until`], [`timeout`], [`interval`].
//!
//! Each worker owns a timer structure (a map ordered by deadline, then by
//! insertion, and a slab for timers inserted at least 1 s (`FAR`) ahead of
//! their deadline: hyper arms a 30-s header-read timeout for every request
//! and cancels it microseconds later, and the slab takes and gives it back
//! without a search; the worker scans the slab when its lower bound on the
//! slab's deadlines is due). A worker's wait timeout is its earliest deadline; after
//! each wait it fires every timer whose deadline has passed, in deadline
//! order (ties in insertion order), before running the batch, and again
//! between two events of the batch for the timers that expired meanwhile
//! (a lock-free look at the heap's published earliest deadline first). A timer is
//! inserted in the heap of the worker polling the [`Sleep`] (from a
//! non-worker thread: a worker chosen round-robin); a timer inserted from
//! another thread ahead of the worker's planned wake-up kicks that worker so
//! it plans again.
//!
//! **Clock reads.** Most deadlines checked per request are far off (hyper's
//! 30 s header-read timeout, polled once per request): the coarse clock
//! (the last tick's time, no clock hardware read) rules them out, and the
//! precise clock is read only for a deadline it cannot rule out
//! ([`Timers::surely_ahead`]).
//!
//! **Elastic workers.** A worker that parks as elastic surplus sleeps with
//! no timeout, so its timers move first ([`Timers::park`]): under its heap's
//! lock and the receiving heap's (taken in index order), every entry goes
//! to the heap of a worker that is still wanted, the parked heap is closed
//! and its *epoch* counted. A closed heap takes no insertion (a round-robin
//! insertion skips it) until its worker rejoins ([`Timers::reopen`]). A
//! [`Sleep`] remembers the heap and epoch it inserted at; when its entry is
//! not in that heap and the heap's epoch has moved, the entry may have moved,
//! and the other heaps are searched (once per such `Sleep`, only after a
//! park). Keys carry their first heap's index, so they stay unique in any
//! heap.
//!
//! Invariants: an entry is in exactly one heap until it fires (removed and
//! woken) or its [`Sleep`] is dropped or reset (removed, not woken); a
//! `Sleep` completes only once its deadline has passed on the monotonic
//! clock; no entry stays in the heap of a parked worker (it is moved with
//! both heaps locked, so no entry is ever between heaps).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

pub use std::time::Instant;

use crate::driver::lock;
use crate::runtime::Handle;

/// A timer's key: its deadline, then `(sequence << 8) | first heap`.
type Key = (Instant, u64);

/// Bits of a key's sequence number that name the heap it was made in
/// (workers are at most 64).
const HEAP_BITS: u32 = 8;

/// Where a [`Sleep`]'s entry was inserted: heap, key, that heap's epoch,
/// and its slot in that heap's far slab ([`NOT_FAR`]: in the map).
type Place = (usize, Key, u64, u32);

/// [`Place`]'s slot of an entry inserted in the map.
const NOT_FAR: u32 = u32::MAX;

/// A timer whose deadline is at least this far ahead when it is inserted
/// goes in its heap's far slab rather than the map.
const FAR: Duration = Duration::from_secs(1);

#[derive(Default)]
struct HeapState {
    entries: BTreeMap<Key, Waker>,
    /// Timers inserted at least [`FAR`] ahead of their deadline (hyper's
    /// 30-s header-read timeout, armed for every request and nearly always
    /// cancelled within microseconds): a slab, so that insertion and
    /// cancellation make no search. Never moved within the heap: they fire
    /// from here (in deadline order with the map's, [`Timers::fire_expired`]),
    /// or go to another heap's map when this one's worker parks.
    far: Vec<Option<(Key, Waker)>>,
    /// Free slots of `far`.
    far_free: Vec<u32>,
    /// At most the earliest deadline in `far` (`None`: `far` is empty). A
    /// cancellation leaves it as it is; a scan makes it exact again.
    far_min: Option<Instant>,
    seq: u64,
    /// The deadline the owner's current wait ends at (`None`: no timer).
    planned: Option<Instant>,
    /// Whether the owner is in (or about to enter) its wait.
    waiting: bool,
    /// The owner is parked as elastic surplus: no insertion here.
    closed: bool,
    /// How many times this heap's entries were moved away.
    epoch: u64,
}

impl HeapState {
    /// Occupied slots of the far slab.
    fn far_len(&self) -> usize {
        self.far.len() - self.far_free.len()
    }

    /// Gives an emptied far slab's memory back and forgets its bound.
    fn reset_far_if_empty(&mut self) {
        if self.far_len() == 0 {
            self.far.clear();
            self.far_free.clear();
            self.far_min = None;
        }
    }
}

/// One worker's timers, and their earliest deadline published for the
/// owner's check between two events of a batch (no lock on that path).
struct Heap {
    state: Mutex<HeapState>,
    /// Earliest deadline in ns after [`Timers::base`]; `u64::MAX`: none.
    /// Written under `state`'s lock after every change.
    earliest: AtomicU64,
}

/// The timer structures of every worker of a runtime.
pub(crate) struct Timers {
    heaps: Box<[Heap]>,
    rr: AtomicUsize,
    base: Instant,
    /// `base` on the monotonic clock in ns (`Instant` is that clock), so
    /// the coarse clock can be compared with published deadlines.
    base_mono_ns: u64,
    /// The most the coarse clock lags the precise one, with a margin: two
    /// of its ticks, at least 2 ms ([`Timers::surely_ahead`]).
    coarse_lag_ns: u64,
}

impl Timers {
    pub(crate) fn new(workers: usize) -> Timers {
        Timers {
            heaps: (0..workers)
                .map(|_| Heap {
                    state: Mutex::default(),
                    earliest: AtomicU64::new(u64::MAX),
                })
                .collect(),
            rr: AtomicUsize::new(0),
            base_mono_ns: skq_rt::sys::cpu::monotonic_ns(),
            base: Instant::now(),
            coarse_lag_ns: 2 * skq_rt::sys::cpu::monotonic_coarse_resolution_ns().max(1_000_000),
        }
    }

    fn lock(&self, w: usize) -> MutexGuard<'_, HeapState> {
        lock(&self.heaps[w].state)
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// The earliest deadline of a heap (the far slab's by its lower bound).
    fn first(g: &HeapState) -> Option<Instant> {
        let map = g.entries.keys().next().map(|k| k.0);
        match (map, g.far_min) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Publishes heap `w`'s earliest deadline (call with its lock held).
    fn publish(&self, w: usize, g: &HeapState) {
        let e = Self::first(g).map_or(u64::MAX, |d| self.ns(d));
        self.heaps[w].earliest.store(e, Ordering::Relaxed);
    }

    /// Empties heap `g`'s far slab into a map (for a move or a clear).
    fn take_far(g: &mut HeapState) -> BTreeMap<Key, Waker> {
        let far: BTreeMap<Key, Waker> = g.far.drain(..).flatten().collect();
        g.far_free.clear();
        g.far_min = None;
        far
    }

    /// Takes `place`'s entry out of heap `g`'s far slab, if it is there.
    fn take_far_slot(g: &mut HeapState, place: &Place) -> Option<Waker> {
        let (_, key, _, slot) = *place;
        let cell = g.far.get_mut(slot as usize)?;
        if cell.as_ref().is_none_or(|(k, _)| *k != key) {
            return None;
        }
        let (_, waker) = cell.take()?;
        g.far_free.push(slot);
        g.reset_far_if_empty();
        Some(waker)
    }

    /// The coarse clock in ns after `base`.
    fn coarse_ns(&self) -> u64 {
        skq_rt::sys::cpu::monotonic_coarse_ns().saturating_sub(self.base_mono_ns)
    }

    /// Whether `deadline_ns` (after `base`) certainly lies ahead, told
    /// without reading the precise clock: the coarse one, moved on by the
    /// most it lags, has not reached it. `base_mono_ns` was read before
    /// `base`, so a deadline converted through them is never later than
    /// the true one. A lag beyond the margin would only make a timer late
    /// by the excess, never early.
    fn surely_ahead(&self, deadline_ns: u64) -> bool {
        self.coarse_ns() + self.coarse_lag_ns < deadline_ns
    }

    /// Worker `w` is about to wait: how long, at most. No clock read
    /// without a timer; a far deadline (hyper's header-read timeout, every
    /// connection's) is planned from the coarse clock, at most its lag
    /// short, so the worker may wake a few ms early once and plan again.
    pub(crate) fn plan(&self, w: usize) -> Option<Duration> {
        let mut g = self.lock(w);
        let next = Self::first(&g);
        g.planned = next;
        g.waiting = true;
        let d = next?;
        let early = self.coarse_ns() + self.coarse_lag_ns;
        match self.ns(d).checked_sub(early) {
            Some(wait) if wait > 0 => Some(Duration::from_nanos(wait)),
            _ => Some(d.saturating_duration_since(Instant::now())),
        }
    }

    /// Worker `w` returned from its wait: wakes its expired timers in
    /// order (the precise clock is read only when its earliest deadline is
    /// not surely ahead).
    pub(crate) fn fire(&self, w: usize) {
        self.fire_expired(w, None, true);
    }

    /// Whether `deadline` has passed, reading the precise clock only when
    /// the coarse one cannot rule it out.
    pub(crate) fn passed(&self, deadline: Instant) -> bool {
        !self.surely_ahead(self.ns(deadline)) && Instant::now() >= deadline
    }

    /// Worker `w` is between two events of its batch: wakes its timers that
    /// expired meanwhile, so a timer waits for at most one event's
    /// processing (or the coarse clock's tick, a few ms, whichever is
    /// longer) rather than the whole batch's. Costs one relaxed load when
    /// the worker has no timer, and a read of the coarse clock when it has
    /// one: that clock lags, so it never says a deadline passed before it
    /// did, and only then is the precise clock read. A server whose every
    /// connection holds a timer (hyper's header-read timeout) read the
    /// precise clock 1.7 times per request here.
    pub(crate) fn fire_due(&self, w: usize) {
        let e = self.heaps[w].earliest.load(Ordering::Relaxed);
        if e == u64::MAX {
            return;
        }
        let coarse = self.coarse_ns();
        if coarse < e {
            return;
        }
        let now = Instant::now();
        if self.ns(now) >= e {
            self.fire_expired(w, Some(now), false);
        }
    }

    /// Wakes worker `w`'s timers expired at `now` (`None`: read the
    /// precise clock if the earliest deadline is not surely ahead).
    fn fire_expired(&self, w: usize, now: Option<Instant>, after_wait: bool) {
        let due = {
            let mut g = self.lock(w);
            if after_wait {
                g.waiting = false;
            }
            let Some(first) = Self::first(&g) else {
                return;
            };
            let now = match now {
                Some(now) => now,
                None if self.surely_ahead(self.ns(first)) => return,
                None => Instant::now(),
            };
            if first > now {
                return;
            }
            let rest = g.entries.split_off(&(now, u64::MAX));
            let mut due = std::mem::replace(&mut g.entries, rest);
            if g.far_min.is_some_and(|m| m <= now) {
                // The far slab's bound is due: take its due entries (into
                // the same ordered map, so all fire in deadline order) and
                // make the bound exact again.
                let HeapState {
                    far,
                    far_free,
                    far_min,
                    ..
                } = &mut *g;
                let mut min: Option<Instant> = None;
                for (i, cell) in far.iter_mut().enumerate() {
                    let Some((k, _)) = cell else { continue };
                    if k.0 <= now {
                        if let Some((k, waker)) = cell.take() {
                            due.insert(k, waker);
                            far_free.push(i as u32);
                        }
                    } else {
                        min = Some(min.map_or(k.0, |m| m.min(k.0)));
                    }
                }
                *far_min = min;
                g.reset_far_if_empty();
            }
            self.publish(w, &g);
            due
        };
        for (_, waker) in due {
            waker.wake();
        }
    }

    /// Worker `me` parks as elastic surplus: its timers move to the heap of
    /// a worker that `wanted` says runs (the first open one from
    /// `me % active`), and its heap closes. Returns the receiving worker
    /// and whether it must be kicked (it waits, planned to wake after the
    /// earliest moved deadline). `None`: no open heap of a wanted worker
    /// (shutdown); the timers stay, the heap stays open.
    pub(crate) fn park(
        &self,
        me: usize,
        active: usize,
        wanted: impl Fn(usize) -> bool,
    ) -> Option<(usize, bool)> {
        let n = self.heaps.len();
        let start = me % active.clamp(1, n);
        for i in 0..n {
            let to = (start + i) % n;
            if to == me || !wanted(to) {
                continue;
            }
            let (mut src, mut dst) = self.lock_pair(me, to);
            if dst.closed {
                continue;
            }
            src.closed = true;
            src.epoch += 1;
            src.planned = None;
            let mut moved = std::mem::take(&mut src.entries);
            // Far entries go to the receiving heap's map: a `Sleep`
            // finds a moved entry there by its key.
            moved.append(&mut Self::take_far(&mut src));
            self.publish(me, &src);
            drop(src);
            let earliest = moved.keys().next().map(|k| k.0);
            dst.entries.extend(moved);
            self.publish(to, &dst);
            let kick = match earliest {
                Some(d) if dst.waiting && dst.planned.is_none_or(|p| d < p) => {
                    dst.planned = Some(d);
                    true
                }
                _ => false,
            };
            return Some((to, kick));
        }
        None
    }

    /// Worker `me` rejoined: its heap takes insertions again.
    pub(crate) fn reopen(&self, me: usize) {
        self.lock(me).closed = false;
    }

    /// Locks heaps `a` and `b` (distinct) in index order; returns `a`'s
    /// guard first.
    fn lock_pair(
        &self,
        a: usize,
        b: usize,
    ) -> (MutexGuard<'_, HeapState>, MutexGuard<'_, HeapState>) {
        if a < b {
            let ga = self.lock(a);
            (ga, self.lock(b))
        } else {
            let gb = self.lock(b);
            (self.lock(a), gb)
        }
    }

    /// Drops every timer (shutdown).
    pub(crate) fn clear(&self) {
        for w in 0..self.heaps.len() {
            let old = {
                let mut g = self.lock(w);
                let mut old = std::mem::take(&mut g.entries);
                old.append(&mut Self::take_far(&mut g));
                self.publish(w, &g);
                old
            };
            drop(old);
        }
    }

    /// Inserts a timer into the heap of `current` (the polling worker) or,
    /// from another thread, of a worker chosen round-robin. Returns its
    /// place and whether that worker must be kicked to plan again.
    fn insert(&self, current: Option<usize>, deadline: Instant, waker: Waker) -> (Place, bool) {
        let n = self.heaps.len();
        let first = current.unwrap_or_else(|| self.rr.fetch_add(1, Ordering::Relaxed) % n);
        // The polling worker's own heap is open (a parked worker polls
        // nothing); a round-robin pick may be closed: the next open one.
        // If every heap is closed (shutdown), the last one tried takes it.
        let mut w = first;
        let mut g = self.lock(w);
        for i in 1..n {
            if !g.closed {
                break;
            }
            drop(g);
            w = (first + i) % n;
            g = self.lock(w);
        }
        g.seq += 1;
        let key = (deadline, (g.seq << HEAP_BITS) | w as u64);
        let e = self.ns(deadline);
        // Far ahead by the coarse clock (which lags, so never taken for
        // far when it is not): the slab, no search.
        let far = e > self.coarse_ns() + self.coarse_lag_ns + FAR.as_nanos() as u64;
        let slot = if far {
            let slot = match g.far_free.pop() {
                Some(s) => s,
                None => {
                    g.far.push(None);
                    (g.far.len() - 1) as u32
                }
            };
            g.far[slot as usize] = Some((key, waker));
            if g.far_min.is_none_or(|m| deadline < m) {
                g.far_min = Some(deadline);
            }
            slot
        } else {
            g.entries.insert(key, waker);
            NOT_FAR
        };
        // The published earliest moves only if this is the new first entry
        // (hyper's timers nearly never are: the same timeout from a later
        // now), so no walk to the map's first key for the others.
        if e < self.heaps[w].earliest.load(Ordering::Relaxed) {
            self.heaps[w].earliest.store(e, Ordering::Relaxed);
        }
        let earlier = g.planned.is_none_or(|p| deadline < p);
        let kick = g.waiting && earlier;
        if kick {
            g.planned = Some(deadline);
        }
        ((w, key, g.epoch, slot), kick)
    }

    /// Runs `f` on the entries of the heap holding `place`'s entry, if it
    /// is still in one (it may have moved since: then `place` is updated to
    /// where it is now), and publishes that heap's earliest deadline if `f`
    /// removed something.
    fn with_entry<R>(
        &self,
        place: &mut Place,
        f: impl FnOnce(&mut BTreeMap<Key, Waker>) -> R,
    ) -> Option<R> {
        let (mut w, key, epoch, _) = *place;
        let mut g = self.lock(w);
        if !g.entries.contains_key(&key) {
            if g.epoch == epoch {
                return None; // never moved: it fired
            }
            drop(g);
            let (i, found) = (0..self.heaps.len()).filter(|&i| i != w).find_map(|i| {
                let g = self.lock(i);
                g.entries.contains_key(&key).then_some((i, g))
            })?;
            *place = (i, key, found.epoch, NOT_FAR);
            (w, g) = (i, found);
        }
        let before = g.entries.len();
        let r = f(&mut g.entries);
        if g.entries.len() != before {
            self.publish(w, &g);
        }
        Some(r)
    }

    /// Replaces the waker of a pending entry; false if it already fired.
    fn update(&self, place: &mut Place, waker: &Waker) -> bool {
        let key = place.1;
        if place.3 != NOT_FAR {
            let mut g = self.lock(place.0);
            if let Some(Some((k, old))) = g.far.get_mut(place.3 as usize) {
                if *k == key {
                    if !old.will_wake(waker) {
                        *old = waker.clone();
                    }
                    return true;
                }
            }
            // Not in the slab any more (it fired): the map's path decides.
        }
        self.with_entry(place, |entries| {
            if let Some(old) = entries.get_mut(&key) {
                if !old.will_wake(waker) {
                    *old = waker.clone();
                }
            }
        })
        .is_some()
    }

    fn remove(&self, mut place: Place) {
        let (w, key, epoch, _) = place;
        // The common case first: the entry is where it was inserted, found
        // and removed in one search (none in the far slab), and the
        // earliest deadline published again only if it was the first entry
        // (a far entry's removal leaves the slab's bound: a lower bound).
        let old = {
            let mut g = self.lock(w);
            if let Some(waker) = Self::take_far_slot(&mut g, &place) {
                if g.far_len() == 0 {
                    self.publish(w, &g);
                }
                drop(g);
                drop(waker);
                return;
            }
            let first = g.entries.first_key_value().map(|(k, _)| *k);
            match g.entries.remove(&key) {
                Some(waker) => {
                    if first == Some(key) {
                        self.publish(w, &g);
                    }
                    Some(waker)
                }
                // Never moved: it fired.
                None if g.epoch == epoch => None,
                None => {
                    drop(g);
                    self.with_entry(&mut place, |entries| entries.remove(&key))
                        .flatten()
                }
            }
        };
        drop(old);
    }
}

/// A future completing at a deadline. Created by [`sleep`] and
/// [`sleep_until`]; binds to the runtime it is first polled on (or created
/// on).
pub struct Sleep {
    deadline: Instant,
    handle: Option<Handle>,
    entry: Option<Place>,
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
        if let (Some(place), Some(h)) = (self.entry.take(), &self.handle) {
            h.shared.timers.remove(place);
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let passed = match &self.handle {
            // Most polls come long before the deadline (a read timeout):
            // the coarse clock tells them apart without a precise read.
            Some(h) => h.shared.timers.passed(self.deadline),
            None => Instant::now() >= self.deadline,
        };
        if passed {
            self.cancel();
            return Poll::Ready(());
        }
        // Borrowed field by field: no reference count is taken on the
        // runtime's shared state (hyper polls a sleep once per request).
        let Sleep {
            deadline,
            handle,
            entry,
        } = &mut *self;
        let shared = &handle
            .get_or_insert_with(|| {
                Handle::try_current()
                    .expect("skq_async::time::Sleep polled outside an skq-async runtime")
            })
            .shared;
        let pending = match entry {
            Some(place) => shared.timers.update(place, cx.waker()),
            None => false,
        };
        if !pending {
            let current = shared.driver.current_worker();
            let (place, kick) = shared.timers.insert(current, *deadline, cx.waker().clone());
            *entry = Some(place);
            if kick {
                shared.driver.kick(place.0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    fn len(t: &Timers, w: usize) -> usize {
        let g = t.lock(w);
        g.entries.len() + g.far_len()
    }

    #[test]
    fn far_timers_skip_the_map_and_fire_in_deadline_order_with_the_others() {
        let t = Timers::new(2);
        let now = Instant::now();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Record(u32, Arc<std::sync::Mutex<Vec<u32>>>);
        impl Wake for Record {
            fn wake(self: Arc<Self>) {
                self.1.lock().unwrap().push(self.0);
            }
        }
        let rec = |i| Waker::from(Arc::new(Record(i, order.clone())));
        let at = |ms| now + Duration::from_millis(ms);
        // Far ahead (several seconds): the slab; near: the map.
        let (far1, _) = t.insert(Some(0), at(5_000), rec(2));
        let (far2, _) = t.insert(Some(0), at(3_000), rec(1));
        let (near, _) = t.insert(Some(0), at(10), rec(0));
        let (gone, _) = t.insert(Some(0), at(4_000), rec(9));
        assert_ne!(far1.3, NOT_FAR);
        assert_ne!(far2.3, NOT_FAR);
        assert_eq!(near.3, NOT_FAR);
        {
            let g = t.lock(0);
            assert_eq!((g.entries.len(), g.far_len()), (1, 3));
            assert_eq!(g.far_min, Some(at(3_000)));
        }
        // The earliest published is the map's first.
        assert_eq!(t.heaps[0].earliest.load(Ordering::Relaxed), t.ns(at(10)));
        // A cancelled far timer frees its slot, which the next one reuses.
        t.remove(gone);
        assert_eq!(len(&t, 0), 3);
        let (again, _) = t.insert(Some(0), at(6_000), rec(3));
        assert_eq!(again.3, gone.3, "the freed slot is reused");
        // A waker update reaches a far entry.
        let mut f1 = far1;
        assert!(t.update(&mut f1, &rec(2)));
        // Everything due at 5.5 s fires, in deadline order across both.
        t.fire_expired(0, Some(at(5_500)), false);
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        {
            let g = t.lock(0);
            assert_eq!((g.entries.len(), g.far_len()), (0, 1));
            assert_eq!(
                g.far_min,
                Some(at(6_000)),
                "the bound is exact after a scan"
            );
        }
        // Removing what already fired is a no-op; removing the last far
        // entry empties the slab and clears the published earliest.
        t.remove(far1);
        t.remove(again);
        assert_eq!(len(&t, 0), 0);
        assert_eq!(t.heaps[0].earliest.load(Ordering::Relaxed), u64::MAX);
        assert!(t.lock(0).far.is_empty());
    }

    #[test]
    fn a_parking_worker_moves_its_far_timers_and_their_sleeps_find_them() {
        let t = Timers::new(2);
        let now = Instant::now();
        let (c, waker) = counter();
        let (p, _) = t.insert(Some(1), now + Duration::from_secs(5), waker.clone());
        assert_ne!(p.3, NOT_FAR);
        let (to, _) = t.park(1, 1, |w| w == 0).expect("worker 0 is wanted");
        assert_eq!(to, 0);
        assert_eq!(len(&t, 1), 0);
        assert_eq!(t.lock(0).entries.len(), 1, "moved into worker 0's map");
        // The sleep's update and removal find it where it went.
        let mut moved = p;
        assert!(t.update(&mut moved, &waker));
        assert_eq!(moved.0, 0);
        t.remove(p);
        assert_eq!(len(&t, 0), 0);
        assert_eq!(c.0.load(Ordering::SeqCst), 0, "removed, never woken");
    }

    #[test]
    fn the_published_earliest_deadline_follows_inserts_and_removals() {
        let t = Timers::new(2);
        let now = Instant::now();
        let (_c, waker) = counter();
        let earliest = |t: &Timers| t.heaps[0].earliest.load(Ordering::Relaxed);
        let at = |ms| now + Duration::from_millis(ms);
        assert_eq!(earliest(&t), u64::MAX);
        let (p20, _) = t.insert(Some(0), at(20), waker.clone());
        assert_eq!(earliest(&t), t.ns(at(20)));
        // A later one leaves it; an earlier one takes its place.
        let (p30, _) = t.insert(Some(0), at(30), waker.clone());
        assert_eq!(earliest(&t), t.ns(at(20)));
        let (p10, _) = t.insert(Some(0), at(10), waker.clone());
        assert_eq!(earliest(&t), t.ns(at(10)));
        // The same deadline again: still that deadline.
        let (p10b, _) = t.insert(Some(0), at(10), waker.clone());
        assert_eq!(earliest(&t), t.ns(at(10)));
        // Removing a later entry leaves it; removing the first moves it on.
        t.remove(p30);
        assert_eq!(earliest(&t), t.ns(at(10)));
        t.remove(p10);
        assert_eq!(
            earliest(&t),
            t.ns(at(10)),
            "the other 10-ms entry is first now"
        );
        t.remove(p10b);
        assert_eq!(earliest(&t), t.ns(at(20)));
        assert_eq!(len(&t, 0), 1);
        // Removing an entry twice (its sleep reset after it fired) is a no-op.
        t.remove(p10b);
        t.remove(p20);
        assert_eq!(earliest(&t), u64::MAX);
        assert_eq!(len(&t, 0), 0);
    }

    #[test]
    fn a_parking_worker_hands_its_timers_to_a_wanted_one_and_they_still_fire() {
        let t = Timers::new(4);
        let now = Instant::now();
        let (c, waker) = counter();
        let mut places: Vec<Place> = (1..=6u64)
            .map(|i| {
                t.insert(Some(3), now + Duration::from_millis(i), waker.clone())
                    .0
            })
            .collect();
        // Worker 1 waits until a later deadline than the moved ones.
        t.lock(1).entries.insert(
            (now + Duration::from_secs(9), 1 << HEAP_BITS | 1),
            waker.clone(),
        );
        // Planned from the coarse clock: never past the deadline, at most
        // the coarse clock's lag (ms) short of it.
        let planned = t.plan(1).expect("worker 1 has a timer");
        assert!(planned <= Duration::from_secs(9), "{planned:?}");
        assert!(planned >= Duration::from_secs(5), "{planned:?}");
        // Workers 0 and 1 stay wanted, 2 and 3 park; 3 starts at 3 % 2 = 1.
        let (to, kick) = t.park(3, 2, |w| w < 2).expect("a wanted heap is open");
        assert_eq!((to, kick), (1, true), "1 waits past the moved deadlines");
        assert_eq!((len(&t, 3), len(&t, 1)), (0, 7));
        assert!(t.lock(3).closed);
        // A Sleep finds its moved entry: the update succeeds, the removal
        // removes it there, and the place follows the entry.
        assert!(t.update(&mut places[0], &waker));
        assert_eq!(places[0].0, 1);
        t.remove(places.pop().expect("six places"));
        assert_eq!(len(&t, 1), 6);
        // Nothing was woken by the move; the owner now fires them in order.
        assert_eq!(c.0.load(Ordering::SeqCst), 0);
        t.fire_expired(1, Some(now + Duration::from_millis(5)), true);
        assert_eq!(c.0.load(Ordering::SeqCst), 5);
        // A fired entry is not found again (searching every heap once).
        assert!(!t.update(&mut places[1], &waker));
        assert_eq!(len(&t, 1), 1);
    }

    #[test]
    fn after_a_wait_far_deadlines_stay_and_passed_ones_fire() {
        let t = Timers::new(1);
        assert_eq!(t.plan(0), None, "no timer: the wait has no timeout");
        let (c, waker) = counter();
        let now = Instant::now();
        t.insert(Some(0), now + Duration::from_secs(60), waker.clone());
        assert!(t.plan(0).is_some());
        t.fire(0);
        assert_eq!(c.0.load(Ordering::SeqCst), 0, "60 s ahead: nothing fires");
        assert!(!t.lock(0).waiting, "the wait is over either way");
        assert!(!t.passed(now + Duration::from_secs(60)));
        // A deadline already behind: planned as no wait, fired by `fire`.
        let behind = now.checked_sub(Duration::from_millis(1)).unwrap_or(now);
        t.insert(Some(0), behind, waker.clone());
        assert_eq!(t.plan(0), Some(Duration::ZERO));
        assert!(t.passed(behind));
        t.fire(0);
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(len(&t, 0), 1, "the far timer stays");
    }

    #[test]
    fn a_closed_heap_takes_no_insertion_until_its_worker_rejoins() {
        let t = Timers::new(3);
        let now = Instant::now();
        let (_, waker) = counter();
        assert!(t.park(1, 1, |w| w < 1).is_some());
        assert!(t.park(2, 1, |w| w < 1).is_some());
        // Round-robin insertions from a foreign thread all land on worker 0.
        for _ in 0..6 {
            let (place, _) = t.insert(None, now + Duration::from_secs(1), waker.clone());
            assert_eq!(place.0, 0);
        }
        // Keys stay unique across heaps: entries made in heap 0 and moved
        // into it never collide (the heap index is in the key).
        t.reopen(2);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..6 {
            let (place, _) = t.insert(None, now + Duration::from_secs(1), waker.clone());
            assert_ne!(place.0, 1, "worker 1 is still parked");
            assert!(seen.insert(place.1));
        }
        assert_eq!(len(&t, 0) + len(&t, 2), 12);
        assert!(t.park(2, 1, |w| w < 1).is_some());
        assert_eq!((len(&t, 0), len(&t, 2)), (12, 0));
    }

    #[test]
    fn with_no_wanted_open_heap_the_timers_stay() {
        let t = Timers::new(2);
        let (_, waker) = counter();
        let (place, _) = t.insert(Some(1), Instant::now(), waker);
        assert!(t.park(1, 1, |_| false).is_none());
        assert!(!t.lock(1).closed);
        assert_eq!(place.0, 1);
        assert_eq!(len(&t, 1), 1);
    }
}
