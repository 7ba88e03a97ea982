//! The simulator must order the policies as the real runtime did wherever the
//! measured gap is clear (issue 4), with the machine modelled as `skq bench`
//! runs it: 8 workers confined to CPU 0 of the 2-CPU VM, the one-thread load
//! generator on CPU 1, so on loopback every flow reports CPU 1
//! (`SO_INCOMING_CPU`), which no worker runs on. The core maps such hints
//! through the topology tree (here: the shared LLC, so all 8 workers).
//!
//! Two committed runs:
//!
//! * `bench-2026-11-23-exponential`, measured after that mapping landed
//!   (exponential curves only; see its README): every clear pair must agree.
//! * `bench-2026-11-22`, measured before it: then the runtime folded every
//!   CPU-1 hint onto worker 0 and the `cpu` curves collapsed (no load met the
//!   SLO). With the harness placement modelled and the old mapping the
//!   simulator reproduced the collapse (0 of 14 clear pairs disagreed); with
//!   the new mapping it does not: `vanilla > cpu` disagrees for both
//!   workloads (simulated `cpu` now equals `vanilla`). So that run checks
//!   every pair except those involving its collapsed `cpu` rows, and that
//!   those are the only ones that disagree.

use std::path::Path;

use skq_sim::compare::{compare, read_bench_path, CompareOpts, CompareReport, MeasuredCurve};
use skq_sim::core_model::{CoreOpts, Harvest};
use skq_sim::machine::{HintSource, Machine};
use skq_sim::model::Overheads;

/// `skq bench`'s placement on the 2-CPU VM (see the module documentation).
fn harness() -> CoreOpts {
    CoreOpts {
        harvest: Harvest::Runtime,
        machine: Machine {
            server_cpus: vec![0],
            hints: HintSource::Client(1),
            ..Machine::default()
        },
        ..CoreOpts::default()
    }
}

fn fixture(name: &str) -> Vec<MeasuredCurve> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    read_bench_path(&dir).unwrap()
}

fn compare_with(curves: &[MeasuredCurve]) -> CompareReport {
    let o = CompareOpts {
        workers: None,
        slo_us: None,
        clear_gap: 0.1,
        requests: 100_000,
        seed: 1,
        threads: 2,
        overheads: Overheads::default(),
        opts: harness(),
    };
    let r = compare(curves, &o).unwrap();
    // tokio is not a policy of the core: skipped, everything else compared.
    assert!(
        r.skipped.iter().all(|(c, _)| c.starts_with("tokio")),
        "{:?}",
        r.skipped
    );
    r
}

#[test]
fn simulator_orders_policies_as_measured_where_the_gap_is_clear() {
    let r = compare_with(&fixture("bench-2026-11-23-exponential"));
    assert!(
        r.pairs.len() >= 5,
        "too few clear pairs to mean anything:\n{}",
        r.render()
    );
    assert!(
        r.pairs
            .iter()
            .any(|(a, b, _)| a.starts_with("cpu ") || b.starts_with("cpu ")),
        "the cpu mode must take part:\n{}",
        r.render()
    );
    assert_eq!(r.disagreements(), 0, "{}", r.render());
}

#[test]
fn the_collapse_measured_before_the_topology_mapping_is_no_longer_reproduced() {
    let r = compare_with(&fixture("bench-2026-11-22"));
    let involves_cpu = |a: &str, b: &str| a.starts_with("cpu ") || b.starts_with("cpu ");
    let others = r.pairs.iter().filter(|(a, b, _)| !involves_cpu(a, b));
    assert!(others.clone().count() >= 6, "{}", r.render());
    assert!(
        others.into_iter().all(|p| p.2),
        "pairs without the collapsed cpu rows must agree:\n{}",
        r.render()
    );
    assert!(
        r.pairs.iter().any(|(a, b, ok)| !ok && involves_cpu(a, b)),
        "the old collapse is reproduced again:\n{}",
        r.render()
    );
}
