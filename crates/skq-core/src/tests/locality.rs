//! Locality under a virtual clock: queue and CPU affinity, and CPU hints
//! mapped through the topology tree (own CPU → SMT sibling → last-level
//! cache → node → spread by per-source salt).

use super::{queued_on, sched};
use crate::*;

/// 2 nodes × 1 LLC × 2 cores × 2 SMT threads: CPU c on core c/2, LLC and
/// node c/4.
fn two_nodes() -> Vec<CpuPlace> {
    (0..8)
        .map(|cpu| CpuPlace {
            cpu,
            core: cpu / 2,
            llc: cpu / 4,
            node: cpu / 4,
        })
        .collect()
}

/// The 2-CPU development VM: separate cores, one LLC, one node.
fn flat(cpus: u32) -> Vec<CpuPlace> {
    (0..cpus)
        .map(|cpu| CpuPlace {
            cpu,
            core: cpu,
            llc: 0,
            node: 0,
        })
        .collect()
}

/// Workers on `cpus` of the two-node machine.
fn on(policy: Policy, cpus: &[u32]) -> Scheduler {
    sched(policy, cpus.len(), |c| {
        c.steal = false;
        c.worker_cpus = cpus.to_vec();
        c.cpu_topology = two_nodes();
    })
}

/// Where a fresh source (registered by no worker) goes on its first
/// activation with a hint on `cpu`, at virtual time `t`.
fn first_choice(s: &Scheduler, cpu: u32, t: u64) -> usize {
    let mut rng = FastRng::new(t);
    let id = s.register(t, Flags::NONE, None).unwrap();
    queued_on(s.activate(id, Ready::READABLE, Some(cpu), t, &mut rng))
}

/// Workers chosen for `n` fresh sources all hinting `cpu`.
fn spread_of(s: &Scheduler, cpu: u32, n: u64) -> Vec<usize> {
    let mut per = vec![0; s.config().workers];
    for t in 0..n {
        per[first_choice(s, cpu, t)] += 1;
    }
    per
}

#[test]
fn a_hint_on_a_workers_cpu_goes_to_that_worker() {
    let s = on(Policy::Cpu, &[0, 2, 4, 6]);
    for (cpu, w) in [(0, 0), (2, 1), (4, 2), (6, 3)] {
        assert_eq!(spread_of(&s, cpu, 8)[w], 8, "CPU {cpu}");
    }
}

#[test]
fn a_hint_on_an_smt_sibling_goes_to_the_worker_on_its_core() {
    // Workers on CPUs 0 and 4; CPU 1 is 0's sibling, CPU 5 is 4's.
    let s = on(Policy::Cpu, &[0, 4]);
    assert_eq!(spread_of(&s, 1, 10), vec![10, 0]);
    assert_eq!(spread_of(&s, 5, 10), vec![0, 10]);
    assert_eq!(
        s.cpu_map().candidates(1, u64::MAX),
        (HintLevel::Sibling, vec![0])
    );
}

#[test]
fn a_hint_on_an_llc_peer_goes_to_a_worker_under_that_cache() {
    // Workers on CPUs 0, 1 (one core) and 4. CPUs 2 and 3 share the first
    // LLC with 0 and 1 but no core with any worker.
    let s = on(Policy::Cpu, &[0, 1, 4]);
    let per = spread_of(&s, 2, 20);
    assert_eq!(per[2], 0, "worker 2 is under the other cache");
    assert!(per[0] > 0 && per[1] > 0, "{per:?}");
    assert_eq!(
        s.cpu_map().candidates(3, u64::MAX),
        (HintLevel::Llc, vec![0, 1])
    );
}

