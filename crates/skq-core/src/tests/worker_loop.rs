//! The worker loop's decisions, driven single-threaded (the cross-thread
//! handshakes are loom's, in `tests/loom.rs`).

use super::{fake_load, queued_on};
use crate::*;

/// Leader/follower (one poller per set).
fn sched(policy: Policy, workers: usize, groups: usize) -> Scheduler {
    sched_pollers(policy, workers, groups, 1)
}

fn sched_pollers(policy: Policy, workers: usize, groups: usize, pollers: usize) -> Scheduler {
    let mut c = Config::new(policy, workers);
    c.capacity = 16;
    c.poll_groups = groups;
    c.pollers = pollers;
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
    assert_eq!(c0.poll_max(), usize::MAX, "the one poller takes the batch");
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
    c.poll_groups = 0; // the policy's choice
    assert!(c.validate().is_ok());
}

#[test]
fn cpu_gets_a_set_per_worker_only_when_each_worker_has_its_own_cpu() {
    let built = |policy: Policy, cpus: &[u32], tune: &dyn Fn(&mut Config)| {
        let mut c = Config::new(policy, cpus.len().max(2));
        c.capacity = 16;
        c.worker_cpus = cpus.to_vec();
        tune(&mut c);
        let s = Scheduler::new(c).unwrap();
        assert_eq!(
            s.config().poll_groups,
            s.poll_groups(),
            "the choice is recorded"
        );
        s.poll_groups()
    };
    assert_eq!(
        Config::new(Policy::Cpu, 2).poll_groups,
        0,
        "the policy chooses"
    );
    assert_eq!(built(Policy::Cpu, &[0, 1], &|_| {}), 2);
    assert_eq!(built(Policy::Cpu, &[3, 1, 2, 0], &|_| {}), 4);
    // Several workers on a CPU: the shared set lets any of them take the
    // CPU's events.
    assert_eq!(built(Policy::Cpu, &[0, 1, 0, 1], &|_| {}), 1);
    // Unknown placement, stealing, or another policy: one shared set.
    assert_eq!(built(Policy::Cpu, &[], &|_| {}), 1);
    assert_eq!(built(Policy::Cpu, &[0, 1], &|c| c.steal = true), 1);
    for p in [
        Policy::Hybrid,
        Policy::Best2,
        Policy::Queue,
        Policy::Vanilla,
    ] {
        assert_eq!(built(p, &[0, 1], &|_| {}), 1, "{p}");
    }
    // One worker: one set either way. An explicit count is kept.
    let mut one = Config::new(Policy::Cpu, 1);
    one.worker_cpus = vec![0];
    assert_eq!(one.effective_poll_groups(), 1);
    assert_eq!(built(Policy::Cpu, &[0, 1], &|c| c.poll_groups = 1), 1);
    assert_eq!(built(Policy::Hybrid, &[0, 1], &|c| c.poll_groups = 2), 2);
}

/// Three workers of `policy`, every idle worker polling one set, all in
/// their blocking poll; two sources registered. Returns the scheduler, the
/// contexts and calls, and the sources.
fn three_polling(policy: Policy) -> (Scheduler, Vec<WorkerCtx>, Vec<WaitCall>, [SourceId; 2]) {
    let s = sched_pollers(policy, 3, 1, 0);
    let a = s.register(1, Flags::NONE, None).unwrap();
    let b = s.register(2, Flags::NONE, None).unwrap();
    let mut ctx: Vec<WorkerCtx> = (0..3).map(|w| s.worker(w)).collect();
    let mut calls: Vec<WaitCall> = ctx
        .iter_mut()
        .map(|c| s.begin_wait(c, 0, None, Readiness::Polled))
        .collect();
    for w in 0..3 {
        assert_eq!(
            step(&s, &mut ctx[w], &mut calls[w], Done::Begin),
            Step::Poll(None)
        );
        // One event per poll: the kernel spreads a burst over the pollers.
        assert_eq!(calls[w].poll_max(), 1);
    }
    (s, ctx, calls, [a, b])
}

#[test]
fn every_idle_worker_polls_by_default_and_the_woken_one_keeps_one_event() {
    assert_eq!(Config::new(Policy::Best2, 2).pollers, DEFAULT_POLLERS);
    let (s, mut ctx, mut calls, [a, b]) = three_polling(Policy::Best2);
    for w in 0..3 {
        assert_eq!(s.wake_via(w), WakeVia::Targeted);
    }
    assert_eq!(s.follower(0), None, "nobody parks");
    // The kernel woke worker 2: its first event stays with it (no wake-up
    // of anyone else), the second goes to another idle worker.
    let mut rng = s.activator_rng(1);
    match s.activate_by(a, Ready::READABLE, None, 5, &mut rng, Some(2)) {
        Activation::Queued { worker, wake } => {
            assert_eq!((worker, wake), (2, Some(2)));
        }
        other => panic!("{other:?}"),
    }
    match s.activate_by(b, Ready::READABLE, None, 5, &mut rng, Some(2)) {
        Activation::Queued { worker, wake } => {
            assert_ne!(worker, 2, "the harvester was claimed by the first");
            assert_eq!(wake, Some(worker));
        }
        other => panic!("{other:?}"),
    }
    // It leaves the set to work while others still poll: no hand-over.
    assert_eq!(
        s.next_step(
            &mut ctx[2],
            &mut calls[2],
            Done::Polled,
            6,
            &mut Vec::new(),
            4
        ),
        Step::Deliver(1)
    );
    assert!(!ctx[2].has_wakes());
    assert!(s.polled(0));
}

