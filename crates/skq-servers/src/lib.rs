//! Example servers on the skq runtime.
//!
//! # The synthetic RPC server (`skq serve rpc`)
//!
//! A server for the skq RPC protocol ([`skq_proto::wire`]): each request asks
//! for `service_ns` nanoseconds of work; the server delivers that much service
//! on the worker that handles the connection and replies with the same `id`
//! and the service time it actually *delivered*, measured on the monotonic
//! clock. It is the workload of the ZygOS and SKQ papers: synthetic service
//! times, many connections, pipelined requests, latency measured by the client.
//!
//! **Protocol handling** ([`conn`]), shared by both runtimes:
//! * a connection's requests are served strictly in order, one reply each; a
//!   client may pipeline as many requests as it likes;
//! * the first invalid frame (bad length, kind, reserved flags, or a reply sent
//!   to the server) closes that connection only and counts a protocol error;
//!   a peer that disappears in the middle of a frame, or whose socket fails,
//!   counts as aborted; neither affects other connections;
//! * a client that stops reading its replies stops being served (no unbounded
//!   output buffering) until its socket drains.
//!
//! **Service** ([`service`]): `spin` busy-waits; `emulate` sleeps to an absolute
//! deadline with 1 ns timer slack (BRIEF §8), so 8–16 workers on 2 cores
//! reproduce the queueing of a larger machine.
//!
//! **Runtimes** ([`server::RuntimeKind`]):
//! * `skq`: N worker threads each own a `skq_rt::Worker` of one shared `Skq`
//!   instance and loop on `wait()`. The listener and every connection are
//!   sources; connections are edge-triggered and live in a preallocated table
//!   indexed by their token. See `skq_backend` for the event handling and why
//!   the per-connection lock is never contended.
//! * `tokio`: the same protocol code, one task per connection on tokio's
//!   multi-thread runtime with N worker threads (see `tokio_backend` for
//!   why service blocks the worker thread).
//!
//! **Process** ([`cli`]): prints exactly `listening on ADDR` once ready, stops on
//! SIGINT/SIGTERM or after `--duration`, writes `--stats-json` (per-worker
//! counters, imbalance, connection and protocol-error counts, the scheduler's
//! own statistics) and exits 0.
//!
//! Use it as a library through [`RpcServer::start`]; the tests do.
//!
//! # The pipe benchmark
//!
//! [`pipes`]: SKQ's pipe scalability benchmark.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cli;
pub mod conn;
pub mod pipes;
pub mod server;
pub mod service;
mod skq_backend;
pub mod stats;
pub mod sys;
mod tokio_backend;

pub use server::{RpcConfig, RpcServer, RpcServerHandle, RuntimeKind, SchedOptions};
pub use service::ServiceMode;
pub use stats::ServerStats;
