//! Every atomic and lock of the core goes through here, so `RUSTFLAGS="--cfg loom"`
//! swaps them for loom's model-checked versions.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

/// Locks a mutex, ignoring poisoning: the core never panics while holding a
/// lock, and a poisoned queue is still structurally valid.
pub(crate) fn lock<T>(m: &Mutex<T>) -> crate::sync::Guard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Tries to lock without blocking; `None` when someone holds it.
pub(crate) fn try_lock<T>(m: &Mutex<T>) -> Option<crate::sync::Guard<'_, T>> {
    #[cfg(loom)]
    {
        m.try_lock().ok()
    }
    #[cfg(not(loom))]
    {
        match m.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

#[cfg(loom)]
pub(crate) type Guard<'a, T> = loom::sync::MutexGuard<'a, T>;
#[cfg(not(loom))]
pub(crate) type Guard<'a, T> = std::sync::MutexGuard<'a, T>;
