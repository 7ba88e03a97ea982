//! Unit tests of the policies and the lifecycle under a virtual clock.
//! Locality (CPU hints through the topology tree) is in `locality.rs`.

use crate::sync::Ordering;
use crate::*;

mod elastic;
mod locality;
mod priority;
mod worker_loop;

pub(crate) fn sched(policy: Policy, workers: usize, f: impl FnOnce(&mut Config)) -> Scheduler {
    let mut c = Config::new(policy, workers);
    f(&mut c);
    Scheduler::new(c).unwrap()
}

/// Sets worker `w`'s best-of-two inputs directly.
fn fake_load(s: &Scheduler, w: usize, t_ret: u64, n_ret: u64, t_avg: f64, n_cur: u64) {
    let l = &s.workers[w].load;
    l.t_ret.store(t_ret, Ordering::Relaxed);
    l.n_ret.store(n_ret, Ordering::Relaxed);
    l.t_avg.store(t_avg.to_bits(), Ordering::Relaxed);
    s.queues[s.qidx(w)].len.store(n_cur, Ordering::Relaxed);
}

pub(crate) fn queued_on(a: Activation) -> usize {
    match a {
        Activation::Queued { worker, .. } => worker,
        other => panic!("expected Queued, got {other:?}"),
    }
}

#[test]
fn best_of_two_picks_the_lower_expected_completion() {
    let s = sched(Policy::Best2, 2, |_| {});
    let mut rng = FastRng::new(1);
    let now = 1_000_000;
    // E(0) = now + 100·5, E(1) = now + 100·2
    fake_load(&s, 0, now, 0, 100.0, 5);
    fake_load(&s, 1, now, 0, 100.0, 2);
    for i in 0..50 {
        let id = s.register(i, Flags::NONE, None).unwrap();
        assert_eq!(
            queued_on(s.activate(id, Ready::READABLE, None, now, &mut rng)),
            1
        );
        fake_load(&s, 1, now, 0, 100.0, 2); // undo the push's length change
    }
    // n_ret counts as much as n_cur.
    fake_load(&s, 0, now, 1, 100.0, 0);
    fake_load(&s, 1, now, 3, 100.0, 0);
    let id = s.register(99, Flags::NONE, None).unwrap();
    assert_eq!(
        queued_on(s.activate(id, Ready::READABLE, None, now, &mut rng)),
        0
    );
}

#[test]
fn activate_next_keeps_the_source_on_the_activating_worker_under_locality() {
    let now = 1_000_000u64;
    let busy_and_idle = |s: &Scheduler| {
        // Worker 0 runs an event and expects to take 500 µs; worker 1 is free.
        fake_load(s, 0, now, 1, 500_000.0, 0);
        fake_load(s, 1, now, 0, 500_000.0, 0);
    };
    for policy in [Policy::Hybrid, Policy::Cpu, Policy::Queue] {
        let s = sched(policy, 2, |c| {
            c.steal = false;
            c.worker_cpus = vec![0, 0];
        });
        let mut rng = FastRng::new(3);
        busy_and_idle(&s);
        let id = s.register(1, Flags::NONE, None).unwrap();
        match s.activate_next(id, Ready::READABLE, Some(0), now, &mut rng, 0) {
            Activation::Queued {
                worker: 0,
                wake: None,
            } => {}
            other => panic!("{policy:?}: expected to stay on worker 0 unwoken, got {other:?}"),
        }
        // With work already queued at worker 0 the source still takes its
        // event's place: the front of worker 0's queue.
        if policy == Policy::Hybrid {
            let id = s.register(2, Flags::NONE, None).unwrap();
            busy_and_idle(&s);
            let plain =
                queued_on(s.activate_by(id, Ready::READABLE, Some(0), now, &mut rng, Some(0)));
            assert_eq!(plain, 1, "activate_by from busy worker 0 balances to 1");
            let q = s.register(3, Flags::NONE, None).unwrap();
            assert!(
                s.push(s.qidx(0), q, false, false),
                "worker 0 has queued work"
            );
            let id = s.register(4, Flags::NONE, None).unwrap();
            busy_and_idle(&s);
            let kept = queued_on(s.activate_next(id, Ready::READABLE, Some(0), now, &mut rng, 0));
            assert_eq!(kept, 0);
            let g = crate::sync::lock(&s.queues[s.qidx(0)].q);
            let order: Vec<_> = g.regular.iter().copied().collect();
            assert_eq!(
                order.first(),
                Some(&id),
                "the kept source is first: {order:?}"
            );
            assert!(order.contains(&q), "the queued work stays: {order:?}");
        }
    }
    // Policies without locality ignore it.
    let s = sched(Policy::Best2, 2, |c| c.steal = false);
    let mut rng = FastRng::new(4);
    for i in 0..20 {
        busy_and_idle(&s);
        let id = s.register(10 + i, Flags::NONE, None).unwrap();
        assert_eq!(
            queued_on(s.activate_next(id, Ready::READABLE, None, now, &mut rng, 0)),
            1
        );
    }
}

