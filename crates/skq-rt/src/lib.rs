//! # skq-rt: SKQ event scheduling for unmodified Linux
//!
//! One [`Skq`] instance is shared by all worker threads of a server. Each
//! worker owns a [`Worker`] handle and loops on [`Worker::wait`], which
//! releases the worker's previous batch and returns the next one. Sources
//! (sockets, listeners, pipes, [`UserEvent`]s) are registered once, edge
//! triggered, and never re-armed: a source returned by `wait` is processing
//! until that worker's next `wait`; readiness arriving meanwhile is
//! redelivered after release, and no source is ever handed to two workers at
//! once. Fd-less [`VirtualSource`]s live in the scheduler's table only and
//! are activated directly by any thread, with no system call unless a
//! worker must be woken (`virtual_source.rs`). Scheduling (which worker gets an activation) is the sans-I/O
//! [`skq_core::Scheduler`]; this crate harvests readiness and moves threads.
//! `docs/ARCHITECTURE.md` explains the harvesting protocol and its
//! alternatives.
//!
//! A handler must read (or accept) until `EAGAIN`, or call
//! [`Worker::still_ready`] when it stops early; otherwise data that is
//! already buffered produces no new edge.
//!
//! ## Registering: the typed path
//!
//! A [`Registry`] (from [`Skq::registry`], cheap to clone, usable from any
//! thread) takes a source by value and returns a [`Registered<S>`] that owns
//! it, derefs to it, and deregisters it on drop *before* closing it. A worker
//! registers through [`Worker::register`], which also records it as the
//! registrar (needed for [`Flags::PINNED`]).
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::{TcpListener, TcpStream};
//! use std::time::Duration;
//! use skq_rt::{Config, Events, Flags, Interest, Policy, Skq};
//!
//! let skq = Skq::new(Config::new(Policy::Hybrid, 2)).unwrap();
//! let registry = skq.registry();
//! let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//! let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
//! let (conn, _) = listener.accept().unwrap();
//! conn.set_nonblocking(true).unwrap();
//! let mut conn = registry.register(conn, 7, Interest::READABLE, Flags::NONE).unwrap();
//! client.write_all(b"ping").unwrap();
//!
//! let mut worker = skq.worker(0);
//! let mut events = Events::with_capacity(16);
//! assert_eq!(worker.wait(&mut events, Some(Duration::from_secs(5))).unwrap(), 1);
//! let ev = events.iter().next().unwrap();
//! assert_eq!((ev.token, ev.source), (7, conn.id()));
//! let mut buf = [0u8; 16];
//! assert_eq!(conn.read(&mut buf).unwrap(), 4); // `conn` derefs to the TcpStream
//! drop(conn); // deregisters, then closes the socket
//! ```
//!
//! ## Registering: the raw path
//!
//! [`Skq::register`] takes a raw fd and returns a bare [`SourceId`]; the
//! caller keeps the fd open until [`Skq::deregister`]. It costs nothing
//! beyond the registration itself and is what the C API and servers with
//! their own fd tables use.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::os::fd::AsRawFd;
//! use std::os::unix::net::UnixStream;
//! use skq_rt::{Config, Events, Flags, Interest, Policy, Skq};
//!
//! let skq = Skq::new(Config::new(Policy::Hybrid, 2)).unwrap();
//! let (mut a, mut b) = UnixStream::pair().unwrap();
//! b.set_nonblocking(true).unwrap();
//! let id = skq.register(b.as_raw_fd(), 7, Interest::READABLE, Flags::NONE, None).unwrap();
//! a.write_all(b"ping").unwrap();
//!
//! let mut worker = skq.worker(0);
//! let mut events = Events::with_capacity(16);
//! let n = worker.wait(&mut events, Some(std::time::Duration::from_secs(5))).unwrap();
//! assert_eq!(n, 1);
//! let ev = events.iter().next().unwrap();
//! assert_eq!(ev.token, 7);
//! let mut buf = [0u8; 16];
//! assert_eq!(b.read(&mut buf).unwrap(), 4); // then read until EAGAIN
//! skq.deregister(id, b.as_raw_fd()).unwrap(); // before `b` closes
//! ```
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

