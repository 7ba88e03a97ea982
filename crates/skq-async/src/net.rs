//! TCP: [`TcpListener`] and [`TcpStream`] on skq's registry.
//!
//! A socket is made non-blocking and registered once, edge triggered, for
//! both directions, when the object is created; it is never re-armed. I/O
//! is optimistic: every operation first makes the system call, and only on
//! `EAGAIN` waits for the direction's next readiness event (see
//! `driver::Dir` for why no edge is lost). Dropping the object forgets its
//! wakers, then deregisters the socket, then closes it (skq-rt's
//! `Registered` order).
//!
//! The stream implements `futures-io`'s traits always, tokio's
//! `AsyncRead`/`AsyncWrite` with the `tokio-io` feature and hyper's
//! `rt::Read`/`rt::Write` with the `hyper` feature (`hyper_rt.rs`).

use std::io::{self, IoSlice, Read, Write};
use std::mem::MaybeUninit;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use skq_rt::{Interest, Registered};

use crate::driver::IoState;
use crate::runtime::{Handle, Shared};

fn current() -> io::Result<Arc<Shared>> {
    Handle::try_current()
        .map(|h| h.shared)
        .ok_or_else(|| io::Error::other("not inside an skq-async runtime (a worker or block_on)"))
}

/// A TCP listening socket.
pub struct TcpListener {
    reg: Registered<std::net::TcpListener>,
    io: Arc<IoState>,
    shared: Arc<Shared>,
}

impl TcpListener {
    /// Binds to `addr` (the first address that binds) and registers the
    /// listener with the current runtime.
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        TcpListener::from_std(std::net::TcpListener::bind(addr)?)
    }

    /// Registers a bound std listener with the current runtime.
    pub fn from_std(l: std::net::TcpListener) -> io::Result<TcpListener> {
        let shared = current()?;
        l.set_nonblocking(true)?;
        let (reg, io) = shared.driver.register_io(l, Interest::READABLE)?;
        Ok(TcpListener { reg, io, shared })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.local_addr()
    }

    /// Accepts a connection (registered with the same runtime).
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (s, addr) = std::task::ready!(self.io.read.poll_op(cx, || self.reg.accept()))?;
        Poll::Ready(TcpStream::with_shared(self.shared.clone(), s).map(|s| (s, addr)))
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        self.shared.driver.forget_io(self.reg.id());
    }
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener")
            .field("local", &self.local_addr().ok())
            .finish()
    }
}

/// A TCP connection.
pub struct TcpStream {
    reg: Registered<std::net::TcpStream>,
    io: Arc<IoState>,
    shared: Arc<Shared>,
}

impl TcpStream {
    /// Connects to `addr` (each resolved address in turn) without blocking
    /// a worker: a non-blocking `connect`, then the writable edge.
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let shared = current()?;
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_one(&shared, a).await {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "connect: no address resolved")
        }))
    }

    async fn connect_one(shared: &Arc<Shared>, addr: SocketAddr) -> io::Result<TcpStream> {
        use socket2::{Domain, Protocol, Socket, Type};
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        sock.set_nonblocking(true)?;
        match sock.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let s = TcpStream::with_shared(shared.clone(), sock.into())?;
        std::future::poll_fn(|cx| {
            s.io.write.poll_op(cx, || {
                if let Some(e) = s.reg.take_error()? {
                    return Err(e);
                }
                match s.reg.peer_addr() {
                    Ok(_) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    Err(e) => Err(e),
                }
            })
        })
        .await?;
        Ok(s)
    }

    /// Registers a connected std stream with the current runtime.
    pub fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        TcpStream::with_shared(current()?, s)
    }

    fn with_shared(shared: Arc<Shared>, s: std::net::TcpStream) -> io::Result<TcpStream> {
        s.set_nonblocking(true)?;
        let (reg, io) = shared
            .driver
            .register_io(s, Interest::READABLE | Interest::WRITABLE)?;
        Ok(TcpStream { reg, io, shared })
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.reg.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.local_addr()
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.reg.set_nodelay(on)
    }

    /// Sets the priority class of this socket's readiness events (skq's
    /// per-source class): a high-priority socket is activated first at
    /// harvest and queued high, so the wake-up of the task waiting on it is
    /// not held behind regular sockets' events. [`crate::set_class`] sets
    /// the task's own class; a task serving a high-priority connection
    /// wants both. Returns whether the class changed.
    pub fn set_class(&self, class: crate::Class) -> io::Result<bool> {
        self.shared.driver.skq().set_class(self.reg.id(), class)
    }

    /// The priority class of this socket's readiness events.
    pub fn class(&self) -> crate::Class {
        self.shared.driver.class_of(self.reg.id())
    }

    /// Polls a read into `buf`; `Ok(0)` at end of stream.
    pub fn poll_read_buf(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.io
            .read
            .poll_stream(cx, buf.len(), || (&*self.reg).read(buf))
    }

    /// Polls a read into uninitialised memory; the first `n` bytes are
    /// initialised when `Ok(n)` is returned.
    pub fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        let sock = socket2::SockRef::from(&*self.reg);
        self.io.read.poll_stream(cx, buf.len(), || sock.recv(buf))
    }

    /// Polls a write of `buf`.
    pub fn poll_write_buf(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.io
            .write
            .poll_stream(cx, buf.len(), || (&*self.reg).write(buf))
    }

    /// Polls a vectored write.
    pub fn poll_write_bufs(
        &self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let want = bufs.iter().map(|b| b.len()).sum();
        self.io
            .write
            .poll_stream(cx, want, || (&*self.reg).write_vectored(bufs))
    }

    /// Shuts the write half down (the peer reads end of stream).
    pub fn shutdown_write(&self) -> io::Result<()> {
        match self.reg.shutdown(Shutdown::Write) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        }
    }

    /// Splits the stream into a read half and a write half that may live in
    /// different tasks (each direction keeps its own waker). The socket
    /// closes when both are dropped; dropping the write half does not shut
    /// the write side down (call `shutdown` on it).
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        let s = Arc::new(self);
        (OwnedReadHalf(s.clone()), OwnedWriteHalf(s))
    }

    /// Reads into `buf`; `Ok(0)` at end of stream.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        std::future::poll_fn(|cx| self.poll_read_buf(cx, buf)).await
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_write_buf(cx, buf)).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
        }
        Ok(())
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.shared.driver.forget_io(self.reg.id());
    }
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream")
            .field("local", &self.local_addr().ok())
            .field("peer", &self.peer_addr().ok())
            .finish()
    }
}

