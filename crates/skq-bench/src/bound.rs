//! The theoretical bound every configuration is compared with: maximum load
//! at SLO of a zero-overhead centralized FCFS queue (M/G/n) with the same
//! workers and the *measured* service time (BRIEF §4, §8).
//!
//! The numbers come from the simulator crate (`skq_sim::bounds`), which is
//! not built yet. Until it is, [`bound_for`] returns `None` and every output
//! prints [`MISSING`]; no number is invented here. Wiring it later means
//! changing the body of [`bound_for`] and [`bound_curves`] only.

use skq_report::plot::Series;

use crate::config::Curve;

/// What tables and reports print where the bound would be.
pub const MISSING: &str = "missing (simulator not built)";

/// Maximum load at SLO (requests/s) of centralized FCFS for `curve`'s
/// workers and workload, with mean service time `service_us` (measured) and
/// SLO `slo_us`; `None` while the simulator is not available.
pub fn bound_for(curve: &Curve, service_us: f64, slo_us: f64) -> Option<f64> {
    let _ = (curve, service_us, slo_us);
    None
}

/// Bound curves (p99 µs against throughput req/s) to draw beside the
/// measured ones: centralized FCFS and partitioned FCFS (n × M/G/1). Empty
/// while the simulator is not available.
pub fn bound_curves(curve: &Curve, service_us: f64) -> Vec<Series> {
    let _ = (curve, service_us);
    Vec::new()
}
