//! hyper 1.x runtime traits: [`rt::Read`]/[`rt::Write`] for [`TcpStream`],
//! an [`rt::Executor`] that spawns on the runtime and an [`rt::Timer`] on
//! its timers, so `hyper::server::conn::http1` and
//! `hyper::client::conn::http1` run unchanged (no `hyper-util` adapter).

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt;

use crate::net::TcpStream;
use crate::runtime::Handle;
use crate::time::Sleep;

impl rt::Read for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `recv` writes only bytes it received (initialised) and
        // never de-initialises the buffer; `advance` below covers exactly
        // the `n` bytes it reports.
        let n = std::task::ready!(self.poll_read_uninit(cx, unsafe { buf.as_mut() }))?;
        // SAFETY: the first `n` bytes were filled by `recv`.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl rt::Write for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_buf(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown_write())
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_bufs(cx, bufs)
    }
}

/// hyper's executor: spawns (detached) regular-class tasks on a runtime.
#[derive(Clone, Debug)]
pub struct HyperExecutor(pub Handle);

impl<F> rt::Executor<F> for HyperExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        self.0.spawn(fut).detach();
    }
}

/// hyper's timer on a runtime's per-worker timers.
#[derive(Clone, Debug)]
pub struct HyperTimer(pub Handle);

impl rt::Timer for HyperTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(Sleep::with_handle(
            self.0.clone(),
            Instant::now() + duration,
        ))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(Sleep::with_handle(self.0.clone(), deadline))
    }
}

impl rt::Sleep for Sleep {}
