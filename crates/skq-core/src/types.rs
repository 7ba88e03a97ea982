//! Small value types shared by the core's API.

use std::fmt;
use std::ops::BitOr;

use thiserror::Error;

/// Index of a worker, `0..workers`.
pub type WorkerId = usize;
/// Nanoseconds from an arbitrary epoch chosen by the driver (real or virtual).
pub type Nanos = u64;

/// Per-registration flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u8);

impl Flags {
    /// No flag.
    pub const NONE: Flags = Flags(0);
    /// Always delivered to the registering worker; never stolen or balanced.
    pub const PINNED: Flags = Flags(1);
    /// Queued on the high-priority queue of its worker.
    pub const HIGH_PRIORITY: Flags = Flags(2);
    /// Batch / best-effort work: with priority diffusion on, queued only on
    /// batch workers (see `priority.rs`).
    pub const BATCH: Flags = Flags(4);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }
}

/// Readiness carried by an activation and reported with the event.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Ready(pub u8);

impl Ready {
    /// Nothing.
    pub const EMPTY: Ready = Ready(0);
    /// Data (or a connection) to read.
    pub const READABLE: Ready = Ready(1);
    /// Room to write.
    pub const WRITABLE: Ready = Ready(2);
    /// Peer hung up.
    pub const HUP: Ready = Ready(4);
    /// Error pending on the source.
    pub const ERROR: Ready = Ready(8);
    /// A user event was triggered.
    pub const USER: Ready = Ready(16);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Ready) -> bool {
        self.0 & other.0 == other.0
    }
    /// Readable.
    pub fn is_readable(self) -> bool {
        self.contains(Ready::READABLE)
    }
    /// Writable.
    pub fn is_writable(self) -> bool {
        self.contains(Ready::WRITABLE)
    }
    /// Hung up or errored.
    pub fn is_closed(self) -> bool {
        self.0 & (Ready::HUP.0 | Ready::ERROR.0) != 0
    }
}

impl BitOr for Ready {
    type Output = Ready;
    fn bitor(self, o: Ready) -> Ready {
        Ready(self.0 | o.0)
    }
}

impl fmt::Debug for Ready {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [(1, "R"), (2, "W"), (4, "HUP"), (8, "ERR"), (16, "USER")];
        let set: Vec<_> = names
            .iter()
            .filter(|(b, _)| self.0 & b != 0)
            .map(|(_, n)| *n)
            .collect();
        write!(f, "Ready({})", set.join("|"))
    }
}

/// A registered source: slot index in the low 32 bits, generation in the high
/// 32. Ids of deregistered sources are stale and ignored everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceId(pub(crate) u64);

impl SourceId {
    /// The id as one integer (fits an epoll `u64` data field).
    pub fn as_u64(self) -> u64 {
        self.0
    }
    /// Rebuilds an id from [`SourceId::as_u64`].
    pub fn from_u64(v: u64) -> SourceId {
        SourceId(v)
    }
    pub(crate) fn new(index: u32, gen: u32) -> SourceId {
        SourceId((gen as u64) << 32 | index as u64)
    }
    /// Slot index.
    pub fn index(self) -> u32 {
        self.0 as u32
    }
    pub(crate) fn gen(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// One delivered event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The application's token for the source.
    pub token: u64,
    /// Which source.
    pub source: SourceId,
    /// Readiness accumulated since the last delivery.
    pub ready: Ready,
    /// Delivered from the high-priority queue.
    pub high: bool,
}

/// What an activation did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Activation {
    /// Queued on `worker`'s queue (queue 0 in shared mode); `wake` names an
    /// idle worker the caller must wake.
    Queued {
        /// Queue owner.
        worker: WorkerId,
        /// Worker to wake, if any.
        wake: Option<WorkerId>,
    },
    /// Already queued; readiness merged, nothing else to do.
    Coalesced,
    /// Being processed; it will be redelivered after its worker releases it.
    Deferred,
    /// The id was deregistered; ignored.
    Stale,
}

/// Errors of registration calls.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum CoreError {
    /// Every slot is in use.
    #[error("source table full ({0} sources); raise the capacity")]
    Full(usize),
    /// The id was deregistered.
    #[error("stale source id")]
    Stale,
    /// A worker index out of range or of an exited worker.
    #[error("worker {0} does not exist or has exited")]
    BadWorker(WorkerId),
}

/// Why a source moved to another worker than the one that last had it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Migrations {
    /// CPU affinity followed a flow to a new CPU.
    pub cpu_follow: u64,
    /// Best-of-two (or hybrid's rival) picked a less loaded worker.
    pub balance: u64,
    /// Taken by work stealing.
    pub steal: u64,
    /// Rescheduled because its worker exited.
    pub exit: u64,
}

/// Per-worker counters, readable at any time.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerStats {
    /// Events delivered by this worker's waits.
    pub delivered: u64,
    /// Sources this worker stole.
    pub steals_made: u64,
    /// Sources stolen from this worker's queue.
    pub steals_suffered: u64,
    /// Sources that arrived here from elsewhere, by reason.
    pub migrations: Migrations,
    /// Wake-ups sent to this worker.
    pub wakeups: u64,
    /// Events pushed onto this worker's queue while it was processing a
    /// batch (they wait for it, or for a thief). A source its own running
    /// worker keeps to run next (`activate_next`) is not counted.
    #[serde(default)]
    pub queued_behind_busy: u64,
    /// High-priority events delivered.
    pub high_served: u64,
    /// Time spent processing batches (wait return → next wait), ns.
    pub busy_ns: u64,
    /// Current EWMA of processing time per event, ns.
    pub t_avg_ns: f64,
    /// Events queued now.
    pub queued: usize,
    /// Whether the worker has exited.
    pub exited: bool,
    /// Whether the worker is parked (elastic worker count; it may rejoin).
    #[serde(default)]
    pub parked: bool,
}

/// What a worker's exit did with its work.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExitReport {
    /// Queued or in-flight sources handed to other workers.
    pub rescheduled: usize,
    /// Pinned sources of the exiting worker: unpinned and rescheduled so no
    /// event is lost; listed so the application can deregister or re-pin them.
    pub unpinned: Vec<(SourceId, u64)>,
    /// Sources that could not be rescheduled because no worker is left.
    pub stranded: Vec<(SourceId, u64)>,
    /// Workers the caller must wake.
    pub wakes: Vec<WorkerId>,
    /// Pinned sources the exit visited to unpin (its cost beyond the
    /// queued ones: proportional to what the worker owns, not to the table).
    pub visited: usize,
}