#[test]
fn hints_on_a_cpu_without_workers_spread_over_all_workers() {
    // The bench harness: the server confined to CPU 0 (8 workers there), the
    // load generator on CPU 1, so every flow reports CPU 1. Before the
    // topology mapping every one of them landed on worker 0.
    let harness = sched(Policy::Cpu, 8, |c| {
        c.worker_cpus = vec![0; 8];
        c.cpu_topology = flat(2);
    });
    // Nothing known about the machine at all.
    let unknown = sched(Policy::Cpu, 8, |c| c.worker_cpus = vec![0; 8]);
    // Workers on node 0 only, hints from node 1.
    let far = on(Policy::Cpu, &[0, 1, 2, 3]);
    for (name, s, cpu) in [
        ("harness", &harness, 1),
        ("unknown", &unknown, 1),
        ("far", &far, 6),
    ] {
        let per = spread_of(s, cpu, 64);
        assert!(per.iter().all(|&n| n > 0), "{name}: {per:?}");
        assert!(per.iter().all(|&n| n < 64), "{name}: all on one worker");
    }
    assert_eq!(harness.cpu_map().candidates(1, u64::MAX).0, HintLevel::Llc);
    assert_eq!(
        unknown.cpu_map().candidates(1, u64::MAX).0,
        HintLevel::Spread
    );
    assert_eq!(far.cpu_map().candidates(6, u64::MAX).0, HintLevel::Spread);
}

#[test]
fn a_dead_worker_falls_to_the_next_level() {
    // Worker 0 on CPU 0, 1 on its sibling, 2 under the same LLC, 3 on the
    // other node. Hints on CPU 0 fall one level per exit.
    let s = on(Policy::Cpu, &[0, 1, 2, 4]);
    let mut t = 0;
    for (exit, expect) in [(None, 0), (Some(0), 1), (Some(1), 2), (Some(2), 3)] {
        if let Some(w) = exit {
            let _ = s.exit(s.worker(w), t);
        }
        t += 1;
        assert_eq!(first_choice(&s, 0, t), expect, "after exit of {exit:?}");
    }
    // A source homed on a worker that exits moves to the next level too.
    let s = on(Policy::Cpu, &[0, 1, 4]);
    let mut rng = FastRng::new(9);
    let id = s.register(1, Flags::NONE, None).unwrap();
    assert_eq!(
        queued_on(s.activate(id, Ready::READABLE, Some(0), 1, &mut rng)),
        0
    );
    let mut w0 = s.worker(0);
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut w0, 2, &mut ev, 4), 1);
    let _ = s.exit(w0, 3);
    assert_eq!(
        queued_on(s.activate(id, Ready::READABLE, Some(0), 4, &mut rng)),
        1,
        "the sibling, not the other node"
    );
}

#[test]
fn queue_affinity_keeps_its_first_choice_cpu_affinity_follows_a_changed_hint() {
    for (policy, follows) in [(Policy::Queue, false), (Policy::Cpu, true)] {
        // Workers on CPUs 0 and 4: hints on sibling CPUs 1 and 5.
        let s = on(policy, &[0, 4]);
        let mut rng = FastRng::new(31);
        let (mut w0, mut w1) = (s.worker(0), s.worker(1));
        let id = s.register(5, Flags::NONE, Some(1)).unwrap();
        let mut ev = Vec::new();
        assert_eq!(
            queued_on(s.activate(id, Ready::READABLE, Some(1), 0, &mut rng)),
            0,
            "{policy}: the first hint decides, not the registrar"
        );
        assert_eq!(s.wait(&mut w0, 1, &mut ev, 4), 1);
        assert_eq!(s.wait(&mut w0, 2, &mut ev, 4), 0);
        let to = queued_on(s.activate(id, Ready::READABLE, Some(5), 3, &mut rng));
        assert_eq!(to, usize::from(follows), "{policy}");
        let got = s.wait(&mut w1, 4, &mut ev, 4) + s.wait(&mut w0, 5, &mut ev, 4);
        assert_eq!(got, 1);
        s.release(&mut w0, 5);
        s.release(&mut w1, 5);
        // Back on CPU 1: CPU affinity returns, queue affinity never left.
        let back = queued_on(s.activate(id, Ready::READABLE, Some(1), 6, &mut rng));
        assert_eq!(back, 0, "{policy}");
        assert_eq!(s.stats()[1].migrations.cpu_follow, u64::from(follows));
    }
}

