//! The tokio peer: the same protocol on tokio's multi-thread runtime.
//!
//! One task per connection on a runtime with `workers` worker threads (tokio's
//! work-stealing scheduler decides which thread polls which task). Service
//! runs *inside the task, blocking its worker thread*, in both modes: a spin
//! is CPU work, and an emulated service stands in for CPU work, so it must
//! occupy the thread exactly as long, not yield it. Two alternatives are
//! deliberately not used:
//! * `tokio::time::sleep` would free the thread during service (and has 1 ms
//!   granularity), turning the worker pool into an unbounded one;
//! * `block_in_place` hands the worker's other tasks to a freshly spawned
//!   thread, so the runtime would silently grow beyond `workers` threads.
//!
//! A task serves every buffered request in order, writing each reply before
//! serving the next, and yields to the scheduler after
//! [`REQUESTS_PER_EVENT`] requests, like the skq workers' per-event budget.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::conn::{Close, Conn, REQUESTS_PER_EVENT};
use crate::server::RpcConfig;
use crate::service::ServiceMode;
use crate::stats::{Counters, ServerInfo, ServerStats, WorkerCounters};
use skq_sys::{cpu, net};

/// Bytes of spare capacity made available before each read.
const READ_CHUNK: usize = 16 * 1024;

thread_local! {
    /// Index of the tokio worker thread running on this OS thread.
    static WORKER_INDEX: Cell<usize> = const { Cell::new(0) };
}

/// A running tokio server.
pub struct TokioServer {
    runtime: tokio::runtime::Runtime,
    counters: Arc<Counters>,
    info: ServerInfo,
    local_addr: SocketAddr,
}

impl TokioServer {
    /// Builds the runtime, binds and starts accepting.
    pub fn start(cfg: &RpcConfig) -> io::Result<Self> {
        let workers = cfg.workers;
        let counters = Arc::new(Counters::new(workers));
        let next_thread = Arc::new(AtomicUsize::new(0));
        let (service, pin, ncpus) = (cfg.service, cfg.pin, cpu::allowed_cpu_count());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_io()
            .enable_time()
            .thread_name("skq-rpc-tokio")
            .on_thread_start(move || {
                let i = next_thread.fetch_add(1, Ordering::Relaxed);
                WORKER_INDEX.with(|w| w.set(i % workers));
                if pin {
                    if let Err(e) = cpu::pin_to_nth_allowed_cpu(i % ncpus) {
                        eprintln!(
                            "warning: could not pin tokio thread {i} to CPU {}: {e}",
                            i % ncpus
                        );
                    }
                }
                service.prepare_thread();
            })
            .build()?;
        let std_listener = net::listen(cfg.addr, false)?;
        std_listener.set_nonblocking(true)?;
        let local_addr = std_listener.local_addr()?;
        let listener = {
            let _guard = runtime.enter();
            TcpListener::from_std(std_listener)?
        };
        let open = Arc::new(AtomicUsize::new(0));
        runtime.spawn(accept_loop(
            listener,
            cfg.service,
            cfg.max_conns,
            counters.clone(),
            open,
        ));
        let info = ServerInfo::new(cfg, cfg.mode_name());
        Ok(TokioServer {
            runtime,
            counters,
            info,
            local_addr,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Current counters.
    pub fn stats(&self) -> ServerStats {
        self.counters.snapshot(&self.info, None)
    }

    /// Drops every task (closing their sockets) and joins the worker threads.
    /// A thread in the middle of a service period finishes it first.
    pub fn shutdown(self) -> ServerStats {
        self.runtime.shutdown_timeout(Duration::from_secs(10));
        self.counters.snapshot(&self.info, None)
    }
}

fn worker_counters(counters: &Counters) -> &WorkerCounters {
    &counters.workers[WORKER_INDEX.with(|w| w.get())]
}

async fn accept_loop(
    listener: TcpListener,
    service: ServiceMode,
    max_conns: usize,
    counters: Arc<Counters>,
    open: Arc<AtomicUsize>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            // Out of fds (or similar): back off instead of spinning, keep serving the others.
            Err(e) => {
                eprintln!("warning: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if open.load(Ordering::Relaxed) >= max_conns {
            counters.conns.rejected();
            drop(stream);
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        counters.conns.accepted();
        let (counters, open) = (counters.clone(), open.clone());
        tokio::spawn(async move {
            let why = serve_connection(stream, service, &counters).await;
            counters.conns.closed(why);
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    service: ServiceMode,
    counters: &Counters,
) -> Close {
    if stream.set_nodelay(true).is_err() {
        return Close::Aborted;
    }
    let mut conn = Conn::new();
    loop {
        let mut served = 0;
        loop {
            match conn.serve_next(service, worker_counters(counters)) {
                Err(e) => return Close::Protocol(e),
                Ok(false) => break,
                Ok(true) => {
                    let n = conn.pending_output().len();
                    if stream.write_all(conn.pending_output()).await.is_err() {
                        return Close::Aborted;
                    }
                    conn.consume_output(n);
                    served += 1;
                    if served % REQUESTS_PER_EVENT == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }
        }
        if conn.is_eof() {
            return if conn.buffered().is_empty() {
                Close::Eof
            } else {
                Close::Aborted
            };
        }
        // Wait for bytes without reserving memory first, so idle connections
        // hold no buffer.
        if stream.readable().await.is_err() {
            return Close::Aborted;
        }
        worker_counters(counters).record_event();
        conn.compact();
        let buf = conn.input_buf();
        buf.reserve(READ_CHUNK);
        match stream.try_read_buf(buf) {
            Ok(0) => conn.set_eof(),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Close::Aborted,
        }
    }
}
