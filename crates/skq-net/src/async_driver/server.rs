//! Starting a server on one of the two runtimes ([`start_handler`]): the
//! state a server's connection tasks share ([`AsyncShared`]), what serves
//! one connection ([`ConnHandler`]) and the accept loop ([`accept_loop`]).
//!
//! * skq-async with the spec's skq mode and tunables (the server layer's
//!   `core_config()`, so `steal_k`, `rtshare`, `batch_workers`, `pollers`,
//!   ... apply as for the skq driver), `batch` events per wait, workers
//!   pinned to skq's CPUs with `--pin`.
//! * tokio's multi-thread runtime with the same worker count, thread i
//!   pinned to the i-th allowed CPU with `--pin` (as the tokio driver).
//!
//! Either way the server is wrapped in this layer's [`ServerHandle`]
//! ([`ServerHandle::from_running`]), so `skq serve` prints the same
//! `listening on ADDR` line and writes the same stats JSON (`driver` is
//! `async`, `mode` the async mode; skq-async adds the scheduler's own
//! statistics as the skq driver does).
//!
//! **Who touches what.** A connection's buffers belong to its task; the
//! shared state ([`AsyncShared`]) is atomics, the per-worker counters and
//! the handler's read-only settings ([`AsyncShared::app`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::stats::{Counters, MemoryStats, SchedulerStats, ServerInfo, WorkerCounters};
use crate::{
    AsyncRuntime, Close, Notice, Notices, Running, ServerConfig, ServerHandle, ServerStats,
};

use super::rt::{AsyncRt, SkqAsync, TokioRt, TOKIO_WORKER};

/// What every connection task of one server shares: the counters and the
/// connection limit (the accept loop's), and the handler's own settings.
pub struct AsyncShared<A> {
    /// The skq-net counters (same stats JSON as the drivers).
    pub counters: Counters,
    /// What the server has to tell the operator.
    pub notices: Notices,
    /// Most connections served at once.
    pub max_conns: usize,
    /// The handler's read-only settings ([`ConnHandler::App`]).
    pub app: A,
    /// Connections being served now.
    open: AtomicUsize,
    /// Bytes an idle connection's task holds (its future).
    idle_conn_bytes: AtomicUsize,
}

impl<A> AsyncShared<A> {
    /// The shared state of a server with `workers` workers serving at most
    /// `max_conns` connections at once, its handler's settings `app`.
    pub fn new(workers: usize, max_conns: usize, app: A) -> Self {
        AsyncShared {
            counters: Counters::new(workers),
            notices: Notices::new(),
            max_conns,
            app,
            open: AtomicUsize::new(0),
            idle_conn_bytes: AtomicUsize::new(0),
        }
    }

    /// The counters of the worker the caller runs on.
    pub fn worker_counters<R: AsyncRt>(&self) -> &WorkerCounters {
        let w = R::worker().min(self.counters.workers.len() - 1);
        &self.counters.workers[w]
    }
}

/// What serves one accepted connection on an [`AsyncRt`]: any skq-net
/// protocol ([`super::ProtocolHandler`]) or an application's own handler
/// (skq-servers' async RPC handler).
pub trait ConnHandler: Send + Sync + 'static {
    /// The handler's settings, shared by its connections
    /// ([`AsyncShared::app`]; `()` for none).
    type App: Send + Sync + 'static;

    /// Serves `stream` until it ends; returns why it ended.
    fn serve<R: AsyncRt>(
        &self,
        stream: R::Stream,
        sh: &AsyncShared<Self::App>,
    ) -> impl Future<Output = Close> + Send;
}

