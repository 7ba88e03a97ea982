//! The theoretical bound every configuration is compared with: maximum load
//! at SLO of a zero-overhead centralized FCFS queue (M/G/n) with the same
//! workers and the *measured* service time (BRIEF §4, §8).
//!
//! The numbers come from the simulator (`skq_sim::bounds`): a deterministic
//! zero-overhead simulation of centralized FCFS (the upper bound) and
//! partitioned FCFS (what a static 1:1 design can reach) with the curve's
//! workers, connections and workload, its service distribution rescaled to
//! the *measured* mean. Workloads the catalogue does not know (memcached,
//! nginx peers) have no bound and print [`MISSING`]; no number is invented.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use skq_proto::workload::{ServiceSpec, Workload};
use skq_report::plot::Series;
use skq_sim::bounds::{slo_bounds_with, spec_with_mean, BoundsOpts};
use skq_sim::workload::Service;

use crate::config::Curve;

/// What tables and reports print where no bound applies.
pub const MISSING: &str = "missing (no service model for this workload)";

/// The curve's workload as a catalogue spec with mean `service_us`.
fn spec_of(curve: &Curve, service_us: f64) -> Option<Service> {
    let workload: Workload = curve.workload.parse().ok()?;
    if !(service_us.is_finite() && service_us > 0.0) {
        return None;
    }
    let nominal = ServiceSpec {
        workload,
        mean_ns: curve.load.mean_us * 1e3,
        scale: curve.load.scale,
    };
    Some(Service::Spec(spec_with_mean(nominal, service_us * 1e3)))
}

/// Bounds are deterministic functions of their inputs and cost ~0.5 s each:
/// computed once per distinct input per process.
type Key = (String, u64, u64, u64, usize, usize, u64);

fn key(curve: &Curve, service_us: f64, extra: f64) -> Key {
    (
        curve.workload.clone(),
        curve.load.mean_us.to_bits(),
        curve.load.scale.to_bits(),
        service_us.to_bits(),
        curve.workers,
        curve.connections,
        extra.to_bits(),
    )
}

fn memo<T: Clone>(cache: &OnceLock<Mutex<HashMap<Key, T>>>, k: Key, f: impl FnOnce() -> T) -> T {
    let m = cache.get_or_init(Default::default);
    if let Some(v) = m.lock().unwrap_or_else(|p| p.into_inner()).get(&k) {
        return v.clone();
    }
    let v = f();
    m.lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(k, v.clone());
    v
}

fn opts(curve: &Curve) -> BoundsOpts {
    BoundsOpts {
        connections: curve.connections.max(1),
        ..BoundsOpts::default()
    }
}

/// Maximum load at SLO (requests/s) of centralized FCFS for `curve`'s
/// workers and workload, with mean service time `service_us` (measured) and
/// SLO `slo_us`; `None` when the workload has no service model.
pub fn bound_for(curve: &Curve, service_us: f64, slo_us: f64) -> Option<f64> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Option<f64>>>> = OnceLock::new();
    memo(&CACHE, key(curve, service_us, slo_us), || {
        let service = spec_of(curve, service_us)?;
        let b = slo_bounds_with(&service, curve.workers, slo_us, &opts(curve)).ok()?;
        b.centralized.map(|m| m.load)
    })
}

/// Bound curves (p99 µs against throughput req/s) to draw beside the
/// measured ones: centralized FCFS and partitioned FCFS (n × M/G/1).
pub fn bound_curves(curve: &Curve, service_us: f64) -> Vec<Series> {
    static CACHE: OnceLock<Mutex<HashMap<Key, Vec<Series>>>> = OnceLock::new();
    memo(&CACHE, key(curve, service_us, 0.0), || {
        let Some(service) = spec_of(curve, service_us) else {
            return Vec::new();
        };
        match skq_sim::bounds::bound_curves(&service, curve.workers, &opts(curve)) {
            Ok(c) => vec![
                Series::new("centralized FCFS (M/G/n)", c.centralized),
                Series::new("partitioned FCFS (n×M/G/1)", c.partitioned),
            ],
            Err(_) => Vec::new(),
        }
    })
}
