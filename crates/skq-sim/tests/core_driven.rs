//! The real core, driven by the simulator, against the references.
//!
//! With zero overheads and one event per `wait()`, `shared` mode is a central
//! FIFO of connections served by any idle worker, which must behave like
//! M/G/n (centralized FCFS); `vanilla` pins connections round-robin, so each
//! worker sees Poisson λ/n and must behave like n × M/G/1. These are
//! cross-checks that the core is driven correctly (wake-ups, parking, release),
//! not tests of the policies. Tolerances: see `queueing.rs` — the same run
//! lengths give a few percent of statistical error at ρ ≤ 0.8; a driver bug
//! (a lost wake-up, a worker that never parks, batches served twice) changes
//! the figures by far more than the 8–12% allowed.

#![allow(clippy::too_many_arguments)] // test helper: every knob of a run spelled out at the call

use skq_proto::workload::{ServiceSpec, Workload};
use skq_sim::core_model::{CoreOpts, Harvest};
use skq_sim::machine::{HintSource, Machine};
use skq_sim::model::{run_point, Model, Overheads, PointOutcome};
use skq_sim::workload::{Scenario, Service};

const S_NS: f64 = 10_000.0;

fn point(
    model: &str,
    w: Workload,
    workers: usize,
    load: f64,
    n: usize,
    seed: u64,
    ov: Overheads,
    opts: CoreOpts,
) -> PointOutcome {
    let svc = Service::Spec(ServiceSpec::new(w, S_NS));
    let sc = Scenario::at_load(svc, workers, 1024, load, n, seed);
    let m = Model::parse(model, workers).unwrap();
    let p = run_point(&m, &sc, &ov, &opts).unwrap();
    assert_eq!(
        p.result.errors.missing, 0,
        "{model} at {load}: requests never served"
    );
    p
}

