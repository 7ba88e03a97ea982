//! The async drivers: an application's connections served by async code on
//! an async runtime, the `async-` modes ([`crate::Mode::Async`], named in
//! [`crate::async_mode`]).
//!
//! `async-MODE` runs on skq-async with the skq scheduling mode `MODE`
//! (tasks are skq-core sources scheduled by that policy), `async-tokio` on
//! tokio's multi-thread runtime; a task per connection either way.
//! [`Server::start`](crate::Server::start) does not start these (it
//! refuses an async mode by name): the application chooses what serves its
//! connections and calls one of
//!
//! * [`start`]: any sans-I/O [`Protocol`](crate::Protocol), served by
//!   [`ProtocolHandler`], this layer's connection loop written once as an
//!   async task (`skq serve http --mode async-*`);
//! * [`start_handler`]: the application's own [`ConnHandler`], a
//!   connection handler written as ordinary async code (skq-servers' RPC
//!   handler, `skq serve rpc --mode async-*`).
//!
//! | part | what it holds |
//! |---|---|
//! | [`AsyncRt`], [`SkqAsync`], [`TokioRt`] (`rt.rs`) | the two runtimes behind one trait: stream type (tokio's `AsyncRead`/`AsyncWrite`), accept, spawn, yield, sleep, timeout, worker index, task class |
//! | [`start_handler`], [`accept_loop`], [`AsyncShared`], [`ConnHandler`] (`server.rs`) | building the runtime from the server's configuration, the accept loop (`--max-conns`), the counters and the [`ServerHandle`](crate::ServerHandle) |
//! | [`start`], [`ProtocolHandler`] (`protocol.rs`) | the protocol loop |
//! | [`Bufs`] (`buf.rs`) | a connection's input and output buffers, bounded as [`crate::conn`]'s |
//!
//! **Guarantees, for every handler:** the server prints the same
//! `listening on ADDR` line and fills the same counters and stats JSON as
//! the other drivers (`driver` is `async`, `mode` the async mode; skq-async
//! adds the scheduler's statistics); a connection over `--max-conns` is
//! closed at once and counted as rejected; a connection task that cannot be
//! spawned closes its connection (counted as aborted) and the accept loop
//! goes on; `memory.idle_conn_bytes` is the size of one connection task.
//!
//! **Who touches what.** A connection's buffers and session belong to its
//! task; what the tasks share ([`AsyncShared`]) is atomics, per-worker
//! counters and read-only settings. The layer prints nothing: failures to
//! accept or pin go to the server's [`Notices`](crate::Notices).

mod buf;
mod protocol;
mod rt;
mod server;

pub use buf::{Bufs, SCRATCH};
pub use protocol::{start, ProtocolHandler, FILE_PIECE};
pub use rt::{AsyncRt, SkqAsync, TokioRt};
pub use server::{accept_loop, start_handler, AsyncShared, ConnHandler};
