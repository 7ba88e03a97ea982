//! `skq bench`: the sweep harness.
//!
//! It sweeps offered load over a set of server configurations (skq policy,
//! plain epoll server or tokio, workload, workers, service mode; or a peer
//! such as memcached), stops each configuration once it saturates, and
//! reports maximum load at SLO (p99 ≤ k·S̄, S̄ measured) per configuration,
//! as a ratio to the baseline configuration of the same run and to the
//! theoretical bound.
//!
//! # What it guarantees
//!
//! * **Every planned point has one record**, measured, failed (with the
//!   reason) or skipped, in every output; a failing configuration ends its
//!   own curve, never the sweep.
//! * **Nothing is judged on the nominal service time** where a measured one
//!   exists: SLO, capacity fraction and the bound use S̄ measured from the
//!   replies (BRIEF §8).
//! * **A point that failed a self-check is marked** (`FAIL`, `*`) wherever
//!   its numbers appear; a late generator is measured again before it may
//!   end a curve.
//! * **Every output says how it was measured**: the CPUs seen, spin or
//!   emulated service, whether emulated RSS was on (over which CPUs, with
//!   what flow migration) or why it was off, and whether the machine was
//!   busy or a signal interrupted the sweep.
//! * **Every output says what a reply cost the server**, per point and per
//!   configuration: its CPU time and its threads' context switches
//!   (voluntary+involuntary, `/proc/PID/task/*/status`, child processes
//!   included) over the measured window, per reply received. Threads that
//!   exit inside the window take their switches with them, so for a server
//!   whose threads come and go the count is a lower bound.
//! * **Every output says how disturbed each point was**: the CPU processes
//!   outside the run used on the machine while it ran (`/proc/stat` less
//!   the server's and the generator's CPU, [`disturbance`]), a point above
//!   the threshold marked disturbed, and per configuration how many of the
//!   points deciding its answer were; `--strict` makes a disturbed or
//!   failed decisive point an error (exit status 3) once everything is
//!   written.
//! * **Every output names how each server was started** (command line,
//!   nginx's configuration, what a tokio mode does; [`peers::ServerSetup`]).
//! * **Nothing is left behind**: servers and generators are stopped and
//!   reaped after each point; the emulated-RSS namespace is deleted on every
//!   exit path (normal end, error return, panic, Ctrl-C; see
//!   [`interrupt`] and [`rss`]).
//!
//! # Layout, in the order data flows
//! * [`config`]: the TOML schema and flags → a validated [`config::Sweep`];
//! * [`sweep`]: planning, the per-curve loop, saturation stop, the
//!   [`sweep::Runner`] trait that measures one point;
//! * [`process`], [`server`], [`procstat`] and [`peers`]: the real runner
//!   (server and load generator as child processes, readiness, CPU placement,
//!   CPU time and context switches);
//! * [`rss`]: emulated RSS, the network namespace the processes run in;
//! * [`interrupt`]: Ctrl-C and SIGTERM;
//! * [`disturbance`]: CPU used outside the run per point;
//! * [`hostgate`]: a probe of the run's CPUs before each point, and a wait
//!   while the host holds them (`--host-gate`);
//! * [`overshoot`]: the host's delays of the server, from how far emulated
//!   service overshot what was asked;
//! * [`summary`]: max load at SLO, ratios, self-check verdicts and the
//!   disturbed decisive points;
//! * [`episode`]: decisive points whose p99 came from a few seconds of the
//!   run (a host stall, a burst), named beside the verdicts;
//! * [`bound`]: the theoretical bound from the simulator;
//! * [`crosscheck`]: wrk's independent closed-loop figure beside a curve's;
//! * [`output`] and [`hdr`]: files, tables, plots and the HTML report,
//!   rendered through `skq_report`;
//! * [`cli`]: `BenchArgs` and `run`, called by the `skq` binary.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod bound;
pub mod capacity;
pub mod cli;
pub mod config;
pub mod crosscheck;
pub mod disturbance;
pub mod episode;
pub mod hdr;
pub mod hostgate;
pub mod interrupt;
pub mod output;
pub mod overshoot;
pub mod peers;
pub mod pool;
pub mod priority;
pub mod process;
pub mod procstat;
pub mod rss;
pub mod series;
pub mod server;
pub mod serverstats;
pub mod summary;
pub mod sweep;
