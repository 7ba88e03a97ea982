//! The two async runtimes behind one trait, [`AsyncRt`]: what a connection
//! handler written as async code needs from its runtime (the stream type,
//! accept, spawn, yield, sleep, timeout, the worker index, the task's
//! class).
//!
//! * [`SkqAsync`]: skq-async; its `TcpStream` implements tokio's
//!   `AsyncRead`/`AsyncWrite` with its `tokio-io` feature, so one handler
//!   serves both runtimes' streams.
//! * [`TokioRt`]: tokio's multi-thread runtime; the worker index is the
//!   one [`super::start_handler`] gives each runtime thread as it starts.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::Class;

/// What an async runtime provides the handler.
pub trait AsyncRt: Clone + Send + Sync + 'static {
    /// A connection.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// A listening socket.
    type Listener: Send + Sync + 'static;

    /// The next connection (with `TCP_NODELAY` set).
    fn accept(l: &Self::Listener) -> impl Future<Output = io::Result<Self::Stream>> + Send;
    /// Spawns a task; false (the task dropped unrun) when the runtime
    /// cannot (skq-async: no file descriptor left for the task's eventfd).
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> bool;
    /// The index of the worker the caller runs on (0 off the workers).
    fn worker() -> usize;
    /// Yields to the runtime once.
    fn yield_now() -> impl Future<Output = ()> + Send;
    /// Sleeps for `d`.
    fn sleep(d: Duration) -> impl Future<Output = ()> + Send;
    /// `f`, or `None` once `d` has passed.
    fn timeout<F: Future + Send>(
        d: Duration,
        f: F,
    ) -> impl Future<Output = Option<F::Output>> + Send;
    /// Sets the priority class of the calling task and of `stream`'s
    /// readiness events, for their next wake-ups (where the runtime has
    /// classes): the socket's event and the task it wakes are both queued
    /// by the class.
    fn set_class(stream: &Self::Stream, class: Class);
}

/// skq-async as an [`AsyncRt`].
#[derive(Clone)]
pub struct SkqAsync(pub skq_async::Handle);

impl AsyncRt for SkqAsync {
    type Stream = skq_async::net::TcpStream;
    type Listener = skq_async::net::TcpListener;

    async fn accept(l: &Self::Listener) -> io::Result<Self::Stream> {
        let (s, _) = l.accept().await?;
        s.set_nodelay(true)?;
        Ok(s)
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> bool {
        // skq-async's spawn panics when the task's source cannot be made
        // (out of file descriptors); the accept loop must survive that.
        let h = &self.0;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.spawn(task).detach())).is_ok()
    }

    fn worker() -> usize {
        skq_async::worker_id().unwrap_or(0)
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        skq_async::yield_now()
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> + Send {
        skq_async::time::sleep(d)
    }

    async fn timeout<F: Future + Send>(d: Duration, f: F) -> Option<F::Output> {
        skq_async::time::timeout(d, f).await.ok()
    }

    fn set_class(stream: &Self::Stream, class: Class) {
        skq_async::set_class(class);
        let _ = stream.set_class(class);
    }
}

thread_local! {
    /// The index of the tokio worker on this thread.
    pub(super) static TOKIO_WORKER: Cell<usize> = const { Cell::new(0) };
}

/// tokio as an [`AsyncRt`].
#[derive(Clone)]
pub struct TokioRt(pub tokio::runtime::Handle);

impl AsyncRt for TokioRt {
    type Stream = tokio::net::TcpStream;
    type Listener = tokio::net::TcpListener;

    async fn accept(l: &Self::Listener) -> io::Result<Self::Stream> {
        let (s, _) = l.accept().await?;
        s.set_nodelay(true)?;
        Ok(s)
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> bool {
        drop(self.0.spawn(task));
        true
    }

    fn worker() -> usize {
        TOKIO_WORKER.with(|w| w.get())
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }

    fn sleep(d: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(d)
    }

    async fn timeout<F: Future + Send>(d: Duration, f: F) -> Option<F::Output> {
        tokio::time::timeout(d, f).await.ok()
    }

    fn set_class(_: &Self::Stream, _: Class) {}
}
