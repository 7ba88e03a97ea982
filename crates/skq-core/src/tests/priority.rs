//! Priority classes through the core's queueing stages, and diffusion.

use super::{queued_on, sched};
use crate::*;

fn ready(s: &Scheduler, id: SourceId, rng: &mut FastRng) -> Activation {
    s.activate(id, Ready::READABLE, None, 0, rng)
}

#[test]
fn a_high_source_queued_after_regular_ones_is_delivered_first() {
    let s = sched(Policy::Vanilla, 1, |_| {});
    let mut w = s.worker(0);
    let mut rng = FastRng::new(1);
    let regular: Vec<_> = (0..5)
        .map(|i| s.register(i, Flags::NONE, None).unwrap())
        .collect();
    let high = s.register(99, Flags::NONE, None).unwrap();
    assert!(s.set_class(high, Class::High).unwrap());
    for &r in &regular {
        let _ = ready(&s, r, &mut rng);
    }
    let _ = ready(&s, high, &mut rng);
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut w, 1, &mut ev, 16), 6);
    assert_eq!((ev[0].token, ev[0].high), (99, true));
    assert!(ev[1..].iter().all(|e| !e.high));
    let order: Vec<u64> = ev[1..].iter().map(|e| e.token).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4], "regular ones keep their order");
}

#[test]
fn a_connections_level_rises_and_falls_with_its_requests() {
    let s = sched(Policy::Vanilla, 1, |_| {});
    let mut w = s.worker(0);
    let mut rng = FastRng::new(2);
    let conn = s.register(1, Flags::NONE, None).unwrap();
    let other = s.register(2, Flags::NONE, None).unwrap();
    let mut ev = Vec::new();
    let mut t = 0;
    // Regular: queued behind `other`. High: ahead of it. Regular again:
    // behind it once more.
    for (class, first) in [
        (Class::Regular, 2),
        (Class::High, 1),
        (Class::Regular, 2),
        (Class::Batch, 2),
    ] {
        s.release(&mut w, t);
        let _ = s.set_class(conn, class).unwrap();
        assert_eq!(s.class_of(conn), class);
        let _ = ready(&s, other, &mut rng);
        let _ = ready(&s, conn, &mut rng);
        t += 10;
        assert_eq!(s.wait(&mut w, t, &mut ev, 16), 2);
        assert_eq!(ev[0].token, first, "{class:?}");
        assert_eq!(
            ev.iter().find(|e| e.token == 1).unwrap().high,
            class == Class::High
        );
    }
    // Other flags survive class changes; a stale id is refused.
    let pinned = s.register(3, Flags::PINNED, Some(0)).unwrap();
    let _ = s.set_class(pinned, Class::High).unwrap();
    assert_eq!(s.class_of(pinned), Class::High);
    let _ = s.set_class(pinned, Class::Regular).unwrap();
    assert!(Class::of_flags(Flags::PINNED) == s.class_of(pinned));
    s.deregister(conn).unwrap();
    assert_eq!(s.set_class(conn, Class::High), Err(CoreError::Stale));
}

#[test]
fn rtshare_still_bounds_classified_sources() {
    let s = sched(Policy::Vanilla, 1, |c| c.rtshare = 50);
    let mut w = s.worker(0);
    let mut rng = FastRng::new(3);
    for i in 0..4 {
        let r = s.register(i, Flags::NONE, None).unwrap();
        let _ = ready(&s, r, &mut rng);
    }
    for i in 10..14 {
        let h = s.register(i, Flags::NONE, None).unwrap();
        let _ = s.set_class(h, Class::High).unwrap();
        let _ = ready(&s, h, &mut rng);
    }
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut w, 1, &mut ev, 4), 4);
    let highs = ev.iter().filter(|e| e.high).count();
    assert_eq!(highs, 2, "rtshare 50% of a 4-event batch");
    assert!(ev[..2].iter().all(|e| e.high));
}

#[test]
fn stealing_takes_a_high_source_queued_after_regular_ones_first() {
    let s = sched(Policy::Queue, 2, |c| {
        c.steal = true;
        c.steal_k = 1;
    });
    let mut thief = s.worker(1);
    let mut rng = FastRng::new(4);
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(s.register(i, Flags::NONE, Some(0)).unwrap());
    }
    let high = s.register(9, Flags::NONE, Some(0)).unwrap();
    let _ = s.set_class(high, Class::High).unwrap();
    for &id in &ids {
        assert_eq!(queued_on(ready(&s, id, &mut rng)), 0);
    }
    assert_eq!(queued_on(ready(&s, high, &mut rng)), 0);
    assert_eq!(s.try_steal(&mut thief), Steal::Took(1));
    let mut ev = Vec::new();
    assert_eq!(s.fill(&mut thief, &mut ev, 8), 1);
    assert_eq!((ev[0].token, ev[0].high), (9, true));
}

