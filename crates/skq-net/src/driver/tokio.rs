//! The tokio driver: the same protocol on tokio's multi-thread runtime.
//!
//! One task per connection on a runtime with `workers` worker threads
//! (tokio's work-stealing scheduler decides which thread polls which task).
//! The protocol's `serve` runs inside the task and blocks its worker thread,
//! as CPU work would. Two alternatives are deliberately not used:
//! `block_in_place` would hand the worker's other tasks to a freshly spawned
//! thread (the runtime would silently grow beyond `workers` threads), and a
//! protocol cannot `.await` (it is sans-I/O).
//!
//! A task serves every buffered request in order, writing each reply before
//! serving the next when the protocol flushes each (and whenever the output
//! ceiling is reached: the task then waits for the socket before serving
//! more), and yields to the scheduler after [`REQUESTS_PER_EVENT`]
//! requests, like the fd drivers' per-event budget. A reply produced in
//! pieces gets each piece once the output is below the low watermark.
//! Timeouts are tokio timers around the waits for readability (idle and
//! request limits, by the state the connection waits in) and writability
//! (the send limit).
//!
//! Two request paths share the runtime, the accept loop, the reads and the
//! writes:
//! * [`Driver::Tokio`]: the protocol runs inline in the task, as above;
//! * [`Driver::TokioSpawnBlocking`]: the protocol runs off the worker
//!   threads, in `tokio::task::spawn_blocking` ([`super::tokio_pool`]), on a
//!   blocking pool capped at `workers` threads (so emulated service, a
//!   sleep, cannot run on more threads than the server has workers).
//!
//! Every thread the runtime starts (worker or blocking) gets a worker index
//! (`i % workers`, in start order), its `prepare_worker` call and, with
//! `pin`, its CPU; the counters a request records are those of the index of
//! the thread that served it.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::os::fd::AsFd;

use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream};

use crate::config::{Driver, ServerConfig, Timeouts};
use crate::conn::{Conn, Limits, REQUESTS_PER_EVENT, SENDFILE_MAX};
use crate::protocol::{Close, Cx, Protocol, Resume, Served};
use crate::server::{Common, Running};
use crate::stats::ServerStats;

/// Bytes of spare capacity made available before each read.
const READ_CHUNK: usize = 16 * 1024;

thread_local! {
    /// Each runtime thread's read buffer (tasks read synchronously with
    /// `try_read`, so no task holds it across an await).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; READ_CHUNK]);
}

thread_local! {
    /// Index of the tokio worker thread running on this OS thread.
    static WORKER_INDEX: Cell<usize> = const { Cell::new(0) };
}

pub(crate) struct TokioDriver<P: Protocol> {
    runtime: tokio::runtime::Runtime,
    common: Arc<Common<P>>,
    local_addr: SocketAddr,
}

pub(crate) fn start<P: Protocol>(
    cfg: &ServerConfig,
    common: Arc<Common<P>>,
) -> io::Result<TokioDriver<P>> {
    let workers = cfg.workers;
    let next_thread = Arc::new(AtomicUsize::new(0));
    let pin = cfg.pin;
    let proto = common.proto.clone();
    let notices = common.notices.clone();
    let pooled = cfg.driver() == Driver::TokioSpawnBlocking;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if pooled {
        builder.max_blocking_threads(workers);
    }
    let runtime = builder
        .worker_threads(workers)
        .enable_io()
        .enable_time()
        .thread_name("skq-tokio")
        .on_thread_start(move || {
            let i = next_thread.fetch_add(1, Ordering::Relaxed);
            WORKER_INDEX.with(|w| w.set(i % workers));
            if pin {
                crate::server::pin_worker(i, &notices);
            }
            proto.prepare_worker(i % workers);
        })
        .build()?;
    let std_listener = skq_sys::net::listen(cfg.addr, false)?;
    let local_addr = std_listener.local_addr()?;
    let listener = {
        let _guard = runtime.enter();
        TcpListener::from_std(std_listener)?
    };
    runtime.spawn(accept_loop(
        listener,
        common.clone(),
        Limits::of(cfg),
        cfg.timeouts,
        pooled,
    ));
    Ok(TokioDriver {
        runtime,
        common,
        local_addr,
    })
}

impl<P: Protocol> Running for TokioDriver<P> {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn stats(&self) -> ServerStats {
        self.common.snapshot(None, 0)
    }