/// The OS boundary, shared by every skq crate (re-exported from `skq-sys`).
pub use skq_sys as sys;
mod elastic;
mod registry;
pub mod topology;
mod user_event;
mod virtual_source;
mod worker;

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub use elastic::{checkpoint, spawn_resource_manager};
pub use registry::{RegisterError, Registered, Registry};
pub use skq_core::{
    imbalance_of, Class, Config, ConfigError, Event, ExitReport, Flags, Phase, Policy, Ready,
    Scheduler, SourceId, WorkerId, WorkerStats,
};
pub use skq_core::{Activation, Decision, ElasticConfig};
use sys::epoll::{self, Epoll};
use sys::eventfd::EventFd;
pub use user_event::UserEvent;
pub use virtual_source::{VirtualSource, VIRTUAL_READY};
pub use worker::{ElasticEvent, Events, Worker};

/// Errors creating an instance.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration was refused (the message names the option).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A system call failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// What a registration wants to hear about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest(u8);

impl Interest {
    /// Readable (and hang-up).
    pub const READABLE: Interest = Interest(1);
    /// Writable.
    pub const WRITABLE: Interest = Interest(2);

    fn epoll_flags(self) -> u32 {
        let mut f = epoll::ET;
        if self.0 & 1 != 0 {
            f |= epoll::IN | epoll::RDHUP;
        }
        if self.0 & 2 != 0 {
            f |= epoll::OUT;
        }
        f
    }
}

impl std::ops::BitOr for Interest {
    type Output = Interest;
    fn bitor(self, o: Interest) -> Interest {
        Interest(self.0 | o.0)
    }
}

const DOORBELL: u64 = u64::MAX;
/// The targeted wake-up with several pollers per set is the real-time
/// signal `SIGRTMIN + 7`, which ends the worker's current or next blocking
/// poll (`skq_sys::signal`: on x86-64 through the wake-up window, the
/// signal unblocked in worker threads with `SA_RESTART`, so one that races
/// the end of a poll can make a call the kernel never restarts return
/// `EINTR`; elsewhere unblocked only inside the poll). An application that
/// uses this signal itself must run with `Config::pollers = 1`.
pub const WAKE_SIGNAL_OFFSET: i32 = 7;
/// Token of the level-triggered shutdown eventfd: once written it stays
/// readable, so every `epoll_wait` after shutdown returns at once, whoever
/// harvested before (an edge could be consumed by another worker's
/// non-blocking harvest just before a new poller blocks).
const SHUTDOWN: u64 = u64::MAX - 1;
/// Marks a harvested event already activated by the high-priority pass.
const SKIPPED: u64 = u64::MAX - 2;
/// Tokens `ORPHAN + g`: set `g`, whose group has no live worker, nested in
/// a live group's set (see [`Skq::adopt_orphans`]).
const ORPHAN: u64 = u64::MAX - 3 - 64;
const KIND_OTHER: u8 = 0;
const KIND_SOCKET: u8 = 1;

/// `SourceFd::set` of a source registered in every readiness set (a
/// listening socket: any group's idle worker may accept).
const ALL_SETS: u8 = u8::MAX;

/// `SourceFd::id` of a free slot (`DOORBELL`'s value: no source id is in
/// the special tokens' range).
const NO_ID: u64 = u64::MAX;

/// What the harvest needs to know of one registered source.
struct SourceFd {
    fd: AtomicI32,
    kind: AtomicU8,
    /// The readiness set (poll group) it is registered in, or `ALL_SETS`.
    set: AtomicU8,
    /// With several sets: held while the source's set membership changes
    /// (registration, a move to its home's set, modify, deregister), so a
    /// move never races a deregistration or a change of interest.
    moving: AtomicBool,
    /// Its epoll interest flags, for a move's `ADD`.
    events: AtomicU32,
    /// The id registered in this slot (`SourceId::as_u64`; `NO_ID` when free):
    /// a move checks it, so it never moves a later registration of the slot.
    id: AtomicU64,
    hint: skq_core::HintCell,
}

impl Default for SourceFd {
    fn default() -> SourceFd {
        SourceFd {
            fd: AtomicI32::new(-1),
            kind: AtomicU8::new(KIND_OTHER),
            set: AtomicU8::new(0),
            moving: AtomicBool::new(false),
            events: AtomicU32::new(0),
            id: AtomicU64::new(NO_ID),
            hint: skq_core::HintCell::new(),
        }
    }
}

