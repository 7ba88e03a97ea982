//! The two plain-Linux baselines, with no skq scheduling. They share
//! everything but where a connection's readiness goes.
//!
//! **`epoll-1to1`** ([`Model::OneToOne`], the memcached/nginx model): every
//! worker thread owns an epoll instance and blocks in its own `epoll_wait`.
//! The listener sits in every instance with `EPOLLEXCLUSIVE`, so a new
//! connection wakes one worker, which accepts until `EAGAIN` and assigns
//! each connection round-robin over all workers by adding it to the chosen
//! worker's epoll (`epoll_ctl` on another thread's instance is safe;
//! memcached makes the same hand-off through a pipe to the worker's event
//! loop, this skips that hop). A connection stays with its worker for life:
//! its readiness (`EPOLLET`, read and write, registered once and never
//! modified, as nginx does) is reported only to that worker. One that stops
//! early (its per-event request budget) is re-armed with `EPOLL_CTL_MOD`,
//! which makes the kernel report it again at once to the same worker.
//!
//! **`epoll-shared`** ([`Model::Shared`], "Linux floating", the 1:N model
//! ZygOS compares with): one epoll set; every worker blocks in
//! `epoll_wait` on it. Connections (and the listener) are registered
//! `EPOLLONESHOT`: an event disables its registration, so the worker that
//! took it owns the connection until it re-arms it (one extra system call
//! per event, the price of this model). The re-arm asks for what the
//! connection needs next: input, or socket space while replies wait, or,
//! when it stopped at its request budget, both (it is writable, so it is
//! reported again at once, to whichever worker waits first).
//!
//! In both, a connection's events reach one worker at a time, so its table
//! slot's lock is uncontended and its requests are served in order. A
//! shared-set wait takes at most `batch` events (events in a batch cannot go
//! to another worker); a 1:1 wait takes up to 64, since they are all its own. Shutdown writes an eventfd that every
//! instance watches level-triggered.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use skq_sys::epoll::{Epoll, EpollFlags, ET, EXCLUSIVE, HUP, IN, ONESHOT, OUT, RDHUP};
use skq_sys::eventfd::EventFd;

use crate::config::ServerConfig;
use crate::conn::{Conn, Limits, Outcome};
use crate::notice::Notice;
use crate::protocol::{Close, Cx, Protocol};
use crate::server::{
    accept_ready, pin_worker, spawn_workers, sweep_one, Common, Running, Sweeper, SCRATCH,
};
use crate::stats::ServerStats;
use crate::table::Table;

const LISTENER: u64 = u64::MAX;
const SHUTDOWN: u64 = u64::MAX - 1;
/// Events one `epoll-1to1` wait takes at least.
const ONE_TO_ONE_BATCH: usize = 64;
/// Interest of every `epoll-1to1` connection, for life.
const ONE_TO_ONE: EpollFlags = IN | OUT | RDHUP | ET;

/// Where a connection's readiness goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Model {
    /// To the epoll of the worker it was assigned at accept.
    OneToOne,
    /// To the one shared epoll set, one-shot.
    Shared,
}

struct Shared<P: Protocol> {
    common: Arc<Common<P>>,
    model: Model,
    /// One per worker (`OneToOne`) or one in all (`Shared`).
    epolls: Box<[Epoll]>,
    listener: TcpListener,
    table: Table<(TcpStream, Conn<P::Session>)>,
    next: AtomicUsize,
    stop: AtomicBool,
    shutdown_fd: EventFd,
    batch: usize,
    pin: bool,
    limits: Limits,
}

impl<P: Protocol> Shared<P> {
    fn epoll_of(&self, w: usize) -> &Epoll {
        &self.epolls[w % self.epolls.len()]
    }
}

pub(crate) struct EpollDriver<P: Protocol> {
    shared: Arc<Shared<P>>,
    threads: Vec<JoinHandle<()>>,
    sweeper: Option<Sweeper>,
    local_addr: SocketAddr,
}

pub(crate) fn start<P: Protocol>(
    cfg: &ServerConfig,
    common: Arc<Common<P>>,
    model: Model,
) -> io::Result<EpollDriver<P>> {
    let listener = skq_sys::net::listen(cfg.addr, false)?;
    let local_addr = listener.local_addr()?;
    let shutdown_fd = EventFd::new()?;
    let (instances, listen_flags) = match model {
        Model::OneToOne => (cfg.workers, IN | EXCLUSIVE),
        Model::Shared => (1, IN | ONESHOT),
    };
    let epolls = (0..instances)
        .map(|_| {
            let ep = Epoll::new()?;
            ep.add(listener.as_raw_fd(), listen_flags, LISTENER)?;
            ep.add(shutdown_fd.as_raw_fd(), IN, SHUTDOWN)?;
            Ok(ep)
        })
        .collect::<io::Result<Box<[Epoll]>>>()?;
    let shared = Arc::new(Shared {
        common,
        model,
        epolls,
        listener,
        table: Table::new(cfg.max_conns),
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        shutdown_fd,
        // A 1:1 worker serves its own events in arrival order whatever the
        // batch, so it takes many per wait, as memcached (libevent) and
        // nginx do; in the shared set a batch holds events others could
        // take, so it keeps the configured size.
        batch: match model {
            Model::OneToOne => cfg.sched.batch.max(ONE_TO_ONE_BATCH),
            Model::Shared => cfg.sched.batch,
        },
        pin: cfg.pin,
        limits: Limits::of(cfg),
    });
    shared.common.idle_conn_bytes.store(
        Table::<(TcpStream, Conn<P::Session>)>::slot_bytes(),
        Ordering::Relaxed,
    );
    let name = cfg.driver().name();
    let threads = spawn_workers(cfg.workers, name, &shared, run)?;
    let sweeper = match cfg.timeouts {
        t if t.any() => {
            let s = shared.clone();
            Some(Sweeper::start(
                t.tick(),
                s.common.notices.clone(),
                move |now| {
                    s.table
                        .try_for_each(|(stream, conn)| sweep_one(stream, conn, now, &t))
                },
            )?)
        }
        _ => None,
    };
    Ok(EpollDriver {
        shared,
        threads,
        sweeper,
        local_addr,
    })
}