/// The read half of [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedReadHalf(Arc<TcpStream>);

/// The write half of [`TcpStream::into_split`].
#[derive(Debug)]
pub struct OwnedWriteHalf(Arc<TcpStream>);

impl OwnedReadHalf {
    /// The whole stream (for addresses and options).
    pub fn stream(&self) -> &TcpStream {
        &self.0
    }
}

impl OwnedWriteHalf {
    /// The whole stream (for addresses and options).
    pub fn stream(&self) -> &TcpStream {
        &self.0
    }
}

impl futures_io::AsyncRead for OwnedReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_read_buf(cx, buf)
    }
}

impl futures_io::AsyncWrite for OwnedWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_write_buf(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_write_bufs(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.0.shutdown_write())
    }
}

impl futures_io::AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_buf(cx, buf)
    }
}

impl futures_io::AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_buf(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_bufs(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown_write())
    }
}

#[cfg(feature = "tokio-io")]
mod tokio_io {
    use super::*;
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    fn read(s: &TcpStream, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        // SAFETY: `recv` only writes bytes it received (initialised), and
        // only the `n` bytes it reports are marked initialised below;
        // nothing uninitialised is ever written into the buffer.
        let unfilled = unsafe { buf.unfilled_mut() };
        let n = std::task::ready!(s.poll_read_uninit(cx, unfilled))?;
        // SAFETY: `recv` initialised the first `n` unfilled bytes.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    macro_rules! tokio_read {
        ($t:ty, $s:ident => $e:expr) => {
            impl AsyncRead for $t {
                fn poll_read(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &mut ReadBuf<'_>,
                ) -> Poll<io::Result<()>> {
                    let $s = &*self;
                    read($e, cx, buf)
                }
            }
        };
    }

    macro_rules! tokio_write {
        ($t:ty, $s:ident => $e:expr) => {
            impl AsyncWrite for $t {
                fn poll_write(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    buf: &[u8],
                ) -> Poll<io::Result<usize>> {
                    let $s = &*self;
                    $e.poll_write_buf(cx, buf)
                }

                fn poll_write_vectored(
                    self: Pin<&mut Self>,
                    cx: &mut Context<'_>,
                    bufs: &[IoSlice<'_>],
                ) -> Poll<io::Result<usize>> {
                    let $s = &*self;
                    $e.poll_write_bufs(cx, bufs)
                }

                fn is_write_vectored(&self) -> bool {
                    true
                }

                fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
                    Poll::Ready(Ok(()))
                }

                fn poll_shutdown(
                    self: Pin<&mut Self>,
                    _: &mut Context<'_>,
                ) -> Poll<io::Result<()>> {
                    let $s = &*self;
                    Poll::Ready($e.shutdown_write())
                }
            }
        };
    }

    tokio_read!(TcpStream, s => s);
    tokio_write!(TcpStream, s => s);
    tokio_read!(OwnedReadHalf, s => &s.0);
    tokio_write!(OwnedWriteHalf, s => &s.0);
}
