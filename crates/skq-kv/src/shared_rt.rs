//! The shared architecture on the skq runtime: every skq mode (`vanilla`, `shared`,
//! `queue`, `cpu`, `best2`, `hybrid`, with `+steal`/`-steal`) decides which worker handles
//! a connection's readiness; the store is the lock-sharded [`SharedStore`].
//!
//! Runtime contract used here (docs/API-CONTRACT.md): sources are edge-triggered and never
//! re-armed; a source returned by `wait` is handled by that worker alone until its next
//! `wait`, so a connection's slot mutex is uncontended. A handler reads until `EAGAIN` or
//! calls `still_ready` (here: only when the receive buffer filled up while the session
//! still wants input). Connections are registered readable *and* writable, so a blocked
//! writer gets an edge when the socket drains and resumes parsing then.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_utils::CachePadded;
use skq_rt::{Config, Event, Events, Flags, Interest, Skq, SourceId};

use crate::server::{Ctx, Running, ServerConfig};
use crate::session::Session;
use crate::shared::{admit, serve_step, SharedStore};

const LISTENER: u64 = u64::MAX;
const BATCH: usize = 64;

struct Conn {
    stream: TcpStream,
    session: Session,
    id: SourceId,
}

struct Server {
    ctx: Arc<Ctx>,
    skq: Arc<Skq>,
    store: SharedStore,
    listener: TcpListener,
    conns: Vec<Mutex<Option<Conn>>>,
    free: Mutex<Vec<usize>>,
    accepted: Arc<Vec<CachePadded<AtomicU64>>>,
    pin: bool,
}

/// The runtime configuration for `--mode`, sized for `--max-conns`.
pub fn runtime_config(mode: &str, workers: usize, max_conns: usize) -> anyhow::Result<Config> {
    let mut rc =
        Config::parse_mode(mode, workers).map_err(|e| anyhow::anyhow!("--mode {mode}: {e}"))?;
    rc.capacity = rc.capacity.max(max_conns + 8);
    rc.validate()
        .map_err(|e| anyhow::anyhow!("--max-conns {max_conns}: {e}"))?;
    Ok(rc)
}

/// Starts the shared-architecture server on the skq runtime.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    let rc = runtime_config(&cfg.mode, cfg.workers, cfg.max_conns)?;
    let skq = Skq::new(rc).map_err(|e| anyhow::anyhow!("--mode {}: {e}", cfg.mode))?;
    let listener = skq_sys::net::listen(cfg.addr, false)
        .map_err(|e| anyhow::anyhow!("--addr {}: cannot listen: {e}", cfg.addr))?;
    let addr = listener.local_addr()?;
    skq.register(
        listener.as_raw_fd(),
        LISTENER,
        Interest::READABLE,
        Flags::NONE,
        None,
    )?;
    let (workers, max_conns, pin) = (cfg.workers, cfg.max_conns, cfg.pin);
    let store = SharedStore::new(cfg.limit_bytes, cfg.limits.max_item_size);
    let ctx = Arc::new(Ctx::new(cfg));
    let accepted: Arc<Vec<_>> = Arc::new(
        (0..workers)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
    );
    let server = Arc::new(Server {
        ctx: ctx.clone(),
        skq: skq.clone(),
        store,
        listener,
        conns: (0..max_conns).map(|_| Mutex::new(None)).collect(),
        free: Mutex::new((0..max_conns).rev().collect()),
        accepted: accepted.clone(),
        pin,
    });
    let mut threads = Vec::new();
    for w in 0..workers {
        let s = server.clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("kv-skq-{w}"))
                .spawn(move || s.run(w))?,
        );
    }
    Ok(Running {
        addr,
        ctx,
        threads,
        wake: Box::new(move || skq.shutdown()),
        accepted,
    })
}

impl Server {
    fn run(&self, w: usize) {
        if self.pin {
            if let Err(e) = self.skq.pin_current_thread(w) {
                eprintln!("skq kv: warning: could not pin worker {w}: {e}");
            }
        }
        let mut worker = self.skq.worker(w);
        let mut events = Events::with_capacity(BATCH);
        while !self.ctx.shutdown.load(Ordering::SeqCst) && !self.skq.is_shutdown() {
            // `Skq::shutdown` (called by `Running::stop`) makes every wait return.
            if let Err(e) = worker.wait(&mut events, None) {
                eprintln!("skq kv: wait failed on worker {w}: {e}");
                break;
            }
            for ev in events.iter() {
                let again = if ev.token == LISTENER {
                    self.accept(w)
                } else {
                    self.serve(w, ev)
                };
                if again {
                    worker.still_ready(ev);
                }
            }
        }
        let _ = worker.exit();
    }

    fn lock(&self, idx: usize) -> MutexGuard<'_, Option<Conn>> {
        self.conns[idx].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Accepts until `EAGAIN`; returns whether to be called again without a new edge.
    fn accept(&self, worker: usize) -> bool {
        loop {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
                // EMFILE and friends: leave the backlog for the next connection's edge
                // rather than spin on an error that will not clear by itself.
                Err(_) => return false,
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
            let mut slot = self.lock(idx);
            let interest = Interest::READABLE | Interest::WRITABLE;
            match self.skq.register(
                stream.as_raw_fd(),
                idx as u64,
                interest,
                Flags::NONE,
                Some(worker),
            ) {
                Ok(id) => {
                    *slot = Some(Conn {
                        stream,
                        session: Session::new(self.ctx.cfg.limits),
                        id,
                    });
                    self.accepted[worker].fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => {
                    eprintln!("skq kv: cannot register a connection: {e}");
                    drop(slot);
                    self.ctx.curr_conns.fetch_sub(1, Ordering::Relaxed);
                    self.free
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(idx);
                }
            }
        }
    }

    /// Handles one delivery; returns whether the source must be redelivered.
    fn serve(&self, worker: usize, ev: &Event) -> bool {
        let idx = ev.token as usize;
        let mut slot = self.lock(idx);
        // A stale delivery for a slot that was closed (and maybe reused) is harmless: the
        // runtime drops deliveries of deregistered sources; check the id anyway.
        let Some(conn) = slot.as_mut().filter(|c| c.id == ev.source) else {
            return false;
        };
        // Readiness bits are not consulted: reads and writes report errors and EOF themselves.
        let step = serve_step(
            &self.ctx,
            &self.store,
            worker,
            &mut conn.session,
            &mut conn.stream,
            true,
        );
        if step.close {
            if let Some(conn) = slot.take() {
                let _ = self.skq.deregister(conn.id, conn.stream.as_raw_fd());
                drop(conn);
                self.ctx.curr_conns.fetch_sub(1, Ordering::Relaxed);
                self.free
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(idx);
            }
            return false;
        }
        step.full && conn.session.wants_read()
    }
}
