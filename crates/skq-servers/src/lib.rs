//! Example servers on the skq runtime: the synthetic RPC server and SKQ's
//! pipe benchmark. Nothing else lives here: the server layer the RPC server
//! plugs into, its drivers and the async drivers are skq-net's.
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
//! **Protocol handling** ([`rpc`]), a sans-I/O `skq_net::Protocol`, so every
//! driver of the server layer serves it: the skq runtime in any mode, the
//! plain-Linux baselines `epoll-1to1` (memcached/nginx) and `epoll-shared`
//! (one epoll set, ONESHOT), and tokio:
//! * a connection's requests are served strictly in order, one reply each; a
//!   client may pipeline as many requests as it likes;
//! * the first invalid frame (bad length, kind, reserved flags, or a reply sent
//!   to the server) closes that connection only and counts a protocol error;
//!   a peer that disappears in the middle of a frame, or whose socket fails,
//!   counts as aborted; neither affects other connections;
//! * a client that stops reading its replies stops being served (no unbounded
//!   output buffering: skq-net's output ceiling) until its socket drains;
//! * a request asking for more than `--max-service-us` (default 100 ms) is
//!   refused with a `FLAG_REFUSED` reply, in order, and the connection kept;
//! * `--idle-timeout SECS` closes connections idle that long (off by
//!   default, as memcached's `idle_timeout`), counted as `timeouts`.
//!
//! **Service** ([`service`]): `spin` busy-waits; `emulate` sleeps to an absolute
//! deadline with 1 ns timer slack (BRIEF §8), so 8–16 workers on 2 cores
//! reproduce the queueing of a larger machine.
//!
//! **Spec** ([`ServerSpec`], skq-net's): mode, workers, service, pinning
//! and scheduling tunables, built from the flags or read whole from
//! `--spec JSON|@FILE` (what `skq bench` passes).
//!
//! **Drivers** ([`server::RuntimeKind`], chosen by `--mode`): see the
//! `skq-net` crate for how each spreads connections over workers. The skq
//! driver serves a connection's readiness on the worker the scheduling
//! mode picks; a connection's first class-1 request re-flags it
//! `HIGH_PRIORITY`. Service runs on the worker thread in every driver,
//! blocking it as real CPU work would (tokio included).
//!
//! **The async handler** ([`async_rpc`], `--mode async-MODE` and
//! `async-tokio`): the same server written once as ordinary async code,
//! run on skq-async (tasks scheduled by the skq mode after `async-`) or on
//! tokio, same replies, refusals and counters. The two runtimes, the accept
//! loop and the stats are skq-net's async drivers
//! ([`skq_net::async_driver`], which also run any skq-net `Protocol` this
//! way: `skq serve http --mode async-*`).
//!
//! **Process** ([`cli`]): prints exactly `listening on ADDR` once ready, stops on
//! SIGINT/SIGTERM or after `--duration`, writes `--stats-json` (per-worker
//! counters, imbalance, connection and protocol-error counts, the scheduler's
//! own statistics) and exits 0.
//!
//! Use it as a library through [`RpcServer::start`]; the tests do:
//!
//! ```
//! use std::io::{Read, Write};
//! use skq_proto::wire::{self, Header};
//! use skq_servers::{RpcConfig, RpcServer, ServerSpec};
//!
//! let spec = ServerSpec::new("best2+steal".parse().unwrap(), 2);
//! let cfg = RpcConfig::new(spec); // 127.0.0.1, free port
//! let server = RpcServer::start(cfg).unwrap();
//!
//! let mut conn = std::net::TcpStream::connect(server.local_addr()).unwrap();
//! let mut frames = Vec::new();
//! Header::request(1, 50_000, 0).encode(&mut frames); // two pipelined requests
//! Header::request(2, 0, 0).encode(&mut frames);
//! conn.write_all(&frames).unwrap();
//! let mut buf = [0u8; 2 * wire::HEADER_LEN];
//! conn.read_exact(&mut buf).unwrap();
//! let first = wire::decode_reply(&buf).unwrap().unwrap();
//! assert_eq!(first.id, 1);
//! assert!(first.service_ns >= 50_000); // delivered, not requested
//! assert_eq!(wire::decode_reply(&buf[wire::HEADER_LEN..]).unwrap().unwrap().id, 2);
//!
//! let stats = server.shutdown();
//! assert_eq!(stats.requests, 2);
//! ```
//!
//! # The pipe benchmark
//!
//! [`pipes`]: SKQ's pipe scalability benchmark.
//!
//! **Who touches what.** [`RpcProtocol`] holds no state shared between
//! connections; its per-connection [`rpc::RpcSession`] is touched only by the
//! worker serving that connection (the `skq-net` drivers guarantee one at a
//! time). All system calls go through `skq-sys`.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod async_rpc;
pub mod cli;
pub mod pipes;
pub mod rpc;
pub mod server;
pub mod service;

pub use rpc::RpcProtocol;
pub use server::{RpcConfig, RpcConfigError, RpcServer, RpcServerHandle, RuntimeKind};
pub use service::{Deliver, ServiceMode};
pub use skq_net::ServerStats;
pub use skq_net::{Mode, SchedSpec, ServerSpec};
