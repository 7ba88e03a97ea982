//! The connection table of the fd-based drivers: one slot per connection,
//! indexed by the token its readiness carries.
//!
//! Each slot has a mutex, but it is uncontended: every driver hands a
//! connection's events to one worker at a time (skq: the processing state;
//! epoll-1to1: one owner epoll; epoll-shared: `EPOLLONESHOT`). The lock only
//! orders an acceptor's insertion against a first event that fires on
//! another worker, and the shutdown sweep against nothing.
//!
//! The table grows with use: slots live in segments of
//! [`skq_core::SEGMENT`] allocated when the first index inside one is
//! handed out, and freed indices are reused before new ones, so memory
//! follows the peak number of open connections, not the configured limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use skq_core::SegVec;

/// Slots of `E`, with a free list.
pub struct Table<E> {
    slots: SegVec<Mutex<Option<E>>>,
    free: Mutex<Vec<usize>>,
    /// Indices below this have been handed out at least once.
    next: AtomicUsize,
}

impl<E> Table<E> {
    /// A table of up to `capacity` slots (none allocated yet).
    pub fn new(capacity: usize) -> Self {
        Table {
            slots: SegVec::new(capacity),
            free: Mutex::new(Vec::new()),
            next: AtomicUsize::new(0),
        }
    }

    /// Takes a free slot index, or `None` when the table is full.
    pub fn reserve(&self) -> Option<usize> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = free.pop() {
            return Some(i);
        }
        // Under the free list's lock, so `next` never passes the capacity.
        let i = self.next.load(Ordering::Relaxed);
        self.slots.ensure(i)?;
        self.next.store(i + 1, Ordering::Relaxed);
        Some(i)
    }

    /// Returns slot `idx` (now empty) to the free list.
    pub fn release(&self, idx: usize) {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(idx);
    }

    /// Locks slot `idx`.
    ///
    /// # Panics
    /// If `idx` was never reserved.
    pub fn lock(&self, idx: usize) -> MutexGuard<'_, Option<E>> {
        self.slots
            .get(idx)
            .expect("a reserved slot")
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Locks slot `idx`, reporting whether another thread held it first;
    /// `None` when `idx` was never reserved (a stale or foreign token).
    pub fn lock_observed(&self, idx: usize) -> Option<(MutexGuard<'_, Option<E>>, bool)> {
        let slot = self.slots.get(idx)?;
        Some(match slot.try_lock() {
            Ok(g) => (g, false),
            Err(TryLockError::WouldBlock) => (slot.lock().unwrap_or_else(|p| p.into_inner()), true),
            Err(TryLockError::Poisoned(p)) => (p.into_inner(), false),
        })
    }

    /// Empties every slot, handing each entry to `f` (shutdown).
    pub fn drain(&self, mut f: impl FnMut(E)) {
        for (_, slot) in self.slots.iter() {
            let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(e) = taken {
                f(e);
            }
        }
    }

    /// Hands every occupied slot that no other thread holds to `f` (the
    /// timeout sweep: a slot held by a worker is busy, hence not idle).
    pub fn try_for_each(&self, mut f: impl FnMut(&mut E)) {
        for (_, slot) in self.slots.iter() {
            let mut g = match slot.try_lock() {
                Ok(g) => g,
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
            };
            if let Some(e) = g.as_mut() {
                f(e);
            }
        }
    }

    /// Bytes the table holds now (segments allocated, not entries' heap).
    pub fn memory_bytes(&self) -> usize {
        self.slots.memory_bytes()
    }

    /// Bytes of one slot (what each connection adds to the table).
    pub fn slot_bytes() -> usize {
        std::mem::size_of::<Mutex<Option<E>>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_a_segment_at_a_time_and_reuses_freed_slots() {
        let t: Table<u64> = Table::new(3 * skq_core::SEGMENT);
        let before = t.memory_bytes();
        let a = t.reserve().unwrap();
        assert!(t.memory_bytes() > before, "the first reservation allocates");
        let one_segment = t.memory_bytes();
        *t.lock(a) = Some(5);
        let ids: Vec<usize> = (0..skq_core::SEGMENT)
            .map(|_| t.reserve().unwrap())
            .collect();
        assert!(t.memory_bytes() > one_segment, "a second segment");
        t.release(ids[7]);
        assert_eq!(t.reserve(), Some(ids[7]), "freed indices come back first");
        assert!(t.lock_observed(3 * skq_core::SEGMENT).is_none());
        assert!(
            t.lock_observed(2 * skq_core::SEGMENT + 1).is_none(),
            "never reserved"
        );
        let mut seen = Vec::new();
        t.drain(|e| seen.push(e));
        assert_eq!(seen, vec![5]);
    }

    #[test]
    fn refuses_past_the_capacity() {
        let t: Table<u8> = Table::new(2);
        assert_eq!(
            (t.reserve(), t.reserve(), t.reserve()),
            (Some(0), Some(1), None)
        );
        t.release(0);
        assert_eq!(t.reserve(), Some(0));
    }
}