/// Three hybrid workers polling one set (one event per poll), all idle:
/// worker 2's harvest keeps `a` and gives `b` to another worker. Returns
/// the scheduler, the contexts and calls, and the sources.
fn harvest_into_the_hand() -> (Scheduler, Vec<WorkerCtx>, Vec<WaitCall>, [SourceId; 2]) {
    let (s, ctx, calls, [a, b]) = three_polling(Policy::Hybrid);
    let mut rng = s.activator_rng(1);
    let a_on = s.activate_harvested(a, Ready::READABLE, None, 5, &mut rng, 2);
    assert_eq!(
        a_on,
        Activation::Queued {
            worker: 2,
            wake: Some(2)
        },
        "the harvester keeps its first event"
    );
    assert_eq!(s.queued(2), 0, "in its hand, not on its queue");
    match s.activate_harvested(b, Ready::READABLE, None, 5, &mut rng, 2) {
        Activation::Queued { worker, wake } => {
            assert_ne!(worker, 2, "the harvester was claimed by the first");
            assert_eq!(wake, Some(worker));
        }
        other => panic!("{other:?}"),
    }
    (s, ctx, calls, [a, b])
}

#[test]
fn the_event_a_poller_keeps_is_delivered_from_its_hand_exactly_once() {
    let (s, mut ctx, mut calls, [a, b]) = harvest_into_the_hand();
    let mut out = Vec::new();
    // Readiness for `a` again while it is kept: coalesced into it.
    let mut rng = s.activator_rng(2);
    assert_eq!(
        s.activate(a, Ready::WRITABLE, None, 5, &mut rng),
        Activation::Coalesced
    );
    let st = s.next_step(&mut ctx[2], &mut calls[2], Done::Polled, 6, &mut out, 4);
    assert_eq!(st, Step::Deliver(1));
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].token, out[0].source), (1, a));
    assert_eq!(out[0].ready, Ready::READABLE | Ready::WRITABLE);
    assert!(!ctx[2].has_wakes(), "others still poll: no hand-over");
    // Busy now: new readiness waits for the release, then comes once more.
    assert_eq!(
        s.activate(a, Ready::READABLE, None, 7, &mut rng),
        Activation::Deferred
    );
    let mut c2 = s.begin_wait(&mut ctx[2], 8, None, Readiness::Polled);
    let mut out = Vec::new();
    let st = s.next_step(&mut ctx[2], &mut c2, Done::Begin, 8, &mut out, 4);
    if !matches!(st, Step::Deliver(_)) {
        out.clear();
    }
    let of = |id| out.iter().filter(|e| e.source == id).count();
    let queued = s.queued(0) + s.queued(1) + s.queued(2);
    assert!(of(a) <= 1 && of(b) <= 1, "{out:?}");
    assert_eq!(
        of(a) + of(b) + queued,
        2,
        "{st:?}: a's redelivery and b each exist once"
    );
    // A poll that keeps nothing shuts the hand: the next activation by
    // worker 2 outside a poll goes through a queue.
    let (s, mut ctx, mut calls, _) = harvest_into_the_hand();
    let mut out = Vec::new();
    assert_eq!(
        s.next_step(&mut ctx[2], &mut calls[2], Done::Polled, 6, &mut out, 4),
        Step::Deliver(1)
    );
    let c = s.register(3, Flags::NONE, None).unwrap();
    let mut rng = s.activator_rng(3);
    let _ = s.activate_harvested(c, Ready::READABLE, None, 7, &mut rng, 2);
    assert_eq!(s.queued(0) + s.queued(1) + s.queued(2), 2, "b and c queued");
}

#[test]
fn an_event_kept_by_a_poll_that_failed_goes_onto_the_pollers_queue() {
    let (s, mut ctx, mut calls, [a, _]) = harvest_into_the_hand();
    s.abort_wait(&mut ctx[2], &mut calls[2], 6);
    assert_eq!(s.queued(2), 1, "queued like any other activation");
    let mut out = Vec::new();
    assert_eq!(s.wait(&mut ctx[2], 7, &mut out, 4), 1);
    assert_eq!(out[0].source, a);
}

