//! The RPC server's connection handler written once as async code, run on
//! skq-async (`--mode async-MODE`) and on tokio (`--mode async-tokio`)
//! unchanged: what a tokio user's server looks like, so `skq bench`
//! compares the two runtimes on the same application code.
//!
//! The handler ([`serve_connection`]) and the accept loop ([`accept_loop`])
//! are generic over [`AsyncRt`]: the stream type (tokio's
//! `AsyncRead`/`AsyncWrite`, which skq-async's `TcpStream` implements with
//! its `tokio-io` feature), accept, spawn, yield, timeout and the worker
//! index. The two implementations are in [`crate::async_rt`].
//!
//! **Behaviour, as the sans-I/O RPC protocol's ([`crate::rpc`]):**
//! * a connection's requests are served strictly in order, one reply each,
//!   each reply written before the next request is served (the protocol's
//!   `flush_each`); the service blocks the worker thread for the service
//!   time (emulated: an absolute-deadline sleep; spun: a busy loop), exactly
//!   as the tokio driver's handler does;
//! * a request above `--max-service-us` gets the refusal reply, in order,
//!   and the connection stays open;
//! * the first invalid frame closes that connection only (counted as a
//!   protocol error); a peer gone mid-frame or a failed socket counts as
//!   aborted; `--idle-timeout` closes a connection idle (nothing buffered)
//!   that long;
//! * after [`REQUESTS_PER_EVENT`] requests in a row the task yields to the
//!   runtime, as the drivers' per-event budget;
//! * with `--classify header`, the task's class follows its latest request
//!   (skq-async: `set_class`, governing the task's next wake-up; tokio has
//!   no task priority).
//!
//! **Counters** (skq-net's, so the stats JSON has the same shape): per
//! worker, requests (refusals included), delivered service, reads that
//! returned bytes (`events`) and writes that had to wait (`write_blocked`);
//! per server, accepted, refused at `--max-conns`, closed by reason.
//!
//! **Memory** (`async_buf.rs`). Reads go through the thread's scratch
//! buffer; an idle connection holds its task (the future, reported as
//! `memory.idle_conn_bytes`) and at most `conn::KEEP_CAPACITY` bytes each
//! of input and output, as skq-net's `Conn`. Larger buffers come from and
//! go back to the thread's `bufpool`, so large requests allocate nothing
//! in steady state.
//!
//! **Who touches what.** A connection's buffers belong to its task; the
//! shared state ([`AsyncShared`]) is atomics and the read-only settings.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use skq_net::conn::REQUESTS_PER_EVENT;
use skq_net::stats::{Counters, WorkerCounters};
use skq_net::{Class, Close, Notice, Notices};
use skq_proto::wire;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::async_buf::Bufs;
use crate::service::{Deliver, ServiceMode};

/// Most unserved bytes a connection may buffer (a whole frame of the
/// largest size must fit, as [`crate::rpc::RpcProtocol`]'s read limit).
const READ_LIMIT: usize = wire::MAX_FRAME + 64 * 1024;

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
    /// Sets the calling task's priority class for its next wake-up (where
    /// the runtime has classes).
    fn set_class(class: Class);
}

/// What every connection task of one server shares.
pub struct AsyncShared {
    /// The skq-net counters (same stats JSON as the drivers).
    pub counters: Counters,
    /// What the server has to tell the operator.
    pub notices: Notices,
    /// How service is delivered.
    pub service: ServiceMode,
    /// `skq_rt::checkpoint` every this many ns of service (0: never).
    pub checkpoint_ns: u64,
    /// Longer requests are refused.
    pub max_service_ns: u64,
    /// Whether the task's class follows its requests' class byte.
    pub classify: bool,
    /// Close connections idle this long.
    pub idle_timeout: Option<Duration>,
    /// Most connections served at once.
    pub max_conns: usize,
    /// Connections being served now.
    pub open: AtomicUsize,
    /// Bytes an idle connection's task holds (its future).
    pub idle_conn_bytes: AtomicUsize,
}

impl AsyncShared {
    /// The counters of the worker the caller runs on.
    pub fn worker_counters<R: AsyncRt>(&self) -> &WorkerCounters {
        let w = R::worker().min(self.counters.workers.len() - 1);
        &self.counters.workers[w]
    }
}

thread_local! {
    /// Whether this thread's timer slack was set for emulated service.
    static PREPARED: Cell<bool> = const { Cell::new(false) };
}

/// Delivers `service_ns` on the calling thread (blocking it) and returns
/// the nanoseconds delivered.
fn deliver(sh: &AsyncShared, service_ns: u32) -> u32 {
    if !PREPARED.with(|p| p.replace(true)) {
        sh.service.prepare_thread();
    }
    if sh.checkpoint_ns == 0 {
        sh.service.serve(service_ns)
    } else {
        sh.service
            .serve_checkpointed(service_ns, sh.checkpoint_ns, || {
                skq_rt::checkpoint();
            })
    }
}

/// The class a request's class byte names (as the header classifier maps it).
fn class_of(byte: u8) -> Class {
    match byte {
        1 => Class::High,
        2 => Class::Batch,
        _ => Class::Regular,
    }
}

