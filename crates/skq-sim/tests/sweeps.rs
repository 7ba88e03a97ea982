//! Sweeps, JSON round trips and the measured-vs-simulated comparison.

use skq_proto::workload::{ServiceSpec, Workload};
use skq_sim::compare::{compare, read_bench_json, CompareOpts};
use skq_sim::core_model::CoreOpts;
use skq_sim::model::{Model, Overheads};
use skq_sim::output::{to_csv, to_json};
use skq_sim::sweep::Sweep;
use skq_sim::workload::{Scenario, Service};

fn sweep(models: &[&str], w: Workload, loads: &[f64]) -> Sweep {
    let svc = Service::Spec(ServiceSpec::new(w, 10_000.0));
    Sweep {
        models: models.iter().map(|m| Model::parse(m, 8).unwrap()).collect(),
        base: Scenario::at_load(svc, 8, 128, 0.5, 30_000, 77),
        loads: loads.to_vec(),
        overheads: Overheads::default(),
        opts: CoreOpts::default(),
    }
}

#[test]
fn output_does_not_depend_on_thread_count() {
    let s = sweep(
        &["hybrid", "shared", "centralized-ps"],
        Workload::Exponential,
        &[0.3, 0.6, 0.9],
    );
    let one = s.run(1, None).unwrap();
    let three = s.run(3, None).unwrap();
    assert_eq!(to_json(&one).unwrap(), to_json(&three).unwrap());
    assert_eq!(to_csv(&one), to_csv(&three));
    assert_eq!(one.len(), 9);
    assert!(one
        .iter()
        .all(|p| p.result.meta.service_mode == "simulated"));
}

#[test]
fn simulator_agrees_with_its_own_curves() {
    // Feeding the simulator's JSON back as if measured must give no ordering
    // disagreement, and the clear gap (vanilla vs best2+steal on gis) must be
    // among the pairs checked.
    let loads: Vec<f64> = (1..=9).map(|i| i as f64 * 0.1).collect();
    let s = sweep(&["vanilla", "best2+steal"], Workload::Gis, &loads);
    let json = to_json(&s.run(2, None).unwrap()).unwrap();
    let curves = read_bench_json(&json).unwrap();
    assert_eq!(curves.len(), 2);
    let o = CompareOpts {
        workers: None,
        slo_us: None,
        clear_gap: 0.1,
        requests: 30_000,
        seed: 77,
        threads: 2,
        overheads: Overheads::default(),
        opts: CoreOpts::default(),
    };
    let r = compare(&curves, &o).unwrap();
    assert!(r.skipped.is_empty());
    assert_eq!(r.pairs.len(), 1, "{}", r.render());
    assert_eq!(r.disagreements(), 0, "{}", r.render());
    assert_eq!(r.pairs[0].0, "best2+steal [gis]");
}
