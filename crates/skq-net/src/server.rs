//! Starting a server: the state every driver shares, and the handle.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::config::{Driver, ServerConfig};
use crate::driver;
use crate::driver::epoll::Model;
use crate::notice::{Notice, Notices};
use crate::protocol::{Close, Protocol};
use crate::stats::{Counters, MemoryStats, SchedulerStats, ServerInfo, ServerStats};
use skq_sys::limits::Accepted;

/// Per-worker read buffer of the fd-based drivers.
pub(crate) const SCRATCH: usize = 64 * 1024;

/// What every driver of one server shares: the protocol, the counters and
/// the connection limit.
pub(crate) struct Common<P> {
    pub proto: Arc<P>,
    pub counters: Counters,
    pub info: ServerInfo,
    pub max_conns: usize,
    open: AtomicUsize,
    /// One fd held back for refusing connections at the fd limit.
    pub reserve: skq_sys::limits::FdReserve,
    /// Bytes an idle connection holds (set by the driver at start).
    pub idle_conn_bytes: AtomicUsize,
    /// What the driver has to tell the operator (it prints nothing).
    pub notices: Notices,
}

impl<P: Protocol> Common<P> {
    /// Admits a freshly accepted connection under the limit (reserving its
    /// place) and makes it non-blocking with `TCP_NODELAY`; or writes the
    /// protocol's busy message, counts the refusal and returns `None` (the
    /// caller drops the stream, which closes it). The connection is counted
    /// as accepted once its session opens ([`Common::open_session`]).
    pub fn admit(&self, worker: usize, stream: TcpStream) -> Option<TcpStream> {
        if self.open.fetch_add(1, Ordering::Relaxed) >= self.max_conns {
            self.open.fetch_sub(1, Ordering::Relaxed);
            self.refuse(worker, &stream);
            return None;
        }
        if stream.set_nonblocking(true).is_err() || stream.set_nodelay(true).is_err() {
            // Already reset by the peer.
            self.open.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(stream)
    }

    /// The session of an admitted connection the driver is about to serve;
    /// counts it as accepted.
    pub fn open_session(&self, worker: usize) -> P::Session {
        self.counters.conns.accepted();
        self.proto.open(worker)
    }

    /// Refuses an admitted connection before its session opened (table
    /// full, registration failed): releases its place and counts the refusal.
    pub fn refuse_admitted(&self, worker: usize, stream: &TcpStream) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.refuse(worker, stream);
    }

    /// [`Common::refuse_admitted`] for a stream already gone (no message).
    pub fn release_admitted(&self, worker: usize) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.counters.conns.rejected();
        self.proto.rejected(worker);
    }

    fn refuse(&self, worker: usize, stream: &TcpStream) {
        let msg = self.proto.busy_message();
        if !msg.is_empty() {
            let _ = io::Write::write_all(&mut &*stream, msg);
        }
        self.counters.conns.rejected();
        self.proto.rejected(worker);
    }

    /// A served connection ended: its socket is deregistered (and about to
    /// be closed) and its session goes back to the protocol.
    pub fn closed(&self, worker: usize, why: Close, session: P::Session) {
        self.open.fetch_sub(1, Ordering::Relaxed);
        self.counters.conns.closed(why);
        if why == Close::Timeout {
            self.proto.timed_out(worker);
        }
        self.proto.close(session, worker);
    }

    pub fn snapshot(&self, sched: Option<SchedulerStats>, table_bytes: usize) -> ServerStats {
        let memory = MemoryStats {
            idle_conn_bytes: self.idle_conn_bytes.load(Ordering::Relaxed) as u64,
            table_bytes: table_bytes as u64,
        };
        self.counters.snapshot(&self.info, sched, memory)
    }

    /// Refuses a connection taken with the reserve fd at the fd limit:
    /// writes the busy message and counts it (the caller closes it).
    fn refuse_at_fd_limit(&self, worker: usize, stream: &TcpStream) {
        let msg = self.proto.busy_message();
        if !msg.is_empty() {
            let _ = io::Write::write_all(&mut &*stream, msg);
        }
        self.counters.conns.rejected_fd_limit();
        self.proto.rejected_fd_limit(worker);
    }
}

