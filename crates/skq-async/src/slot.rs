//! A source slot's runtime side, and the task wake-up protocol: how
//! async-task's `schedule` turns a `Runnable` into an activation of the
//! task's skq source ([`Entry::schedule`]), and how the worker that skq
//! delivers the source to takes it back to run it ([`Entry::take_runnable`]).
//!
//! The driver (`driver.rs`) keeps one [`Entry`] per skq source slot; the
//! notifier `N` is the task's skq-rt virtual source, whose notification is
//! a direct activation in skq-core (plus the wake-up of the worker it
//! claims). The loom model (`loom_model.rs`) runs this same code with a
//! notifier that makes the same skq-core activation.
//!
//! ## Invariants
//!
//! 1. An entry's task half is believed only if its stored [`SourceId`]
//!    equals the caller's (generation check): a stale wake-up or event of a
//!    reused source finds no `Runnable`, or the new task's.
//! 2. A `Runnable` is stored *before* the source is notified, so the
//!    delivery the notification causes finds it (notify first, and a fast
//!    worker can find the slot empty and release the source: the wake-up
//!    is lost).
//! 3. Only the worker skq delivered the source to takes the `Runnable`,
//!    or the worker whose own notification call was held back (the
//!    driver runs a task woken by an I/O event within that event when skq
//!    would deliver it to this worker next anyway): no activation was
//!    made for that `Runnable`, so no delivery can take it;
//!    async-task calls `schedule` at most once per `Runnable` (once more
//!    only after a `run` that saw a wake-up), and skq-core hands a source to
//!    one worker at a time, deferring an activation that arrives while the
//!    source is processed until its release. So a task is polled by one
//!    worker at a time, and a wake-up during its poll is redelivered.
//! 4. No lock is held while a source is notified or a `Runnable` is run or
//!    dropped.

use std::sync::Arc;

use async_task::Runnable;
use skq_core::SourceId;

use crate::sync::{lock, Mutex, MutexGuard};

/// How a task's source is told it has work (an activation).
pub(crate) trait Notify {
    /// Activates the source (never fails short of a broken counter).
    fn notify(&self);
}

/// What a source slot holds on the runtime side.
#[derive(Default)]
pub(crate) enum Slot<N, I> {
    /// Unused.
    #[default]
    Free,
    /// A task; `runnable` is set between its wake-up and its poll.
    Task {
        id: SourceId,
        runnable: Option<Runnable>,
        ev: Arc<N>,
    },
    /// An I/O source and the wakers waiting on it.
    #[cfg_attr(not(feature = "runtime"), allow(dead_code))]
    Io { id: SourceId, io: Arc<I> },
}

/// One entry per skq source slot (indexed like the core's table).
pub(crate) struct Entry<N, I>(Mutex<Slot<N, I>>);

impl<N, I> Default for Entry<N, I> {
    fn default() -> Self {
        Entry(Mutex::new(Slot::Free))
    }
}

impl<N: Notify, I> Entry<N, I> {
    /// The slot, locked (the caller drops what it replaces after unlocking).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Slot<N, I>> {
        lock(&self.0)
    }

    /// async-task's `schedule` for task `id`: parks the `Runnable` and
    /// notifies the source (in this order, invariant 2). A `Runnable` of a
    /// task no longer in the slot (its future is being dropped) is dropped.
    pub(crate) fn schedule(&self, id: SourceId, runnable: Runnable) {
        let (ev, refused) = match &mut *self.lock() {
            Slot::Task {
                id: i,
                runnable: r,
                ev,
            } if *i == id => {
                assert!(
                    !cfg!(any(debug_assertions, loom)) || r.is_none(),
                    "a task scheduled twice"
                );
                *r = Some(runnable);
                (Some(ev.clone()), None)
            }
            _ => (None, Some(runnable)),
        };
        drop(refused);
        if let Some(ev) = ev {
            ev.notify();
        }
    }

    /// Activates task `id`'s source, whose `Runnable` waits here: the
    /// notification [`Entry::schedule`] makes, for one that was held back
    /// (`driver.rs`, a task run within the I/O event that woke it) and
    /// then had to be made after all.
    #[cfg_attr(not(feature = "runtime"), allow(dead_code))]
    pub(crate) fn notify(&self, id: SourceId) {
        let ev = match &*self.lock() {
            Slot::Task { id: i, ev, .. } if *i == id => Some(ev.clone()),
            _ => None,
        };
        if let Some(ev) = ev {
            ev.notify();
        }
    }

    /// The delivered task's `Runnable`, for the worker skq delivered source
    /// `id` to (`None`: a stale or spurious delivery).
    pub(crate) fn take_runnable(&self, id: SourceId) -> Option<Runnable> {
        match &mut *self.lock() {
            Slot::Task {
                id: i, runnable, ..
            } if *i == id => runnable.take(),
            _ => None,
        }
    }
}