    /// Drops every task (closing their sockets) and joins the worker threads.
    fn shutdown(self: Box<Self>) -> ServerStats {
        let me = *self;
        me.runtime.shutdown_timeout(Duration::from_secs(10));
        me.common.snapshot(None, 0)
    }
}

pub(super) fn worker_index() -> usize {
    WORKER_INDEX.with(|w| w.get())
}

async fn accept_loop<P: Protocol>(
    listener: TcpListener,
    common: Arc<Common<P>>,
    limits: Limits,
    timeouts: Timeouts,
    pooled: bool,
) {
    let mut task_bytes = 0;
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of fds: take the waiting connection with the reserve fd
            // and close it, counted, rather than leave it in the backlog.
            Err(e) if skq_sys::limits::is_fd_exhaustion(&e) => {
                let w = worker_index();
                if common.reserve.release() {
                    if let Ok((refused, _)) = listener.accept().await {
                        let msg = common.proto.busy_message();
                        if !msg.is_empty() {
                            let _ = refused.try_write(msg);
                        }
                        common.counters.conns.rejected_fd_limit();
                        common.proto.rejected_fd_limit(w);
                    }
                    common.reserve.restore();
                } else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
            // Anything else: back off instead of spinning.
            Err(e) => {
                common.notices.push(crate::notice::Notice::AcceptFailed(e));
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let w = worker_index();
        let Ok(std_stream) = stream.into_std() else {
            continue;
        };
        let Some(std_stream) = common.admit(w, std_stream) else {
            continue;
        };
        let Ok(stream) = TcpStream::from_std(std_stream) else {
            // The runtime refused the socket (it is closed already).
            common.release_admitted(w);
            continue;
        };
        let shared = common.clone();
        let task = async move {
            let mut conn = Conn::with_limits(shared.open_session(w), limits);
            if pooled {
                let (why, conn) =
                    super::tokio_pool::serve_connection(stream, conn, &shared, timeouts).await;
                // No connection back: the runtime is shutting down.
                if let Some(conn) = conn {
                    shared.closed(worker_index(), why, conn.session);
                }
            } else {
                let why = serve_connection(stream, &mut conn, &shared, timeouts).await;
                shared.closed(worker_index(), why, conn.session);
            }
        };
        if task_bytes == 0 {
            // The task's future is the connection's whole state (tokio's
            // own task header comes on top and is not counted here).
            task_bytes = std::mem::size_of_val(&task);
            common.idle_conn_bytes.store(task_bytes, Ordering::Relaxed);
        }
        tokio::spawn(task);
    }
}

async fn serve_connection<P: Protocol>(
    mut stream: TcpStream,
    conn: &mut Conn<P::Session>,
    common: &Common<P>,
    t: Timeouts,
) -> Close {
    match serve_until_closed(&mut stream, conn, common, &t).await {
        Ok(never) => match never {},
        Err(why) => why,
    }
}

/// Serves the connection; returns only with the reason to close it.
async fn serve_until_closed<P: Protocol>(
    stream: &mut TcpStream,
    conn: &mut Conn<P::Session>,
    common: &Common<P>,
    t: &Timeouts,
) -> Result<std::convert::Infallible, Close> {
    let proto = &*common.proto;
    let (flush_each, limit) = (proto.flush_each(), proto.read_limit());
    let max_output = conn.limits().max_output;
    let mut served = 0usize;
    loop {
        loop {
            let w = worker_index();
            let mut cx = Cx::new(w, &common.counters.workers[w]);
            match conn.serve_one(proto, &mut cx) {
                Served::Request { .. } => {
                    served += 1;
                    pump(stream, conn, common, t, &mut served).await?;
                    if flush_each || conn.sending_file() || conn.pending_charge() >= max_output {
                        write_out(stream, conn, t.send).await?;
                    }
                    if served >= REQUESTS_PER_EVENT {
                        served = 0;
                        write_out(stream, conn, t.send).await?;
                        tokio::task::yield_now().await;
                    }
                }
                Served::NeedInput { .. } => break,
                Served::Close { why, .. } => {
                    let _ = write_out(stream, conn, t.send).await;
                    return Err(why);
                }
            }
        }
        write_out(stream, conn, t.send).await?;
        read_more(stream, conn, common, t, limit).await?;
    }
}

/// Once the buffered requests are served and their replies written: ends
/// the connection at the peer's EOF or at an over-long request, else waits
/// for bytes and reads what is there; returns how many bytes it read (0:
/// woken without data, or EOF just seen).
pub(super) async fn read_more<P: Protocol>(
    stream: &mut TcpStream,
    conn: &mut Conn<P::Session>,
    common: &Common<P>,
    t: &Timeouts,
    limit: usize,
) -> Result<usize, Close> {
    if conn.is_eof() {
        return Err(if conn.buffered().is_empty() {
            Close::Eof
        } else {
            Close::Aborted
        });
    }
    if conn.buffered().len() >= limit {
        return Err(Close::Protocol);
    }
    // Wait for bytes without reserving memory first, so idle
    // connections hold no buffer; under the timeout of the state the
    // connection waits in.
    let ready = if conn.limits().timers {
        let now = skq_sys::cpu::monotonic_ns();
        conn.note_wait(now);
        match conn.time_left(now, t) {
            Some(ns) => tokio::time::timeout(Duration::from_nanos(ns), stream.readable())
                .await
                .map_err(|_| Close::Timeout)?,
            None => stream.readable().await,
        }
    } else {
        stream.readable().await
    };
    ready.map_err(|_| Close::Aborted)?;
    common.counters.workers[worker_index()].record_event();
    // Read into this thread's scratch buffer and keep only the bytes
    // read, as the other drivers do: a connection holds no read buffer
    // sized for the largest read it ever made.
    let read = SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        let r = stream.try_read(&mut scratch[..]);
        if let Ok(n) = r {
            conn.push_input(&scratch[..n]);
        }
        r
    });
    match read {
        Ok(0) => {
            conn.set_eof();
            Ok(0)
        }
        Ok(n) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
        Err(_) => Err(Close::Aborted),
    }
}