#[test]
fn an_activation_said_not_to_read_the_clock_chooses_the_same_worker_at_any_now() {
    let now = 1_000_000u64;
    // (policy, workers, through activate_next by worker 0)
    let cases = [
        (Policy::Shared, 2, false),
        (Policy::Vanilla, 2, false),
        (Policy::Queue, 2, false),
        (Policy::Cpu, 2, false),
        (Policy::Hybrid, 2, true),
        (Policy::Hybrid, 1, false),
        (Policy::Best2, 1, false),
    ];
    for (policy, workers, next) in cases {
        let by = Some(0);
        let chosen = |at: u64| {
            let s = sched(policy, workers, |c| {
                c.steal = false;
                c.worker_cpus = vec![0; workers];
            });
            for w in 0..workers {
                fake_load(&s, w, now, w as u64, 500_000.0, w as u64);
            }
            let mut rng = FastRng::new(7);
            assert!(
                !s.activation_reads_clock(next, by),
                "{policy:?} x{workers} next={next}"
            );
            (0..8)
                .map(|i| {
                    let id = s.register(i, Flags::NONE, None).unwrap();
                    let act = if next {
                        s.activate_next(id, Ready::READABLE, Some(0), at, &mut rng, 0)
                    } else {
                        s.activate_by(id, Ready::READABLE, Some(0), at, &mut rng, by)
                    };
                    queued_on(act)
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(chosen(now), chosen(0), "{policy:?} x{workers} next={next}");
    }
    // Comparing expected completions reads it.
    assert!(sched(Policy::Best2, 2, |_| {}).activation_reads_clock(true, Some(0)));
    assert!(sched(Policy::Hybrid, 2, |_| {}).activation_reads_clock(false, Some(0)));
    assert!(sched(Policy::Hybrid, 2, |_| {}).activation_reads_clock(true, None));
}

#[test]
fn a_worker_past_its_batchs_expected_end_is_expected_to_need_one_more_event() {
    let s = sched(Policy::Best2, 2, |_| {});
    let now = 1_000_000u64;
    // Worker 0 returned 10 events at t=0 and never came back; 1 more queued.
    fake_load(&s, 0, 0, 10, 100.0, 1);
    // Unclamped, E(0) = 0 + 100·11 = 1100, far in the past; SKQ's clamp
    // says now + 100 (the queued event only), which an idle worker with one
    // queued event ties. Expected: one more event, then the queued one.
    let e0 = s.expected_completion(0, now);
    assert_eq!(e0, now as f64 + 200.0);
    // On schedule (returned 1 event 50 ns ago): the batch's own end.
    fake_load(&s, 0, now - 50, 1, 100.0, 1);
    assert_eq!(s.expected_completion(0, now), now as f64 + 50.0 + 100.0);
    fake_load(&s, 0, 0, 10, 100.0, 1);
    // An idle worker (E = now) therefore beats the stalled one.
    fake_load(&s, 1, now - 10, 0, 100.0, 0);
    let mut rng = FastRng::new(2);
    let id = s.register(1, Flags::NONE, None).unwrap();
    assert_eq!(
        queued_on(s.activate(id, Ready::READABLE, None, now, &mut rng)),
        1
    );
}

#[test]
fn hybrid_charges_the_penalty_to_the_rival_not_the_local_choice() {
    let s = sched(Policy::Hybrid, 2, |c| c.penalty_ns = 500);
    let mut rng = FastRng::new(3);
    let now = 10_000_000;
    let a = s.register(1, Flags::NONE, None).unwrap();
    // Local = worker 0 (readiness on CPU 0). E(local) = now + 1000.
    // Rival E = now + 600: better, but not by more than the penalty -> local.
    fake_load(&s, 0, now, 0, 100.0, 10);
    fake_load(&s, 1, now, 0, 100.0, 6);
    assert_eq!(
        queued_on(s.activate(a, Ready::READABLE, Some(0), now, &mut rng)),
        0
    );
    // A penalty applied to the local side would have picked the rival here.
    // Rival E = now + 400: beats local by 600 > 500 -> rival.
    let b = s.register(2, Flags::NONE, None).unwrap();
    fake_load(&s, 0, now, 0, 100.0, 10);
    fake_load(&s, 1, now, 0, 100.0, 4);
    assert_eq!(
        queued_on(s.activate(b, Ready::READABLE, Some(0), now, &mut rng)),
        1
    );
    assert_eq!(
        s.stats()[1].migrations.balance,
        0,
        "first placement is not a migration"
    );
}

#[test]
fn rtshare_bounds_high_priority_share_of_a_batch() {
    let s = sched(Policy::Vanilla, 1, |c| c.rtshare = 80);
    let mut w = s.worker(0);
    let mut rng = FastRng::new(4);
    for i in 0..10 {
        let h = s.register(i, Flags::HIGH_PRIORITY, None).unwrap();
        let r = s.register(100 + i, Flags::NONE, None).unwrap();
        let _ = s.activate(h, Ready::READABLE, None, 0, &mut rng);
        let _ = s.activate(r, Ready::READABLE, None, 0, &mut rng);
    }
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut w, 1, &mut ev, 10), 10);
    assert_eq!(ev.iter().filter(|e| e.high).count(), 8);
    assert!(
        ev[..8].iter().all(|e| e.high),
        "high-priority events come first"
    );
    assert_eq!(s.wait(&mut w, 2, &mut ev, 10), 10);
    // 2 high left, then 8 regular
    assert_eq!(ev.iter().filter(|e| e.high).count(), 2);
    // With no regular work left, spare room takes more high-priority events.
    for i in 0..10 {
        let h = s.register(200 + i, Flags::HIGH_PRIORITY, None).unwrap();
        let _ = s.activate(h, Ready::READABLE, None, 3, &mut rng);
    }
    assert_eq!(s.wait(&mut w, 4, &mut ev, 10), 10);
    assert!(ev.iter().all(|e| e.high));
    assert_eq!(s.stats()[0].high_served, 20);
}

#[test]
fn rtfreq_shrinks_batches_to_one_over_t_avg_times_rtfreq() {
    // t_avg = 10 µs, rtfreq = 20 000 waits/s -> 1e9 / (1e4 · 2e4) = 5 events.
    let s = sched(Policy::Vanilla, 1, |c| c.rtfreq = 20_000);
    let mut w = s.worker(0);
    let mut rng = FastRng::new(5);
    let ids: Vec<_> = (0..40)
        .map(|i| s.register(i, Flags::NONE, None).unwrap())
        .collect();
    let _ = s.activate(ids[0], Ready::READABLE, None, 0, &mut rng);
    let mut ev = Vec::new();
    assert_eq!(
        s.wait(&mut w, 0, &mut ev, 64),
        1,
        "no history yet: no limit"
    );
    for id in &ids[1..] {
        let _ = s.activate(*id, Ready::READABLE, None, 1, &mut rng);
    }
    // The previous batch of 1 event took 10 µs.
    assert_eq!(s.wait(&mut w, 10_000, &mut ev, 64), 5);
    assert!((s.stats()[0].t_avg_ns - 10_000.0).abs() < 1e-6);
    let s2 = sched(Policy::Vanilla, 1, |c| c.rtfreq = 0);
    assert_eq!(s2.batch_cap(0, 64), 64, "rtfreq 0 means unlimited");
}

#[test]
fn t_avg_is_an_ewma_with_alpha_005() {
    let s = sched(Policy::Vanilla, 1, |_| {});
    let mut w = s.worker(0);
    let mut rng = FastRng::new(6);
    let id = s.register(0, Flags::NONE, None).unwrap();
    let mut ev = Vec::new();
    let mut now = 0;
    let mut expect = 0.0f64;
    for (k, per) in [1_000u64, 3_000, 3_000, 500].iter().enumerate() {
        let _ = s.activate(id, Ready::READABLE, None, now, &mut rng);
        assert_eq!(s.wait(&mut w, now, &mut ev, 4), 1);
        now += per;
        s.release(&mut w, now);
        expect = if k == 0 {
            *per as f64
        } else {
            expect + ALPHA * (*per as f64 - expect)
        };
        assert!((s.stats()[0].t_avg_ns - expect).abs() < 1e-9);
    }
}

#[test]
fn deferred_activation_is_redelivered_after_release_and_coalesces() {
    let s = sched(Policy::Cpu, 2, |_| {});
    let (mut w0, mut w1) = (s.worker(0), s.worker(1));
    let mut rng = FastRng::new(7);
    let id = s.register(42, Flags::NONE, None).unwrap();
    let mut ev = Vec::new();
    assert_eq!(
        queued_on(s.activate(id, Ready::READABLE, Some(0), 0, &mut rng)),
        0
    );
    assert_eq!(
        s.activate(id, Ready::WRITABLE, Some(0), 0, &mut rng),
        Activation::Coalesced
    );
    assert_eq!(s.wait(&mut w0, 1, &mut ev, 8), 1);
    assert_eq!(ev[0].ready, Ready::READABLE | Ready::WRITABLE);
    assert_eq!(s.phase(id), Phase::Busy);
    assert_eq!(
        s.activate(id, Ready::READABLE, Some(1), 2, &mut rng),
        Activation::Deferred
    );
    assert_eq!(s.phase(id), Phase::BusyPending);
    // Nobody else can get it while it is processing.
    assert_eq!(s.wait(&mut w1, 3, &mut ev, 8), 0);
    // w0's next wait releases it; it follows CPU 1 to worker 1.
    assert_eq!(s.wait(&mut w0, 4, &mut ev, 8), 0);
    assert_eq!(s.wait(&mut w1, 5, &mut ev, 8), 1);
    assert_eq!(ev[0].token, 42);
}

#[test]
fn still_ready_redelivers_without_new_readiness() {
    let s = sched(Policy::Vanilla, 1, |_| {});
    let mut w = s.worker(0);
    let mut rng = FastRng::new(8);
    let id = s.register(1, Flags::NONE, None).unwrap();
    let _ = s.activate(id, Ready::READABLE, None, 0, &mut rng);
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut w, 0, &mut ev, 4), 1);
    s.still_ready(&mut w, id);
    assert_eq!(s.wait(&mut w, 1, &mut ev, 4), 1);
    assert!(ev[0].ready.is_readable());
    assert_eq!(s.wait(&mut w, 2, &mut ev, 4), 0);
}

