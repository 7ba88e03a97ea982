//! Virtual sources: sources without a file descriptor, activated directly.
//!
//! A [`VirtualSource`] lives in skq-core's source table only: no fd, no
//! epoll registration, nothing to harvest. [`VirtualSource::activate`],
//! callable from any thread, is the activation a harvest would have made
//! for a readable user event, done at once by the caller:
//!
//! 1. `Scheduler::activate_by(id, USER | READABLE, hint, now, rng, me)`,
//!    where `me` is the calling thread's worker index if it is a worker of
//!    this same instance (the thread-local context its first `wait`
//!    installs, `elastic.rs`), else `None`; `hint` is the calling thread's
//!    CPU under the locality policies (`cpu`, `queue`, `hybrid`), so the
//!    source follows whoever activates it (for a task, the worker that
//!    handled the socket it waited on), and `None` under the others;
//! 2. if the activation claimed an idle worker (`Activation::Queued` with
//!    `wake: Some(w)`), the caller wakes `w` by the means skq-core names
//!    (`Skq::wake`: the set's doorbell, the targeted signal, or `w`'s
//!    parker). A worker never wakes itself (it is awake, and waits next);
//!    a foreign thread always wakes.
//!
//! So an activation costs no system call when the chosen worker is busy,
//! and exactly one wake-up when it claimed an idle one: the claim and the
//! wake-up are one step of the caller, which is why this lives in skq-rt
//! (the wake-up is private to it).
//!
//! ## What the handler sees (coalescing)
//!
//! Deliveries are those of any source, with skq-core's per-source state and
//! no re-arming: an activation while the source is queued merges into that
//! delivery; one while it is being processed (between the `wait` that
//! returned it and the worker's next `wait` or `release`) is redelivered
//! once after the release. So for every activation a delivery follows that
//! is returned by `wait` after the activation began; several activations
//! may share one delivery. A handler that needs a count keeps it itself
//! (bump a counter before activating, read it in the handler).
//!
//! ## Deregistration
//!
//! Dropping the handle deregisters the source: the slot's generation moves
//! on, so a late activation through a copied [`SourceId`] is stale and
//! ignored, queued deliveries are dropped, and a new owner of the slot never
//! receives the old source's activations (as for [`crate::Registered`]).
//! [`VirtualSource::activate`] borrows the handle, so it cannot run after
//! the drop.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use skq_core::{Activation, FastRng, Flags, Ready, SourceId, WorkerId};

use crate::sys::cpu::{current_cpu, monotonic_ns};
use crate::{Skq, Worker};

/// What a virtual source's delivery carries: a user event, readable (as an
/// eventfd-backed [`crate::UserEvent`]'s delivery reads).
pub const VIRTUAL_READY: Ready = Ready(Ready::USER.0 | Ready::READABLE.0);

/// A source without an fd, activated from any thread by
/// [`VirtualSource::activate`] (see the module docs). Created by
/// [`Skq::virtual_source`] or, with a registrar, [`Worker::virtual_source`];
/// dropping it deregisters it.
///
/// ```
/// use std::time::Duration;
/// use skq_rt::{Config, Events, Flags, Policy, Skq, VIRTUAL_READY};
///
/// let skq = Skq::new(Config::new(Policy::Hybrid, 1)).unwrap();
/// let vs = skq.virtual_source(7, Flags::NONE).unwrap();
/// let mut worker = skq.worker(0);
/// let waiter = std::thread::spawn(move || {
///     let mut events = Events::with_capacity(4);
///     worker.wait(&mut events, Some(Duration::from_secs(10))).unwrap();
///     events.iter().map(|ev| (ev.token, ev.ready)).collect::<Vec<_>>()
/// });
/// let _ = vs.activate(); // from a thread that is no worker: wakes it if idle
/// assert_eq!(waiter.join().unwrap(), vec![(7, VIRTUAL_READY)]);
/// ```
pub struct VirtualSource {
    skq: Arc<Skq>,
    id: SourceId,
}

impl VirtualSource {
    /// The registration (as carried by [`crate::Event::source`]).
    pub fn id(&self) -> SourceId {
        self.id
    }

    /// The instance it is registered with.
    pub fn skq(&self) -> &Arc<Skq> {
        &self.skq
    }

    /// Activates the source: it is delivered to the worker the policy
    /// chooses, waking that worker if it is idle. Never blocks, makes no
    /// system call unless a worker must be woken. See the module docs for
    /// the hint, the coalescing and what the handler sees.
    pub fn activate(&self) -> Activation {
        self.skq.activate_virtual(self.id, false)
    }

    /// [`VirtualSource::activate`] from inside the last event of the
    /// calling worker's batch, the event whose work the source continues
    /// (an I/O event waking the task that waits on it): under the locality
    /// policies the source takes that event's place at the front of the
    /// caller's queue (no wake-up, no thief, no hop to another worker; it
    /// stays stealable). skq-core's [`skq_core::Scheduler::activate_next`].
    /// On any other thread it is [`VirtualSource::activate`].
    pub fn activate_next(&self) -> Activation {
        self.skq.activate_virtual(self.id, true)
    }

