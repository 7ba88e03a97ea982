//! # skq-core: the sans-I/O SKQ scheduling core
//!
//! One [`Scheduler`] is the event object all workers of a server share. It
//! holds a queue per worker (one in total in `shared` mode), the state machine
//! of every registered source, and the policies that decide which worker gets
//! an activation. It never touches a file descriptor and never reads a clock:
//! callers pass `now` in nanoseconds. The Linux runtime (`skq-rt`) drives it
//! from epoll; the simulator (`skq-sim`) drives the very same code in virtual
//! time.
//!
//! The lifecycle needs no re-arming: an event returned by a worker's
//! [`Scheduler::wait`] is *processing* until that worker's next `wait` (or
//! [`Scheduler::release`]); readiness that arrives meanwhile is remembered and
//! the source is redelivered after release. A source is never handed to two
//! workers at once, and a worker that exits hands its queued work to the
//! others ([`Scheduler::exit`]).
//!
//! ## What it guarantees (BRIEF §7, checked by `src/tests/` and by loom in
//! `tests/loom.rs`)
//!
//! 1. every activation is delivered to exactly one worker or merged into a
//!    delivery still pending; none is lost, and no wake-up is lost (a worker
//!    about to sleep and a push to its queue are ordered by its queue lock);
//! 2. a source is never processed by two workers at once: only the worker
//!    that dequeued it may release it;
//! 3. per-source order: readiness arriving during processing is redelivered
//!    after release, never alongside;
//! 4. a worker that exits hands its queued work to live workers; its pinned
//!    sources are unpinned and reported, never dropped; a worker that parks
//!    ([`Scheduler::park_worker`], elastic worker count) does the same and
//!    may [`Scheduler::rejoin`];
//! 5. CPU hints map to workers through the topology tree
//!    ([`Config::cpu_topology`], `cpumap.rs`): own CPU, SMT sibling, last-level
//!    cache, node, else spread over live workers by a per-source salt, so no
//!    placement of the server piles flows onto one worker;
//! 6. the activation path takes one lock (the target queue's) and allocates
//!    only when a queue outgrows its capacity; what the policies look up is
//!    precomputed at [`Scheduler::new`].
//!
//! ## Who may touch what
//!
//! * `slot.rs` owns the per-source state word: it changes only by the
//!   transitions in its table (a CAS through `Slot::cas`, or the release
//!   store that publishes a fresh registration in `sched.rs`).
//! * Queue entries move only under their queue's lock: `sched.rs` pushes,
//!   `wait.rs` pops into a batch, `exit.rs` drains a dying worker's queue,
//!   `steal.rs` takes from a victim it could try-lock. No code holds two
//!   queue locks.
//! * `policy.rs` and `cpumap.rs` decide where a source goes and write only
//!   the slot's placement hints (`home`, `homed`), never its state.
//! * `exit.rs` and `elastic.rs` (park/rejoin) are the only writers of the
//!   `alive` mask after [`Scheduler::new`]; `wait.rs` and `sched.rs` own the `idle` mask
//!   (park handshake; `exit.rs` only clears an exiting worker's bit).
//! * `worker_loop.rs` owns the worker loop's shared state (the poller role,
//!   parked followers, the elastic target, shutdown): what a worker does
//!   next is [`Scheduler::next_step`]'s answer ([`Step`]); drivers only
//!   execute steps (system calls in skq-rt, virtual time in skq-sim).
//! * `hint.rs` ([`HintCell`]) is for drivers (skq-rt caches
//!   `SO_INCOMING_CPU` in it); the scheduler never reads it.
//! * Every atomic and lock of the scheduler goes through `sync.rs` so loom
//!   can swap them; drivers (`skq-rt`, `skq-sim`) use only the public API.
//!
//! ```
//! use skq_core::{Config, Flags, Policy, Ready, Scheduler};
//!
//! let sched = Scheduler::new(Config::new(Policy::Hybrid, 2)).unwrap();
//! let mut w0 = sched.worker(0);
//! let conn = sched.register(7, Flags::NONE, Some(0)).unwrap();
//! let mut rng = sched.activator_rng(1);
//! // Readiness seen on CPU 0 goes to the worker on CPU 0.
//! let _ = sched.activate(conn, Ready::READABLE, Some(0), 1_000, &mut rng);
//! let mut events = Vec::new();
//! assert_eq!(sched.wait(&mut w0, 2_000, &mut events, 16), 1);
//! assert_eq!(events[0].token, 7);
//! // Ready again while processing: deferred, redelivered after release.
//! let _ = sched.activate(conn, Ready::READABLE, Some(0), 3_000, &mut rng);
//! assert_eq!(sched.wait(&mut w0, 4_000, &mut events, 16), 1);
//! ```
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod config;
mod cpulist;
mod cpumap;
mod elastic;
mod exit;
mod hint;
mod policy;
mod priority;
mod rng;
mod sched;
mod segvec;
mod slot;
mod steal;
mod sync;
mod types;
mod wait;
mod worker;
mod worker_loop;

#[cfg(test)]
mod tests;

pub use config::{
    split_steal, Config, ConfigError, CpuPlace, Policy, DEFAULT_POLLERS, DEFAULT_PROMOTE_MIN_NS,
    MAX_CPUS, MAX_WORKERS,
};
pub use cpulist::{format_cpu_list, parse_cpu_list};
pub use cpumap::{CpuMap, HintLevel};
pub use elastic::{Decision, ElasticConfig, ResourceManager};
pub use exit::imbalance_of;
pub use hint::HintCell;
pub use priority::Class;
pub use rng::FastRng;
pub use sched::{Scheduler, ALPHA};
pub use segvec::{SegVec, SEGMENT};
pub use slot::Phase;
pub use steal::Steal;
pub use types::{
    Activation, CoreError, Event, ExitReport, Flags, Migrations, Nanos, Ready, SourceId, WorkerId,
    WorkerStats,
};
pub use worker::WorkerCtx;
pub use worker_loop::{
    Done, Readiness, Step, WaitCall, WakeVia, KERNEL_FIFO_MIN_NS, LONE_HARVEST_EVERY,
    ONE_EVENT_POLLS_MAX_SET,
};