#[test]
fn deregistered_sources_are_never_delivered() {
    let s = sched(Policy::Vanilla, 1, |_| {});
    let mut w = s.worker(0);
    let mut rng = FastRng::new(9);
    let id = s.register(1, Flags::NONE, None).unwrap();
    let _ = s.activate(id, Ready::READABLE, None, 0, &mut rng);
    s.deregister(id).unwrap();
    assert_eq!(s.deregister(id), Err(CoreError::Stale));
    assert_eq!(
        s.activate(id, Ready::READABLE, None, 0, &mut rng),
        Activation::Stale
    );
    // The slot is reused with a new generation; the stale queue entry is dropped.
    let id2 = s.register(2, Flags::NONE, None).unwrap();
    assert_eq!(id2.index(), id.index());
    assert_ne!(id2, id);
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut w, 1, &mut ev, 4), 0);
    let _ = s.activate(id2, Ready::READABLE, None, 2, &mut rng);
    assert_eq!(s.wait(&mut w, 3, &mut ev, 4), 1);
    assert_eq!(ev[0].token, 2);
}

#[test]
fn capacity_is_enforced() {
    let s = sched(Policy::Vanilla, 1, |c| c.capacity = 2);
    s.register(0, Flags::NONE, None).unwrap();
    let b = s.register(1, Flags::NONE, None).unwrap();
    assert_eq!(s.register(2, Flags::NONE, None), Err(CoreError::Full(2)));
    s.deregister(b).unwrap();
    s.register(3, Flags::NONE, None).unwrap();
}