#[test]
fn under_cpu_affinity_the_harvester_keeps_only_events_of_its_own_cpu() {
    // Workers 0 and 2 on CPU 0, worker 1 on CPU 1.
    let mut c = Config::new(Policy::Cpu, 3);
    c.capacity = 16;
    c.pollers = 0;
    c.worker_cpus = vec![0, 1, 0];
    let s = Scheduler::new(c).unwrap();
    let a = s.register(1, Flags::NONE, None).unwrap();
    let b = s.register(2, Flags::NONE, None).unwrap();
    let mut ctx: Vec<WorkerCtx> = (0..3).map(|w| s.worker(w)).collect();
    for (w, c) in ctx.iter_mut().enumerate() {
        let mut call = s.begin_wait(c, 0, None, Readiness::Polled);
        assert_eq!(step(&s, c, &mut call, Done::Begin), Step::Poll(None), "{w}");
    }
    let mut rng = s.activator_rng(1);
    // A hint on CPU 1 goes to worker 1 even though worker 0 harvests.
    match s.activate_by(a, Ready::READABLE, Some(1), 5, &mut rng, Some(0)) {
        Activation::Queued { worker, wake } => assert_eq!((worker, wake), (1, Some(1))),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.wake_via(1), WakeVia::Targeted);
    // A hint on CPU 0 stays with the harvester on CPU 0, whichever of the
    // CPU's workers was its home.
    match s.activate_by(b, Ready::READABLE, Some(0), 5, &mut rng, Some(2)) {
        Activation::Queued { worker, wake } => assert_eq!((worker, wake), (2, Some(2))),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_cap_on_pollers_parks_the_rest_and_the_last_poller_hands_over() {
    let s = sched_pollers(Policy::Best2, 3, 1, 2);
    let id = s.register(1, Flags::NONE, None).unwrap();
    let mut ctx: Vec<WorkerCtx> = (0..3).map(|w| s.worker(w)).collect();
    let mut calls: Vec<WaitCall> = ctx
        .iter_mut()
        .map(|c| s.begin_wait(c, 0, None, Readiness::Polled))
        .collect();
    let steps: Vec<Step> = (0..3)
        .map(|w| step(&s, &mut ctx[w], &mut calls[w], Done::Begin))
        .collect();
    assert_eq!(
        steps,
        vec![Step::Poll(None), Step::Poll(None), Step::Park(None)]
    );
    assert_eq!(s.wake_via(2), WakeVia::Parker);
    // Worker 0 takes an event while worker 1 still polls: nobody is handed
    // the poll.
    let mut rng = s.activator_rng(1);
    let _ = s.activate_by(id, Ready::READABLE, None, 5, &mut rng, Some(0));
    assert_eq!(
        s.next_step(
            &mut ctx[0],
            &mut calls[0],
            Done::Polled,
            6,
            &mut Vec::new(),
            4
        ),
        Step::Deliver(1)
    );
    assert!(!ctx[0].has_wakes());
    // Worker 1, the last poller, leaves with work: the parked worker 2 is
    // handed the poll.
    let mut out = Vec::new();
    let b = s.register(2, Flags::NONE, None).unwrap();
    let _ = s.activate_by(b, Ready::READABLE, None, 7, &mut rng, Some(1));
    assert_eq!(
        s.next_step(&mut ctx[1], &mut calls[1], Done::Polled, 8, &mut out, 4),
        Step::Deliver(1)
    );
    assert_eq!(ctx[1].take_wakes(), vec![2]);
}

#[test]
fn with_workers_parked_the_only_poller_takes_the_batch() {
    // The elastic manager sees a backlog only in the core's queues.
    let s = sched_pollers(Policy::Hybrid, 3, 1, 0);
    let _ = s.set_target(2);
    let mut ctx: Vec<WorkerCtx> = (0..2).map(|w| s.worker(w)).collect();
    let mut c0 = s.begin_wait(&mut ctx[0], 0, None, Readiness::Polled);
    assert_eq!(
        step(&s, &mut ctx[0], &mut c0, Done::Begin),
        Step::Poll(None)
    );
    assert_eq!(c0.poll_max(), usize::MAX);
    let mut c1 = s.begin_wait(&mut ctx[1], 0, None, Readiness::Polled);
    assert_eq!(
        step(&s, &mut ctx[1], &mut c1, Done::Begin),
        Step::Poll(None)
    );
    assert_eq!(c1.poll_max(), 1, "a second poller takes one");
}

#[test]
fn pollers_are_checked() {
    let mut c = Config::new(Policy::Cpu, 4);
    c.pollers = 5;
    assert!(c.validate().unwrap_err().to_string().contains("pollers"));
    c.pollers = 4;
    assert!(c.validate().is_ok());
}

/// Hybrid, worker 0 on CPU 0 and worker 1 on CPU 1. Worker 0 learns
/// t_avg = 1,000 ns from one event, then starts a second at t = 1,000 (it is
/// expected to finish at 2,000); worker 1 blocks in the set. At `now`,
/// worker 1 harvests a source hinting CPU 0: returns the chosen worker.
fn hybrid_choice_beside_a_busy_local_worker(now: Nanos) -> WorkerId {
    let mut c = Config::new(Policy::Hybrid, 2);
    c.capacity = 16;
    c.pollers = 0;
    c.worker_cpus = vec![0, 1];
    let s = Scheduler::new(c).unwrap();
    let ids: Vec<SourceId> = (0..3)
        .map(|t| s.register(t, Flags::NONE, None).unwrap())
        .collect();
    let (mut w0, mut w1) = (s.worker(0), s.worker(1));
    let mut rng = s.activator_rng(1);
    let mut out = Vec::new();
    for &id in &ids[..2] {
        let _ = s.activate(id, Ready::READABLE, Some(0), 0, &mut rng);
    }
    assert_eq!(s.wait(&mut w0, 0, &mut out, 1), 1);
    assert_eq!(s.wait(&mut w0, 1_000, &mut out, 1), 1);
    assert_eq!(out[0].source, ids[1]);
    assert_eq!(s.queued(0), 0);
    let mut c1 = s.begin_wait(&mut w1, 1_000, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w1, &mut c1, Done::Begin), Step::Poll(None));
    match s.activate_by(ids[2], Ready::READABLE, Some(0), now, &mut rng, Some(1)) {
        Activation::Queued { worker, .. } => worker,
        other => panic!("{other:?}"),
    }
}

#[test]
fn under_hybrid_an_idle_harvester_takes_an_event_its_overdue_local_worker_would_hold() {
    // Within the penalty (500 ns) of its expected end the local worker keeps
    // the event (cache locality), though worker 1 harvested it.
    assert_eq!(hybrid_choice_beside_a_busy_local_worker(1_800), 0);
    // Further from its end, the harvester's E plus the penalty is lower.
    assert_eq!(hybrid_choice_beside_a_busy_local_worker(1_200), 1);
    // Past its expected end worker 0 is expected to need one more event
    // (E = now + 1,000), and the idle harvester takes the event. SKQ's
    // clamp (E = now, the harvester's own E) kept it on worker 0, queued
    // behind a batch of unknown length.
    assert_eq!(hybrid_choice_beside_a_busy_local_worker(5_000), 1);
}

/// Whether worker 0, with one event queued and no worker blocked in a set,
/// harvests on the way before delivering, after an event of `event_ns`
/// (its `t_avg`), under the configuration `tune` makes and the change
/// `after` makes to the built scheduler.
fn harvests_after(event_ns: u64, tune: impl Fn(&mut Config), after: impl Fn(&Scheduler)) -> bool {
    let mut c = Config::new(Policy::Cpu, 2);
    c.capacity = 16;
    c.pollers = 0;
    c.worker_cpus = vec![0, 1];
    // One shared set unless `tune` says otherwise (cpu would choose one set
    // per worker here).
    c.poll_groups = 1;
    tune(&mut c);
    let s = Scheduler::new(c).unwrap();
    after(&s);
    let a = s.register(1, Flags::NONE, None).unwrap();
    let b = s.register(2, Flags::NONE, None).unwrap();
    let mut rng = s.activator_rng(1);
    let mut w0 = s.worker(0);
    assert_eq!(
        queued_on(s.activate(a, Ready::READABLE, Some(0), 0, &mut rng)),
        0
    );
    assert_eq!(s.wait(&mut w0, 0, &mut Vec::new(), 4), 1);
    assert_eq!(
        queued_on(s.activate(b, Ready::READABLE, Some(0), 5, &mut rng)),
        0
    );
    // Releasing `a` at `event_ns` sets t_avg; then `b` is about to go.
    let mut call = s.begin_wait(&mut w0, event_ns, None, Readiness::Polled);
    match step(&s, &mut w0, &mut call, Done::Begin) {
        Step::Harvest => {
            // The delivery follows the harvest.
            let st = step(&s, &mut w0, &mut call, Done::Harvested);
            assert_eq!(st, Step::Deliver(1));
            true
        }
        Step::Deliver(1) => false,
        other => panic!("{other:?}"),
    }
}

fn harvests_on_the_way(tune: impl Fn(&mut Config), after: impl Fn(&Scheduler)) -> bool {
    harvests_after(100_000, tune, after)
}

#[test]
fn readiness_stays_in_the_one_set_every_idle_worker_polls_and_is_harvested_on_the_way_otherwise() {
    // One set, every idle worker polling: the kernel's list is the FIFO.
    assert!(!harvests_on_the_way(|_| {}, |_| {}));
    // Unless events are short: then batching the harvest wins.
    let short = KERNEL_FIFO_MIN_NS as u64 / 2;
    assert!(harvests_after(short, |_| {}, |_| {}));
    // A cap on pollers (parked followers see nothing in the kernel).
    assert!(harvests_on_the_way(|c| c.pollers = 1, |_| {}));
    // Several sets (other groups' idle workers see only queue entries).
    assert!(harvests_on_the_way(|c| c.poll_groups = 2, |_| {}));
    // Elastic workers parked (the manager sees backlog in queues only).
    assert!(harvests_on_the_way(
        |_| {},
        |s| {
            let _ = s.set_target(1);
        }
    ));
    // A high-priority source exists (its readiness goes first).
    assert!(harvests_on_the_way(
        |_| {},
        |s| {
            let hi = s.register(9, Flags::HIGH_PRIORITY, None).unwrap();
            assert!(s.prioritized());
            let _ = s.deregister(hi);
        }
    ));
    let s = Scheduler::new(Config::new(Policy::Cpu, 2)).unwrap();
    let id = s.register(1, Flags::NONE, None).unwrap();
    assert!(!s.prioritized() && s.kernel_fifo());
    s.set_class(id, Class::High).unwrap();
    assert!(s.prioritized() && !s.kernel_fifo());
}

/// Worker 0 of a one-worker scheduler with `queued` sources queued on it
/// (short events: the harvest on the way would apply): the steps of its
/// next `calls` waits, each delivering at most 4 events, with every
/// harvest answered as if the set were empty.
fn lone_worker_steps(queued: usize, calls: usize, high: bool) -> Vec<Step> {
    let mut c = Config::new(Policy::Hybrid, 1);
    c.capacity = 64;
    c.pollers = 0;
    let s = Scheduler::new(c).unwrap();
    if high {
        let hi = s.register(99, Flags::HIGH_PRIORITY, None).unwrap();
        let _ = s.deregister(hi);
    }
    let mut rng = s.activator_rng(1);
    for k in 0..queued {
        let id = s.register(k as u64, Flags::NONE, None).unwrap();
        assert_eq!(
            queued_on(s.activate(id, Ready::READABLE, Some(0), 0, &mut rng)),
            0
        );
    }
    let mut w0 = s.worker(0);
    let mut steps = Vec::new();
    for t in 0..calls {
        let mut call = s.begin_wait(&mut w0, 1_000 * t as u64, None, Readiness::Polled);
        let mut st = step(&s, &mut w0, &mut call, Done::Begin);
        if st == Step::Harvest {
            steps.push(st);
            st = step(&s, &mut w0, &mut call, Done::Harvested);
        }
        if let Step::Poll(_) = st {
            assert_eq!(call.poll_max(), usize::MAX, "a lone worker takes the batch");
        }
        steps.push(st);
    }
    steps
}

#[test]
fn a_lone_worker_harvests_on_the_way_once_per_bound_and_takes_whole_batches() {
    // 40 queued events, 4 per call: the first 32 go without looking at the
    // set, then one harvest, then the rest; then the empty queue polls.
    let steps = lone_worker_steps(40, 11, false);
    let harvests = steps.iter().filter(|s| **s == Step::Harvest).count();
    assert_eq!(harvests, 1, "{steps:?}");
    let delivered = |steps: &[Step]| -> usize {
        steps
            .iter()
            .map(|s| match s {
                Step::Deliver(n) => *n,
                _ => 0,
            })
            .sum()
    };
    let first_harvest = steps.iter().position(|s| *s == Step::Harvest).unwrap();
    assert_eq!(
        delivered(&steps[..first_harvest]),
        LONE_HARVEST_EVERY,
        "{steps:?}"
    );
    assert_eq!(
        delivered(&steps),
        40,
        "every queued event is delivered once"
    );
    assert_eq!(steps.last(), Some(&Step::Poll(None)));
    // A high-priority source anywhere: the harvest precedes every batch.
    let steps = lone_worker_steps(8, 2, true);
    assert_eq!(
        steps,
        vec![
            Step::Harvest,
            Step::Deliver(4),
            Step::Harvest,
            Step::Deliver(4)
        ]
    );
    // With a second worker the harvest on the way stays before each batch.
    assert!(harvests_after(
        KERNEL_FIFO_MIN_NS as u64 / 2,
        |_| {},
        |_| {}
    ));
}

/// Where a source that became ready again while worker 1 processed it goes
/// when worker 1 releases it, under `policy` with 3 workers: workers 0 and 2
/// are busy, 1 ms into events expected to take 1 ms, and the source's
/// local worker (its CPU hint) is worker 0. Returns the owner of each of 20
/// redeliveries.
fn redeliveries_beside_busy_workers(policy: Policy) -> Vec<usize> {
    let mut c = Config::new(policy, 3);
    c.capacity = 16;
    c.pollers = 0;
    c.worker_cpus = vec![0, 1, 1];
    let s = Scheduler::new(c).unwrap();
    let mut rng = s.activator_rng(7);
    let mut out = Vec::new();
    let (mut w0, mut w1, mut w2) = (s.worker(0), s.worker(1), s.worker(2));
    // Workers 0 and 2: one event of 1 ms done (t_avg), the next started.
    for (w, ctx) in [(0, &mut w0), (2, &mut w2)] {
        let a = s.register(10 + w as u64, Flags::PINNED, Some(w)).unwrap();
        let b = s.register(20 + w as u64, Flags::PINNED, Some(w)).unwrap();
        for id in [a, b] {
            let _ = s.activate(id, Ready::READABLE, None, 0, &mut rng);
        }
        assert_eq!(s.wait(ctx, 0, &mut out, 1), 1);
        assert_eq!(s.wait(ctx, 1_000_000, &mut out, 1), 1);
    }
    let x = s.register(1, Flags::NONE, None).unwrap();
    let mut owners = Vec::new();
    let mut now = 1_000_000;
    // First harvested by worker 1 while it polls (idle): it keeps x.
    assert_eq!(s.steal(&mut w1), 0);
    assert!(s.prepare_park(&w1));
    let first = s.activate_by(x, Ready::READABLE, Some(0), now, &mut rng, Some(1));
    assert_eq!(queued_on(first), 1);
    for _ in 0..20 {
        // Worker 1 takes x; new readiness arrives while it runs.
        assert_eq!(s.wait(&mut w1, now, &mut out, 1), 1);
        assert_eq!(out[0].source, x);
        let a = s.activate(x, Ready::READABLE, Some(0), now + 5, &mut rng);
        assert_eq!(a, Activation::Deferred);
        now += 10;
        // Its release queues x again (the wait that follows takes it).
        s.release(&mut w1, now);
        owners.push((0..3).find(|&w| s.queued(w) == 1).unwrap());
    }
    owners
}

#[test]
fn a_redelivery_stays_with_the_free_worker_that_released_it_rather_than_wait_behind_a_busy_one() {
    // Hybrid: the local worker (0) is busy for another ~1 ms; the releaser
    // is free now and is the rival. Best of two: the releaser is one of
    // the two. Before, the releaser was not a candidate: best of two drew
    // two random workers and queued x behind a busy one about a third of
    // the time (checked: this test fails that way without the change).
    for policy in [Policy::Hybrid, Policy::Best2] {
        let owners = redeliveries_beside_busy_workers(policy);
        assert!(owners.iter().all(|&w| w == 1), "{policy:?}: {owners:?}");
    }
}

/// With stealing on and one set every idle worker polls: worker 0 runs
/// events of `victim_ns` on average and another source is pushed behind it
/// while worker 1, whose events take `thief_ns`, polls. Returns the
/// wake-up the push asked for, worker 1's next step once its poll ends,
/// and what is left queued on worker 0.
fn entry_behind_a_busy_worker(victim_ns: u64, thief_ns: u64) -> (Option<WorkerId>, Step, usize) {
    let mut c = Config::new(Policy::Cpu, 2);
    c.capacity = 16;
    c.pollers = 0;
    c.steal = true;
    c.worker_cpus = vec![0, 1];
    let s = Scheduler::new(c).unwrap();
    let mut rng = s.activator_rng(3);
    let mut out = Vec::new();
    let (mut w0, mut w1) = (s.worker(0), s.worker(1));
    let a = s.register(1, Flags::NONE, None).unwrap();
    let b = s.register(2, Flags::NONE, None).unwrap();
    let c1 = s.register(3, Flags::NONE, None).unwrap();
    let x = s.register(4, Flags::NONE, None).unwrap();
    for (id, cpu) in [(a, 0), (b, 0), (c1, 1)] {
        let _ = s.activate(id, Ready::READABLE, Some(cpu), 0, &mut rng);
    }
    assert_eq!(s.wait(&mut w0, 0, &mut out, 1), 1);
    assert_eq!(s.wait(&mut w0, victim_ns, &mut out, 1), 1); // busy with b
    assert_eq!(s.wait(&mut w1, 0, &mut out, 1), 1);
    assert_eq!(s.wait(&mut w1, thief_ns, &mut out, 1), 0);
    let mut call = s.begin_wait(&mut w1, thief_ns, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w1, &mut call, Done::Begin), Step::Poll(None));
    let wake = match s.activate(x, Ready::READABLE, Some(0), victim_ns + 1, &mut rng) {
        Activation::Queued { worker: 0, wake } => wake,
        other => panic!("{other:?}"),
    };
    let next = step(&s, &mut w1, &mut call, Done::Polled);
    (wake, next, s.queued(0))
}

