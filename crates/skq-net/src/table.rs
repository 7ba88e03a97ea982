//! The connection table of the fd-based drivers: one slot per connection,
//! indexed by the token its readiness carries.
//!
//! Each slot has a mutex, but it is uncontended: every driver hands a
//! connection's events to one worker at a time (skq: the processing state;
//! epoll-1to1: one owner epoll; epoll-shared: `EPOLLONESHOT`). The lock only
//! orders an acceptor's insertion against a first event that fires on
//! another worker, and the shutdown sweep against nothing.

use std::sync::{Mutex, MutexGuard, TryLockError};

/// Slots of `E`, with a free list.
pub struct Table<E> {
    slots: Box<[Mutex<Option<E>>]>,
    free: Mutex<Vec<usize>>,
}

impl<E> Table<E> {
    /// A table of `capacity` empty slots.
    pub fn new(capacity: usize) -> Self {
        Table {
            slots: (0..capacity).map(|_| Mutex::new(None)).collect(),
            free: Mutex::new((0..capacity).rev().collect()),
        }
    }

    /// Takes a free slot index, or `None` when the table is full.
    pub fn reserve(&self) -> Option<usize> {
        self.free.lock().unwrap_or_else(|p| p.into_inner()).pop()
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
    /// If `idx` is out of range.
    pub fn lock(&self, idx: usize) -> MutexGuard<'_, Option<E>> {
        self.slots[idx].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks slot `idx`, reporting whether another thread held it first;
    /// `None` when `idx` is out of range (a stale or foreign token).
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
        for slot in self.slots.iter() {
            let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(e) = taken {
                f(e);
            }
        }
    }
}
