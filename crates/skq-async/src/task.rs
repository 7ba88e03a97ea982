//! Tasks: spawning, [`JoinHandle`], cancellation, panics, `yield_now`.
//!
//! Allocation, reference counting and wakers are async-task's. What this
//! module adds around the user's future:
//!
//! * a panic catcher, so a panicking task completes with
//!   [`JoinError::Panic`] and its worker keeps serving (the `Runnable` never
//!   unwinds into the worker loop);
//! * a guard that frees the task's skq source when the future is dropped,
//!   whether it completed, was cancelled, or the runtime shut down.
//!
//! A task's output reaches its [`JoinHandle`] exactly once; dropping the
//! handle detaches the task (it runs on), [`JoinHandle::abort`] cancels it:
//! the future is dropped on a worker at its next scheduling, or at once if
//! it is idle and nothing else holds it.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use async_task::FallibleTask;
use skq_core::{Class, SourceId};

use crate::runtime::Shared;

/// A caught panic's payload.
pub(crate) type Panic = Box<dyn Any + Send + 'static>;
type Output<T> = Result<T, Panic>;

/// Why a task produced no value.
pub enum JoinError {
    /// The task was aborted (or the runtime shut down) before it completed.
    Cancelled,
    /// The task panicked; the payload is the panic's.
    Panic(Panic),
}

impl JoinError {
    /// Whether the task was cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// Whether the task panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panic(_))
    }

    /// The panic payload, to resume with [`std::panic::resume_unwind`].
    ///
    /// # Panics
    /// If the task was cancelled rather than panicked.
    pub fn into_panic(self) -> Panic {
        match self {
            JoinError::Panic(p) => p,
            JoinError::Cancelled => panic!("JoinError::into_panic on a cancelled task"),
        }
    }

    fn message(&self) -> String {
        match self {
            JoinError::Cancelled => "task was cancelled".into(),
            JoinError::Panic(p) => {
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string payload".into());
                format!("task panicked: {what}")
            }
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for JoinError {}

/// An owned permission to await a task's output, or to abort it.
///
/// Awaiting gives `Ok(output)`, or the [`JoinError`]. Dropping the handle
/// detaches the task.
pub struct JoinHandle<T> {
    state: State<T>,
}

enum State<T> {
    Running(FallibleTask<Output<T>>),
    Aborting(Pin<Box<dyn Future<Output = Option<Output<T>>> + Send>>),
    /// Aborted after it had already completed: the output is kept.
    Finished(Option<Output<T>>),
    Taken,
}

impl<T: Send + 'static> JoinHandle<T> {
    pub(crate) fn new(task: async_task::Task<Output<T>>) -> JoinHandle<T> {
        JoinHandle {
            state: State::Running(task.fallible()),
        }
    }

    /// Cancels the task. Awaiting the handle afterwards gives
    /// [`JoinError::Cancelled`], or the output if the task had already
    /// completed. Aborting twice, or after completion, does nothing more.
    pub fn abort(&mut self) {
        let State::Running(task) = std::mem::replace(&mut self.state, State::Taken) else {
            return;
        };
        let mut cancel: Pin<Box<dyn Future<Output = Option<Output<T>>> + Send>> =
            Box::pin(task.cancel());
        // The first poll marks the task cancelled (and schedules it, if idle,
        // so a worker drops its future); nobody needs waking by this poll.
        let waker = Waker::from(Arc::new(Noop));
        match cancel.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(out) => self.state = State::Finished(out),
            Poll::Pending => self.state = State::Aborting(cancel),
        }
    }

    /// Lets the task run on without anyone awaiting it (what dropping the
    /// handle does).
    pub fn detach(self) {
        drop(self);
    }

    /// Whether the task has completed (or been cancelled).
    pub fn is_finished(&self) -> bool {
        match &self.state {
            State::Running(t) => t.is_finished(),
            _ => true,
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let State::Running(t) = std::mem::replace(&mut self.state, State::Taken) {
            t.detach();
        }
    }
}

// The output is only ever held by value, never pinned.
impl<T> Unpin for JoinHandle<T> {}

fn convert<T>(out: Option<Output<T>>) -> Result<T, JoinError> {
    match out {
        None => Err(JoinError::Cancelled),
        Some(Ok(v)) => Ok(v),
        Some(Err(p)) => Err(JoinError::Panic(p)),
    }
}

impl<T: Send + 'static> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let out = match &mut self.state {
            State::Running(t) => std::task::ready!(Pin::new(t).poll(cx)),
            State::Aborting(f) => std::task::ready!(f.as_mut().poll(cx)),
            State::Finished(out) => out.take(),
            State::Taken => panic!("JoinHandle polled after it completed"),
        };
        self.state = State::Taken;
        Poll::Ready(convert(out))
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").finish_non_exhaustive()
    }
}

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls the inner future, turning a panic into `Err(payload)`.
pub(crate) struct CatchUnwind<F>(pub(crate) F);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Output<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of the only field: `self` is pinned, the
        // field is never moved out nor handed out unpinned, and `CatchUnwind`
        // has no `Drop` impl that could move it.
        let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0) };
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(p) => Poll::Ready(Err(p)),
        }
    }
}