#[test]
fn where_the_kernels_list_is_the_queue_no_thief_is_woken_and_an_idle_worker_polls_without_stealing()
{
    let long = 5 * KERNEL_FIFO_MIN_NS as u64;
    let short = KERNEL_FIFO_MIN_NS as u64 / 4;
    // Events of 100 us: x waits for worker 0 (its next event) while worker
    // 1 polls the set again; nobody was woken to steal it.
    assert_eq!(
        entry_behind_a_busy_worker(long, long),
        (None, Step::Poll(None), 1)
    );
    // Events of 5 us: the idle worker is woken as a thief and takes x.
    let stolen = (Some(1), Step::Deliver(1), 0);
    assert_eq!(entry_behind_a_busy_worker(short, short), stolen);
    // A victim outside the regime (short events, or none timed yet, as at
    // start-up) gets a thief, and the thief steals though its own events
    // are long: it was woken for this.
    assert_eq!(entry_behind_a_busy_worker(short, long), stolen);
    // A worker outside the regime looks on its own before it sleeps.
    assert_eq!(
        entry_behind_a_busy_worker(long, short),
        (None, Step::Deliver(1), 0)
    );
}

/// Worker 1 of three (hybrid, every idle worker polling, one set) finishes
/// an event with two regular events queued on it while workers 0 and 2 are
/// in the middle of theirs, and a high-priority source `hi` is ready in
/// the set with its CPU hint on worker 0's CPU. Returns the steps and the
/// first delivery of worker 1's wait, and the worker `hi` was queued on.
fn harvest_beside_busy_workers(policy: Policy, hi_flags: Flags) -> (Vec<Step>, Vec<Event>, usize) {
    let mut c = Config::new(policy, 3);
    c.capacity = 16;
    c.pollers = 0;
    c.worker_cpus = vec![0, 1, 1];
    let s = Scheduler::new(c).unwrap();
    let mut rng = s.activator_rng(3);
    let mut out = Vec::new();
    let hi = s.register(100, hi_flags, None).unwrap();
    for w in [0, 2] {
        let mut ctx = s.worker(w);
        let a = s.register(10 + w as u64, Flags::PINNED, Some(w)).unwrap();
        let _ = s.activate(a, Ready::READABLE, None, 0, &mut rng);
        assert_eq!(s.wait(&mut ctx, 0, &mut out, 1), 1);
    }
    for k in 0..2 {
        let r = s.register(20 + k, Flags::PINNED, Some(1)).unwrap();
        assert_eq!(
            queued_on(s.activate(r, Ready::READABLE, None, 0, &mut rng)),
            1
        );
    }
    let mut w1 = s.worker(1);
    let mut call = s.begin_wait(&mut w1, 10, None, Readiness::Polled);
    let mut steps = Vec::new();
    let mut done = Done::Begin;
    let mut owner = usize::MAX;
    loop {
        let st = s.next_step(&mut w1, &mut call, done, 10, &mut out, 1);
        steps.push(st);
        match st {
            Step::Harvest => {
                // The set holds `hi`'s readiness.
                if owner == usize::MAX {
                    owner = queued_on(s.activate_harvested(
                        hi,
                        Ready::READABLE,
                        Some(0),
                        10,
                        &mut rng,
                        1,
                    ));
                }
                done = Done::Harvested;
            }
            Step::Deliver(_) => return (steps, out, owner),
            other => panic!("{other:?} in {steps:?}"),
        }
    }
}

