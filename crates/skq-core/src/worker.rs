//! Per-worker state: the part every thread may read (queues, load figures,
//! counters) and the part only the worker's own thread touches ([`WorkerCtx`]).

use std::collections::VecDeque;

use crossbeam_utils::CachePadded;

use crate::rng::FastRng;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::types::{Nanos, SourceId, WorkerId};

/// The two queues of one worker (one pair in total in shared mode).
pub(crate) struct Queues {
    pub(crate) high: VecDeque<SourceId>,
    pub(crate) regular: VecDeque<SourceId>,
    /// False once the owner exited: pushes must go elsewhere.
    pub(crate) alive: bool,
}

impl Queues {
    pub(crate) fn len(&self) -> usize {
        self.high.len() + self.regular.len()
    }
}

/// A worker queue. The lock is taken by activators pushing, by the owner
/// popping and (try-lock only) by thieves. `len` mirrors the queue length for
/// lock-free readers (best-of-two's n_cur, the park check, victim choice).
pub(crate) struct QueueShared {
    pub(crate) q: Mutex<Queues>,
    pub(crate) len: AtomicU64,
    /// Pushes ever made onto this queue, written under the lock (a plain
    /// load and store): an idle thief compares their sum before its steal
    /// attempt and after announcing its sleep, so a push it raced with is
    /// never missed (see `Scheduler::prepare_park`).
    pub(crate) pushes: AtomicU64,
}

impl QueueShared {
    pub(crate) fn new() -> Self {
        QueueShared {
            q: Mutex::new(Queues {
                high: VecDeque::with_capacity(64),
                regular: VecDeque::with_capacity(256),
                alive: true,
            }),
            len: AtomicU64::new(0),
            pushes: AtomicU64::new(0),
        }
    }
}

/// Best-of-two inputs, written by the owner at each wait, read by any
/// activator. Padded: activators on other CPUs read this line on every
/// best-of-two decision while the owner writes it once per batch.
pub(crate) struct LoadFigures {
    pub(crate) t_ret: AtomicU64,
    pub(crate) n_ret: AtomicU64,
    /// f64 bits of the EWMA of per-event processing time (ns).
    pub(crate) t_avg: AtomicU64,
}

/// Counters (relaxed; monotonically increasing except `busy_ns`'s reads).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) delivered: AtomicU64,
    pub(crate) steals_made: AtomicU64,
    pub(crate) steals_suffered: AtomicU64,
    pub(crate) mig_cpu: AtomicU64,
    pub(crate) mig_balance: AtomicU64,
    pub(crate) mig_steal: AtomicU64,
    pub(crate) mig_exit: AtomicU64,
    pub(crate) wakeups: AtomicU64,
    /// Events this worker kept in its hand from its own harvest: wake-ups
    /// too (its poll ended for them), counted apart because only this
    /// worker writes them (no locked add on the path of every reply).
    pub(crate) kept: AtomicU64,
    /// Pushes that left an event waiting behind this worker's current
    /// batch (its idle bit was not set and it was processing).
    pub(crate) queued_behind: AtomicU64,
    pub(crate) high_served: AtomicU64,
    pub(crate) busy_ns: AtomicU64,
    /// Steps of this worker's loop (`worker_loop.rs`).
    pub(crate) steps: AtomicU64,
    /// Returns from sleeping (a poll or a park) of this worker.
    pub(crate) sleeps_ended: AtomicU64,
}

impl Counters {
    /// Adds to a counter only its owner writes: a plain load and store (no
    /// locked instruction); readers may see it a moment late.
    #[inline]
    pub(crate) fn bump(c: &AtomicU64, n: u64) {
        if n != 0 {
            c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
        }
    }

    /// Adds to a counter several threads write.
    #[inline]
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        if n != 0 {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }
}

pub(crate) struct WorkerShared {
    pub(crate) load: CachePadded<LoadFigures>,
    pub(crate) counters: CachePadded<Counters>,
    /// The worker's hand during its blocking poll (`worker_loop.rs`, "The
    /// kept event"). Only the worker's own thread touches it.
    pub(crate) hand: CachePadded<Hand>,
}

