//! # skq-net: one protocol handler, many drivers
//!
//! The server layer every skq application plugs into. An application writes
//! only its [`Protocol`]: a sans-I/O handler that turns the bytes a
//! connection received into replies (no socket, no clock, no thread). The
//! layer runs it on any [`Driver`]:
//!
//! | driver | model | who decides where a connection's events run |
//! |---|---|---|
//! | `skq` | one shared `Skq` instance, per-worker queues | the scheduling mode (`vanilla`, `shared`, `queue`, `cpu`, `best2`, `hybrid`, `+steal`) |
//! | `epoll-1to1` | one epoll per thread (memcached, nginx) | round-robin at accept, fixed for life |
//! | `epoll-shared` | one epoll set, all threads wait, `EPOLLONESHOT` + re-arm ("Linux floating") | whichever thread waits first |
//! | `tokio` | tokio's multi-thread runtime, a task per connection | tokio's work stealing |
//!
//! So every application gets the real baselines a user would run instead,
//! built once: the RPC server and the cache today, and every later server.
//!
//! **The async drivers** ([`async_driver`], the `async-` modes:
//! `async-MODE` on skq-async with an skq scheduling mode, `async-tokio` on
//! tokio) serve connections with async code, a task per connection: any
//! `Protocol` through one connection loop written as an async task
//! ([`async_driver::start`], what `skq serve http --mode async-*` runs),
//! or an application's own async handler ([`async_driver::start_handler`],
//! skq-servers' RPC handler). The application starts them;
//! [`Server::start`] refuses an async mode by name.
//!
//! **Guarantees, for every driver** (the tests in `tests/drivers.rs` check
//! them on all four): a connection's requests are served in order, each
//! exactly once; a connection is served by one worker at a time; a protocol
//! error or a vanished peer closes that connection only; a peer that stops
//! reading stops being served instead of growing buffers without bound
//! (pending output has a ceiling, [`ServerConfig::max_output`], and long
//! replies are produced in pieces as the socket drains, [`Cx::resume_later`]);
//! idle, slow-request and slow-reading connections are closed by the
//! [`Timeouts`] set (none by default) and counted;
//! `--max-conns` refuses new connections (with the protocol's busy message)
//! and counts them, and service resumes as connections close.
//!
//! **Who touches what.** The protocol value is shared by every worker
//! (`&self`); its per-connection `Session` is touched only by the worker
//! serving that connection. Drivers own sockets, the connection table and
//! the threads; [`stats`] counters are per worker and written by that worker
//! only. All system calls go through `skq-sys`. The layer prints nothing:
//! what a driver has to tell the operator goes to the server's [`Notices`],
//! which the serve lifecycle ([`serve`], the process around a server that
//! every `skq serve` command shares) prints.
//!
//! ```
//! use std::io::{BufRead, BufReader, Write};
//! use std::sync::Arc;
//! use skq_net::{Cx, Driver, Protocol, Served, Server, ServerConfig};
//!
//! /// Replies to each line with the line upper-cased.
//! struct Upper;
//! impl Protocol for Upper {
//!     type Session = ();
//!     fn open(&self, _worker: usize) {}
//!     fn serve(&self, _: &mut (), input: &[u8], out: &mut Vec<u8>, _: &mut Cx<'_>) -> Served {
//!         match input.iter().position(|&b| b == b'\n') {
//!             Some(i) => {
//!                 out.extend(input[..=i].iter().map(u8::to_ascii_uppercase));
//!                 Served::Request { consumed: i + 1 }
//!             }
//!             None => Served::NeedInput { consumed: 0 },
//!         }
//!     }
//! }
//!
//! for driver in Driver::ALL {
//!     let server = Server::start(&ServerConfig::new(driver, 2), Arc::new(Upper)).unwrap();
//!     let mut c = std::net::TcpStream::connect(server.local_addr()).unwrap();
//!     c.write_all(b"hello\nworld\n").unwrap();
//!     let mut r = BufReader::new(c);
//!     let mut line = String::new();
//!     r.read_line(&mut line).unwrap();
//!     assert_eq!(line, "HELLO\n");
//!     line.clear();
//!     r.read_line(&mut line).unwrap();
//!     assert_eq!(line, "WORLD\n");
//!     assert_eq!(server.shutdown().requests, 2);
//! }
//! ```
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod async_driver;
pub mod async_mode;
pub mod bufpool;
pub mod classify;
pub mod config;
pub mod conn;
mod driver;
pub mod notice;
pub mod protocol;
pub mod serve;
mod server;
pub mod spec;
pub mod stats;
pub mod table;

pub use async_mode::AsyncRuntime;
pub use classify::{Class, ClassState, ClassTracker, Classifier};
pub use config::{
    Driver, InvalidConfig, ServerConfig, Timeouts, DEFAULT_MAX_OUTPUT, MAX_CONNS, MAX_WORKERS,
};
pub use notice::{Notice, Notices};
pub use protocol::{Close, Cx, FileRegion, Protocol, Resume, Served, SharedRegion};
pub use serve::{Lifecycle, ServeError, Serving, Started};
pub use server::{Running, Server, ServerHandle};
pub use spec::{
    parse_spec_arg, spec_from_json, CoreTunables, Mode, ModeError, SchedSpec, ServerSpec,
    ServiceMode, SpecError,
};
pub use stats::ServerStats;