/// Drives `rounds` random activations and waits over 4 workers, worker 3
/// the batch worker; returns (events per class per worker, deliveries).
fn diffusion_run(policy: Policy, seed: u64) {
    let s = sched(policy, 4, |c| {
        c.steal = policy != Policy::Vanilla;
        c.steal_k = 2;
        c.batch_workers = 1 << 3;
    });
    let mut workers: Vec<_> = (0..4).map(|w| s.worker(w)).collect();
    let mut rng = FastRng::new(seed);
    let mut srcs = Vec::new();
    for i in 0..40u64 {
        let id = s.register(i, Flags::NONE, Some((i % 4) as usize)).unwrap();
        let class = [Class::Batch, Class::Regular, Class::High][(i % 3) as usize];
        let _ = s.set_class(id, class).unwrap();
        srcs.push((id, class));
    }
    let mut ev = Vec::new();
    let mut now = 0;
    let mut batch_on = [0u64; 4];
    let mut other_on = [0u64; 4];
    let mut in_flight = std::collections::HashSet::new();
    for _ in 0..3000 {
        now += 100;
        let (id, _) = srcs[rng.below(srcs.len())];
        let cpu = Some(rng.below(4) as u32);
        let _ = s.activate(id, Ready::READABLE, cpu, now, &mut rng);
        let w = rng.below(4);
        let n = s.wait(&mut workers[w], now, &mut ev, 4);
        in_flight.retain(|&(ww, _)| ww != w);
        for e in &ev[..n] {
            let class = srcs.iter().find(|(i, _)| *i == e.source).unwrap().1;
            assert!(
                in_flight.insert((w, e.source)),
                "one source, one delivery at a time"
            );
            assert!(
                in_flight.iter().filter(|(_, x)| *x == e.source).count() == 1,
                "a source is never with two workers at once"
            );
            if class == Class::Batch {
                assert_eq!(w, 3, "batch source {} ran on reserved worker {w}", e.token);
                batch_on[w] += 1;
            } else {
                other_on[w] += 1;
            }
        }
    }
    assert!(batch_on[3] > 0, "batch work ran: {batch_on:?}");
    assert!(other_on[..3].iter().sum::<u64>() > 0);
}

#[test]
fn with_diffusion_no_batch_source_ever_runs_on_a_reserved_worker() {
    for policy in [
        Policy::Vanilla,
        Policy::Queue,
        Policy::Cpu,
        Policy::Best2,
        Policy::Hybrid,
    ] {
        for seed in 1..4 {
            diffusion_run(policy, seed);
        }
    }
}

#[test]
fn batch_workers_take_regular_work_only_by_stealing_when_idle() {
    let s = sched(Policy::Best2, 2, |c| {
        c.steal = true;
        c.batch_workers = 0b10;
    });
    let mut rng = FastRng::new(5);
    let mut reserved = s.worker(0);
    let mut batchw = s.worker(1);
    let r = s.register(1, Flags::NONE, None).unwrap();
    let b = s.register(2, Flags::NONE, None).unwrap();
    let _ = s.set_class(b, Class::Batch).unwrap();
    // Routing: regular to the reserved worker, batch to the batch worker.
    assert_eq!(queued_on(ready(&s, r, &mut rng)), 0);
    assert_eq!(queued_on(ready(&s, b, &mut rng)), 1);
    // The idle batch worker (after its own batch source) steals the regular one.
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut batchw, 1, &mut ev, 1), 1);
    assert_eq!(ev[0].token, 2);
    assert_eq!(s.wait(&mut batchw, 2, &mut ev, 1), 1);
    assert_eq!(ev[0].token, 1, "an idle batch worker takes regular work");
    // The reserved worker never steals a batch source.
    let _ = s.wait(&mut batchw, 3, &mut ev, 1);
    assert_eq!(queued_on(ready(&s, b, &mut rng)), 1);
    assert_eq!(s.wait(&mut reserved, 4, &mut ev, 4), 0);
    assert_eq!(s.try_steal(&mut reserved), Steal::Nothing);
    assert_eq!(s.wait(&mut batchw, 5, &mut ev, 1), 1);
}

#[test]
fn diffusion_settings_are_checked() {
    let mut c = Config::new(Policy::Hybrid, 4);
    c.batch_workers = 0b1111;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("every worker"));
    c.batch_workers = 1 << 5;
    assert!(c.validate().unwrap_err().to_string().contains("worker 5"));
    let mut c = Config::new(Policy::Shared, 4);
    c.batch_workers = 1;
    assert!(c.validate().unwrap_err().to_string().contains("shared"));
    let mut c = Config::new(Policy::Cpu, 4);
    c.batch_workers = 0b1000;
    assert!(c.validate().is_ok());
}
