//! `skq sim`: a discrete-event simulator that drives the real scheduling core
//! (`skq_core::Scheduler`) in virtual time, beside the zero-overhead queueing
//! models every measurement is judged against.
//!
//! * [`workload`]: scenarios — Poisson arrivals or trace replay over many
//!   connections, service times from the BRIEF §9 catalogue (`skq_proto`) or
//!   measured samples, optionally a high-priority client (first K connections).
//! * [`reference`](mod@reference): centralized / partitioned FCFS and processor sharing.
//! * [`core_model`]: the real server's model — connections as sources, workers
//!   looping on `wait()`, edge-triggered reads of up to 32 requests — around the
//!   real core, with [`model::Overheads`] for what the core does not see, and
//!   readiness delivered either at once or through skq-rt's poller
//!   ([`core_model::Harvest`]).
//! * [`sweep`]: parallel, deterministic load sweeps and maximum load at SLO.
//! * [`bounds`]: the centralized/partitioned FCFS bounds `skq bench` quotes
//!   ([`bounds::slo_bounds`], [`bounds::bound_curves`]).
//! * [`headline`]: the policy × workload table.
//! * [`compare`]: simulated against measured curves (`skq bench` JSON).
//! * [`cli`]: the `skq sim` subcommand.
//!
//! Every random draw descends from one seed, simultaneous events are ordered
//! by insertion, and parallel sweeps put results back in input order: the same
//! arguments give bit-identical output on any machine and thread count.
//!
//! Quick start: `skq sim --workload bimodal-1 --model centralized-fcfs,vanilla,hybrid`,
//! `skq sim --headline`, `skq sim --bounds --workload gis`,
//! `skq sim --bench-speed`, `skq sim --compare bench.json --workers 16`.
#![deny(missing_docs)]

pub mod bounds;
pub mod cli;
pub mod compare;
pub mod core_model;
pub mod headline;
pub mod model;
pub mod output;
pub mod queue;
pub mod reference;
pub mod stats;
pub mod sweep;
pub mod workload;