/// A running server: one of this layer's drivers, or a server an
/// application runs itself (its async handler on an async runtime, the
/// `async-` modes) wrapped in a [`ServerHandle`] by
/// [`ServerHandle::from_running`].
pub trait Running: Send {
    /// The address it listens on.
    fn local_addr(&self) -> SocketAddr;
    /// Its counters now.
    fn stats(&self) -> ServerStats;
    /// Makes worker `i` leave mid-run (unsupported by default).
    fn retire_worker(&self, _i: usize) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "retire_worker: only the skq driver can remove a worker thread",
        ))
    }
    /// Stops accepting, stops the workers, closes every connection and
    /// returns the final counters.
    fn shutdown(self: Box<Self>) -> ServerStats;
}

/// Starts servers.
pub struct Server;

impl Server {
    /// Binds `cfg.addr`, starts `cfg.workers` workers of `cfg.driver()` serving
    /// `proto`, and returns once the server accepts connections. Invalid
    /// configuration is an `InvalidInput` error whose message names the
    /// option and its range (its inner error is the typed
    /// [`crate::config::InvalidConfig`]).
    pub fn start<P: Protocol>(cfg: &ServerConfig, proto: Arc<P>) -> io::Result<ServerHandle> {
        cfg.validate()
            .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        let common = Arc::new(Common {
            proto,
            counters: Counters::new(cfg.workers),
            info: ServerInfo {
                driver: cfg.driver().name().to_string(),
                mode: cfg.mode_name(),
                service: cfg.service_label.clone(),
                pinned: cfg.pin,
                cpus: skq_sys::cpu::allowed_cpu_count(),
            },
            max_conns: cfg.max_conns,
            open: AtomicUsize::new(0),
            reserve: skq_sys::limits::FdReserve::new()?,
            idle_conn_bytes: AtomicUsize::new(0),
            notices: Notices::new(),
        });
        let notices = common.notices.clone();
        let running: Box<dyn Running> = match cfg.driver() {
            Driver::Skq => Box::new(driver::skq::start(cfg, common)?),
            Driver::Epoll1to1 => Box::new(driver::epoll::start(cfg, common, Model::OneToOne)?),
            Driver::EpollShared => Box::new(driver::epoll::start(cfg, common, Model::Shared)?),
            Driver::Tokio | Driver::TokioSpawnBlocking => {
                Box::new(driver::tokio::start(cfg, common)?)
            }
            Driver::Async => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                    "--mode {}: this server has no async handler (`skq serve rpc` and `skq serve http` have one)",
                    cfg.mode
                ),
                ))
            }
        };
        Ok(ServerHandle {
            running: Some(running),
            notices,
        })
    }
}

/// A running server. Dropping it shuts the server down.
pub struct ServerHandle {
    running: Option<Box<dyn Running>>,
    notices: Notices,
}

impl ServerHandle {
    /// The handle of a server the application runs itself (an `async-`
    /// mode), so the serve lifecycle treats it as any other; `notices` is
    /// its notice log.
    pub fn from_running(running: Box<dyn Running>, notices: Notices) -> ServerHandle {
        ServerHandle {
            running: Some(running),
            notices,
        }
    }

    fn running(&self) -> &dyn Running {
        self.running.as_deref().expect("server already shut down")
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.running().local_addr()
    }

    /// The server's notice log (a shared handle that outlives the server,
    /// so notices logged during [`ServerHandle::shutdown`] can be read).
    pub fn notices(&self) -> Notices {
        self.notices.clone()
    }

    /// Current counters.
    pub fn stats(&self) -> ServerStats {
        self.running().stats()
    }

    /// Makes worker `i` leave mid-run (skq driver only: `Worker::exit()`; it
    /// finishes its current batch and the core reschedules its queued events).
    pub fn retire_worker(&self, i: usize) -> io::Result<()> {
        self.running().retire_worker(i)
    }