#[test]
fn with_high_priority_sources_a_busy_worker_harvests_before_its_queue_and_takes_the_high_event() {
    // Hybrid: the harvest comes before the fill, the harvester takes the
    // high-priority event although its CPU hint names busy worker 0, and
    // delivers it ahead of the two regular events queued before it.
    for policy in [Policy::Hybrid, Policy::Best2] {
        let (steps, out, owner) = harvest_beside_busy_workers(policy, Flags::HIGH_PRIORITY);
        assert_eq!(steps, vec![Step::Harvest, Step::Deliver(1)], "{policy:?}");
        assert_eq!(owner, 1, "{policy:?}: the free harvester takes it");
        assert_eq!(out.len(), 1);
        assert_eq!(
            out[0].token, 100,
            "{policy:?}: high before the queued regular events"
        );
        assert!(out[0].high);
    }
    // CPU affinity keeps its locality: the event goes to the hinted worker.
    let (_, out, owner) = harvest_beside_busy_workers(Policy::Cpu, Flags::HIGH_PRIORITY);
    assert_eq!(owner, 0);
    assert_ne!(out[0].token, 100);
    // A regular source under hybrid: no high-priority source exists, so
    // the worker fills first and harvests on the way after (the event it
    // delivers is its own queued one).
    let (steps, out, owner) = harvest_beside_busy_workers(Policy::Hybrid, Flags::NONE);
    assert_eq!(steps, vec![Step::Harvest, Step::Deliver(1)]);
    assert_ne!(out[0].token, 100);
    assert_ne!(owner, usize::MAX);
}

