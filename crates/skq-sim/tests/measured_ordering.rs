//! The simulator must order the policies as the real runtime did wherever the
//! measured gap is clear (issue 4). The measurement is a committed `skq bench`
//! run (tests/fixtures/bench-2026-11-22): 8 workers on a 2-CPU machine, every
//! flow arriving on the load generator's CPU (loopback `SO_INCOMING_CPU`),
//! which the simulator is told with `cpus` and `client_cpu`.

use std::path::Path;

use skq_sim::compare::{compare, read_bench_path, CompareOpts};
use skq_sim::core_model::{CoreOpts, Harvest};
use skq_sim::model::Overheads;

#[test]
fn simulator_orders_policies_as_measured_where_the_gap_is_clear() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bench-2026-11-22");
    let curves = read_bench_path(&dir).unwrap();
    let o = CompareOpts {
        workers: None,
        slo_us: None,
        clear_gap: 0.1,
        requests: 100_000,
        seed: 1,
        threads: 2,
        overheads: Overheads::default(),
        opts: CoreOpts {
            harvest: Harvest::Runtime,
            cpus: Some(2),
            client_cpu: Some(1),
            ..CoreOpts::default()
        },
    };
    let r = compare(&curves, &o).unwrap();
    // tokio is not a policy of the core: skipped, everything else compared.
    assert!(
        r.skipped.iter().all(|(c, _)| c.starts_with("tokio")),
        "{:?}",
        r.skipped
    );
    assert!(
        r.pairs.len() >= 10,
        "too few clear pairs to mean anything:\n{}",
        r.render()
    );
    assert_eq!(r.disagreements(), 0, "{}", r.render());
}
