//! hyper's runtime traits for tokio, for `hyper_server --runtime tokio`:
//! [`TokioIo`] (hyper's `rt::Read`/`rt::Write` over a tokio stream) and
//! [`TokioTimer`] (hyper's `rt::Timer` on tokio's timers). hyper-util has
//! the same adapters; it is not a dependency of this workspace, and these
//! are a few lines each.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A tokio stream as a hyper I/O object.
pub struct TokioIo<T>(pub T);

impl<T: AsyncRead + Unpin> rt::Read for TokioIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let n = {
            // SAFETY: tokio's `ReadBuf` over the cursor's unfilled bytes: a
            // tokio stream writes only initialised bytes into it and never
            // de-initialises any (tokio's `AsyncRead` contract).
            let mut tbuf = ReadBuf::uninit(unsafe { buf.as_mut() });
            std::task::ready!(Pin::new(&mut self.0).poll_read(cx, &mut tbuf))?;
            tbuf.filled().len()
        };
        // SAFETY: the stream filled (initialised) the first `n` bytes.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> rt::Write for TokioIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// hyper's timer on tokio's (the current runtime's) timers.
#[derive(Clone, Copy)]
pub struct TokioTimer;

struct TokioSleep(Pin<Box<tokio::time::Sleep>>);

impl Future for TokioSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl rt::Sleep for TokioSleep {}

impl rt::Timer for TokioTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(TokioSleep(Box::pin(tokio::time::sleep(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn rt::Sleep>> {
        Box::pin(TokioSleep(Box::pin(tokio::time::sleep_until(
            deadline.into(),
        ))))
    }
}