#[test]
fn once_a_source_is_high_priority_every_poller_takes_the_whole_batch() {
    let s = sched_pollers(Policy::Hybrid, 2, 1, 0);
    let (mut w0, mut w1) = (s.worker(0), s.worker(1));
    let mut c0 = s.begin_wait(&mut w0, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w0, &mut c0, Done::Begin), Step::Poll(None));
    assert_eq!(
        c0.poll_max(),
        1,
        "one event per poll: a burst wakes several"
    );
    let _ = s.register(1, Flags::HIGH_PRIORITY, None).unwrap();
    let mut c1 = s.begin_wait(&mut w1, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w1, &mut c1, Done::Begin), Step::Poll(None));
    assert_eq!(
        c1.poll_max(),
        usize::MAX,
        "the driver can activate high-priority readiness first only if it takes it"
    );
}

#[test]
fn a_harvested_high_priority_event_goes_to_an_idle_worker_rather_than_pile_on_the_harvester() {
    // Hybrid, two workers: worker 1 harvests a high-priority source whose
    // CPU hint names worker 0, which is idle (about to sleep): the event
    // goes to worker 0, woken, not behind worker 1's queue.
    let mut c = Config::new(Policy::Hybrid, 2);
    c.capacity = 16;
    c.pollers = 0;
    c.worker_cpus = vec![0, 1];
    let s = Scheduler::new(c).unwrap();
    let mut rng = s.activator_rng(5);
    let hi = s.register(100, Flags::HIGH_PRIORITY, None).unwrap();
    let mut w0 = s.worker(0);
    assert_eq!(s.steal(&mut w0), 0);
    assert!(s.prepare_park(&w0));
    let a = s.activate_harvested(hi, Ready::READABLE, Some(0), 10, &mut rng, 1);
    assert_eq!(
        a,
        Activation::Queued {
            worker: 0,
            wake: Some(0)
        }
    );
}