    /// Stops accepting, stops the workers, closes every connection and
    /// returns the final counters.
    pub fn shutdown(mut self) -> ServerStats {
        self.stop()
    }

    fn stop(&mut self) -> ServerStats {
        self.running
            .take()
            .expect("server already shut down")
            .shutdown()
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if self.running.is_some() {
            self.stop();
        }
    }
}

/// Pins the calling thread for worker `w` of a non-skq driver (the `w`-th
/// allowed CPU), logging a notice instead of failing.
pub(crate) fn pin_worker(w: usize, notices: &Notices) {
    if let Err(error) = skq_sys::cpu::pin_to_nth_allowed_cpu(w) {
        notices.push(Notice::PinFailed { worker: w, error });
    }
}

/// Starts `n` worker threads named `NAME-w`, each running `run(shared, w)`.
pub(crate) fn spawn_workers<T: Send + Sync + 'static>(
    n: usize,
    name: &str,
    shared: &Arc<T>,
    run: fn(&T, usize),
) -> io::Result<Vec<JoinHandle<()>>> {
    (0..n)
        .map(|w| {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{w}"))
                .spawn(move || run(&shared, w))
        })
        .collect()
}

/// The connections a non-blocking listener has ready: accepts until
/// `EAGAIN`, skipping connections reset before they were accepted. Out of
/// file descriptors, it refuses the waiting connections one by one with
/// the reserve fd (see [`skq_sys::limits::FdReserve`]) so none is left
/// stuck in the backlog; other errors end the batch with a notice, and
/// the next readiness of the listener offers the backlog again.
pub(crate) fn accept_ready<'a, P: Protocol>(
    listener: &'a TcpListener,
    common: &'a Common<P>,
    worker: usize,
) -> impl Iterator<Item = TcpStream> + 'a {
    std::iter::from_fn(move || loop {
        let got = common.reserve.accept(
            || listener.accept().map(|(s, _)| s),
            |refused| common.refuse_at_fd_limit(worker, &refused),
        );
        match got {
            Ok(Accepted::Conn(s)) => return Some(s),
            Ok(Accepted::Refused) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => {
                // Out of fds with the reserve spent (something else in the
                // process holds them all), or worse: back off briefly so a
                // level-triggered listener does not spin.
                common.notices.push(Notice::AcceptFailed(e));
                std::thread::sleep(std::time::Duration::from_millis(1));
                return None;
            }
        }
    })
}

/// The timeout sweep of the fd drivers (see [`crate::config::Timeouts`]):
/// a thread that every tick calls `sweep(now)`, which marks each expired
/// connection it can lock ([`crate::conn::Conn::mark_timed_out`]) and shuts
/// its socket down. The shutdown raises an event on the connection's own
/// worker, which closes it as [`Close::Timeout`], so a connection is still
/// closed only by the worker that owns it and the protocol's `close` runs
/// there.
pub(crate) struct Sweeper {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    notices: Notices,
}

impl Sweeper {
    /// Starts the sweep every `tick` (a panic of its thread goes to
    /// `notices` at [`Sweeper::stop`]).
    pub fn start(
        tick: std::time::Duration,
        notices: Notices,
        sweep: impl Fn(u64) + Send + 'static,
    ) -> io::Result<Sweeper> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("skq-sweep".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    std::thread::park_timeout(tick);
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    sweep(skq_sys::cpu::monotonic_ns());
                }
            })?;
        Ok(Sweeper {
            stop,
            thread,
            notices,
        })
    }

    /// Stops the sweep and waits for its thread.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.thread.thread().unpark();
        if self.thread.join().is_err() {
            self.notices.push(Notice::SweepPanicked);
        }
    }
}

/// What the sweep does with one connection: marks it and shuts its socket
/// down when it has waited too long.
pub(crate) fn sweep_one<S>(
    stream: &TcpStream,
    conn: &mut crate::conn::Conn<S>,
    now: u64,
    t: &crate::config::Timeouts,
) {
    if conn.expired(now, t) {
        conn.mark_timed_out();
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
}
