//! The per-source state machine.
//!
//! Each registered source owns one [`Slot`]. Its whole scheduling state lives
//! in one atomic word so that every transition is a single compare-and-swap:
//!
//! ```text
//! bits 0-1  phase     FREE | IDLE | QUEUED | BUSY
//! bit  2    PENDING   (BUSY only) readiness arrived while processing
//! bit  3    STOLEN    taken by a thief; cleared when the thief releases it
//! bits 8-15 ready     readiness accumulated since the last delivery
//! bits 32-63 gen      generation; bumped by deregistration
//! ```
//!
//! Transitions (who may make them):
//!
//! ```text
//! IDLE   --activate-->        QUEUED   then pushed on exactly one queue
//! QUEUED --activate-->        QUEUED   readiness merged ("coalesced")
//! QUEUED --dequeue (owner)--> BUSY     under the queue's lock
//! BUSY   --activate-->        BUSY|PENDING
//! BUSY   --release (owner)--> IDLE
//! BUSY|PENDING --release-->   QUEUED   then pushed on exactly one queue
//! any    --deregister-->      FREE, gen+1 (queue entries become stale)
//! ```
//!
//! Invariants (BRIEF §7): a QUEUED source is in at most one queue and in
//! transit to at most one; only the worker that dequeued a source may release
//! it, so it is never processed by two workers at once; an activation is never
//! dropped: it either queues the source, merges into a pending delivery, or
//! marks the busy source for redelivery.

use crate::sync::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use crate::types::{Flags, Ready, SourceId};

pub(crate) const PHASE: u64 = 0b11;
pub(crate) const FREE: u64 = 0;
pub(crate) const IDLE: u64 = 1;
pub(crate) const QUEUED: u64 = 2;
pub(crate) const BUSY: u64 = 3;
pub(crate) const PENDING: u64 = 1 << 2;
pub(crate) const STOLEN: u64 = 1 << 3;
const READY_SHIFT: u32 = 8;
const READY_MASK: u64 = 0xff << READY_SHIFT;
const GEN_SHIFT: u32 = 32;
pub(crate) const NONE: u32 = u32::MAX;

/// Readiness bits inside a state word.
#[inline]
pub(crate) fn ready_of(word: u64) -> Ready {
    Ready(((word & READY_MASK) >> READY_SHIFT) as u8)
}

#[inline]
pub(crate) fn with_ready(word: u64, r: Ready) -> u64 {
    word | (r.0 as u64) << READY_SHIFT
}

#[inline]
pub(crate) fn gen_of(word: u64) -> u32 {
    (word >> GEN_SHIFT) as u32
}

#[inline]
pub(crate) fn word(gen: u32, bits: u64) -> u64 {
    (gen as u64) << GEN_SHIFT | bits
}

/// Where a source is in its life (for tests and introspection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not registered (or the id is stale).
    Free,
    /// Registered, nothing to deliver.
    Idle,
    /// On a worker queue.
    Queued,
    /// Being processed by a worker.
    Busy,
    /// Being processed, and ready again: redelivered after release.
    BusyPending,
}

/// One registered source.
pub(crate) struct Slot {
    pub(crate) state: AtomicU64,
    pub(crate) token: AtomicU64,
    pub(crate) flags: AtomicU8,
    /// Registering worker (target of PINNED), or NONE.
    pub(crate) registrar: AtomicU32,
    /// Locality home (vanilla assignment, queue/CPU affinity), or NONE.
    pub(crate) home: AtomicU32,
    /// Worker it was last queued on, for migration accounting.
    pub(crate) last: AtomicU32,
    /// CPU of the latest readiness with a CPU hint (NONE if never given);
    /// redeliveries after release use it so CPU affinity follows the flow.
    pub(crate) cpu: AtomicU32,
    /// Queue affinity: 1 once the first CPU hint fixed the home.
    pub(crate) homed: AtomicU8,
    /// This slot's index in the table (spreads sources over a CPU's workers).
    pub(crate) index: AtomicU32,
}

impl Default for Slot {
    fn default() -> Slot {
        Slot::new()
    }
}

impl Slot {
    pub(crate) fn new() -> Slot {
        Slot {
            state: AtomicU64::new(word(0, FREE)),
            token: AtomicU64::new(0),
            flags: AtomicU8::new(0),
            registrar: AtomicU32::new(NONE),
            home: AtomicU32::new(NONE),
            last: AtomicU32::new(NONE),
            cpu: AtomicU32::new(NONE),
            homed: AtomicU8::new(0),
            index: AtomicU32::new(0),
        }
    }

    pub(crate) fn flags(&self) -> Flags {
        Flags(self.flags.load(Ordering::Relaxed))
    }

    /// The phase of `id` as seen now.
    pub(crate) fn phase(&self, id: SourceId) -> Phase {
        let w = self.state.load(Ordering::Acquire);
        if gen_of(w) != id.gen() {
            return Phase::Free;
        }
        match w & PHASE {
            FREE => Phase::Free,
            IDLE => Phase::Idle,
            QUEUED => Phase::Queued,
            _ if w & PENDING != 0 => Phase::BusyPending,
            _ => Phase::Busy,
        }
    }

    /// Current word if it belongs to `id` and is in `phase`, else None.
    #[inline]
    pub(crate) fn load_if(&self, id: SourceId, phase: u64) -> Option<u64> {
        let w = self.state.load(Ordering::Acquire);
        (gen_of(w) == id.gen() && w & PHASE == phase).then_some(w)
    }

    /// CAS helper with the orderings every transition uses: Release so the
    /// next owner sees our writes, Acquire so we see the previous owner's.
    #[inline]
    pub(crate) fn cas(&self, cur: u64, new: u64) -> Result<u64, u64> {
        self.state
            .compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
    }
}