#[test]
fn a_worker_alone_in_its_set_is_woken_by_the_doorbell_without_a_targeted_wake_up() {
    // Unlimited pollers, but one worker per set: one worker in all, or as
    // many poll groups as workers.
    for (workers, groups) in [(1, 1), (2, 2), (4, 4)] {
        let s = sched_pollers(Policy::Hybrid, workers, groups, 0);
        assert!(!s.targeted_wakes(), "{workers} workers, {groups} groups");
        let mut ctx: Vec<WorkerCtx> = (0..workers).map(|w| s.worker(w)).collect();
        for (w, c) in ctx.iter_mut().enumerate() {
            let mut call = s.begin_wait(c, 0, None, Readiness::Polled);
            assert_eq!(step(&s, c, &mut call, Done::Begin), Step::Poll(None));
            assert_eq!(s.wake_via(w), WakeVia::Doorbell, "worker {w}");
        }
    }
    // Two workers share a set: the one to wake is named.
    let s = sched_pollers(Policy::Hybrid, 4, 2, 0);
    assert!(s.targeted_wakes());
    let mut w0 = s.worker(0);
    let mut call = s.begin_wait(&mut w0, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w0, &mut call, Done::Begin), Step::Poll(None));
    assert_eq!(s.wake_via(0), WakeVia::Targeted);
    // One poller per set never needs it.
    assert!(!sched_pollers(Policy::Hybrid, 4, 1, 1).targeted_wakes());
}

#[test]
fn a_poller_of_a_set_of_more_than_eight_takes_the_batch_only_when_events_are_short() {
    let short = KERNEL_FIFO_MIN_NS / 4.0;
    let long = KERNEL_FIFO_MIN_NS * 5.0;
    let big = ONE_EVENT_POLLS_MAX_SET as usize + 1;
    let small = ONE_EVENT_POLLS_MAX_SET as usize;
    // (workers on the one set, the poller's t_avg, the poll's size)
    for (workers, t_avg, expect) in [
        (big, short, usize::MAX),
        (64, short, usize::MAX),
        (big, long, 1),
        (big, 0.0, 1), // nothing timed yet
        (small, short, 1),
        (2, short, 1),
    ] {
        let s = sched_pollers(Policy::Hybrid, workers, 1, 0);
        let mut ctx: Vec<WorkerCtx> = (0..2).map(|w| s.worker(w)).collect();
        for (w, c) in ctx.iter_mut().enumerate() {
            fake_load(&s, w, 0, 0, t_avg, 0);
            let mut call = s.begin_wait(c, 0, None, Readiness::Polled);
            assert_eq!(step(&s, c, &mut call, Done::Begin), Step::Poll(None));
            // Whether or not another worker already polls the set.
            assert_eq!(
                call.poll_max(),
                expect,
                "{workers} workers, t_avg {t_avg} ns, poller {w}"
            );
        }
    }
    // The bound is the configuration's: 64 turns batches off, 0 gives
    // them to every set of several workers; past 64 is refused.
    for (above, workers, expect) in [(64, 64, 1), (0, 2, usize::MAX), (2, 2, 1)] {
        let mut c = Config::new(Policy::Hybrid, workers);
        c.capacity = 16;
        c.batch_polls_above = above;
        let s = Scheduler::new(c).unwrap();
        let mut w0 = s.worker(0);
        fake_load(&s, 0, 0, 0, short, 0);
        let mut call = s.begin_wait(&mut w0, 0, None, Readiness::Polled);
        assert_eq!(step(&s, &mut w0, &mut call, Done::Begin), Step::Poll(None));
        assert_eq!(call.poll_max(), expect, "above {above}, {workers} workers");
    }
    let mut c = Config::new(Policy::Hybrid, 4);
    c.batch_polls_above = 65;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("batch-polls-above"));
    // Sets of 8 out of 16 workers (poll groups) keep one event per poll.
    let s = sched_pollers(Policy::Hybrid, 16, 2, 0);
    let mut w0 = s.worker(0);
    fake_load(&s, 0, 0, 0, short, 0);
    let mut call = s.begin_wait(&mut w0, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut w0, &mut call, Done::Begin), Step::Poll(None));
    assert_eq!(call.poll_max(), 1);
}

