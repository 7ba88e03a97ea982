//! `skq serve kv`: a memcached-compatible cache (text protocol) in two architectures.
//!
//! - [`shared`]: one store shared by every worker, split into lock shards;
//! - [`tpc`]: thread-per-core after the Sphinx paper — keys partitioned by MurmurHash3
//!   across workers, a listener per worker (`SO_REUSEPORT`), requests for foreign keys
//!   forwarded over single-producer/single-consumer rings ([`ring`]).
//!
//! Both serve the classic text commands and the meta commands (`mg`, `ms`, `md`, `mn`;
//! see [`meta`] and the crate README for the flags served).
//!
//! Both share the sans-I/O [`protocol`] parser, the per-connection [`session`] (reply
//! ordering, backpressure) and the log-structured [`store`] ([`arena`]: 2 MiB segments,
//! append-only, FIFO eviction of whole segments), so the comparison isolates the
//! architecture.
//!
//! Bytes of overhead per item (measured by `stats` as `skq_overhead_per_item`): a 21-byte
//! record header in the arena plus one index entry (a 64-bit key hash and an 8-byte
//! location, 24 bytes with the enum tag, plus hashbrown's control byte, divided by the
//! table's load factor) — roughly 50–80 bytes depending on where the table is in its
//! growth cycle; the key is not duplicated in the index. See the crate README table for
//! memcached's figure measured the same way.
//!
//! **Guarantees and who touches what.** Replies leave each connection in request order,
//! in both architectures (tpc reserves a reply slot for a forwarded command and releases
//! replies only in order, [`session`]). Bad input closes or errors that connection only.
//! The shared store is touched under its shard locks by any worker; a tpc partition and
//! its arena are touched only by their owning worker thread, which alone pops its
//! incoming rings (single consumer) while each peer pushes to its own ring (single
//! producer). The layering reads bottom-up with no cycle: `command` → `recycle` (the
//! thread-local spares a command's buffers come from and return to) → `meta` →
//! `protocol` → `exec`/`store` → `config` (with [`config::KvMode`], what serves) and
//! `spec` ([`spec::KvSpec`], the mode and workers `skq bench` hands the server as
//! `--spec`) → `ctx` → `session` → `shared` (a protocol of the `skq-net` server layer)
//! and `tpc` (its own driver) → `running` → `server`.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod arena;
#[cfg(feature = "runtime")]
pub mod cli;
pub mod command;
pub mod config;
pub mod ctx;
pub mod doorbell;
pub mod exec;
pub mod forward;
pub mod fuzzing;
pub mod meta;
pub mod murmur3;
#[cfg(feature = "runtime")]
pub mod priority;
pub mod protocol;
pub mod recycle;
pub mod reply;
pub mod ring;
pub mod running;
pub mod server;
pub mod session;
#[cfg(feature = "runtime")]
pub mod shared;
#[cfg(feature = "runtime")]
pub mod spec;
pub mod stats;
pub mod store;
mod tick;
pub mod tpc;
pub mod trim;
