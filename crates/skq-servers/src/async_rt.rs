//! The two runtimes the async handlers run on (the RPC handler,
//! [`crate::async_rpc`], and any skq-net protocol, [`crate::async_proto`]),
//! and starting a server on one of them (`--mode async-MODE`).
//!
//! * [`SkqAsync`]: skq-async with the spec's skq mode and tunables (the
//!   server layer's `core_config()`, so `steal_k`, `rtshare`,
//!   `batch_workers`, `pollers`, ... apply as for the skq driver), `batch`
//!   events per wait, workers pinned to skq's CPUs with `--pin`.
//! * [`TokioRt`]: tokio's multi-thread runtime with the same worker count,
//!   thread i pinned to the i-th allowed CPU with `--pin` (as the tokio
//!   driver).
//!
//! Either way the server is wrapped in skq-net's `ServerHandle`
//! ([`skq_net::ServerHandle::from_running`]), so `skq serve rpc` prints the
//! same `listening on ADDR` line and writes the same stats JSON (`driver`
//! is `async`, `mode` the async mode; skq-async adds the scheduler's own
//! statistics as the skq driver does).

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use skq_net::stats::{Counters, MemoryStats, SchedulerStats, ServerInfo};
use skq_net::{AsyncRuntime, Class, Notice, Notices, Running, ServerHandle, ServerStats};

use crate::async_rpc::{accept_loop, AsyncRt, AsyncShared, ConnHandler};
use crate::server::RpcConfig;
use skq_net::ServerConfig;

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

    fn set_class(class: Class) {
        skq_async::set_class(class);
    }
}

thread_local! {
    /// The index of the tokio worker on this thread.
    static TOKIO_WORKER: Cell<usize> = const { Cell::new(0) };
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

    fn set_class(_: Class) {}
}

/// The runtime a server runs on.
enum Rt {
    Skq(skq_async::Runtime),
    Tokio(tokio::runtime::Runtime),
}

/// A running async RPC server.
struct AsyncServer {
    rt: Option<Rt>,
    shared: Arc<AsyncShared>,
    info: ServerInfo,
    local_addr: SocketAddr,
    started_ns: u64,
}

impl AsyncServer {
    fn snapshot(&self) -> ServerStats {
        let sched = match &self.rt {
            Some(Rt::Skq(rt)) => {
                let skq = rt.handle().skq();
                Some(SchedulerStats {
                    per_worker: skq
                        .stats()
                        .iter()
                        .map(|w| serde_json::to_value(w).unwrap_or(serde_json::Value::Null))
                        .collect(),
                    imbalance: skq.imbalance(),
                    accept_races: 0,
                    ownership_violations: 0,
                    live_workers: skq.live_workers(),
                    elastic: Vec::new(),
                    started_ns: self.started_ns,
                })
            }
            _ => None,
        };
        let memory = MemoryStats {
            idle_conn_bytes: self.shared.idle_conn_bytes.load(Ordering::Relaxed) as u64,
            table_bytes: 0,
        };
        self.shared.counters.snapshot(&self.info, sched, memory)
    }
}

impl Running for AsyncServer {
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
pub fn start<H: ConnHandler>(
    server_cfg: &ServerConfig,
    runtime: AsyncRuntime,
    shared: AsyncShared,
    handler: Arc<H>,
) -> io::Result<ServerHandle> {
    let cfg = server_cfg;
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
            let rt = skq_async::Builder::new()
                .config(core)
                .batch(server_cfg.sched.batch)
                .pin_workers(cfg.pin)
                .build()
                .map_err(|e| match e {
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
        started_ns: skq_sys::cpu::monotonic_ns(),
    };
    Ok(ServerHandle::from_running(Box::new(server), notices))
}

/// The shared state of a server for `cfg`'s settings.
pub(crate) fn shared(cfg: &RpcConfig, max_service_ns: u64, checkpoint_ns: u64) -> AsyncShared {
    AsyncShared {
        counters: Counters::new(cfg.spec.workers),
        notices: Notices::new(),
        service: cfg.spec.service,
        checkpoint_ns,
        max_service_ns,
        classify: cfg.classify == crate::rpc::Classify::Header,
        idle_timeout: cfg.idle_timeout,
        max_conns: cfg.max_conns,
        open: AtomicUsize::new(0),
        idle_conn_bytes: AtomicUsize::new(0),
    }
}
