//! Plain-Linux driver of the shared architecture (`--mode epoll`): one epoll instance shared
//! by all worker threads — the "Linux floating" 1:N model without the skq runtime.
//! Every connection and the listener are registered `EPOLLONESHOT`, so at most one worker
//! holds a given connection at a time (its slot's mutex is therefore uncontended) and it
//! re-arms the registration when done, with the interest the session needs (read unless
//! blocked, write while output is pending). A never-drained eventfd wakes every worker at
//! shutdown.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_utils::CachePadded;

use crate::server::{Ctx, Running, ServerConfig};
use crate::session::Session;
use crate::shared::{admit, serve_step, SharedStore};
use skq_sys::epoll::{Epoll, HUP, IN, ONESHOT, OUT, RDHUP};
use skq_sys::eventfd::EventFd;
use skq_sys::net;

const LISTENER: u64 = u64::MAX;
const WAKE: u64 = u64::MAX - 1;

struct Conn {
    stream: TcpStream,
    session: Session,
}

struct Server {
    ctx: Arc<Ctx>,
    store: SharedStore,
    epoll: Epoll,
    listener: TcpListener,
    wake: EventFd,
    conns: Vec<Mutex<Option<Conn>>>,
    free: Mutex<Vec<usize>>,
    accepted: Arc<Vec<CachePadded<AtomicU64>>>,
}

/// Starts the shared-architecture server on one shared epoll.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    let listener = net::listen(cfg.addr, false)
        .map_err(|e| anyhow::anyhow!("--addr {}: cannot listen: {e}", cfg.addr))?;
    let addr = listener.local_addr()?;
    let workers = cfg.workers;
    let max_conns = cfg.max_conns;
    let store = SharedStore::new(cfg.limit_bytes, cfg.limits.max_item_size);
    let ctx = Arc::new(Ctx::new(cfg));
    let accepted: Arc<Vec<_>> = Arc::new(
        (0..workers)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    let server = Arc::new(Server {
        ctx: ctx.clone(),
        store,
        epoll: Epoll::new()?,
        listener,
        wake: EventFd::new()?,
        conns: (0..max_conns).map(|_| Mutex::new(None)).collect(),
        free: Mutex::new((0..max_conns).rev().collect()),
        accepted: accepted.clone(),
    });
    server
        .epoll
        .add(server.listener.as_raw_fd(), IN | ONESHOT, LISTENER)?;
    server.epoll.add(server.wake.as_raw_fd(), IN, WAKE)?;
    let mut threads = Vec::new();
    for w in 0..workers {
        let s = server.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("kv-epoll-{w}"))
                .spawn(move || s.run(w))?,
        );
    }
    let wake_srv = server.clone();
    Ok(Running {
        addr,
        ctx,
        threads,
        wake: Box::new(move || {
            let _ = wake_srv.wake.notify();
        }),
        accepted,
    })
}

impl Server {
    fn run(&self, worker: usize) {
        let mut events = Vec::with_capacity(64);
        while !self.ctx.shutdown.load(Ordering::SeqCst) {
            if let Err(e) = self.epoll.wait_ns(&mut events, None) {
                eprintln!("skq kv: epoll_wait failed on worker {worker}: {e}");
                return;
            }
            for ev in events.iter().copied() {
                match ev.u64 {
                    LISTENER => self.accept(worker),
                    WAKE => {}
                    idx => self.serve(worker, idx as usize, ev.events),
                }
            }
        }
    }

    fn lock(&self, idx: usize) -> std::sync::MutexGuard<'_, Option<Conn>> {
        self.conns[idx].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn accept(&self, worker: usize) {
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break, // WouldBlock, or EMFILE: retried on the next readiness
            };
            let Some(stream) = admit(&self.ctx, worker, stream) else {
                continue;
            };
            let idx = self
                .free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop()
                .expect("admit bounds connections");
            let fd = stream.as_raw_fd();
            *self.lock(idx) = Some(Conn {
                stream,
                session: Session::new(self.ctx.cfg.limits),
            });
            self.accepted[worker].fetch_add(1, Ordering::SeqCst);
            if self
                .epoll
                .add(fd, IN | RDHUP | ONESHOT, idx as u64)
                .is_err()
            {
                self.close(idx, &mut self.lock(idx));
            }
        }
        let _ = self
            .epoll
            .modify(self.listener.as_raw_fd(), IN | ONESHOT, LISTENER);
    }

    fn serve(&self, worker: usize, idx: usize, events: u32) {
        let mut slot = self.lock(idx);
        let Some(conn) = slot.as_mut() else { return };
        if events & HUP != 0 {
            self.close(idx, &mut slot);
            return;
        }
        let read = events & (IN | RDHUP) != 0;
        let step = serve_step(
            &self.ctx,
            &self.store,
            worker,
            &mut conn.session,
            &mut conn.stream,
            read,
        );
        if step.close {
            self.close(idx, &mut slot);
            return;
        }
        // Level-triggered re-arm: input still buffered in the socket fires again at once.
        let mut interest = ONESHOT;
        if conn.session.wants_read() {
            interest |= IN | RDHUP;
        }
        if conn.session.wants_write() {
            interest |= OUT;
        }
        if self
            .epoll
            .modify(conn.stream.as_raw_fd(), interest, idx as u64)
            .is_err()
        {
            self.close(idx, &mut slot);
        }
    }

    fn close(&self, idx: usize, slot: &mut Option<Conn>) {
        if let Some(conn) = slot.take() {
            let _ = self.epoll.delete(conn.stream.as_raw_fd());
            drop(conn);
            self.ctx.curr_conns.fetch_sub(1, Ordering::Relaxed);
            self.free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(idx);
        }
    }
}
