//! What every measurement in skq reports, and how it is judged and shown.
//!
//! * [`result`]: the schema of one measured load point (`skq load --json`),
//!   read by the sweep harness and produced in the same shape by the simulator.
//! * [`slo`]: maximum load at SLO, one definition for `skq bench` and `skq sim`.
//! * [`plot`]: SVG plots (p99 against load with bounds and the SLO line,
//!   latency CDFs).
//! * [`table`]: one table rendered for a terminal, as CSV and as HTML.
//! * [`html`]: a self-contained HTML report, held as plain data (text, tables,
//!   charts as [`plot::Chart`] values) and drawn when rendered.
//! * [`csv`]: the CSV writer and reader behind [`table`].
//!
//! The rendering modules are pure functions of their inputs: no files, no
//! processes, no clock. `skq bench` and `skq sim` both draw through them.
//!
//! Pure functions over result records: no I/O but writing the files it is
//! asked to write, no clock, no shared state; `skq bench` and `skq sim` call
//! the same code, so a figure means the same in both.
#![deny(missing_docs)]

pub mod capacity;
pub mod csv;
pub mod html;
pub mod plot;
pub mod result;
pub mod slo;
pub mod table;
