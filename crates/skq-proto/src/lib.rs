//! Code shared by every skq component that speaks or models requests.
//!
//! * [`wire`]: the skq RPC binary protocol (framing, encode, incremental decode).
//! * [`db`]: the GET/PUT/SEEK payloads of the RocksDB front end, inside RPC frames.
//! * [`workload`]: the service-time catalogue of BRIEF §9 (fixed, exponential,
//!   bimodal-1/2, gis, skewed-mix, uniform-10/20), sampled identically by the
//!   load generator (to encode requested service times) and by the simulator.
//! * [`request`]: one drawn request (operation, key, size, service time)
//!   before a protocol encodes it.
//! * [`zippydb`]: Facebook's ZippyDB key-value workload (db_bench's
//!   `mixgraph` fit) and the cost model of its operations on RocksDB, drawn
//!   by the load generator, `skq db` and the simulator alike.
//! * [`profile`]: rate profiles (steps, diurnal, bursts) that warp an arrival
//!   process, used by `skq load --rate-profile` and by the simulator.
//!
//! Pure functions and plain data: no I/O, no clock, no shared state, so the
//! server, the generator and the simulator can never disagree on a frame or
//! on a workload's distribution.
#![deny(missing_docs)]

pub mod db;
pub mod profile;
pub mod request;
pub mod wire;
pub mod workload;
pub mod zippydb;