/// Frees a task's skq source when the task's future is dropped.
struct SourceGuard {
    shared: Arc<Shared>,
    id: SourceId,
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        self.shared.driver.deregister_task(self.id);
    }
}

/// Spawns `fut` as a task of `class` on `shared`'s workers.
pub(crate) fn spawn<F>(shared: &Arc<Shared>, class: Class, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let id = match shared.driver.register_task(class) {
        Ok(id) => id,
        Err(e) => panic!("{e}"),
    };
    let guard = SourceGuard {
        shared: shared.clone(),
        id,
    };
    let wrapped = async move {
        let _guard = guard;
        CatchUnwind(fut).await
    };
    let sched = shared.clone();
    let (runnable, task) = async_task::spawn(wrapped, move |r| sched.driver.schedule(id, r));
    runnable.schedule();
    JoinHandle::new(task)
}

/// Yields once: the task is woken at once and goes back through the
/// scheduler, so the worker's other events of the batch run first.
pub async fn yield_now() {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    YieldNow(false).await
}

/// A cooperative checkpoint for a long-running task (skq's `checkpoint()`
/// as an async yield point, issue 23 item 3): returns at once unless the
/// task should let other work run, in which case it yields once, as
/// [`yield_now`].
///
/// It yields when the task's poll budget is spent (each call spends one
/// unit of the budget I/O operations spend, 128 per poll), or when, after
/// skq's own checkpoint has handed this worker's queued events to idle
/// workers as the policy allows, work still waits for this worker (queued
/// events, or events left in its current batch). So a task calling it
/// often costs little while its worker has nothing else to do, and holds
/// other tasks back by at most one checkpoint interval when it has.
/// Outside a task of an skq-async worker (inside `block_on`, on the
/// blocking pool, on another runtime) it returns at once.
pub async fn checkpoint() {
    struct Checkpoint(bool);
    impl Future for Checkpoint {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            let yield_now = crate::runtime::Handle::try_current()
                .is_some_and(|h| h.shared.driver.checkpoint_should_yield());
            if !yield_now {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    Checkpoint(false).await
}

/// Sets the priority class of the calling task for its next wake-up (and
/// on, until changed). Returns false when called outside a task.
pub fn set_class(class: Class) -> bool {
    match (
        crate::runtime::Handle::try_current(),
        crate::driver::current_task(),
    ) {
        (Some(h), Some(id)) => {
            h.shared.driver.set_class(id, class);
            true
        }
        _ => false,
    }
}

/// The priority class of the calling task (`None` outside a task).
pub fn current_class() -> Option<Class> {
    match (
        crate::runtime::Handle::try_current(),
        crate::driver::current_task(),
    ) {
        (Some(h), Some(id)) => Some(h.shared.driver.class_of(id)),
        _ => None,
    }
}