fn one_event() -> CoreOpts {
    CoreOpts {
        max_events: 1,
        ..CoreOpts::default()
    }
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

fn erlang_c(c: usize, a: f64) -> f64 {
    let mut term = 1.0;
    let mut sum = 0.0;
    for k in 0..c {
        sum += term;
        term *= a / (k + 1) as f64;
    }
    let top = term / (1.0 - a / c as f64);
    top / (sum + top)
}

#[test]
fn shared_mode_approaches_centralized_fcfs() {
    for (load, tol) in [(0.5, 0.08), (0.8, 0.12)] {
        let n = 8;
        let p = point(
            "shared",
            Workload::Exponential,
            n,
            load,
            200_000,
            3,
            Overheads::ZERO,
            one_event(),
        );
        let r = point(
            "centralized-fcfs",
            Workload::Exponential,
            n,
            load,
            200_000,
            3,
            Overheads::ZERO,
            one_event(),
        );
        // Mean sojourn of M/M/n: S̄ + Erlang C wait.
        let want =
            (S_NS + erlang_c(n, load * n as f64) * S_NS / (n as f64 * (1.0 - load))) / 1000.0;
        let got = p.result.latency.mean;
        assert!(
            rel(got, want) < tol,
            "shared ρ={load}: mean {got:.2} µs, M/M/{n} {want:.2} µs"
        );
        let (a, b) = (p.result.latency.p99.value, r.result.latency.p99.value);
        assert!(
            rel(a, b) < tol,
            "shared ρ={load}: p99 {a:.1} µs vs centralized FCFS {b:.1} µs"
        );
    }
}

#[test]
fn vanilla_mode_approaches_partitioned_fcfs() {
    for (load, tol) in [(0.5, 0.08), (0.8, 0.12)] {
        let n = 8;
        let p = point(
            "vanilla",
            Workload::Exponential,
            n,
            load,
            200_000,
            4,
            Overheads::ZERO,
            one_event(),
        );
        let r = point(
            "partitioned-fcfs",
            Workload::Exponential,
            n,
            load,
            200_000,
            4,
            Overheads::ZERO,
            one_event(),
        );
        // Each worker is an M/M/1 at ρ: mean sojourn S̄/(1−ρ).
        let want = S_NS / (1.0 - load) / 1000.0;
        let got = p.result.latency.mean;
        assert!(
            rel(got, want) < tol,
            "vanilla ρ={load}: mean {got:.2} µs, M/M/1 {want:.2} µs"
        );
        let (a, b) = (p.result.latency.p99.value, r.result.latency.p99.value);
        assert!(
            rel(a, b) < tol,
            "vanilla ρ={load}: p99 {a:.1} µs vs partitioned FCFS {b:.1} µs"
        );
    }
}

#[test]
fn every_mode_serves_every_request() {
    // Batches of 64 exercise still_ready and deferred redelivery as well.
    for (harvest, max_events) in [
        (Harvest::Immediate, 1),
        (Harvest::Runtime, 1),
        (Harvest::Immediate, 64),
    ] {
        every_mode_serves_every_request_with(harvest, max_events);
    }
}

fn every_mode_serves_every_request_with(harvest: Harvest, max_events: usize) {
    let opts = CoreOpts {
        migrate_prob: 0.01,
        harvest,
        max_events,
        ..CoreOpts::default()
    };
    for mode in [
        "vanilla",
        "shared",
        "queue",
        "cpu",
        "best2",
        "best2+steal",
        "hybrid",
        "hybrid-steal",
        "cpu+steal",
        "queue+steal",
    ] {
        for (w, load) in [(Workload::Bimodal1, 0.3), (Workload::Gis, 0.9)] {
            // `point` asserts that nothing was stranded.
            let p = point(
                mode,
                w,
                8,
                load,
                15_000,
                7,
                Overheads::default(),
                opts.clone(),
            );
            assert_eq!(p.result.received, 13_500, "{mode}");
            assert!(p.result.latency.p50.value > 0.0);
        }
    }
}

#[test]
fn same_seed_same_result() {
    let opts = CoreOpts {
        migrate_prob: 0.05,
        ..CoreOpts::default()
    };
    let a = point(
        "hybrid",
        Workload::SkewedMix,
        8,
        0.8,
        50_000,
        9,
        Overheads::default(),
        opts.clone(),
    );
    let b = point(
        "hybrid",
        Workload::SkewedMix,
        8,
        0.8,
        50_000,
        9,
        Overheads::default(),
        opts.clone(),
    );
    assert_eq!(a.result, b.result);
    assert_eq!(a.events, b.events);
    let c = point(
        "hybrid",
        Workload::SkewedMix,
        8,
        0.8,
        50_000,
        10,
        Overheads::default(),
        opts.clone(),
    );
    assert_ne!(a.result.latency, c.result.latency);
    let rt = CoreOpts {
        harvest: Harvest::Runtime,
        ..opts.clone()
    };
    let d = point(
        "hybrid",
        Workload::SkewedMix,
        8,
        0.8,
        50_000,
        9,
        Overheads::default(),
        rt.clone(),
    );
    let e = point(
        "hybrid",
        Workload::SkewedMix,
        8,
        0.8,
        50_000,
        9,
        Overheads::default(),
        rt,
    );
    assert_eq!(d.result, e.result);
    assert_ne!(
        d.result.latency, a.result.latency,
        "harvest model had no effect"
    );
}

#[test]
fn balancing_beats_static_partitioning_on_imbalanced_work() {
    // gis: 1% of connections carry 200 µs requests forever. Pinned round-robin
    // (vanilla) traps short requests behind them; best-of-two and stealing
    // route around. The gap at ρ = 0.7 is several-fold, far above noise.
    let v = point(
        "vanilla",
        Workload::Gis,
        8,
        0.7,
        100_000,
        12,
        Overheads::ZERO,
        CoreOpts::default(),
    );
    let h = point(
        "best2+steal",
        Workload::Gis,
        8,
        0.7,
        100_000,
        12,
        Overheads::ZERO,
        CoreOpts::default(),
    );
    let (pv, ph) = (v.result.latency.p99.value, h.result.latency.p99.value);
    assert!(
        ph * 1.5 < pv,
        "best2+steal p99 {ph:.0} µs vs vanilla {pv:.0} µs"
    );
}

#[test]
fn the_model_executes_the_cores_worker_loop() {
    // Every step a simulated worker takes is skq-core's answer
    // (`Scheduler::next_step`), as in skq-rt; the run itself fails if the
    // core counted another number of steps than the model executed. Here:
    // the loop ran, workers slept and were woken through it, steals were
    // seen and charged, and the cost counters follow the sleeps.
    for (mode, harvest) in [
        ("hybrid", Harvest::Runtime),
        ("best2+steal", Harvest::Immediate),
        ("best2+steal", Harvest::Runtime),
        ("shared", Harvest::Runtime),
    ] {
        let Model::Core(cfg) = Model::parse(mode, 8).unwrap() else {
            panic!("{mode} is not a core model");
        };
        let svc = Service::Spec(ServiceSpec::new(Workload::Bimodal1, S_NS));
        let sc = Scenario::at_load(svc, 8, 256, 0.8, 20_000, 5);
        let opts = CoreOpts {
            harvest,
            ..CoreOpts::default()
        };
        let o = skq_sim::core_model::run(&cfg, &Overheads::default(), &opts, &sc).unwrap();
        assert_eq!(o.stranded, 0, "{mode}");
        assert!(o.loop_steps > 20_000, "{mode}: {} steps", o.loop_steps);
        assert!(o.switches > 0 && o.wakeups > 0, "{mode}: nobody slept");
        // Workers still asleep at the end were counted going to sleep only.
        assert!(o.wakeups <= o.switches, "{mode}");
        assert!(o.syscalls >= o.switches, "{mode}: every sleep is a call");
        let ov = Overheads::default();
        let floor = o.switches as f64 * ov.switch_ns as f64;
        assert!(
            o.cpu_ns > floor,
            "{mode}: CPU {} below its switches",
            o.cpu_ns
        );
        if mode.ends_with("+steal") {
            assert!(o.stolen > 0, "{mode}: no steal seen");
        }
    }
}

#[test]
fn high_priority_connections_keep_a_low_tail() {
    // 1/16 of the connections are registered HIGH_PRIORITY; at ρ = 0.9 the
    // worker queues are long, and `wait()` takes high-priority events first,
    // so their p99 must sit far below the regular one (a several-fold gap at
    // this load; a core that ignored the flag would give equal tails).
    let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, S_NS));
    let mut sc = Scenario::at_load(svc, 8, 128, 0.9, 100_000, 21);
    sc.high_conns = 8;
    let m = Model::parse("vanilla", 8).unwrap();
    let p = run_point(&m, &sc, &Overheads::default(), &CoreOpts::default()).unwrap();
    let high = p
        .result
        .high_priority_latency
        .as_ref()
        .expect("high-priority latency reported");
    let (h, r) = (high.p99.value, p.result.latency.p99.value);
    assert!(
        h * 2.0 < r,
        "high-priority p99 {h:.1} µs vs regular {r:.1} µs"
    );
    assert!(
        high.count > 4_000 && high.count < 7_000,
        "share {}",
        high.count
    );
    sc.high_conns = 0;
    let q = run_point(&m, &sc, &Overheads::default(), &CoreOpts::default()).unwrap();
    assert!(q.result.high_priority_latency.is_none());
}

