//! `epoll-1to1`: the memcached/nginx model, with no skq scheduling.
//!
//! Every worker thread owns an epoll instance and blocks in its own
//! `epoll_wait`. The listener sits in every instance with `EPOLLEXCLUSIVE`,
//! so a new connection wakes one worker, which accepts until `EAGAIN` and
//! assigns each connection round-robin over all workers by adding it to the
//! chosen worker's epoll (`epoll_ctl` on another thread's instance is safe;
//! memcached makes the same hand-off through a pipe to the worker's event
//! loop, this skips that hop). A connection then stays with its worker for
//! life: its readiness (`EPOLLET`, read and write, registered once, never
//! modified, as nginx does) is reported only to that worker, so the table
//! slot's lock is uncontended and requests are served in order.
//!
//! A connection that stops early (its per-event request budget) is re-armed
//! with `EPOLL_CTL_MOD`, which makes the kernel report it again at once to
//! the same worker (it is writable), after the events already queued there.
//! Shutdown writes an eventfd that every instance watches level-triggered.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use skq_sys::epoll::{Epoll, ET, EXCLUSIVE, IN, OUT, RDHUP};
use skq_sys::eventfd::EventFd;

use crate::config::ServerConfig;
use crate::conn::{Conn, Outcome};
use crate::protocol::{Cx, Protocol};
use crate::server::{pin_worker, Common, Running, SCRATCH};
use crate::stats::ServerStats;
use crate::table::Table;

const LISTENER: u64 = u64::MAX;
const SHUTDOWN: u64 = u64::MAX - 1;
/// Interest of every connection, for life.
const CONN_FLAGS: u32 = IN | OUT | RDHUP | ET;

struct Shared<P: Protocol> {
    common: Arc<Common<P>>,
    epolls: Box<[Epoll]>,
    listener: TcpListener,
    table: Table<(TcpStream, Conn<P::Session>)>,
    next: AtomicUsize,
    stop: AtomicBool,
    shutdown_fd: EventFd,
    batch: usize,
}

pub(crate) struct Epoll1to1<P: Protocol> {
    shared: Arc<Shared<P>>,
    threads: Vec<JoinHandle<()>>,
    local_addr: SocketAddr,
}

pub(crate) fn start<P: Protocol>(
    cfg: &ServerConfig,
    common: Arc<Common<P>>,
) -> io::Result<Epoll1to1<P>> {
    let listener = skq_sys::net::listen(cfg.addr, false)?;
    let local_addr = listener.local_addr()?;
    let shutdown_fd = EventFd::new()?;
    let epolls = (0..cfg.workers)
        .map(|_| {
            let ep = Epoll::new()?;
            ep.add(listener.as_raw_fd(), IN | EXCLUSIVE, LISTENER)?;
            ep.add(shutdown_fd.as_raw_fd(), IN, SHUTDOWN)?;
            Ok(ep)
        })
        .collect::<io::Result<Box<[Epoll]>>>()?;
    let shared = Arc::new(Shared {
        common,
        epolls,
        listener,
        table: Table::new(cfg.max_conns),
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        shutdown_fd,
        batch: cfg.sched.batch,
    });
    let mut threads = Vec::with_capacity(cfg.workers);
    for w in 0..cfg.workers {
        let shared = shared.clone();
        let pin = cfg.pin;
        threads.push(
            std::thread::Builder::new()
                .name(format!("epoll-1to1-{w}"))
                .spawn(move || run(&shared, w, pin))?,
        );
    }
    Ok(Epoll1to1 {
        shared,
        threads,
        local_addr,
    })
}

impl<P: Protocol> Running for Epoll1to1<P> {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn stats(&self) -> ServerStats {
        self.shared.common.snapshot(None)
    }

    fn shutdown(self: Box<Self>) -> ServerStats {
        let s = &self.shared;
        s.stop.store(true, Ordering::SeqCst);
        let _ = s.shutdown_fd.notify();
        let mut me = *self;
        for t in std::mem::take(&mut me.threads) {
            if t.join().is_err() {
                eprintln!("warning: a worker panicked");
            }
        }
        let s = &me.shared;
        let stats = s.common.snapshot(None);
        s.table.drain(|(stream, _)| {
            for ep in s.epolls.iter() {
                let _ = ep.delete(stream.as_raw_fd());
            }
        });
        stats
    }
}

fn run<P: Protocol>(s: &Shared<P>, w: usize, pin: bool) {
    if pin {
        pin_worker(w);
    }
    s.common.proto.prepare_worker(w);
    let mut events = Vec::with_capacity(s.batch);
    let mut scratch = vec![0u8; SCRATCH];
    while !s.stop.load(Ordering::Relaxed) {
        if let Err(e) = s.epolls[w].wait_ns(&mut events, None) {
            eprintln!("error: worker {w}: epoll_wait failed: {e}");
            return;
        }
        for ev in events.iter().copied() {
            match ev.u64 {
                LISTENER => accept_all(s, w),
                SHUTDOWN => return,
                idx => serve(s, w, idx as usize, &mut scratch),
            }
        }
    }
}

fn accept_all<P: Protocol>(s: &Shared<P>, w: usize) {
    loop {
        let stream = match s.listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
            // WouldBlock, or EMFILE: the listener is level-triggered, so the
            // backlog is offered again at the next wait.
            Err(_) => return,
        };
        let Some(stream) = s.common.admit(w, stream) else {
            continue;
        };
        let Some(idx) = s.table.reserve() else {
            s.common.refuse_admitted(w, &stream);
            continue;
        };
        let owner = s.next.fetch_add(1, Ordering::Relaxed) % s.epolls.len();
        let fd = stream.as_raw_fd();
        // In the table before the owner's epoll can report it.
        *s.table.lock(idx) = Some((stream, Conn::new(s.common.proto.open(owner))));
        if let Err(e) = s.epolls[owner].add(fd, CONN_FLAGS, idx as u64) {
            eprintln!("warning: could not register a connection: {e}");
            if let Some((stream, conn)) = s.table.lock(idx).take() {
                s.common.refuse_admitted(w, &stream);
                s.common.proto.close(conn.session, owner);
            }
            s.table.release(idx);
        }
    }
}

fn serve<P: Protocol>(s: &Shared<P>, w: usize, idx: usize, scratch: &mut [u8]) {
    let Some((mut slot, _)) = s.table.lock_observed(idx) else {
        return;
    };
    let Some((stream, conn)) = slot.as_mut() else {
        return;
    };
    let counters = &s.common.counters.workers[w];
    counters.record_event();
    let mut cx = Cx::new(w, counters);
    match conn.on_ready(&*s.common.proto, stream, scratch, &mut cx) {
        Outcome::Idle => {}
        Outcome::Blocked => counters.record_blocked(),
        Outcome::More => {
            // Re-arming an edge-triggered registration re-reports it now.
            let _ = s.epolls[w].modify(stream.as_raw_fd(), CONN_FLAGS, idx as u64);
        }
        Outcome::Close(why) => {
            let (stream, conn) = slot.take().expect("entry checked above");
            let _ = s.epolls[w].delete(stream.as_raw_fd());
            drop(stream);
            drop(slot);
            s.table.release(idx);
            s.common.closed(w, why, conn.session);
        }
    }
}
