//! `skq bench`: the sweep harness.
//!
//! It sweeps offered load over a set of server configurations (skq policy or
//! runtime, workload, workers, service mode; or a peer such as memcached),
//! stops each configuration once it saturates, and reports maximum load at
//! SLO (p99 ≤ k·S̄, S̄ measured) per configuration, as a ratio to the
//! `vanilla` baseline of the same run and to the theoretical bound.
//!
//! Layout, in the order data flows:
//! * [`config`]: the TOML schema and flags → a validated [`config::Sweep`];
//! * [`sweep`]: planning, the per-curve loop, saturation stop, the
//!   [`sweep::Runner`] trait that measures one point;
//! * [`process`] and [`peers`]: the real runner (server and load generator as
//!   child processes, readiness, CPU placement and CPU time);
//! * [`summary`]: max load at SLO, ratios and self-check verdicts;
//! * [`bound`]: the theoretical bound (from the simulator, once it exists);
//! * [`output`] and [`hdr`]: files, tables, plots and the HTML report,
//!   rendered through `skq_report`;
//! * [`cli`]: `BenchArgs` and `run`, called by the `skq` binary.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod bound;
pub mod cli;
pub mod config;
pub mod hdr;
pub mod output;
pub mod peers;
pub mod process;
pub mod summary;
pub mod sweep;