impl<P: Protocol> Running for EpollDriver<P> {
    fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    fn stats(&self) -> ServerStats {
        self.shared
            .common
            .snapshot(None, self.shared.table.memory_bytes())
    }

    fn shutdown(self: Box<Self>) -> ServerStats {
        if let Some(sw) = self.sweeper {
            sw.stop();
        }
        let s = &self.shared;
        s.stop.store(true, Ordering::SeqCst);
        let _ = s.shutdown_fd.notify();
        for t in self.threads {
            if t.join().is_err() {
                s.common.notices.push(Notice::WorkerPanicked);
            }
        }
        let stats = s.common.snapshot(None, s.table.memory_bytes());
        s.table.drain(|(stream, _)| {
            for ep in s.epolls.iter() {
                let _ = ep.delete(stream.as_raw_fd());
            }
        });
        stats
    }
}

fn run<P: Protocol>(s: &Shared<P>, w: usize) {
    if s.pin {
        pin_worker(w, &s.common.notices);
    }
    s.common.proto.prepare_worker(w);
    let mut events = Vec::with_capacity(s.batch);
    let mut scratch = vec![0u8; SCRATCH];
    while !s.stop.load(Ordering::Relaxed) {
        if let Err(error) = s.epoll_of(w).wait_ns(&mut events, None) {
            s.common.notices.push(Notice::WaitFailed {
                worker: w,
                call: "epoll_wait",
                error,
            });
            return;
        }
        for ev in events.iter().copied() {
            match ev.u64 {
                LISTENER => accept_all(s, w),
                SHUTDOWN => return,
                idx => serve(s, w, idx as usize, ev.events, &mut scratch),
            }
        }
    }
}

fn accept_all<P: Protocol>(s: &Shared<P>, w: usize) {
    for stream in accept_ready(&s.listener, &s.common, w) {
        let Some(stream) = s.common.admit(w, stream) else {
            continue;
        };
        let Some(idx) = s.table.reserve() else {
            s.common.refuse_admitted(w, &stream);
            continue;
        };
        let (owner, flags) = match s.model {
            Model::OneToOne => (
                s.next.fetch_add(1, Ordering::Relaxed) % s.epolls.len(),
                ONE_TO_ONE,
            ),
            Model::Shared => (w, IN | RDHUP | ONESHOT),
        };
        let fd = stream.as_raw_fd();
        // In the table before the epoll can report it.
        let conn = Conn::with_limits(s.common.open_session(owner), s.limits);
        *s.table.lock(idx) = Some((stream, conn));
        if let Err(e) = s.epoll_of(owner).add(fd, flags, idx as u64) {
            s.common.notices.push(Notice::RegisterFailed(e));
            if let Some((stream, conn)) = s.table.lock(idx).take() {
                drop(stream);
                s.common.closed(owner, Close::Aborted, conn.session);
            }
            s.table.release(idx);
        }
    }
    if s.model == Model::Shared {
        let _ = s
            .epoll_of(w)
            .modify(s.listener.as_raw_fd(), IN | ONESHOT, LISTENER);
    }
}

fn serve<P: Protocol>(s: &Shared<P>, w: usize, idx: usize, bits: EpollFlags, scratch: &mut [u8]) {
    let Some((mut slot, _)) = s.table.lock_observed(idx) else {
        return;
    };
    let Some((stream, conn)) = slot.as_mut() else {
        return;
    };
    let counters = &s.common.counters.workers[w];
    counters.record_event();
    let mut cx = Cx::new(w, counters);
    let hup = bits & (RDHUP | HUP) != 0;
    let outcome = conn.on_ready(&*s.common.proto, stream, scratch, &mut cx, hup);
    if outcome == Outcome::Blocked {
        counters.record_blocked();
    }
    let rearm = match (s.model, outcome) {
        (_, Outcome::Close(why)) => {
            let (stream, conn) = slot.take().expect("entry checked above");
            let _ = s.epoll_of(w).delete(stream.as_raw_fd());
            drop(stream);
            drop(slot);
            s.table.release(idx);
            s.common.closed(w, why, conn.session);
            return;
        }
        // Edge-triggered for life; re-arming re-reports it now.
        (Model::OneToOne, Outcome::More) => ONE_TO_ONE,
        (Model::OneToOne, _) => return,
        (Model::Shared, Outcome::Idle) => IN | RDHUP | ONESHOT,
        (Model::Shared, Outcome::Blocked) => OUT | RDHUP | ONESHOT,
        (Model::Shared, Outcome::More) => IN | OUT | RDHUP | ONESHOT,
    };
    if let Err(e) = s.epoll_of(w).modify(stream.as_raw_fd(), rearm, idx as u64) {
        s.common.notices.push(Notice::RearmFailed(e));
    }
}
