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
//! serving the next when the protocol flushes each, and yields to the
//! scheduler after [`REQUESTS_PER_EVENT`] requests, like the fd drivers'
//! per-event budget.

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::config::ServerConfig;
use crate::conn::{Conn, OUT_HIGH, REQUESTS_PER_EVENT};
use crate::protocol::{Close, Cx, Protocol, Served};
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
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_io()
        .enable_time()
        .thread_name("skq-tokio")
        .on_thread_start(move || {
            let i = next_thread.fetch_add(1, Ordering::Relaxed);
            WORKER_INDEX.with(|w| w.set(i % workers));
            if pin {
                crate::server::pin_worker(i);
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
    runtime.spawn(accept_loop(listener, common.clone()));
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

fn worker_index() -> usize {
    WORKER_INDEX.with(|w| w.get())
}

async fn accept_loop<P: Protocol>(listener: TcpListener, common: Arc<Common<P>>) {
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
                eprintln!("warning: accept failed: {e}");
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
            let mut conn = Conn::new(shared.open_session(w));
            let why = serve_connection(stream, &mut conn, &shared).await;
            shared.closed(worker_index(), why, conn.session);
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
) -> Close {
    let proto = &*common.proto;
    let (flush_each, limit) = (proto.flush_each(), proto.read_limit());
    let mut served = 0usize;
    loop {
        let need_input = loop {
            let w = worker_index();
            let mut cx = Cx::new(w, &common.counters.workers[w]);
            match conn.serve_one(proto, &mut cx) {
                Served::Request { .. } => {
                    served += 1;
                    if (flush_each || conn.pending_output().len() >= OUT_HIGH)
                        && write_out(&mut stream, conn).await.is_err()
                    {
                        return Close::Aborted;
                    }
                    if served % REQUESTS_PER_EVENT == 0 {
                        if write_out(&mut stream, conn).await.is_err() {
                            return Close::Aborted;
                        }
                        tokio::task::yield_now().await;
                    }
                }
                Served::NeedInput { .. } => break true,
                Served::Close { why, .. } => {
                    let _ = write_out(&mut stream, conn).await;
                    return why;
                }
            }
        };
        debug_assert!(need_input);
        if write_out(&mut stream, conn).await.is_err() {
            return Close::Aborted;
        }
        if conn.is_eof() {
            return if conn.buffered().is_empty() {
                Close::Eof
            } else {
                Close::Aborted
            };
        }
        if conn.buffered().len() >= limit {
            return Close::Protocol;
        }
        // Wait for bytes without reserving memory first, so idle
        // connections hold no buffer.
        if stream.readable().await.is_err() {
            return Close::Aborted;
        }
        common.counters.workers[worker_index()].record_event();
        // Read into this thread's scratch buffer and keep only the bytes
        // read, as the other drivers do: a connection holds no read buffer
        // sized for the largest read it ever made.
        let read = SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let r = stream.try_read(&mut scratch[..]);
            if let Ok(n) = r {
                conn.input_buf().extend_from_slice(&scratch[..n]);
            }
            r
        });
        match read {
            Ok(0) => conn.set_eof(),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Close::Aborted,
        }
    }
}

async fn write_out<S>(stream: &mut TcpStream, conn: &mut Conn<S>) -> io::Result<()> {
    let n = conn.pending_output().len();
    if n > 0 {
        stream.write_all(conn.pending_output()).await?;
        conn.consume_output(n);
    }
    Ok(())
}
