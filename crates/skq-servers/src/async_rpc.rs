//! The RPC server's connection handler written once as async code, run on
//! skq-async (`--mode async-MODE`) and on tokio (`--mode async-tokio`)
//! unchanged: what a tokio user's server looks like, so `skq bench`
//! compares the two runtimes on the same application code.
//!
//! The handler ([`serve_connection`]) is generic over skq-net's
//! [`AsyncRt`]: the stream type (tokio's `AsyncRead`/`AsyncWrite`, which
//! skq-async's `TcpStream` implements with its `tokio-io` feature), yield,
//! timeout, the worker index and the task's class. skq-net's async drivers
//! ([`skq_net::async_driver`]) have the two runtimes, the accept loop and
//! the stats; [`crate::RpcServer::start`] starts the handler on them for an
//! `async-` mode.
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
//! * with `--classify header`, the task's class and its socket's follow its
//!   latest request (skq-async: `set_class` and `TcpStream::set_class`,
//!   governing the next wake-ups of both, so the socket's readiness is
//!   activated and queued high too; tokio has no task priority).
//!
//! **Counters** (skq-net's, so the stats JSON has the same shape): per
//! worker, requests (refusals included), delivered service, reads that
//! returned bytes (`events`) and writes that had to wait (`write_blocked`);
//! per server, accepted, refused at `--max-conns`, closed by reason.
//!
//! **Memory** (skq-net's [`Bufs`]). Reads go through the thread's scratch
//! buffer; an idle connection holds its task (the future, reported as
//! `memory.idle_conn_bytes`) and at most `conn::KEEP_CAPACITY` bytes each
//! of input and output, as skq-net's `Conn`. Larger buffers come from and
//! go back to the thread's `bufpool`, so large requests allocate nothing
//! in steady state.
//!
//! **Who touches what.** A connection's buffers belong to its task; the
//! shared state ([`AsyncShared`]) is atomics, the counters and the
//! read-only settings ([`Settings`]).

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use skq_net::async_driver::{self, AsyncRt, AsyncShared, Bufs, ConnHandler};
use skq_net::conn::REQUESTS_PER_EVENT;
use skq_net::stats::WorkerCounters;
use skq_net::{AsyncRuntime, Class, Close, ServerHandle};
use skq_proto::wire;
use tokio::io::AsyncWrite;

use crate::rpc::Classify;
use crate::server::RpcConfig;
use crate::service::{Deliver, ServiceMode};

/// Most unserved bytes a connection may buffer (a whole frame of the
/// largest size must fit, as [`crate::rpc::RpcProtocol`]'s read limit).
const READ_LIMIT: usize = wire::MAX_FRAME + 64 * 1024;

/// The RPC handler's settings, shared by its connections
/// ([`AsyncShared::app`]).
pub struct Settings {
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
}

/// Starts the RPC handler for `cfg` (an `async-` mode, validated) on
/// `runtime`, the one the mode names; `max_service_ns` and `checkpoint_ns`
/// as the sans-I/O protocol's.
pub(crate) fn start(
    cfg: &RpcConfig,
    runtime: AsyncRuntime,
    max_service_ns: u64,
    checkpoint_ns: u64,
) -> io::Result<ServerHandle> {
    let settings = Settings {
        service: cfg.spec.service,
        checkpoint_ns,
        max_service_ns,
        classify: cfg.classify == Classify::Header,
        idle_timeout: cfg.idle_timeout,
    };
    let shared = AsyncShared::new(cfg.spec.workers, cfg.max_conns, settings);
    async_driver::start_handler(&cfg.server_config(), runtime, shared, Arc::new(Rpc))
}

thread_local! {
    /// Whether this thread's timer slack was set for emulated service.
    static PREPARED: Cell<bool> = const { Cell::new(false) };
}

/// Delivers `service_ns` on the calling thread (blocking it) and returns
/// the nanoseconds delivered.
fn deliver(sh: &Settings, service_ns: u32) -> u32 {
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

/// The RPC handler ([`serve_connection`]).
pub struct Rpc;

impl ConnHandler for Rpc {
    type App = Settings;

    fn serve<R: AsyncRt>(
        &self,
        stream: R::Stream,
        sh: &AsyncShared<Settings>,
    ) -> impl Future<Output = Close> + Send {
        serve_connection::<R>(stream, sh)
    }
}

/// Serves one connection until it ends; returns why it ended.
pub async fn serve_connection<R: AsyncRt>(
    mut stream: R::Stream,
    sh: &AsyncShared<Settings>,
) -> Close {
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
            if u64::from(req.service_ns) > sh.app.max_service_ns {
                req.refusal().encode(&mut b.out);
            } else {
                if sh.app.classify && class_of(req.class) != class {
                    class = class_of(req.class);
                    R::set_class(&stream, class);
                }
                let delivered = deliver(&sh.app, req.service_ns);
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
        let read = match sh.app.idle_timeout {
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
async fn write_all<S: AsyncWrite + Unpin>(
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