/// Produces a resumed reply's pieces ([`Protocol::resume`]) while the
/// output is below the low watermark, writing between pieces, until the
/// reply is complete; pieces count against the request budget.
async fn pump<P: Protocol>(
    stream: &mut TcpStream,
    conn: &mut Conn<P::Session>,
    common: &Common<P>,
    t: &Timeouts,
    served: &mut usize,
) -> Result<(), Close> {
    let proto = &*common.proto;
    while conn.is_resuming() {
        if conn.pending_charge() >= conn.limits().low_water || conn.sending_file() {
            write_out(stream, conn, t.send).await?;
        }
        if *served >= REQUESTS_PER_EVENT {
            *served = 0;
            tokio::task::yield_now().await;
        }
        *served += 1;
        let w = worker_index();
        let mut cx = Cx::new(w, &common.counters.workers[w]);
        if let Some(Resume::Close(why)) = conn.resume_one(proto, &mut cx) {
            let _ = write_out(stream, conn, t.send).await;
            return Err(why);
        }
    }
    Ok(())
}

/// Writes all pending output, then the reply's file region if any (with
/// `sendfile(2)`, through tokio's readiness: `try_io`); each wait for
/// socket space is limited by the send timeout (restarted by every write
/// that makes progress).
pub(super) async fn write_out<S>(
    stream: &mut TcpStream,
    conn: &mut Conn<S>,
    send: Option<Duration>,
) -> Result<(), Close> {
    // File bytes sent since the task last yielded: a long file does not
    // hold the worker thread (the fd drivers' per-event budget).
    let mut since_yield = 0usize;
    while conn.wants_write() {
        // Buffered bytes (and shared regions) first; then the file region,
        // straight from the page cache.
        let file = !conn.has_pending_bytes();
        let wrote = if file {
            let sock = stream.as_fd();
            stream.try_io(Interest::WRITABLE, || conn.send_file_once(sock))
        } else {
            let mut iov = [io::IoSlice::new(&[]); 32];
            let n = conn.pending_slices(&mut iov);
            stream.try_write_vectored(&iov[..n])
        };
        match wrote {
            Ok(n) if file => {
                since_yield += n;
                if since_yield >= SENDFILE_MAX {
                    since_yield = 0;
                    tokio::task::yield_now().await;
                }
            }
            Ok(0) => return Err(Close::Aborted),
            Ok(n) => conn.consume_output(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let ready = match send {
                    Some(d) => tokio::time::timeout(d, stream.writable())
                        .await
                        .map_err(|_| Close::Timeout)?,
                    None => stream.writable().await,
                };
                ready.map_err(|_| Close::Aborted)?;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(Close::Aborted),
        }
    }
    Ok(())
}
