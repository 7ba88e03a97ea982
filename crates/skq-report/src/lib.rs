//! What every measurement in skq reports, and how it is judged.
//!
//! * [`result`]: the schema of one measured load point (`skq load --json`),
//!   read by the sweep harness and produced in the same shape by the simulator.
//! * [`slo`]: maximum load at SLO, one definition for `skq bench` and `skq sim`.
#![deny(missing_docs)]

pub mod result;
pub mod slo;