/// [`SourceFd::moving`] held; released on drop.
struct SetLock<'a>(&'a AtomicBool);

impl SourceFd {
    /// Waits for the set lock (a move holds it for two `epoll_ctl` calls).
    fn lock_set(&self) -> SetLock<'_> {
        while self
            .moving
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::thread::yield_now();
        }
        SetLock(&self.moving)
    }

    /// The set lock if nobody holds it.
    fn try_lock_set(&self) -> Option<SetLock<'_>> {
        self.moving
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            .then_some(SetLock(&self.moving))
    }
}

impl Drop for SetLock<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// A worker's sleeping place when it is not the poller.
struct Parker {
    flag: Mutex<bool>,
    cv: Condvar,
}

impl Parker {
    fn park(&self, timeout_ns: Option<u64>) {
        let mut g = self.flag.lock().unwrap_or_else(|p| p.into_inner());
        if !*g {
            g = match timeout_ns {
                Some(ns) => {
                    self.cv
                        .wait_timeout(g, Duration::from_nanos(ns))
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.cv.wait(g).unwrap_or_else(|p| p.into_inner()),
            };
        }
        *g = false;
    }

    fn unpark(&self) {
        let mut g = self.flag.lock().unwrap_or_else(|p| p.into_inner());
        *g = true;
        self.cv.notify_one();
    }
}

/// The shared event object of one server.
pub struct Skq {
    core: Scheduler,
    /// One epoll set per poll group (`Config::poll_groups`; one by
    /// default), harvested by that group's workers.
    sets: Box<[Epoll]>,
    /// Per set: rung to wake the worker blocked in it (its poller).
    doorbells: Box<[EventFd]>,
    /// Spreads sources with no locality over the sets.
    next_set: AtomicU64,
    /// Per set: the set it is nested in while its group has no live
    /// worker (`adopt_orphans`), or `None`.
    adopted: Mutex<Vec<Option<usize>>>,
    /// Written once by `shutdown`; level-triggered in the shared epoll.
    shutdown_fd: EventFd,
    parkers: Box<[Parker]>,
    /// Where a set may have several pollers (`Scheduler::targeted_wakes`):
    /// the signal that ends one worker's blocking poll (`WakeVia::Targeted`).
    wake_signal: Option<skq_sys::signal::WakeSignal>,
    /// Per worker: the kernel thread id of the thread that last waited on
    /// it (0 before its first wait), for the targeted wake-up.
    tids: Box<[std::sync::atomic::AtomicI32]>,
    taken: Box<[AtomicBool]>,
    /// Per source slot: its fd and kind (for SO_INCOMING_CPU) and its
    /// cached CPU hint (`Config::hint_refresh`). Grows with the core's
    /// source table, a segment at a time.
    sources: skq_core::SegVec<SourceFd>,
    hint_refresh: u32,
    /// `getsockopt(SO_INCOMING_CPU)` calls made so far.
    incoming_cpu_calls: AtomicU64,
    /// Registrations moved to their home's readiness set so far.
    set_moves: AtomicU64,
    need_cpu: bool,
    /// The resource manager's decisions.
    elastic_log: Mutex<Vec<skq_core::Decision>>,
}

impl Skq {
    /// Creates an instance. Unless `cfg.worker_cpus` is set, worker `w` is
    /// placed (for locality decisions and [`Skq::pin_current_thread`]) on the
    /// w-th CPU of the topology's spread order over the CPUs this process may
    /// use, wrapping around ([`topology::worker_cpus`]). Unless
    /// `cfg.cpu_topology` is set, it is filled from /sys
    /// ([`topology::Topology::places`]), so a CPU hint naming a CPU without a
    /// worker goes to the nearest workers in the tree (`skq topology` shows
    /// the mapping); an unreadable /sys leaves it empty (such hints spread).
    pub fn new(mut cfg: Config) -> Result<Arc<Skq>, Error> {
        cfg.validate()?;
        let topo = topology::Topology::detect().ok();
        if cfg.worker_cpus.is_empty() {
            let allowed = sys::cpu::allowed_cpus()?;
            cfg.worker_cpus = topology::worker_cpus(topo.as_ref(), &allowed, cfg.workers);
        }
        if cfg.cpu_topology.is_empty() {
            cfg.cpu_topology = topo.map(|t| t.places()).unwrap_or_default();
        }
        let hint_refresh = cfg.hint_refresh;
        // A hint only chooses among workers: with one there is nothing to
        // choose, and no `getsockopt` is spent on it.
        let need_cpu =
            cfg.workers > 1 && matches!(cfg.policy, Policy::Cpu | Policy::Queue | Policy::Hybrid);
        let n = cfg.workers;
        let cap = cfg.capacity;
        let core = Scheduler::new(cfg)?;
        let groups = core.poll_groups();
        let wake_signal = if core.targeted_wakes() {
            Some(skq_sys::signal::WakeSignal::install(WAKE_SIGNAL_OFFSET)?)
        } else {
            None
        };
        let shutdown_fd = EventFd::new()?;
        let mut sets = Vec::new();
        let mut doorbells = Vec::new();
        for _ in 0..core.poll_groups() {
            let epoll = Epoll::new()?;
            let doorbell = EventFd::new()?;
            epoll.add(doorbell.as_raw_fd(), epoll::IN | epoll::ET, DOORBELL)?;
            epoll.add(shutdown_fd.as_raw_fd(), epoll::IN, SHUTDOWN)?;
            sets.push(epoll);
            doorbells.push(doorbell);
        }
        Ok(Arc::new(Skq {
            core,
            sets: sets.into_boxed_slice(),
            doorbells: doorbells.into_boxed_slice(),
            next_set: AtomicU64::new(0),
            adopted: Mutex::new(vec![None; groups]),
            shutdown_fd,
            parkers: (0..n)
                .map(|_| Parker {
                    flag: Mutex::new(false),
                    cv: Condvar::new(),
                })
                .collect(),
            wake_signal,
            tids: (0..n)
                .map(|_| std::sync::atomic::AtomicI32::new(0))
                .collect(),
            taken: (0..n).map(|_| AtomicBool::new(false)).collect(),
            sources: skq_core::SegVec::new(cap),
            hint_refresh,
            incoming_cpu_calls: AtomicU64::new(0),
            set_moves: AtomicU64::new(0),
            need_cpu,
            elastic_log: Mutex::new(Vec::new()),
        }))
    }