/// Most events a lone worker's hand keeps from one blocking poll; the rest
/// of its harvest goes through its queue.
#[cfg(not(loom))]
pub(crate) const HAND_ROOM: usize = 32;
#[cfg(loom)]
pub(crate) const HAND_ROOM: usize = 2;

/// The sources a worker's harvest keeps (`worker_loop.rs`, "The kept
/// event"), QUEUED on no queue. Atomics only because the scheduler is
/// shared; only the worker's thread reads or writes them (relaxed: plain
/// loads and stores).
pub(crate) struct Hand {
    /// How many it may hold: 0 while shut (outside a blocking poll that may
    /// keep something), 1 for one of several pollers, [`HAND_ROOM`] for a
    /// lone worker.
    pub(crate) room: AtomicUsize,
    /// How many it holds, in `ids[..len]`.
    pub(crate) len: AtomicUsize,
    pub(crate) ids: [AtomicU64; HAND_ROOM],
}

impl Hand {
    fn new() -> Hand {
        Hand {
            room: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            ids: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl WorkerShared {
    pub(crate) fn new() -> Self {
        WorkerShared {
            load: CachePadded::new(LoadFigures {
                t_ret: AtomicU64::new(0),
                n_ret: AtomicU64::new(0),
                t_avg: AtomicU64::new(0f64.to_bits()),
            }),
            counters: CachePadded::new(Counters::default()),
            hand: CachePadded::new(Hand::new()),
        }
    }

    #[inline]
    pub(crate) fn t_avg(&self) -> f64 {
        f64::from_bits(self.load.t_avg.load(Ordering::Relaxed))
    }
}

/// The state only one worker's thread touches: its in-flight batch, its
/// random stream, and wake-ups it owes other workers. Create it once with
/// `Scheduler::worker` and pass it to every call made on that worker's behalf.
pub struct WorkerCtx {
    pub(crate) id: WorkerId,
    pub(crate) batch: Vec<SourceId>,
    pub(crate) rng: FastRng,
    pub(crate) t_ret: Nanos,
    pub(crate) n_ret: usize,
    pub(crate) wakes: Vec<WorkerId>,
    /// Sum of every queue's push count taken before the last steal attempt
    /// (None: no attempt since the last delivery).
    pub(crate) seen_pushes: Option<u64>,
    /// The last steal attempt found its victim's queue locked: the next
    /// attempt waits for the lock rather than trying it (`steal.rs`).
    pub(crate) steal_blocked: bool,
    /// Events delivered since this worker last harvested or polled its
    /// set (read only with one worker, `worker_loop::LONE_HARVEST_EVERY`).
    pub(crate) unharvested: usize,
}

impl WorkerCtx {
    pub(crate) fn new(id: WorkerId, seed: u64) -> Self {
        WorkerCtx {
            id,
            batch: Vec::with_capacity(64),
            rng: FastRng::new(seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            t_ret: 0,
            n_ret: 0,
            wakes: Vec::new(),
            seen_pushes: None,
            steal_blocked: false,
            unharvested: 0,
        }
    }

    /// This worker's index.
    pub fn id(&self) -> WorkerId {
        self.id
    }

    /// Workers that must be woken because this worker queued work on them
    /// (redeliveries at release, rescheduling at exit, steal hand-offs).
    pub fn take_wakes(&mut self) -> Vec<WorkerId> {
        std::mem::take(&mut self.wakes)
    }

    /// Whether any wake-ups are owed.
    pub fn has_wakes(&self) -> bool {
        !self.wakes.is_empty()
    }

    /// Drains owed wake-ups into `out` without allocating.
    pub fn drain_wakes_into(&mut self, out: &mut Vec<WorkerId>) {
        out.append(&mut self.wakes);
    }

    /// This worker's scheduling random stream (for activations it performs).
    pub fn rng(&mut self) -> &mut FastRng {
        &mut self.rng
    }

    /// Sources delivered by the last wait and not yet released.
    pub fn in_flight(&self) -> &[SourceId] {
        &self.batch
    }
}