#[test]
fn stealing_skips_processing_and_just_stolen_sources() {
    let s = sched(Policy::Cpu, 3, |c| {
        c.steal = true;
        c.steal_k = 1;
    });
    let (mut w0, mut w1, mut w2) = (s.worker(0), s.worker(1), s.worker(2));
    let mut rng = FastRng::new(10);
    let a = s.register(1, Flags::NONE, None).unwrap();
    let b = s.register(2, Flags::NONE, None).unwrap();
    let mut ev = Vec::new();
    let _ = s.activate(a, Ready::READABLE, Some(0), 0, &mut rng);
    assert_eq!(s.wait(&mut w0, 0, &mut ev, 1), 1); // a is processing on w0
    assert_eq!(
        s.activate(a, Ready::READABLE, Some(0), 1, &mut rng),
        Activation::Deferred
    );
    // a is processing (and pending): not stealable.
    assert_eq!(s.try_steal(&mut w1), Steal::Empty);
    let _ = s.activate(b, Ready::READABLE, Some(0), 2, &mut rng);
    assert_eq!(s.try_steal(&mut w1), Steal::Took(1)); // takes b, never a
                                                      // b sits on w1's queue marked STOLEN: w2 may not take it.
    assert_eq!(s.try_steal(&mut w2), Steal::Nothing);
    assert_eq!(s.wait(&mut w1, 3, &mut ev, 4), 1);
    assert_eq!(ev[0].token, 2);
    let st = s.stats();
    assert_eq!(
        (
            st[1].steals_made,
            st[0].steals_suffered,
            st[1].migrations.steal
        ),
        (1, 1, 1)
    );
    // Once processed and released, the flag is gone: b is stealable again.
    s.release(&mut w1, 4);
    let _ = s.activate(b, Ready::READABLE, Some(0), 5, &mut rng);
    assert_eq!(s.try_steal(&mut w2), Steal::Took(1));
}

#[test]
fn stealing_gives_up_on_a_locked_victim_and_bounds_its_scan() {
    let s = sched(Policy::Cpu, 2, |c| {
        c.steal = true;
        c.steal_k = 1;
    });
    let mut w1 = s.worker(1);
    let mut rng = FastRng::new(11);
    let p1 = s.register(1, Flags::PINNED, Some(0)).unwrap();
    let p2 = s.register(2, Flags::PINNED, Some(0)).unwrap();
    let free = s.register(3, Flags::NONE, None).unwrap();
    for id in [p1, p2, free] {
        let _ = s.activate(id, Ready::READABLE, Some(0), 0, &mut rng);
    }
    {
        let _held = s.queues[0].q.lock().unwrap();
        assert_eq!(s.try_steal(&mut w1), Steal::Busy);
    }
    // k = 1 scans at most 2 entries: both pinned, the third is not reached.
    assert_eq!(s.try_steal(&mut w1), Steal::Nothing);
    assert_eq!(s.queued(0), 3);
}

#[test]
fn after_a_locked_victim_the_next_steal_waits_for_the_lock() {
    let s = sched(Policy::Cpu, 2, |c| c.steal = true);
    let mut w1 = s.worker(1);
    let mut rng = FastRng::new(13);
    let a = s.register(1, Flags::NONE, None).unwrap();
    let _ = s.activate(a, Ready::READABLE, Some(0), 0, &mut rng);
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    std::thread::scope(|t| {
        let s = &s;
        t.spawn(move || {
            let _held = s.queues[0].q.lock().unwrap();
            held_tx.send(()).unwrap();
            // Held well past the thief's next attempt, which must wait
            // for it: retrying the try-lock would spin here (or give up).
            std::thread::sleep(std::time::Duration::from_millis(50));
        });
        held_rx.recv().unwrap();
        assert_eq!(s.try_steal(&mut w1), Steal::Busy);
        assert_eq!(s.try_steal(&mut w1), Steal::Took(1));
    });
    // A complete look clears it: the next attempt try-locks again.
    assert!(!w1.steal_blocked);
}

