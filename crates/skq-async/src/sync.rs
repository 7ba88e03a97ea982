//! The locks the task wake-up protocol (`slot.rs`) synchronises with go
//! through here, so `RUSTFLAGS="--cfg loom"` swaps them for loom's
//! model-checked versions (as skq-core's `sync` module does for the core).

#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: every critical section of this crate is
/// a few moves, so a panic while holding a lock leaves consistent data.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
