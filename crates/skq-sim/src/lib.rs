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
//!   real core, with [`params::Overheads`] for what the core does not see, and
//!   readiness delivered either at once or through skq-rt's poller
//!   ([`params::Harvest`]).
//! * [`machine`]: where the workers run, which CPU processes each flow's
//!   packets (its own worker's, one client CPU, or an RSS hash over a set)
//!   and the topology; handed to the core, which maps the hints itself.
//! * [`params`]: the core-driven model's knobs ([`params::CoreOpts`]).
//! * [`sweep`]: parallel, deterministic load sweeps and maximum load at SLO.
//! * [`bounds`]: the centralized/partitioned FCFS bounds `skq bench` quotes
//!   ([`bounds::slo_bounds`], [`bounds::bound_curves`]).
//! * [`headline`]: the policy × workload table.
//! * [`compare`]: simulated against measured curves (`skq bench` JSON).
//! * [`cli`]: the `skq sim` subcommand.
//!
//! ## What it guarantees
//!
//! * Every scheduling decision of a core-driven model is made by the real
//!   `skq_core::Scheduler`, including how CPU hints map to workers (the
//!   machine's placement and topology go in through `Config::worker_cpus` and
//!   `Config::cpu_topology`); the simulator never re-implements a policy.
//! * Every request completes or is reported stranded (a lost wake-up in the
//!   core shows up as stranded requests, never as a silent hang).
//! * Every random draw descends from one seed, simultaneous events are ordered
//!   by insertion, and parallel sweeps put results back in input order: the
//!   same arguments give bit-identical output on any machine and thread count.
//! * No I/O besides the CLI's input and output files; virtual time only.
//!
//! ## Who may touch what
//!
//! Modules read bottom-up, no cycle: `machine`, `queue`, `stats`,
//! `workload` depend on nothing here; `params` on `machine`; `core_model` on
//! `params`, `queue`, `stats`, `workload`; `reference` on `stats`, `workload`;
//! `model` on `core_model`, `reference`, `params`; `sweep`, `bounds`,
//! `headline`, `compare`, `output` on `model`; `cli` on everything. Only
//! `core_model` drives the scheduler; only `machine` knows CPU numbers.
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
pub mod machine;
pub mod model;
pub mod output;
pub mod params;
pub mod queue;
pub mod reference;
pub mod stats;
pub mod sweep;
pub mod workload;