#[test]
fn vanilla_never_migrates() {
    let s = sched(Policy::Vanilla, 4, |_| {});
    let mut ctxs: Vec<_> = (0..4).map(|w| s.worker(w)).collect();
    let mut rng = FastRng::new(12);
    let ids: Vec<_> = (0..64)
        .map(|i| s.register(i, Flags::NONE, None).unwrap())
        .collect();
    let mut owner = vec![None; 64];
    let mut ev = Vec::new();
    for step in 0..5_000u64 {
        let id = ids[rng.below(64)];
        let _ = s.activate(
            id,
            Ready::READABLE,
            Some(rng.below(4) as u32),
            step,
            &mut rng,
        );
        let w = rng.below(4);
        s.wait(&mut ctxs[w], step, &mut ev, 4);
        for e in &ev {
            let o = owner[e.token as usize].get_or_insert(w);
            assert_eq!(*o, w, "source {} moved from worker {o} to {w}", e.token);
        }
    }
    assert!(s
        .stats()
        .iter()
        .all(|st| st.migrations == Migrations::default()));
    // Round-robin assignment: 16 sources per worker.
    let mut per = [0; 4];
    for o in owner.iter().flatten() {
        per[*o] += 1;
    }
    assert!(per.iter().all(|&n| n <= 16), "{per:?}");
}

#[test]
fn pinned_sources_never_move() {
    let s = sched(Policy::Hybrid, 3, |c| c.steal_k = 8);
    let mut ctxs: Vec<_> = (0..3).map(|w| s.worker(w)).collect();
    let mut rng = FastRng::new(13);
    let pinned: Vec<_> = (0..20)
        .map(|i| s.register(i, Flags::PINNED, Some(1)).unwrap())
        .collect();
    let mut ev = Vec::new();
    // Worker 1 looks terribly loaded; others idle and stealing.
    for step in 0..2_000u64 {
        fake_load(&s, 1, 0, 50, 1e6, s.queues[1].len.load(Ordering::Relaxed));
        let id = pinned[rng.below(20)];
        let _ = s.activate(
            id,
            Ready::READABLE,
            Some(rng.below(3) as u32),
            step,
            &mut rng,
        );
        for w in [0, 2] {
            s.wait(&mut ctxs[w], step, &mut ev, 8);
            assert!(
                ev.is_empty(),
                "worker {w} got pinned source {:?}",
                ev.first()
            );
        }
        if step % 7 == 0 {
            s.wait(&mut ctxs[1], step, &mut ev, 8);
            assert!(ev.iter().all(|e| e.token < 20));
        }
    }
}

#[test]
fn shared_mode_has_one_queue_any_worker_takes_any_event() {
    let s = sched(Policy::Shared, 3, |_| {});
    let mut rng = FastRng::new(15);
    let mut ctxs: Vec<_> = (0..3).map(|w| s.worker(w)).collect();
    for i in 0..9 {
        let id = s.register(i, Flags::NONE, None).unwrap();
        let _ = s.activate(id, Ready::READABLE, Some(0), 0, &mut rng);
    }
    let mut ev = Vec::new();
    assert_eq!(
        s.wait(&mut ctxs[2], 1, &mut ev, 9),
        9,
        "worker 2 sees every queued event"
    );
    assert_eq!(s.queues.len(), 1);
}

#[test]
fn parking_protocol_never_loses_a_wake_up() {
    let s = sched(Policy::Cpu, 2, |_| {});
    let mut rng = FastRng::new(16);
    let w1 = s.worker(1);
    let id = s.register(1, Flags::NONE, None).unwrap();
    assert!(s.prepare_park(&w1));
    assert_eq!(
        s.activate(id, Ready::READABLE, Some(1), 0, &mut rng),
        Activation::Queued {
            worker: 1,
            wake: Some(1)
        }
    );
    assert_eq!(s.stats()[1].wakeups, 1);
    // Work already queued: the worker must not go to sleep.
    assert!(!s.prepare_park(&w1));
    // Shared mode wakes any idle worker.
    let sh = sched(Policy::Shared, 2, |_| {});
    let c0 = sh.worker(0);
    assert!(sh.prepare_park(&c0));
    let id = sh.register(1, Flags::NONE, None).unwrap();
    assert_eq!(
        sh.activate(id, Ready::READABLE, None, 0, &mut rng),
        Activation::Queued {
            worker: 0,
            wake: Some(0)
        }
    );
}

