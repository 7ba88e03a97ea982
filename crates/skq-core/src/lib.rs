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
mod policy;
mod rng;
mod sched;
mod slot;
mod steal;
mod sync;
mod types;
mod worker;

#[cfg(test)]
mod tests;

pub use config::{Config, ConfigError, Policy, MAX_WORKERS};
pub use rng::FastRng;
pub use sched::{imbalance_of, Scheduler, ALPHA};
pub use slot::Phase;
pub use steal::Steal;
pub use types::{
    Activation, CoreError, Event, ExitReport, Flags, Migrations, Nanos, Ready, SourceId, WorkerId,
    WorkerStats,
};
pub use worker::WorkerCtx;