/// A lone hybrid worker blocked in its poll, with `n` sources registered
/// (tokens 0..n).
fn lone_polling(n: u64) -> (Scheduler, WorkerCtx, WaitCall, Vec<SourceId>) {
    let s = sched(Policy::Hybrid, 1, 1);
    let ids: Vec<SourceId> = (0..n)
        .map(|t| s.register(t, Flags::NONE, None).unwrap())
        .collect();
    let mut ctx = s.worker(0);
    let mut call = s.begin_wait(&mut ctx, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut ctx, &mut call, Done::Begin), Step::Poll(None));
    assert_eq!(call.poll_max(), usize::MAX, "a lone worker takes the batch");
    (s, ctx, call, ids)
}

#[test]
fn a_lone_worker_keeps_its_harvest_in_its_hand_and_delivers_each_event_once() {
    let (s, mut ctx, mut call, ids) = lone_polling(7);
    let mut rng = s.activator_rng(1);
    // Its poll harvests six events: the first claims its idle bit (its one
    // wake-up), the rest follow it into the hand.
    for (i, &id) in ids[..6].iter().enumerate() {
        let wake = (i == 0).then_some(0);
        assert_eq!(
            s.activate_harvested(id, Ready::READABLE, None, 5, &mut rng, 0),
            Activation::Queued { worker: 0, wake },
            "event {i}"
        );
    }
    assert_eq!(s.queued(0), 0, "all six in the hand");
    // Readiness again for a kept source coalesces into it.
    assert_eq!(
        s.activate(ids[1], Ready::WRITABLE, None, 5, &mut rng),
        Activation::Coalesced
    );
    // An activation from outside the worker meanwhile goes onto its queue.
    assert!(matches!(
        s.activate(ids[6], Ready::READABLE, None, 5, &mut rng),
        Activation::Queued { worker: 0, .. }
    ));
    assert_eq!(s.queued(0), 1);
    // Room for four: the first four kept go out, in harvest order; the
    // other two go onto the queue behind the outsider's.
    let mut out = Vec::new();
    assert_eq!(
        s.next_step(&mut ctx, &mut call, Done::Polled, 6, &mut out, 4),
        Step::Deliver(4)
    );
    let tokens: Vec<u64> = out.iter().map(|e| e.token).collect();
    assert_eq!(tokens, vec![0, 1, 2, 3]);
    assert_eq!(out[1].ready, Ready::READABLE | Ready::WRITABLE);
    assert_eq!(s.queued(0), 3);
    let mut seen = tokens;
    let mut out = Vec::new();
    assert_eq!(s.wait(&mut ctx, 7, &mut out, 4), 3);
    seen.extend(out.iter().map(|e| e.token));
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..7).collect::<Vec<u64>>(),
        "each event exactly once"
    );
    assert_eq!(s.wait(&mut ctx, 8, &mut out, 4), 0, "nothing left");
    // A poll that keeps nothing shuts the hand: an activation by the worker
    // outside a poll goes through its queue.
    let _ = s.activate_harvested(ids[0], Ready::READABLE, None, 9, &mut rng, 0);
    assert_eq!(s.queued(0), 1);
}

#[test]
fn what_a_lone_worker_kept_in_a_poll_that_failed_goes_onto_its_queue() {
    let (s, mut ctx, mut call, ids) = lone_polling(3);
    let mut rng = s.activator_rng(1);
    for &id in &ids {
        let _ = s.activate_harvested(id, Ready::READABLE, None, 5, &mut rng, 0);
    }
    assert_eq!(s.queued(0), 0);
    s.abort_wait(&mut ctx, &mut call, 6);
    assert_eq!(s.queued(0), 3, "queued like any other activation");
    let mut out = Vec::new();
    assert_eq!(s.wait(&mut ctx, 7, &mut out, 8), 3);
    let tokens: Vec<u64> = out.iter().map(|e| e.token).collect();
    assert_eq!(tokens, vec![0, 1, 2], "in harvest order");
}

#[test]
fn a_lone_worker_keeps_nothing_in_its_hand_once_a_source_is_high_priority() {
    let s = sched(Policy::Hybrid, 1, 1);
    let hi = s.register(0, Flags::HIGH_PRIORITY, None).unwrap();
    let lo = s.register(1, Flags::NONE, None).unwrap();
    let mut ctx = s.worker(0);
    let mut call = s.begin_wait(&mut ctx, 0, None, Readiness::Polled);
    assert_eq!(step(&s, &mut ctx, &mut call, Done::Begin), Step::Poll(None));
    let mut rng = s.activator_rng(1);
    // Both go through the queue, so the high-priority one is delivered
    // first even when the regular one was activated before it (the driver
    // activates high priority first, but a class may change meanwhile).
    let _ = s.activate_harvested(lo, Ready::READABLE, None, 5, &mut rng, 0);
    let _ = s.activate_harvested(hi, Ready::READABLE, None, 5, &mut rng, 0);
    assert_eq!(s.queued(0), 2, "nothing in the hand");
    let mut out = Vec::new();
    assert_eq!(
        s.next_step(&mut ctx, &mut call, Done::Polled, 6, &mut out, 4),
        Step::Deliver(2)
    );
    assert_eq!((out[0].token, out[0].high), (0, true));
    assert_eq!(out[1].token, 1);
}