#[test]
fn stealing_wakes_an_idle_thief_when_a_backlog_forms() {
    let s = sched(Policy::Cpu, 3, |c| c.steal = true);
    let mut rng = FastRng::new(17);
    let (mut w0, mut w1, mut w2) = (s.worker(0), s.worker(1), s.worker(2));
    let ids: Vec<_> = (0..4)
        .map(|i| s.register(i, Flags::NONE, None).unwrap())
        .collect();
    // A stealing worker sleeps only after a steal attempt found nothing.
    assert!(!s.prepare_park(&w1), "no steal attempt yet");
    assert_eq!(s.steal(&mut w1), 0);
    assert!(s.prepare_park(&w1));
    assert_eq!(s.steal(&mut w2), 0);
    assert!(s.prepare_park(&w2));
    // Worker 0 is not busy yet: work queued for it wakes nobody (it is
    // about to look at its queue itself).
    let mut ev = Vec::new();
    let _ = s.activate(ids[0], Ready::READABLE, Some(0), 0, &mut rng);
    assert_eq!(s.wait(&mut w0, 1, &mut ev, 1), 1, "worker 0 takes it");
    // Now busy: the next event queued behind it wakes one idle thief.
    let first = s.activate(ids[1], Ready::READABLE, Some(0), 2, &mut rng);
    let Activation::Queued {
        worker: 0,
        wake: Some(thief),
    } = first
    else {
        panic!("expected a thief to be woken: {first:?}");
    };
    assert!(thief == 1 || thief == 2);
    // While it searches, a second push wakes nobody more (one searcher).
    assert_eq!(
        s.activate(ids[2], Ready::READABLE, Some(0), 3, &mut rng),
        Activation::Queued {
            worker: 0,
            wake: None
        }
    );
    // Both pushes left an event behind busy worker 0 and are counted; the
    // first one, taken by worker 0 before it was busy, is not.
    let st = s.stats();
    assert_eq!(st[0].queued_behind_busy, 2);
    assert_eq!(st[1].queued_behind_busy + st[2].queued_behind_busy, 0);
    // The thief takes one (steal_k = 1); work is still queued behind busy
    // worker 0, so it passes the search on to the other idle worker.
    let (t, u) = if thief == 1 {
        (&mut w1, &mut w2)
    } else {
        (&mut w2, &mut w1)
    };
    s.unpark(t);
    assert_eq!(s.steal(t), 1);
    let owed = t.take_wakes();
    assert_eq!(owed, vec![3 - thief], "the chain wakes the other thief");
    // That one takes the last event; nothing is left, nobody else is woken.
    s.unpark(u);
    assert_eq!(s.steal(u), 1);
    assert!(u.take_wakes().is_empty());
    // Idle again with nothing queued anywhere: no wake-ups are owed and
    // both may sleep.
    assert_eq!(s.wait(t, 5, &mut ev, 1), 1);
    assert_eq!(s.wait(u, 5, &mut ev, 1), 1);
    assert_eq!(s.wait(t, 6, &mut ev, 1), 0);
    assert!(s.prepare_park(t));
    assert_eq!(s.wait(u, 6, &mut ev, 1), 0);
    assert!(s.prepare_park(u));
}

#[test]
fn exiting_worker_hands_over_queued_work_and_reports_pinned_sources() {
    let s = sched(Policy::Cpu, 3, |_| {});
    let mut rng = FastRng::new(18);
    let mut ctxs: Vec<_> = (0..3).map(|w| Some(s.worker(w))).collect();
    let ids: Vec<_> = (0..6)
        .map(|i| s.register(i, Flags::NONE, None).unwrap())
        .collect();
    let pinned = s.register(100, Flags::PINNED, Some(2)).unwrap();
    let idle_pinned = s.register(101, Flags::PINNED, Some(2)).unwrap();
    for id in ids.iter().chain([&pinned]) {
        let _ = s.activate(*id, Ready::READABLE, Some(2), 0, &mut rng);
    }
    let mut ev = Vec::new();
    // Worker 2 takes one, then exits with it in flight (and ready again).
    assert_eq!(s.wait(ctxs[2].as_mut().unwrap(), 1, &mut ev, 1), 1);
    let in_flight = ev[0].source;
    let _ = s.activate(in_flight, Ready::READABLE, Some(2), 2, &mut rng);
    let report = s.exit(ctxs[2].take().unwrap(), 3);
    assert_eq!(report.rescheduled, 6, "{report:?}");
    let mut unpinned: Vec<_> = report.unpinned.iter().map(|p| p.1).collect();
    unpinned.sort();
    assert_eq!(unpinned, vec![100, 101]);
    assert!(report.stranded.is_empty());
    assert!(s.stats()[2].exited);
    // Everything (7 sources incl. the in-flight one) reaches workers 0 and 1.
    let mut seen = Vec::new();
    for step in 0..10 {
        for c in ctxs.iter_mut().take(2) {
            s.wait(c.as_mut().unwrap(), 4 + step, &mut ev, 8);
            seen.extend(ev.iter().map(|e| e.token));
        }
    }
    seen.sort();
    assert_eq!(seen, vec![0, 1, 2, 3, 4, 5, 100]);
    // Later activations avoid the dead worker, pinned or not.
    for id in [idle_pinned, ids[0]] {
        let w = queued_on(s.activate(id, Ready::READABLE, Some(2), 20, &mut rng));
        assert!(w < 2);
    }
    assert_eq!(
        s.register(1, Flags::PINNED, Some(2)),
        Err(CoreError::BadWorker(2))
    );
}

#[test]
fn worker_exit_visits_only_the_sources_it_pinned() {
    // A large, mostly free table: 50,000 sources registered and 49,990 of
    // them gone again; worker 1 pinned 4 of the survivors, then unpinned one
    // and deregistered another. Its exit must visit its own pinned sources,
    // not every slot ever used.
    let s = sched(Policy::Hybrid, 2, |_| {});
    let ids: Vec<_> = (0..50_000u64)
        .map(|i| s.register(i, Flags::NONE, Some(0)).unwrap())
        .collect();
    for id in &ids[10..] {
        s.deregister(*id).unwrap();
    }
    let pinned: Vec<_> = (0..4u64)
        .map(|i| s.register(900 + i, Flags::PINNED, Some(1)).unwrap())
        .collect();
    s.modify(pinned[0], 900, Flags::NONE).unwrap();
    s.deregister(pinned[1]).unwrap();
    let _other = s.register(999, Flags::PINNED, Some(0)).unwrap();
    let w1 = s.worker(1);
    let report = s.exit(w1, 0);
    assert_eq!(report.visited, 2, "{report:?}");
    let mut unpinned: Vec<_> = report.unpinned.iter().map(|p| p.1).collect();
    unpinned.sort();
    assert_eq!(unpinned, vec![902, 903]);
    // The table grew with use: freed slots were reused, not a new segment each.
    assert!(
        s.slots_allocated() <= 50_000 + SEGMENT,
        "{}",
        s.slots_allocated()
    );
}