    /// Bytes one registered source adds to the source tables.
    pub fn bytes_per_source() -> usize {
        Scheduler::slot_bytes() + std::mem::size_of::<SourceFd>()
    }

    /// Bytes the source tables (the core's and the runtime's) hold now:
    /// they grow a segment at a time with the sources registered.
    pub fn table_bytes(&self) -> usize {
        self.core.table_bytes() + self.sources.memory_bytes()
    }

    /// The scheduling core (counters, configuration, phases).
    pub fn core(&self) -> &Scheduler {
        &self.core
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        self.core.config()
    }

    /// Registers `fd` (non-blocking) edge-triggered with a user `token`.
    /// `registrar` is the registering worker (required for `PINNED`).
    ///
    /// The raw path, for the C API and for tables that manage their fds
    /// themselves: nothing ties `fd` to the returned id, and the caller must
    /// call [`Skq::deregister`] with the same fd before closing it. Rust
    /// callers that own their sources use [`Registry::register`] or
    /// [`Worker::register`], which do both by construction.
    pub fn register(
        &self,
        fd: RawFd,
        token: u64,
        interest: Interest,
        flags: Flags,
        registrar: Option<WorkerId>,
    ) -> io::Result<SourceId> {
        let id = self
            .core
            .register(token, flags, registrar)
            .map_err(io::Error::other)?;
        let idx = id.index() as usize;
        let kind = if sys::socket::is_socket(fd).unwrap_or(false) {
            KIND_SOCKET
        } else {
            KIND_OTHER
        };
        let src = self
            .sources
            .ensure(idx)
            .expect("the core checked the index");
        // Held until the source is in its set(s): a readiness harvested
        // meanwhile is delivered, but its move waits for the next one.
        let _held = self.set_lock(Some(src));
        src.fd.store(fd, Ordering::Relaxed);
        src.kind.store(kind, Ordering::Relaxed);
        src.events.store(interest.epoll_flags(), Ordering::Relaxed);
        src.id.store(id.as_u64(), Ordering::Relaxed);
        let set = self.set_for(fd, kind, id, registrar);
        src.set.store(set, Ordering::Relaxed);
        for s in self.sets_of(set) {
            if let Err(e) = self.sets[s].add(fd, interest.epoll_flags(), id.as_u64()) {
                for done in self.sets_of(set).take_while(|&d| d != s) {
                    let _ = self.sets[done].delete(fd);
                }
                let _ = self.core.deregister(id);
                return Err(e);
            }
        }
        Ok(id)
    }