/// What serves one accepted connection on an [`AsyncRt`]: the RPC handler
/// ([`Rpc`]) or any skq-net protocol ([`crate::async_proto`]).
pub trait ConnHandler: Send + Sync + 'static {
    /// Serves `stream` until it ends; returns why it ended.
    fn serve<R: AsyncRt>(
        &self,
        stream: R::Stream,
        sh: &AsyncShared,
    ) -> impl Future<Output = Close> + Send;
}

/// The RPC handler ([`serve_connection`]).
pub struct Rpc;

impl ConnHandler for Rpc {
    fn serve<R: AsyncRt>(
        &self,
        stream: R::Stream,
        sh: &AsyncShared,
    ) -> impl Future<Output = Close> + Send {
        serve_connection::<R>(stream, sh)
    }
}

/// Accepts connections forever, spawning one `handler` task each.
pub async fn accept_loop<R: AsyncRt, H: ConnHandler>(
    rt: R,
    listener: R::Listener,
    sh: Arc<AsyncShared>,
    handler: Arc<H>,
) {
    loop {
        let stream = match R::accept(&listener).await {
            Ok(s) => s,
            Err(e) => {
                // Out of fds, or worse: back off instead of spinning.
                sh.notices.push(Notice::AcceptFailed(e));
                R::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if sh.open.fetch_add(1, Ordering::Relaxed) >= sh.max_conns {
            sh.open.fetch_sub(1, Ordering::Relaxed);
            sh.counters.conns.rejected();
            continue; // dropping the stream closes it
        }
        sh.counters.conns.accepted();
        let task_sh = sh.clone();
        let task_h = handler.clone();
        let task = async move {
            let why = task_h.serve::<R>(stream, &task_sh).await;
            task_sh.open.fetch_sub(1, Ordering::Relaxed);
            task_sh.counters.conns.closed(why);
        };
        if sh.idle_conn_bytes.load(Ordering::Relaxed) == 0 {
            let bytes = std::mem::size_of_val(&task);
            sh.idle_conn_bytes.store(bytes, Ordering::Relaxed);
        }
        if !rt.spawn(task) {
            // The stream went with the task: closed, counted as aborted.
            sh.open.fetch_sub(1, Ordering::Relaxed);
            sh.counters.conns.closed(Close::Aborted);
            sh.notices.push(Notice::AcceptFailed(io::Error::other(
                "a connection task could not be spawned; the connection was closed",
            )));
        }
    }
}

/// Serves one connection until it ends; returns why it ended.
pub async fn serve_connection<R: AsyncRt>(mut stream: R::Stream, sh: &AsyncShared) -> Close {
    // `out` holds one reply at a time (a header: replies carry no payload).
    let mut b = Bufs::default();
    let mut start = 0; // bytes of `b.input` already served
    let mut served = 0;
    let mut class = Class::Regular;
    loop {
        // Every whole request buffered, in order, each reply written before
        // the next is served.
        loop {
            let req = match wire::decode_request(&b.input[start..]) {
                Err(_) => return Close::Protocol,
                Ok(None) => break,
                Ok(Some(req)) => req,
            };
            start += req.frame_len();
            let c = sh.worker_counters::<R>();
            c.record_request();
            b.out.clear();
            if u64::from(req.service_ns) > sh.max_service_ns {
                req.refusal().encode(&mut b.out);
            } else {
                if sh.classify && class_of(req.class) != class {
                    class = class_of(req.class);
                    R::set_class(class);
                }
                let delivered = deliver(sh, req.service_ns);
                c.record_service(u64::from(delivered));
                req.reply(delivered).encode(&mut b.out);
            }
            if let Err(why) = write_all(&mut stream, &b.out, c).await {
                return why;
            }
            served += 1;
            if served >= REQUESTS_PER_EVENT {
                served = 0;
                R::yield_now().await;
            }
        }
        b.compact(start);
        start = 0;
        if b.input.len() >= READ_LIMIT {
            return Close::Protocol;
        }
        let idle = b.input.is_empty();
        let read = match sh.idle_timeout {
            Some(d) if idle => match R::timeout(d, b.read(&mut stream)).await {
                Some(r) => r,
                None => return Close::Timeout,
            },
            _ => b.read(&mut stream).await,
        };
        match read {
            Ok(0) if b.input.is_empty() => return Close::Eof,
            Ok(0) => return Close::Aborted,
            Ok(_) => sh.worker_counters::<R>().record_event(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Close::Aborted,
        }
    }
}

/// Writes all of `buf`; a write that has to wait for socket space counts
/// once in `write_blocked`.
pub(crate) async fn write_all<S: AsyncWrite + Unpin>(
    stream: &mut S,
    mut buf: &[u8],
    c: &WorkerCounters,
) -> Result<(), Close> {
    let mut blocked = false;
    while !buf.is_empty() {
        let n = poll_fn(|cx| {
            let p = Pin::new(&mut *stream).poll_write(cx, buf);
            if p.is_pending() && !blocked {
                blocked = true;
                c.record_blocked();
            }
            p
        })
        .await
        .map_err(|_| Close::Aborted)?;
        if n == 0 {
            return Err(Close::Aborted);
        }
        buf = &buf[n..];
    }
    Ok(())
}