#[test]
fn the_source_table_grows_with_use_and_reuses_freed_slots() {
    let s = sched(Policy::Cpu, 1, |c| c.capacity = 1 << 20);
    assert_eq!(s.slots_allocated(), 0, "nothing is preallocated");
    let a = s.register(1, Flags::NONE, None).unwrap();
    assert_eq!(s.slots_allocated(), SEGMENT);
    s.deregister(a).unwrap();
    // Churn of one live source at a time stays in the first segment.
    for i in 0..10_000 {
        let id = s.register(i, Flags::NONE, None).unwrap();
        s.deregister(id).unwrap();
    }
    assert_eq!(s.slots_allocated(), SEGMENT);
    // A stale id from a segment never allocated is just stale.
    let far = SourceId::new(500_000, 0);
    assert_eq!(s.phase(far), Phase::Free);
    let mut rng = FastRng::new(1);
    assert_eq!(
        s.activate(far, Ready::READABLE, None, 0, &mut rng),
        Activation::Stale
    );
}

#[test]
fn imbalance_is_max_minus_min_over_max() {
    let mk = |b: u64| WorkerStats {
        busy_ns: b,
        ..Default::default()
    };
    assert_eq!(imbalance_of(&[mk(100), mk(54)]), 0.46);
    assert_eq!(imbalance_of(&[mk(0), mk(0)]), 0.0);
}

/// Randomized single-threaded model check, every policy: every activation is
/// followed by a delivery (none lost), no source is delivered to two workers
/// at once, and deliveries never outnumber activations.
#[test]
fn exactly_once_model_every_policy() {
    for mode in [
        "vanilla",
        "shared",
        "queue",
        "cpu+steal",
        "best2",
        "best2+steal",
        "hybrid",
    ] {
        let mut cfg = Config::parse_mode(mode, 4).unwrap();
        cfg.steal_k = 3;
        let s = Scheduler::new(cfg).unwrap();
        let mut ctxs: Vec<_> = (0..4).map(|w| s.worker(w)).collect();
        let mut rng = FastRng::new(19);
        let n = 50;
        let ids: Vec<_> = (0..n)
            .map(|i| {
                let f = if i % 10 == 0 {
                    Flags::HIGH_PRIORITY
                } else {
                    Flags::NONE
                };
                s.register(i as u64, f, Some(i % 4)).unwrap()
            })
            .collect();
        let mut owed = vec![false; n]; // activated and not delivered since
        let mut busy_on: Vec<Option<usize>> = vec![None; n];
        let (mut acts, mut dels) = (0u64, 0u64);
        let mut ev = Vec::new();
        let mut step = 0u64;
        let mut run_wait = |w: usize,
                            step: u64,
                            busy_on: &mut Vec<Option<usize>>,
                            owed: &mut Vec<bool>,
                            dels: &mut u64| {
            for b in busy_on.iter_mut() {
                if *b == Some(w) {
                    *b = None;
                }
            }
            s.wait(&mut ctxs[w], step, &mut ev, 1 + (step as usize % 4));
            for e in &ev {
                let t = e.token as usize;
                assert_eq!(
                    busy_on[t], None,
                    "{mode}: source {t} delivered twice at once"
                );
                busy_on[t] = Some(w);
                owed[t] = false;
                *dels += 1;
            }
        };
        for _ in 0..20_000 {
            step += 1;
            if rng.below(2) == 0 {
                let t = rng.below(n);
                let _ = s.activate(
                    ids[t],
                    Ready::READABLE,
                    Some(rng.below(4) as u32),
                    step,
                    &mut rng,
                );
                owed[t] = true;
                acts += 1;
            } else {
                run_wait(rng.below(4), step, &mut busy_on, &mut owed, &mut dels);
            }
        }
        // Drain: everything owed must come out.
        for _ in 0..200 {
            step += 1;
            for w in 0..4 {
                run_wait(w, step, &mut busy_on, &mut owed, &mut dels);
            }
        }
        assert!(
            owed.iter().all(|o| !o),
            "{mode}: lost activations {:?}",
            owed.iter().positions()
        );
        assert!(
            dels <= acts,
            "{mode}: {dels} deliveries for {acts} activations"
        );
    }
}

trait Positions {
    fn positions(self) -> Vec<usize>;
}
impl<'a, I: Iterator<Item = &'a bool>> Positions for I {
    fn positions(self) -> Vec<usize> {
        self.enumerate()
            .filter(|(_, b)| **b)
            .map(|(i, _)| i)
            .collect()
    }
}

#[test]
fn others_busy_sees_only_live_unparked_peers() {
    let s = sched(Policy::Hybrid, 3, |c| c.steal = true);
    let (mut w0, mut w1, mut w2) = (s.worker(0), s.worker(1), s.worker(2));
    // Nobody parked yet: every peer counts as busy.
    assert!(s.others_busy(0));
    assert_eq!(s.steal(&mut w1), 0);
    assert!(s.prepare_park(&w1));
    assert!(s.others_busy(0), "worker 2 still runs");
    assert_eq!(s.steal(&mut w2), 0);
    assert!(s.prepare_park(&w2));
    assert!(
        !s.others_busy(0),
        "both peers parked: nothing can pile up unseen"
    );
    // Our own state does not count.
    assert_eq!(s.steal(&mut w0), 0);
    assert!(s.prepare_park(&w0));
    assert!(!s.others_busy(0));
    s.unpark(&w2);
    assert!(s.others_busy(0));
    assert!(s.others_busy(1), "worker 2 busy");
    // An exited worker is not busy.
    s.exit(w2, 0);
    assert!(s.stats()[2].exited);
    assert!(!s.others_busy(1), "worker 0 parked, worker 2 gone");
    assert!(!s.others_busy(0), "worker 1 parked, worker 2 gone");
    // A lone worker never has busy peers.
    let one = sched(Policy::Hybrid, 1, |c| c.steal = true);
    assert!(!one.others_busy(0));
}