#[test]
fn a_sticky_home_stays_put_among_its_levels_candidates() {
    // All 4 workers on CPU 0; flows hinting CPU 1 (same LLC) keep the worker
    // their first hint chose, whatever the salt would pick later.
    let s = sched(Policy::Cpu, 4, |c| {
        c.worker_cpus = vec![0; 4];
        c.cpu_topology = flat(2);
    });
    let mut rng = FastRng::new(3);
    let ids: Vec<_> = (0..8)
        .map(|i| s.register(i, Flags::NONE, None).unwrap())
        .collect();
    let first: Vec<usize> = ids
        .iter()
        .map(|&id| queued_on(s.activate(id, Ready::READABLE, Some(1), 0, &mut rng)))
        .collect();
    assert!((0..4).all(|w| first.contains(&w)), "{first:?}");
    let mut ev = Vec::new();
    for w in 0..4 {
        let mut c = s.worker(w);
        while s.wait(&mut c, 1, &mut ev, 8) > 0 {}
    }
    // Now hinting CPU 0 (the workers' own CPU, same candidates): unchanged.
    for (i, &id) in ids.iter().enumerate() {
        assert_eq!(
            queued_on(s.activate(id, Ready::READABLE, Some(0), 2, &mut rng)),
            first[i]
        );
    }
    assert_eq!(
        s.stats()
            .iter()
            .map(|w| w.migrations.cpu_follow)
            .sum::<u64>(),
        0
    );
}

#[test]
fn cpu_affinity_follows_the_flow_and_queue_affinity_stays() {
    for (policy, follows) in [(Policy::Cpu, true), (Policy::Queue, false)] {
        let s = sched(policy, 2, |_| {});
        let mut rng = FastRng::new(14);
        let (mut w0, mut w1) = (s.worker(0), s.worker(1));
        let id = s.register(5, Flags::NONE, None).unwrap();
        let mut ev = Vec::new();
        assert_eq!(
            queued_on(s.activate(id, Ready::READABLE, Some(0), 0, &mut rng)),
            0
        );
        assert_eq!(s.wait(&mut w0, 1, &mut ev, 4), 1);
        assert_eq!(s.wait(&mut w0, 2, &mut ev, 4), 0);
        let to = queued_on(s.activate(id, Ready::READABLE, Some(1), 3, &mut rng));
        assert_eq!(to, if follows { 1 } else { 0 }, "{policy}");
        let got = s.wait(&mut w1, 4, &mut ev, 4) + s.wait(&mut w0, 4, &mut ev, 4);
        assert_eq!(got, 1);
        assert_eq!(s.stats()[1].migrations.cpu_follow, u64::from(follows));
    }
}

#[test]
fn locality_policies_start_hintless_sources_at_their_registrar() {
    for policy in [Policy::Queue, Policy::Cpu, Policy::Hybrid] {
        let s = sched(policy, 3, |c| c.steal = false);
        let mut rng = FastRng::new(20);
        let id = s.register(1, Flags::NONE, Some(2)).unwrap();
        // No CPU hint (a pipe): stays with worker 2.
        for t in 0..3 {
            let w = queued_on(s.activate(id, Ready::READABLE, None, t, &mut rng));
            assert_eq!(w, 2, "{policy}");
            let mut c = s.worker(2);
            let mut ev = Vec::new();
            s.wait(&mut c, t, &mut ev, 4);
            s.release(&mut c, t);
        }
        // Queue affinity: the first hint fixes the home, later hints do not move it.
        if policy == Policy::Queue {
            assert_eq!(
                queued_on(s.activate(id, Ready::READABLE, Some(0), 9, &mut rng)),
                0
            );
            let mut c = s.worker(0);
            let mut ev = Vec::new();
            s.wait(&mut c, 10, &mut ev, 4);
            s.release(&mut c, 11);
            assert_eq!(
                queued_on(s.activate(id, Ready::READABLE, Some(1), 12, &mut rng)),
                0
            );
        }
    }
}

#[test]
fn cpu_affinity_spreads_a_cpus_flows_over_all_its_workers() {
    // 4 workers on 2 CPUs: CPU 0 serves workers 0 and 2.
    let s = sched(Policy::Cpu, 4, |c| c.worker_cpus = vec![0, 1, 0, 1]);
    let mut rng = FastRng::new(21);
    let mut per = [0usize; 4];
    for i in 0..40 {
        // All accepted (registered) by worker 0, all arriving on CPU 0.
        let id = s.register(i, Flags::NONE, Some(0)).unwrap();
        per[queued_on(s.activate(id, Ready::READABLE, Some(0), 0, &mut rng))] += 1;
    }
    assert_eq!(per, [20, 0, 20, 0]);
}
