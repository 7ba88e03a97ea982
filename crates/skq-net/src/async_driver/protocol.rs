//! Any [`Protocol`] served by async code on skq-async (`--mode
//! async-MODE`) or tokio (`--mode async-tokio`): the connection loop the
//! sans-I/O drivers run, written once as an async task over [`AsyncRt`]
//! and started by [`super::start_handler`], the same runtimes, accept loop
//! and stats as any other [`ConnHandler`] (skq-servers' async RPC handler
//! among them). `skq serve http` runs its static-file protocol this way.
//!
//! **Behaviour, as this layer's connection layer ([`crate::conn`]):**
//! * `serve` is called with every unserved byte, one request per call, in
//!   order; replies are written after each request when the protocol
//!   wants `flush_each`, else once per batch of pipelined requests (at most
//!   [`REQUESTS_PER_EVENT`], then the task yields);
//! * a reply marked `resume_later` is finished piece by piece, each piece
//!   written before the next is asked for; a reply ending with a file
//!   region (`Cx::send_file`) is written, then the region is **read in
//!   bounded pieces** ([`FILE_PIECE`] bytes, `pread`) and written: no
//!   `sendfile(2)` on this path (the runtimes' streams expose no zero-copy
//!   send), but a connection still holds at most one piece of the file;
//!   a file that turns out shorter closes the connection (aborted);
//!   nothing else is served on the connection until the reply is sent;
//! * [`Served::Close`] writes what the reply holds, then closes with its
//!   reason; input beyond the protocol's `read_limit` closes as a protocol
//!   error; a peer gone mid-request or a failed socket counts as aborted;
//! * timeouts ([`Timeouts`]): `request` from a request's first byte to its
//!   end (and a fresh connection's wait for its first byte), `idle`
//!   between requests, `send` for a write that makes no progress; a
//!   timeout calls the protocol's `timed_out` before `close`.
//!
//! **Memory** ([`Bufs`], `buf.rs`): reads go through the thread's
//! scratch buffer; buffers beyond `conn::KEEP_CAPACITY` come from the
//! thread's `bufpool` and go back once empty, so an idle connection holds
//! at most two buffers of that size, as this layer's `Conn`, and large
//! requests and replies allocate nothing in steady state.
//!
//! **Not on this path:** the protocol's classifier (no scheduling classes
//! here; `skq serve http` refuses `--priority` outside the skq driver),
//! `refuse_batch`, and the per-protocol rejection hooks and busy message
//! (a connection over `--max-conns` is closed at once and counted).

use std::cell::Cell;
use std::convert::Infallible;
use std::future::poll_fn;
use std::io;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWrite;

use crate::conn::REQUESTS_PER_EVENT;
use crate::protocol::FileRegion;
use crate::stats::WorkerCounters;
use crate::{Close, Cx, Protocol, Resume, Served, ServerConfig, ServerHandle, Timeouts};

use super::buf::{reserve_pooled, Bufs};
use super::{AsyncRt, AsyncShared, ConnHandler};

/// Most bytes of a file region read into memory at once.
pub const FILE_PIECE: usize = 64 * 1024;

thread_local! {
    /// Whether the protocol's `prepare_worker` ran on this thread.
    static PREPARED: Cell<bool> = const { Cell::new(false) };
}

/// A protocol as a [`ConnHandler`].
pub struct ProtocolHandler<P> {
    proto: Arc<P>,
    timeouts: Timeouts,
}

/// Starts `proto` on the async runtime `cfg.mode` names (an `async-` mode;
/// anything else is an `InvalidInput` error naming it).
pub fn start<P: Protocol>(cfg: &ServerConfig, proto: Arc<P>) -> io::Result<ServerHandle> {
    let crate::Mode::Async(runtime) = cfg.mode else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--mode {}: not an async mode", cfg.mode),
        ));
    };
    cfg.validate()
        .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
    let shared = AsyncShared::new(cfg.workers, cfg.max_conns, ());
    let handler = Arc::new(ProtocolHandler {
        proto,
        timeouts: cfg.timeouts,
    });
    super::start_handler(cfg, runtime, shared, handler)
}

impl<P: Protocol> ConnHandler for ProtocolHandler<P> {
    type App = ();

    async fn serve<R: AsyncRt>(&self, stream: R::Stream, sh: &AsyncShared<()>) -> Close {
        let worker = R::worker();
        if !PREPARED.with(|p| p.replace(true)) {
            self.proto.prepare_worker(worker);
        }
        let mut session = self.proto.open(worker);
        let why = match self.run::<R>(stream, sh, &mut session).await {
            Ok(never) => match never {},
            Err(why) => why,
        };
        if why == Close::Timeout {
            self.proto.timed_out(R::worker());
        }
        self.proto.close(session, R::worker());
        why
    }
}

