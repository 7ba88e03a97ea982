//! `epoll-shared`: the "Linux floating" 1:N model, with no skq scheduling.
//!
//! One epoll set; every worker thread blocks in `epoll_wait` on it and takes
//! at most `batch` events per wait. Connections (and the listener) are
//! registered `EPOLLONESHOT`: an event disables its registration, so the
//! worker that took it owns the connection until it re-arms it with
//! `EPOLL_CTL_MOD` (one extra system call per event, the price of this
//! model), and the table slot's lock is uncontended. The re-arm asks for
//! what the connection needs next: input, or socket space while replies
//! wait, or, when it stopped early at its request budget, both (it is
//! writable, so it is reported again at once, to whichever worker waits
//! first). Shutdown writes an eventfd watched level-triggered.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use skq_sys::epoll::{Epoll, IN, ONESHOT, OUT, RDHUP};
use skq_sys::eventfd::EventFd;

use crate::config::ServerConfig;
use crate::conn::{Conn, Outcome};
use crate::protocol::{Cx, Protocol};
use crate::server::{pin_worker, Common, Running, SCRATCH};
use crate::stats::ServerStats;
use crate::table::Table;

const LISTENER: u64 = u64::MAX;
const SHUTDOWN: u64 = u64::MAX - 1;

struct Shared<P: Protocol> {
    common: Arc<Common<P>>,
    epoll: Epoll,
    listener: TcpListener,
    table: Table<(TcpStream, Conn<P::Session>)>,
    stop: AtomicBool,
    shutdown_fd: EventFd,
    batch: usize,
}

pub(crate) struct EpollShared<P: Protocol> {
    shared: Arc<Shared<P>>,
    threads: Vec<JoinHandle<()>>,
    local_addr: SocketAddr,
}

pub(crate) fn start<P: Protocol>(
    cfg: &ServerConfig,
    common: Arc<Common<P>>,
) -> io::Result<EpollShared<P>> {
    let listener = skq_sys::net::listen(cfg.addr, false)?;
    let local_addr = listener.local_addr()?;
    let epoll = Epoll::new()?;
    let shutdown_fd = EventFd::new()?;
    epoll.add(listener.as_raw_fd(), IN | ONESHOT, LISTENER)?;
    epoll.add(shutdown_fd.as_raw_fd(), IN, SHUTDOWN)?;
    let shared = Arc::new(Shared {
        common,
        epoll,
        listener,
        table: Table::new(cfg.max_conns),
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
                .name(format!("epoll-shared-{w}"))
                .spawn(move || run(&shared, w, pin))?,
        );
    }
    Ok(EpollShared {
        shared,
        threads,
        local_addr,
    })
}

impl<P: Protocol> Running for EpollShared<P> {
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
            let _ = s.epoll.delete(stream.as_raw_fd());
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
        if let Err(e) = s.epoll.wait_ns(&mut events, None) {
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
            Err(_) => break, // WouldBlock, or EMFILE: offered again after the re-arm
        };
        let Some(stream) = s.common.admit(w, stream) else {
            continue;
        };
        let Some(idx) = s.table.reserve() else {
            s.common.refuse_admitted(w, &stream);
            continue;
        };
        let fd = stream.as_raw_fd();
        *s.table.lock(idx) = Some((stream, Conn::new(s.common.proto.open(w))));
        if let Err(e) = s.epoll.add(fd, IN | RDHUP | ONESHOT, idx as u64) {
            eprintln!("warning: could not register a connection: {e}");
            if let Some((stream, conn)) = s.table.lock(idx).take() {
                s.common.refuse_admitted(w, &stream);
                s.common.proto.close(conn.session, w);
            }
            s.table.release(idx);
        }
    }
    let _ = s
        .epoll
        .modify(s.listener.as_raw_fd(), IN | ONESHOT, LISTENER);
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
    let rearm = match conn.on_ready(&*s.common.proto, stream, scratch, &mut cx) {
        Outcome::Idle => IN | RDHUP,
        Outcome::Blocked => {
            counters.record_blocked();
            OUT | RDHUP
        }
        Outcome::More => IN | OUT | RDHUP,
        Outcome::Close(why) => {
            let (stream, conn) = slot.take().expect("entry checked above");
            let _ = s.epoll.delete(stream.as_raw_fd());
            drop(stream);
            drop(slot);
            s.table.release(idx);
            s.common.closed(w, why, conn.session);
            return;
        }
    };
    if let Err(e) = s
        .epoll
        .modify(stream.as_raw_fd(), rearm | ONESHOT, idx as u64)
    {
        eprintln!("warning: could not re-arm a connection: {e}");
    }
}
