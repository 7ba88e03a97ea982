//! The worker loop's decisions, driven single-threaded (the cross-thread
//! handshakes are loom's, in `tests/loom.rs`).

use crate::*;

fn sched(policy: Policy, workers: usize, groups: usize) -> Scheduler {
    let mut c = Config::new(policy, workers);
    c.capacity = 16;
    c.poll_groups = groups;
    Scheduler::new(c).unwrap()
}

/// Runs `ctx`'s loop from `done` until it asks for something other than
/// waking (which this test does by hand: nobody sleeps here).
fn step(s: &Scheduler, ctx: &mut WorkerCtx, call: &mut WaitCall, done: Done) -> Step {
    let mut out = Vec::new();
    let mut done = done;
    loop {
        match s.next_step(ctx, call, done, 10, &mut out, 4) {
            Step::Wake => {
                let mut w = Vec::new();
                ctx.drain_wakes_into(&mut w);
                done = Done::Woke;
            }
            st => return st,
        }
    }
}

#[test]
fn an_idle_worker_polls_then_the_next_parks_and_delivery_follows_readiness() {
    let s = sched(Policy::Cpu, 2, 1);
    let id = s.register(7, Flags::NONE, None).unwrap();
    let (mut w0, mut w1) = (s.worker(0), s.worker(1));
    let mut c0 = s.begin_wait(&mut w0, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w0, &mut c0, Done::Begin), Step::Poll(None));
    assert_eq!(s.wake_via(0), WakeVia::Doorbell);
    let mut c1 = s.begin_wait(&mut w1, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w1, &mut c1, Done::Begin), Step::Park(None));
    assert_eq!(s.wake_via(1), WakeVia::Parker);
    // The poller harvests readiness for its own CPU and leaves to work.
    let mut rng = s.activator_rng(1);
    let _ = s.activate(id, Ready::READABLE, Some(0), 5, &mut rng);
    assert_eq!(step(&s, &mut w0, &mut c0, Done::Polled), Step::Deliver(1));
    assert_eq!(s.sleeps_ended(), 1);
    assert_eq!(s.loop_steps(), 3);
    // Nobody polls now: the next idle worker takes the role.
    assert!(!s.polled(0));
}

#[test]
fn a_deadline_returns_nothing_and_shutdown_ends_every_wait() {
    let s = sched(Policy::Shared, 2, 1);
    let mut w0 = s.worker(0);
    let mut c0 = s.begin_wait(&mut w0, 0, Some(5), Readiness::Polled);
    assert_eq!(step(&s, &mut w0, &mut c0, Done::Begin), Step::Return);
    let mut c0 = s.begin_wait(&mut w0, 100, None, Readiness::Pushed);
    assert_eq!(step(&s, &mut w0, &mut c0, Done::Begin), Step::Park(None));
    s.shut_down();
    assert_eq!(step(&s, &mut w0, &mut c0, Done::Woke), Step::Return);
}

#[test]
fn a_worker_above_the_elastic_target_leaves_and_rejoins_when_wanted() {
    let s = sched(Policy::Cpu, 2, 1);
    let mut w1 = s.worker(1);
    assert_eq!(s.set_target(1), 1..2);
    let mut c1 = s.begin_wait(&mut w1, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w1, &mut c1, Done::Begin), Step::Surplus);
    assert!(s.is_parked(1) && !s.wanted(1));
    assert_eq!(s.set_target(2), 1..2);
    assert!(s.wanted(1));
    assert_eq!(step(&s, &mut w1, &mut c1, Done::Rejoined), Step::Poll(None));
    assert!(!s.is_parked(1));
}

#[test]
fn poll_groups_split_the_workers_and_promote_within_a_group() {
    let s = sched(Policy::Cpu, 4, 2);
    assert_eq!(s.poll_groups(), 2);
    let groups: Vec<usize> = (0..4).map(|w| s.poll_group(w)).collect();
    assert_eq!(groups, vec![0, 0, 1, 1]);
    let mut ctx: Vec<WorkerCtx> = (0..4).map(|w| s.worker(w)).collect();
    let mut calls: Vec<WaitCall> = ctx
        .iter_mut()
        .map(|c| s.begin_wait(c, 0, None, Readiness::Polled))
        .collect();
    // One poller per group: workers 0 and 2 poll, 1 and 3 park.
    let steps: Vec<Step> = (0..4)
        .map(|w| step(&s, &mut ctx[w], &mut calls[w], Done::Begin))
        .collect();
    assert_eq!(
        steps,
        vec![
            Step::Poll(None),
            Step::Park(None),
            Step::Poll(None),
            Step::Park(None)
        ]
    );
    assert_eq!(s.follower(0), Some(1));
    assert_eq!(s.follower(2), Some(3));
    assert!(s.polled(1) && s.polled(3));
    assert_eq!(s.wake_via(2), WakeVia::Doorbell);
    assert_eq!(s.wake_via(1), WakeVia::Parker);
}

#[test]
fn poll_groups_are_checked() {
    let mut c = Config::new(Policy::Cpu, 4);
    c.poll_groups = 5;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("poll-groups"));
    c.poll_groups = 0;
    assert!(c.validate().is_err());
}