impl<P: Protocol> ProtocolHandler<P> {
    /// The connection loop; returns (as its error) why the connection ended.
    async fn run<R: AsyncRt>(
        &self,
        mut stream: R::Stream,
        sh: &AsyncShared<()>,
        session: &mut P::Session,
    ) -> Result<Infallible, Close> {
        let p = &*self.proto;
        let send = self.timeouts.send;
        let mut b = Bufs::default();
        let mut start = 0; // bytes of `b.input` already served
        let mut served_any = false;
        // When the unserved request's first byte arrived (or, before the
        // first request, the connection was accepted).
        let mut request_since: Option<Instant> = None;
        loop {
            let mut served = 0;
            loop {
                let c = sh.worker_counters::<R>();
                let mut cx = Cx::new(R::worker(), c);
                b.prepare_output();
                let result = p.serve(session, &b.input[start..], &mut b.out, &mut cx);
                // This loop writes one buffer: shared regions are copied in.
                cx.inline_shared(&mut b.out);
                let (file, resume) = (cx.take_file(), cx.take_resume());
                drop(cx);
                match result {
                    Served::NeedInput { consumed } => {
                        start += consumed;
                        break;
                    }
                    Served::Close { why, .. } => {
                        let _ = write_out::<R>(&mut stream, &mut b.out, c, send).await;
                        return Err(why);
                    }
                    Served::Request { consumed } => {
                        start += consumed;
                        c.record_request();
                        served_any = true;
                        request_since = None;
                        if resume {
                            self.finish::<R>(&mut stream, session, &mut b.out, c)
                                .await?;
                        }
                        if let Some(region) = file {
                            write_out::<R>(&mut stream, &mut b.out, c, send).await?;
                            send_region::<R>(&mut stream, region, &mut b.out, c, send).await?;
                        } else if p.flush_each() {
                            write_out::<R>(&mut stream, &mut b.out, c, send).await?;
                        }
                        served += 1;
                        if served >= REQUESTS_PER_EVENT {
                            served = 0;
                            write_out::<R>(&mut stream, &mut b.out, c, send).await?;
                            R::yield_now().await;
                        }
                    }
                }
            }
            let c = sh.worker_counters::<R>();
            write_out::<R>(&mut stream, &mut b.out, c, send).await?;
            b.settle_output();
            b.compact(start);
            start = 0;
            if b.input.len() >= p.read_limit() {
                return Err(Close::Protocol);
            }
            let limit = if b.input.is_empty() && served_any {
                self.timeouts.idle
            } else {
                let since = *request_since.get_or_insert_with(Instant::now);
                self.timeouts
                    .request
                    .map(|d| d.saturating_sub(since.elapsed()))
            };
            let read = match limit {
                Some(d) => match R::timeout(d, b.read(&mut stream)).await {
                    Some(r) => r,
                    None => return Err(Close::Timeout),
                },
                None => b.read(&mut stream).await,
            };
            match read {
                Ok(0) if b.input.is_empty() => return Err(Close::Eof),
                Ok(0) => return Err(Close::Aborted),
                Ok(_) => sh.worker_counters::<R>().record_event(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Close::Aborted),
            }
        }
    }

    /// Writes a `resume_later` reply piece by piece until it is done.
    async fn finish<R: AsyncRt>(
        &self,
        stream: &mut R::Stream,
        session: &mut P::Session,
        out: &mut Vec<u8>,
        c: &WorkerCounters,
    ) -> Result<(), Close> {
        loop {
            write_out::<R>(stream, out, c, self.timeouts.send).await?;
            let mut cx = Cx::new(R::worker(), c);
            let r = self.proto.resume(session, out, &mut cx);
            cx.inline_shared(out);
            drop(cx);
            match r {
                Resume::More => {}
                Resume::Done => return Ok(()),
                Resume::Close(why) => {
                    let _ = write_out::<R>(stream, out, c, self.timeouts.send).await;
                    return Err(why);
                }
            }
        }
    }
}

/// Writes and clears `out`; a write that has to wait counts once in
/// `write_blocked`; one that makes no progress for `send` times out.
async fn write_out<R: AsyncRt>(
    stream: &mut R::Stream,
    out: &mut Vec<u8>,
    c: &WorkerCounters,
    send: Option<Duration>,
) -> Result<(), Close> {
    let mut at = 0;
    let mut blocked = false;
    while at < out.len() {
        let write = poll_fn(|cx| {
            let p = Pin::new(&mut *stream).poll_write(cx, &out[at..]);
            if p.is_pending() && !blocked {
                blocked = true;
                c.record_blocked();
            }
            p
        });
        let n = match send {
            Some(d) => R::timeout(d, write).await.ok_or(Close::Timeout)?,
            None => write.await,
        }
        .map_err(|_| Close::Aborted)?;
        if n == 0 {
            return Err(Close::Aborted);
        }
        at += n;
    }
    out.clear();
    Ok(())
}

/// Sends a file region by reading it in pieces of at most [`FILE_PIECE`]
/// bytes into `out` (empty on entry and on return); a file shorter than
/// the region aborts the connection.
async fn send_region<R: AsyncRt>(
    stream: &mut R::Stream,
    region: FileRegion,
    out: &mut Vec<u8>,
    c: &WorkerCounters,
    send: Option<Duration>,
) -> Result<(), Close> {
    let FileRegion {
        file,
        mut offset,
        mut len,
    } = region;
    while len > 0 {
        let want = (len as usize).min(FILE_PIECE);
        reserve_pooled(out, want);
        out.resize(want, 0);
        let n = loop {
            match file.read_at(&mut out[..want], offset) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break 0,
            }
        };
        if n == 0 {
            out.clear();
            return Err(Close::Aborted);
        }
        out.truncate(n);
        write_out::<R>(stream, out, c, send).await?;
        offset += n as u64;
        len -= n as u64;
    }
    Ok(())
}