    /// Changes the token and flags (its class, [`Flags::HIGH_PRIORITY`],
    /// [`Flags::BATCH`]); `PINNED` needs a registration made through
    /// [`Worker::virtual_source`].
    pub fn modify(&self, token: u64, flags: Flags) -> io::Result<()> {
        self.skq
            .core
            .modify(self.id, token, flags)
            .map_err(io::Error::other)
    }
}

impl Drop for VirtualSource {
    fn drop(&mut self) {
        let _ = self.skq.core.deregister(self.id);
    }
}

impl std::fmt::Debug for VirtualSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtualSource")
            .field("id", &self.id)
            .finish()
    }
}

impl Skq {
    /// Registers a virtual source (no fd, no epoll; see
    /// [`VirtualSource`]) with a user `token`, without a registrar: `flags`
    /// must not contain [`Flags::PINNED`] (use [`Worker::virtual_source`]).
    pub fn virtual_source(self: &Arc<Self>, token: u64, flags: Flags) -> io::Result<VirtualSource> {
        if flags.contains(Flags::PINNED) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Flags::PINNED needs a registering worker: use Worker::virtual_source",
            ));
        }
        self.register_virtual(token, flags, None)
    }

    fn register_virtual(
        self: &Arc<Self>,
        token: u64,
        flags: Flags,
        registrar: Option<WorkerId>,
    ) -> io::Result<VirtualSource> {
        let id = self
            .core
            .register(token, flags, registrar)
            .map_err(io::Error::other)?;
        // The runtime's side of the slot may hold a former fd source's
        // fields: mark it fd-less, so nothing ever asks the kernel about it.
        if let Some(src) = self.sources.ensure(id.index() as usize) {
            src.fd.store(-1, Ordering::Relaxed);
            src.kind.store(crate::KIND_OTHER, Ordering::Relaxed);
        }
        Ok(VirtualSource {
            skq: self.clone(),
            id,
        })
    }

    /// The activation of a virtual source (module docs, steps 1 and 2).
    fn activate_virtual(&self, id: SourceId, next: bool) -> Activation {
        let hint = if self.need_cpu { current_cpu() } else { None };
        let (act, me) = crate::elastic::with_activator(self, |me, rng| {
            // The clock only when the policy compares expected completion
            // times: a task's wake-up on a lone worker, or one its worker
            // keeps, reads none.
            let now = if self.core.activation_reads_clock(next && me.is_some(), me) {
                monotonic_ns()
            } else {
                0
            };
            let act = match me {
                Some(w) if next => self
                    .core
                    .activate_next(id, VIRTUAL_READY, hint, now, rng, w),
                _ => self.core.activate_by(id, VIRTUAL_READY, hint, now, rng, me),
            };
            (act, me)
        });
        if let Activation::Queued { wake: Some(w), .. } = act {
            // `usize::MAX` names no worker: a foreign caller always wakes.
            self.wake(w, me.unwrap_or(usize::MAX));
        }
        act
    }
}

impl Worker {
    /// Registers a virtual source like [`Skq::virtual_source`], with this
    /// worker as the registrar: the target of [`Flags::PINNED`] and, under
    /// the locality policies, the source's first home.
    pub fn virtual_source(&self, token: u64, flags: Flags) -> io::Result<VirtualSource> {
        self.skq().register_virtual(token, flags, Some(self.id()))
    }
}

/// Seeds the generators of threads that activate without being workers.
static FOREIGN_SEED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The scheduling generator of a thread that is not a worker (or is
    /// one of another instance).
    static FOREIGN_RNG: RefCell<Option<FastRng>> = const { RefCell::new(None) };
}

/// Runs `f` with a generator for a thread that is not one of `skq`'s
/// workers (or whose worker context is busy).
pub(crate) fn with_foreign_rng<R>(skq: &Skq, f: impl FnOnce(&mut FastRng) -> R) -> R {
    let mut f = Some(f);
    let r = FOREIGN_RNG.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return None;
        };
        let rng = c.get_or_insert_with(|| {
            let salt = FOREIGN_SEED.fetch_add(1, Ordering::Relaxed);
            skq.core.activator_rng(0xF0E1_D2C3 ^ salt)
        });
        Some((f.take().expect("called once"))(rng))
    });
    match r {
        Ok(Some(r)) => r,
        // Thread teardown or a reentrant call: a throwaway generator.
        _ => {
            let salt = FOREIGN_SEED.fetch_add(1, Ordering::Relaxed);
            let mut rng = skq.core.activator_rng(0xF0E1_D2C3 ^ salt);
            (f.take().expect("called once"))(&mut rng)
        }
    }
}