/// Accepts connections forever, spawning one `handler` task each.
pub async fn accept_loop<R: AsyncRt, H: ConnHandler>(
    rt: R,
    listener: R::Listener,
    sh: Arc<AsyncShared<H::App>>,
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

/// The runtime a server runs on.
enum Rt {
    Skq(skq_async::Runtime),
    Tokio(tokio::runtime::Runtime),
}

/// A running async server.
struct AsyncServer<A> {
    rt: Option<Rt>,
    shared: Arc<AsyncShared<A>>,
    info: ServerInfo,
    local_addr: SocketAddr,
    started_ns: u64,
}

impl<A> AsyncServer<A> {
    fn snapshot(&self) -> ServerStats {
        let sched = match &self.rt {
            Some(Rt::Skq(rt)) => Some(SchedulerStats::of(rt.handle().skq(), self.started_ns)),
            _ => None,
        };
        let memory = MemoryStats {
            idle_conn_bytes: self.shared.idle_conn_bytes.load(Ordering::Relaxed) as u64,
            table_bytes: 0,
        };
        self.shared.counters.snapshot(&self.info, sched, memory)
    }
}

impl<A: Send + Sync + 'static> Running for AsyncServer<A> {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn stats(&self) -> ServerStats {
        self.snapshot()
    }

    /// Drops every task (closing their sockets) and joins the workers; the
    /// scheduler's statistics are those just before.
    fn shutdown(mut self: Box<Self>) -> ServerStats {
        let last = self.snapshot();
        match self.rt.take() {
            Some(Rt::Skq(rt)) => rt.shutdown(),
            Some(Rt::Tokio(rt)) => rt.shutdown_timeout(Duration::from_secs(10)),
            None => {}
        }
        ServerStats {
            scheduler: last.scheduler,
            ..self.snapshot()
        }
    }
}

/// Starts a server for `server_cfg` (an `async-` mode, validated) on
/// `runtime`, each connection served by `handler` with `shared`'s settings.
pub fn start_handler<H: ConnHandler>(
    server_cfg: &ServerConfig,
    runtime: AsyncRuntime,
    shared: AsyncShared<H::App>,
    handler: Arc<H>,
) -> io::Result<ServerHandle> {
    let cfg = server_cfg;
    // Before the runtime starts: the resource manager's first decision
    // (elastic worker count) is timed from here.
    let started_ns = skq_sys::cpu::monotonic_ns();
    let notices = shared.notices.clone();
    let shared = Arc::new(shared);
    let std_listener = skq_sys::net::listen(cfg.addr, false)?;
    let local_addr = std_listener.local_addr()?;
    let invalid = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
    let rt = match runtime {
        AsyncRuntime::Skq { .. } => {
            let core = server_cfg
                .core_config()
                .map_err(|e| invalid(e.to_string()))?;
            // One source per connection task and one per socket, plus the
            // accept loop, the listener and the workers' kicks.
            let mut core = core;
            core.capacity = (2 * cfg.max_conns + core.workers + 16).min(1 << 24);
            let mut b = skq_async::Builder::new()
                .config(core)
                .batch(server_cfg.sched.batch)
                .pin_workers(cfg.pin);
            if let Some(e) = server_cfg.elastic_config() {
                b = b.elastic(e);
            }
            let rt = b.build().map_err(|e| match e {
                skq_async::BuildError::Io(e) => e,
                other => invalid(other.to_string()),
            })?;
            let listener =
                rt.block_on(async { skq_async::net::TcpListener::from_std(std_listener) })?;
            let h = SkqAsync(rt.handle().clone());
            if !h.spawn(accept_loop(h.clone(), listener, shared.clone(), handler)) {
                return Err(io::Error::other("cannot spawn the accept loop"));
            }
            Rt::Skq(rt)
        }
        AsyncRuntime::Tokio => {
            let workers = cfg.workers;
            let next = Arc::new(AtomicUsize::new(0));
            let (pin, pin_notices) = (cfg.pin, notices.clone());
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_io()
                .enable_time()
                .thread_name("skq-async-tokio")
                .on_thread_start(move || {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    TOKIO_WORKER.with(|w| w.set(i % workers));
                    if pin {
                        if let Err(error) = skq_sys::cpu::pin_to_nth_allowed_cpu(i) {
                            pin_notices.push(Notice::PinFailed { worker: i, error });
                        }
                    }
                })
                .build()?;
            let listener = {
                let _guard = rt.enter();
                tokio::net::TcpListener::from_std(std_listener)?
            };
            let h = TokioRt(rt.handle().clone());
            h.spawn(accept_loop(h.clone(), listener, shared.clone(), handler));
            Rt::Tokio(rt)
        }
    };
    let info = ServerInfo {
        driver: server_cfg.driver().name().to_string(),
        mode: server_cfg.mode_name(),
        service: server_cfg.service_label.clone(),
        pinned: cfg.pin,
        cpus: skq_sys::cpu::allowed_cpu_count(),
    };
    let server = AsyncServer {
        rt: Some(rt),
        shared,
        info,
        local_addr,
        started_ns,
    };
    Ok(ServerHandle::from_running(Box::new(server), notices))
}