    /// The readiness set a new source goes to (with one set, set 0): a
    /// listening socket to every set (any group's idle worker accepts); a
    /// socket whose packets were already processed on a CPU to the set of
    /// the group whose workers the core maps that CPU to (its locality
    /// home, as an activation would be routed); anything else to its
    /// registrar's group, or round-robin.
    fn set_for(&self, fd: RawFd, kind: u8, id: SourceId, registrar: Option<WorkerId>) -> u8 {
        let groups = self.sets.len();
        if groups == 1 {
            return 0;
        }
        if kind == KIND_SOCKET {
            if sys::socket::is_listening(fd) {
                return ALL_SETS;
            }
            if let Some(cpu) = sys::socket::incoming_cpu(fd) {
                let n = self.core.config().workers;
                let all = u64::MAX >> (64 - n);
                if let Some((w, _)) = self.core.cpu_map().route(cpu, None, id.index(), all) {
                    return self.core.poll_group(w) as u8;
                }
            }
        }
        match registrar {
            Some(w) if w < self.core.config().workers => self.core.poll_group(w) as u8,
            _ => (self.next_set.fetch_add(1, Ordering::Relaxed) % groups as u64) as u8,
        }
    }

    /// Nests the set of every poll group left without a live worker (all
    /// its workers exited or parked) into a live group's set, level
    /// triggered, and takes it out once its group lives again; a harvest
    /// that meets the nested set's token harvests it too. So every set
    /// keeps a harvester whatever exits or parks. Called after each exit,
    /// park and rejoin; nothing to do with one set.
    pub(crate) fn adopt_orphans(&self) {
        let n = self.sets.len();
        if n == 1 {
            return;
        }
        let mut adopted = self.adopted.lock().unwrap_or_else(|p| p.into_inner());
        let live: Vec<usize> = (0..n).filter(|&g| self.core.group_live(g)).collect();
        for g in 0..n {
            let fd = self.sets[g].as_raw_fd();
            let home_live = live.contains(&g);
            if let Some(h) = adopted[g] {
                if home_live || !live.contains(&h) {
                    let _ = self.sets[h].delete(fd);
                    adopted[g] = None;
                }
            }
            if !home_live && adopted[g].is_none() && !live.is_empty() {
                let h = live[g % live.len()];
                // An epoll set added while it holds readiness is reported at
                // once, so nothing that arrived meanwhile is missed.
                if self.sets[h].add(fd, epoll::IN, ORPHAN + g as u64).is_ok() {
                    adopted[g] = Some(h);
                }
            }
        }
    }

    /// The sets a source registered with `set` lives in.
    fn sets_of(&self, set: u8) -> std::ops::Range<usize> {
        if set == ALL_SETS {
            0..self.sets.len()
        } else {
            set as usize..set as usize + 1
        }
    }

    /// The set (or `ALL_SETS`) source `id` was registered in.
    fn set_of(&self, id: SourceId) -> u8 {
        self.sources
            .get(id.index() as usize)
            .map_or(0, |s| s.set.load(Ordering::Relaxed))
    }

    /// Changes a registration's token, interest and flags.
    pub fn modify(
        &self,
        id: SourceId,
        fd: RawFd,
        token: u64,
        interest: Interest,
        flags: Flags,
    ) -> io::Result<()> {
        self.core
            .modify(id, token, flags)
            .map_err(io::Error::other)?;
        let src = self.sources.get(id.index() as usize);
        let _held = self.set_lock(src);
        if let Some(src) = src {
            src.events.store(interest.epoll_flags(), Ordering::Relaxed);
        }
        for s in self.sets_of(self.set_of(id)) {
            self.sets[s].modify(fd, interest.epoll_flags(), id.as_u64())?;
        }
        Ok(())
    }