#[test]
fn pinned_sources_go_to_their_registrar_in_every_mode() {
    for mode in [
        "vanilla",
        "shared",
        "queue",
        "cpu",
        "best2",
        "hybrid",
        "cpu+steal",
        "best2+steal",
    ] {
        let cfg = Config::parse_mode(mode, 3).unwrap();
        let s = Scheduler::new(cfg).unwrap();
        let mut rng = FastRng::new(5);
        let mut ctxs: Vec<_> = (0..3).map(|w| s.worker(w)).collect();
        let pinned = s.register(7, Flags::PINNED, Some(2)).unwrap();
        let other = s.register(8, Flags::NONE, None).unwrap();
        let mut ev = Vec::new();
        // Worker 2 sleeps; worker 0 and 1 are awake and ask first.
        if s.config().steal {
            assert_eq!(s.steal(&mut ctxs[2]), 0);
        }
        assert!(s.prepare_park(&ctxs[2]), "{mode}");
        for round in 0..20u64 {
            let t = 10 * round;
            let a = s.activate(pinned, Ready::READABLE, Some(0), t, &mut rng);
            let _ = s.activate(other, Ready::READABLE, Some(0), t, &mut rng);
            if round == 0 {
                assert_eq!(
                    a,
                    Activation::Queued {
                        worker: if mode == "shared" { 2 } else { s.qidx(2) },
                        wake: Some(2)
                    },
                    "{mode}: the sleeping registrar is woken"
                );
                s.unpark(&ctxs[2]);
            }
            for (w, ctx) in ctxs.iter_mut().enumerate().take(2) {
                s.wait(ctx, t + 1, &mut ev, 4);
                assert!(
                    ev.iter().all(|e| e.token != 7),
                    "{mode}: worker {w} got the source pinned to worker 2"
                );
            }
            assert_eq!(s.wait(&mut ctxs[2], t + 2, &mut ev, 4), {
                ev.iter().filter(|e| e.token == 7).count().max(1)
            });
            assert!(
                ev.iter().any(|e| e.token == 7),
                "{mode}: worker 2 did not get its pinned source"
            );
            for c in ctxs.iter_mut() {
                s.release(c, t + 3);
            }
        }
        // The registrar leaves: its pinned source is unpinned and reported,
        // and the others serve it from then on.
        let w2 = ctxs.pop().unwrap();
        let report = s.exit(w2, 1_000);
        assert_eq!(report.unpinned, vec![(pinned, 7)], "{mode}");
        let _ = s.activate(pinned, Ready::READABLE, Some(2), 1_001, &mut rng);
        let got: usize = (0..2)
            .map(|w| {
                s.wait(&mut ctxs[w], 1_002, &mut ev, 4);
                ev.iter().filter(|e| e.token == 7).count()
            })
            .sum();
        assert_eq!(got, 1, "{mode}: delivered once after the registrar left");
    }
}

#[test]
fn next_is_immediate_only_where_the_source_would_be_the_next_work() {
    // (policy, workers, last, rest only activates, something queued) -> expected
    let cases = [
        // A locality policy keeps the batch's last event's source at the
        // front, ahead of what waits.
        (Policy::Hybrid, 2, true, true, false, true),
        (Policy::Hybrid, 2, true, true, true, true),
        (Policy::Cpu, 2, true, true, true, true),
        (Policy::Queue, 2, true, true, false, true),
        // Not the last event: the policy may give it to another worker.
        (Policy::Hybrid, 2, false, true, false, false),
        // No locality: the policy chooses again.
        (Policy::Shared, 2, true, true, false, false),
        (Policy::Best2, 2, true, true, false, false),
        // A lone worker under any policy, while nothing is queued and the
        // rest of the batch only activates sources.
        (Policy::Shared, 1, false, true, false, true),
        (Policy::Best2, 1, true, true, false, true),
        (Policy::Hybrid, 1, false, true, false, true),
        (Policy::Shared, 1, false, false, false, false),
        (Policy::Shared, 1, false, true, true, false),
        (Policy::Best2, 1, true, true, true, false),
    ];
    for (policy, workers, last, rest, queued, want) in cases {
        let s = sched(policy, workers, |c| c.steal = false);
        if queued {
            let q = s.register(1, Flags::NONE, None).unwrap();
            assert!(s.push(s.qidx(0), q, false, false));
        }
        assert_eq!(
            s.next_is_immediate(0, last, rest),
            want,
            "{policy:?}, {workers} workers, last {last}, rest only activates {rest}, queued {queued}"
        );
    }
    // Once a source was high priority, never.
    let s = sched(Policy::Hybrid, 1, |_| {});
    s.register(1, Flags::HIGH_PRIORITY, None).unwrap();
    assert!(!s.next_is_immediate(0, true, true));
}
