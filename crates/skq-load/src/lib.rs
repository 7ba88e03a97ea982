//! `skq load`: an open-loop load generator that checks its own work.
//!
//! * **Open loop.** Every connection follows its own send schedule
//!   ([`schedule`]: Poisson, fixed rate, or a replayed trace); requests leave at
//!   their scheduled time whether or not replies came back. Thousands of
//!   non-blocking connections are spread over a few threads, each with its own
//!   epoll instance ([`worker`]). A rate profile ([`profile`]: steps, a
//!   diurnal ramp, on/off bursts) makes the offered rate change over the run
//!   for every protocol; the offered rate, achieved rate and latency per
//!   interval are then reported ([`skq_report::result::IntervalPoint`]).
//!   Latency is measured from the *scheduled*
//!   send time (no coordinated omission); latency from the actual send time is
//!   reported beside it.
//! * **Protocols** ([`protocol`]): skq RPC (`skq_proto::wire`), memcached text
//!   get/set (ETC and Sphinx mixes), HTTP/1.1 GET keep-alive.
//! * **Exactly once, in order.** Every reply is matched against the
//!   connection's outstanding requests; missing, duplicate, out-of-order and
//!   bad replies are counted ([`worker`] documents the rules).
//! * **Statistics** ([`stats`]): per-thread HdrHistograms merged after the
//!   run; percentiles with 95% order-statistic confidence intervals.
//! * **Self-checks** ([`checks`]): achieved vs target rate, Anderson–Darling
//!   test of the inter-arrival gaps, lag-1 rank correlation of latencies, send
//!   lateness. A failed check is printed and recorded, never hidden.
//! * **Ground truth** ([`refserver`], [`queueing`], [`validate`]): an
//!   in-process FCFS server with exact emulated service, compared against the
//!   M/M/1 and M/D/1 closed forms (`--validate`), and a capacity search
//!   against this machine's own timing floor ([`capacity`], `--capacity`).
//!
//! The library entry point is [`run`]; the CLI is [`cli`].
//!
//! **Who touches what.** Each generator thread owns its connections, its
//! schedules and its histograms outright (nothing is shared while a point
//! runs); results are merged once the threads have joined. All system calls
//! go through `skq-sys`.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod capacity;
pub mod checks;
pub mod cli;
pub mod config;
pub mod engine;
pub mod idle;
/// Rate profiles live in `skq-proto` (the simulator uses them too).
pub use skq_proto::profile;
pub mod protocol;
pub mod queueing;
pub mod refserver;
pub mod schedule;
pub mod simple;
pub mod stats;
pub mod validate;
pub mod worker;

pub use config::{Batch, Client, Keeping, LoadConfig, Output, ProtocolConfig, Stall};
pub use engine::run;
pub use protocol::Protocol;
pub use schedule::ScheduleKind;