    /// Sets a source's priority class (QStack's per-request priority): the
    /// class governs the source's next activation, at harvest (high first),
    /// in the worker queues, in stealing and under diffusion. Touches only
    /// the scheduler's flags word, no system call; call it from the worker
    /// processing the source. Returns whether the class changed.
    pub fn set_class(&self, id: SourceId, class: skq_core::Class) -> io::Result<bool> {
        self.core.set_class(id, class).map_err(io::Error::other)
    }

    /// Removes a registration; call before closing `fd`. Pending and
    /// in-flight deliveries of the source are dropped.
    pub fn deregister(&self, id: SourceId, fd: RawFd) -> io::Result<()> {
        let src = self.sources.get(id.index() as usize);
        let held = self.set_lock(src);
        let mut r = Ok(());
        for s in self.sets_of(self.set_of(id)) {
            let d = self.sets[s].delete(fd);
            if r.is_ok() {
                r = d;
            }
        }
        if let Some(src) = src {
            src.fd.store(-1, Ordering::Relaxed);
            src.id.store(NO_ID, Ordering::Relaxed);
        }
        drop(held);
        self.core.deregister(id).map_err(io::Error::other)?;
        r
    }

    /// `src`'s set lock, taken only when there are several readiness sets
    /// (with one, nothing moves and nothing needs it).
    fn set_lock<'a>(&self, src: Option<&'a SourceFd>) -> Option<SetLock<'a>> {
        src.filter(|_| self.sets.len() > 1).map(SourceFd::lock_set)
    }

    /// Registrations moved so far to the readiness set of their home (see
    /// [`Skq::follow_home`]); 0 with one set.
    pub fn set_moves(&self) -> u64 {
        self.set_moves.load(Ordering::Relaxed)
    }

    /// The readiness set (poll group) source `id` is registered in now;
    /// `None` for a listening socket (in every set) or a stale id.
    pub fn poll_set_of(&self, id: SourceId) -> Option<usize> {
        let src = self.sources.get(id.index() as usize)?;
        if src.id.load(Ordering::Relaxed) != id.as_u64() {
            return None;
        }
        let set = src.set.load(Ordering::Relaxed);
        (set != ALL_SETS).then_some(set as usize)
    }

    /// With several readiness sets: moves source `id`, just routed to
    /// worker `to`, into `to`'s set when `to` is its home (the policy keeps
    /// it there: its CPU hint moved, or vanilla's round-robin home differs
    /// from where it was registered) and it lives in another set. Until
    /// then every readiness of the flow is harvested by a worker of the old
    /// group and handed across, a targeted wake-up each time its home
    /// sleeps; after it, the kernel wakes the home directly. The move is
    /// `ADD` to the new set, then `DEL` from the old (a readiness in
    /// between may be reported by both; the slot's state machine merges
    /// it). It is skipped when another thread holds the source's set lock
    /// (a registration, modify or deregistration in progress; the next
    /// activation tries again) and for a balance decision that leaves the
    /// home where it was.
    fn follow_home(&self, id: SourceId, to: WorkerId) {
        let Some(src) = self.sources.get(id.index() as usize) else {
            return;
        };
        let target = self.core.poll_group(to) as u8;
        let set = src.set.load(Ordering::Relaxed);
        if set == ALL_SETS || set == target || self.core.home_of(id) != Some(to) {
            return;
        }
        let Some(_held) = src.try_lock_set() else {
            return;
        };
        let fd = src.fd.load(Ordering::Relaxed);
        let set = src.set.load(Ordering::Relaxed);
        if fd < 0
            || src.id.load(Ordering::Relaxed) != id.as_u64()
            || set == ALL_SETS
            || set == target
        {
            return;
        }
        let events = src.events.load(Ordering::Relaxed);
        if self.sets[target as usize]
            .add(fd, events, id.as_u64())
            .is_err()
        {
            return;
        }
        if self.sets[set as usize].delete(fd).is_err() {
            let _ = self.sets[target as usize].delete(fd);
            return;
        }
        src.set.store(target, Ordering::Relaxed);
        self.set_moves.fetch_add(1, Ordering::Relaxed);
    }

    /// Creates an eventfd-backed user event registered with `token`
    /// (without a registrar, so not `PINNED`); dropping it deregisters it.
    pub fn user_event(self: &Arc<Self>, token: u64, flags: Flags) -> io::Result<UserEvent> {
        UserEvent::new(self, token, flags)
    }

    /// The handle of worker `id` for the thread that will run it.
    ///
    /// # Panics
    /// If `id` is out of range or its handle was already taken.
    pub fn worker(self: &Arc<Self>, id: WorkerId) -> Worker {
        assert!(
            id < self.taken.len(),
            "worker {id} out of range (0..{})",
            self.taken.len()
        );
        assert!(
            !self.taken[id].swap(true, Ordering::AcqRel),
            "worker {id} handle already taken"
        );
        Worker::new(self.clone(), self.core.worker(id))
    }

    /// Pins the calling thread to the CPU assigned to worker `w`.
    pub fn pin_current_thread(&self, w: WorkerId) -> io::Result<u32> {
        let cpu = self.core.config().cpu_of(w);
        sys::cpu::pin_current_thread(cpu)?;
        Ok(cpu)
    }

    /// Per-worker counters.
    pub fn stats(&self) -> Vec<WorkerStats> {
        self.core.stats()
    }

    /// (max − min) / max of per-worker processing time.
    pub fn imbalance(&self) -> f64 {
        self.core.imbalance()
    }

    /// Makes every current and future `wait` return `Ok(0)` at once.
    pub fn shutdown(&self) {
        self.core.shut_down();
        let _ = self.shutdown_fd.notify();
        for d in self.doorbells.iter() {
            let _ = d.notify();
        }
        for p in self.parkers.iter() {
            p.unpark();
        }
    }

    /// Whether [`Skq::shutdown`] was called.
    pub fn is_shutdown(&self) -> bool {
        self.core.is_shut_down()
    }

    /// Wakes worker `w` however it sleeps. `me` is the calling worker (a
    /// worker never wakes itself: it is awake and waits next), or
    /// `usize::MAX` for a thread that is no worker of this instance, which
    /// always wakes `w`.
    fn wake(&self, w: WorkerId, me: WorkerId) {
        if w == me {
            return;
        }
        match self.core.wake_via(w) {
            skq_core::WakeVia::Doorbell => {
                let _ = self.doorbells[self.core.poll_group(w)].notify();
            }
            skq_core::WakeVia::Targeted => {
                // `w` is in the set's pollers, so it waited already and its
                // thread id is known; the signal ends its next blocking poll
                // at once if it is not blocked yet.
                let tid = self.tids[w].load(Ordering::Acquire);
                let sent = match (&self.wake_signal, tid) {
                    (Some(sig), t) if t > 0 => sig.send(t).is_ok(),
                    _ => false,
                };
                if !sent {
                    // Never expected; wake some poller of its set rather
                    // than none (it harvests, and `w` sees its queue at
                    // its next wait).
                    let _ = self.doorbells[self.core.poll_group(w)].notify();
                }
            }
            skq_core::WakeVia::Parker => self.parkers[w].unpark(),
        }
    }

    /// `getsockopt(SO_INCOMING_CPU)` calls made so far (one per
    /// `hint_refresh` socket activations): divide by replies for system
    /// calls per reply.
    pub fn incoming_cpu_calls(&self) -> u64 {
        self.incoming_cpu_calls.load(Ordering::Relaxed)
    }

    /// Times a worker came back from sleeping (blocked in `epoll_wait` or on
    /// its parker), for any reason: readiness, a wake-up by another worker,
    /// a timeout. Divided by events delivered, the runtime's wake-ups per
    /// event; an idle instance adds none.
    pub fn wakeups(&self) -> u64 {
        self.core.sleeps_ended()
    }

    /// Turns harvested epoll events into activations.
    ///
    /// Under the locality policies a socket's activation carries its CPU
    /// hint, `SO_INCOMING_CPU`, from the source's [`skq_core::HintCell`]: the
    /// kernel is asked at the first activation and again after
    /// `cfg.hint_refresh` activations (default 16), so a flow that moves is
    /// followed at most `hint_refresh − 1` activations late.
    ///
    /// `me` is the harvesting worker, inside its wait call: the core may
    /// give it the event when it harvests as one of several pollers, and
    /// gives it a high-priority one under best-of-two and hybrid
    /// (`Scheduler::activate_harvested`).
    ///
    /// Returns the time it stamped the activations with (a clock read the
    /// caller may reuse).
    fn activate_all(
        &self,
        evs: &mut [epoll::Event],
        me: WorkerId,
        rng: &mut skq_core::FastRng,
    ) -> u64 {
        let now = sys::cpu::monotonic_ns();
        let mut asked = 0u64;
        // High-priority readiness becomes activations first (QStack's
        // full-datapath priority): one pass over the harvest for sources
        // whose class is high, marking them done, then the rest in order.
        // The class is read once per event, so each event is activated
        // exactly once even if a worker changes a class meanwhile.
        if self.core.prioritized() {
            for ev in evs.iter_mut() {
                let data = ev.u64;
                // Below every special token (nested sets, SKIPPED, SHUTDOWN, DOORBELL).
                if data < ORPHAN
                    && self.core.class_of(SourceId::from_u64(data)) == skq_core::Class::High
                {
                    self.activate_one(ev, now, &mut asked, me, rng);
                    ev.u64 = SKIPPED;
                }
            }
        }
        for ev in evs.iter() {
            self.activate_one(ev, now, &mut asked, me, rng);
        }
        if asked > 0 {
            self.incoming_cpu_calls.fetch_add(asked, Ordering::Relaxed);
        }
        now
    }

    /// Turns one harvested readiness into an activation (see
    /// [`Skq::activate_all`]).
    #[inline]
    fn activate_one(
        &self,
        ev: &epoll::Event,
        now: u64,
        asked: &mut u64,
        me: WorkerId,
        rng: &mut skq_core::FastRng,
    ) {
        let data = ev.u64;
        if data == DOORBELL {
            self.doorbells[self.core.poll_group(me)].drain();
            return;
        }
        if data == SHUTDOWN || data == SKIPPED {
            return; // SHUTDOWN is never drained: it stays readable
        }
        if (ORPHAN..ORPHAN + 64).contains(&data) {
            // A set without a live group, nested here: harvest it too.
            let g = (data - ORPHAN) as usize;
            let mut buf = Vec::with_capacity(64);
            if let Ok(k) = self.sets[g].wait_ns(&mut buf, Some(0)) {
                if k > 0 {
                    let _ = self.activate_all(&mut buf, me, rng);
                }
            }
            return;
        }
        let id = SourceId::from_u64(data);
        let bits = ev.events;
        let mut ready = Ready::EMPTY;
        if bits & epoll::IN != 0 {
            ready = ready | Ready::READABLE;
        }
        if bits & epoll::OUT != 0 {
            ready = ready | Ready::WRITABLE;
        }
        if bits & (epoll::HANGUP | epoll::RDHUP) != 0 {
            ready = ready | Ready::HUP | Ready::READABLE;
        }
        if bits & epoll::ERR != 0 {
            ready = ready | Ready::ERROR;
        }
        // Sockets carry the CPU that processed their packets; other
        // sources (pipes, user events) carry none and stay with their
        // registering worker under the locality policies.
        let cpu = if self.need_cpu {
            match self.sources.get(id.index() as usize) {
                Some(src)
                    if src.kind.load(Ordering::Relaxed) == KIND_SOCKET
                        && src.fd.load(Ordering::Relaxed) >= 0 =>
                {
                    let fd = src.fd.load(Ordering::Relaxed);
                    src.hint.cached(id).unwrap_or_else(|| {
                        *asked += 1;
                        let hint = sys::socket::incoming_cpu(fd);
                        src.hint.store(id, hint, self.hint_refresh);
                        hint
                    })
                }
                _ => None,
            }
        } else {
            None
        };
        if let skq_core::Activation::Queued { worker, wake } =
            self.core.activate_harvested(id, ready, cpu, now, rng, me)
        {
            if self.sets.len() > 1 {
                self.follow_home(id, worker);
            }
            if let Some(w) = wake {
                self.wake(w, me);
            }
        }
    }
}

impl Skq {
    /// A cloneable, `Send + Sync` handle through which any thread registers
    /// owned sources ([`Registry::register`]); see also [`Worker::register`].
    pub fn registry(self: &Arc<Self>) -> Registry {
        Registry::new(self.clone())
    }
}