#[test]
fn cpu_affinity_spreads_flows_whatever_cpus_their_hints_name() {
    // skq bench's placement: all 8 workers on CPU 0, every flow processed on
    // the generator's CPU 1 (loopback); or RSS over both CPUs. No worker runs
    // on CPU 1, so its hints map through the LLC to all 8 workers by salt.
    // The old mapping put every flow on worker 0 (imbalance 1.0).
    for hints in [HintSource::Client(1), HintSource::Rss(vec![0, 1])] {
        let opts = CoreOpts {
            machine: Machine {
                server_cpus: vec![0],
                hints: hints.clone(),
                ..Machine::default()
            },
            ..one_event()
        };
        let p = point(
            "cpu",
            Workload::Exponential,
            8,
            0.5,
            20_000,
            3,
            Overheads::default(),
            opts,
        );
        let c = p.core.expect("core-driven");
        assert!(c.imbalance < 0.5, "{hints:?}: imbalance {}", c.imbalance);
        assert_eq!(
            c.off_home, 0,
            "{hints:?}: cpu mode serves every flow at its home"
        );
    }
}

#[test]
fn with_diffusion_no_best_effort_request_runs_on_a_reserved_worker() {
    // 16 workers; 8 best-effort connections (registered BATCH) send 200 µs
    // requests beside the regular 10 µs ones. With workers 14 and 15 as
    // batch workers, the core must keep every best-effort request off
    // workers 0..14 (queueing and stealing alike); without diffusion the
    // policy spreads them over reserved workers too, which this checks so
    // that the test can fail.
    let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, S_NS));
    let mut sc = Scenario::at_load(svc, 16, 256, 0.6, 100_000, 33);
    sc.batch_conns = 8;
    sc.batch_rps = 6_000.0; // 60% of the two batch workers
    sc.batch_service_ns = 200_000;
    let Model::Core(cfg) = Model::parse("hybrid", 16).unwrap() else {
        panic!("hybrid is a core model")
    };
    let run = |batch_workers: u64| {
        let mut cfg = (*cfg).clone();
        cfg.batch_workers = batch_workers;
        let o = skq_sim::core_model::run(&cfg, &Overheads::default(), &CoreOpts::default(), &sc)
            .unwrap();
        assert_eq!(o.stranded, 0);
        let be = o.summary.batch.expect("best-effort latency reported");
        assert!(
            be.count > 400,
            "best-effort requests measured: {}",
            be.count
        );
        o.batch_served
    };
    let reserved = |served: &[u64]| served[..14].iter().sum::<u64>();
    let diffused = run(0b11 << 14);
    assert_eq!(reserved(&diffused), 0, "per worker: {diffused:?}");
    assert_eq!(diffused.iter().sum::<u64>(), sc.batch_requests() as u64);
    let plain = run(0);
    assert!(reserved(&plain) > 0, "per worker: {plain:?}");
}

#[test]
fn poll_groups_and_a_set_lock_serve_every_request_once() {
    // Several readiness sets, each harvested by its own group, with a lock
    // held per harvest: every request is still served exactly once, the
    // lock's time is charged (as CPU) exactly when it is modelled, and the
    // run differs from one set's.
    let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, S_NS));
    let sc = Scenario::at_load(svc, 16, 256, 0.7, 40_000, 9);
    let opts = CoreOpts {
        harvest: Harvest::Runtime,
        ..CoreOpts::default()
    };
    let locked = Overheads {
        set_hold_ns: 500,
        set_item_ns: 200,
        ..Overheads::default()
    };
    let mut runs = Vec::new();
    for groups in [1, 4] {
        let Model::Core(mut cfg) = Model::parse("hybrid", 16).unwrap() else {
            panic!("hybrid is a core model");
        };
        cfg.poll_groups = groups;
        for ov in [Overheads::default(), locked] {
            let o = skq_sim::core_model::run(&cfg, &ov, &opts, &sc).unwrap();
            assert_eq!(o.stranded, 0, "{groups} groups");
            assert_eq!(o.summary.completed, 40_000, "{groups} groups");
            // The lock's time is charged only when it is modelled.
            assert_eq!(o.set_lock_ns > 0, ov.set_hold_ns > 0, "{groups} groups");
            assert!(o.cpu_ns >= o.set_lock_ns as f64);
            runs.push(o.cpu_ns);
        }
    }
    assert_ne!(runs[0], runs[2], "poll groups changed nothing");
}

#[test]
fn checkpoints_hand_a_busy_owners_readiness_to_other_workers() {
    // One readiness set per worker: readiness for a worker inside a long
    // request waits in its set. A handler that checkpoints lets its worker
    // harvest that set and hand what it found, and what it had queued, to
    // other workers. Every request is still served exactly once; the
    // checkpoints are counted, and the moved work shows as requests served
    // away from their connection's home.
    let svc = Service::Spec(ServiceSpec::new(Workload::Bimodal1, S_NS));
    let sc = Scenario::at_load(svc, 16, 256, 0.5, 40_000, 3);
    let Model::Core(mut cfg) = Model::parse("hybrid", 16).unwrap() else {
        panic!("hybrid is a core model");
    };
    cfg.poll_groups = 16;
    let run = |every_ns: u64| {
        let opts = CoreOpts {
            harvest: Harvest::Runtime,
            checkpoint_ns: every_ns,
            ..CoreOpts::default()
        };
        let o = skq_sim::core_model::run(&cfg, &Overheads::default(), &opts, &sc).unwrap();
        assert_eq!(o.stranded, 0, "checkpoint every {every_ns} ns");
        assert_eq!(
            o.summary.completed, 40_000,
            "checkpoint every {every_ns} ns"
        );
        o
    };
    let without = run(0);
    assert_eq!(
        (
            without.checkpoints,
            without.checkpoint_harvests,
            without.checkpoint_moved
        ),
        (0, 0, 0)
    );
    let with = run(20_000);
    assert!(with.checkpoints > 0);
    assert!(with.checkpoint_harvests > 0 && with.checkpoint_harvests <= with.checkpoints);
    assert!(with.checkpoint_moved > 0);
    assert!(
        with.off_home > without.off_home,
        "off home {} with checkpoints, {} without",
        with.off_home,
        without.off_home
    );
}
