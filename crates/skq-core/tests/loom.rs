//! loom model checks of the cross-thread state machine (BRIEF §7):
//! 1. every readiness is delivered to exactly one worker, none lost;
//! 2. a source is never processed by two workers at once;
//! 3. per-source order: a redelivery never overtakes the delivery in flight.
//!
//! Plus the park/push handshake (no lost wake-up).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p skq-core --test loom --release`
#![cfg(loom)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use skq_core::{Activation, Config, Flags, Phase, Policy, Ready, Scheduler};

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f);
}

/// `model` with another preemption bound (larger models need a smaller one).
fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    b.check(f);
}

fn small(policy: Policy, workers: usize, steal: bool) -> Arc<Scheduler> {
    let mut c = Config::new(policy, workers);
    c.capacity = 4;
    c.steal = steal;
    c.steal_k = 1;
    Arc::new(Scheduler::new(c).unwrap())
}

/// Drains every worker until nothing is queued; returns deliveries.
fn drain(s: &Scheduler, ctxs: &mut [skq_core::WorkerCtx]) -> usize {
    let mut ev = Vec::new();
    let mut n = 0;
    for round in 0..4 {
        for c in ctxs.iter_mut() {
            n += s.wait(c, 100 + round, &mut ev, 4);
        }
    }
    n
}

/// Activation racing the release of the same source: the readiness is
/// either merged into the old delivery's redelivery or queued anew — never
/// lost, never delivered twice at once.
#[test]
fn activation_vs_release() {
    model(|| {
        let s = small(Policy::Cpu, 2, false);
        let id = s.register(1, Flags::NONE, None).unwrap();
        let mut w0 = s.worker(0);
        let mut rng = s.activator_rng(0);
        let _ = s.activate(id, Ready::READABLE, Some(0), 0, &mut rng);
        let mut ev = Vec::new();
        assert_eq!(s.wait(&mut w0, 1, &mut ev, 1), 1);
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let mut rng = s2.activator_rng(1);
            let _ = s2.activate(id, Ready::READABLE, Some(1), 2, &mut rng);
        });
        s.release(&mut w0, 3);
        t.join().unwrap();
        // The second readiness must come out exactly once.
        let mut w1 = s.worker(1);
        let mut ctxs = [w0, w1];
        assert_eq!(drain(&s, &mut ctxs), 1);
        w1 = ctxs.into_iter().nth(1).unwrap();
        let _ = w1;
        assert_eq!(s.phase(id), Phase::Idle);
    });
}

/// A thief stealing while the owner dequeues and an activator re-activates:
/// the source is delivered once, to one worker, and its re-activation is
/// not lost.
#[test]
fn steal_vs_dequeue_vs_activation() {
    model(|| {
        let s = small(Policy::Cpu, 2, true);
        let id = s.register(1, Flags::NONE, None).unwrap();
        let mut rng = s.activator_rng(0);
        let _ = s.activate(id, Ready::READABLE, Some(0), 0, &mut rng);
        let holders = Arc::new(AtomicUsize::new(0));
        let delivered = Arc::new(AtomicUsize::new(0));
        let spawn_worker = |w: usize| {
            let (s, holders, delivered) = (s.clone(), holders.clone(), delivered.clone());
            thread::spawn(move || {
                let mut ctx = s.worker(w);
                let mut ev = Vec::new();
                let n = s.wait(&mut ctx, 1, &mut ev, 1);
                if n == 1 {
                    assert_eq!(
                        holders.fetch_add(1, Ordering::SeqCst),
                        0,
                        "two workers hold the source"
                    );
                    delivered.fetch_add(1, Ordering::SeqCst);
                    holders.fetch_sub(1, Ordering::SeqCst);
                }
                ctx
            })
        };
        let t0 = spawn_worker(0);
        let t1 = spawn_worker(1);
        let _ = s.activate(id, Ready::READABLE, Some(0), 1, &mut rng);
        let c0 = t0.join().unwrap();
        let c1 = t1.join().unwrap();
        let mut ctxs = [c0, c1];
        let later = drain(&s, &mut ctxs);
        let total = delivered.load(Ordering::SeqCst) + later;
        // First readiness delivered once; the second either merged into the
        // first (still queued then) or delivered again afterwards.
        assert!((1..=2).contains(&total), "total {total}");
        assert_eq!(s.phase(id), Phase::Idle);
    });
}

/// A worker exiting while another thread activates sources homed on it:
/// everything ends up delivered by the survivor.
#[test]
fn activation_vs_worker_exit() {
    model(|| {
        let s = small(Policy::Vanilla, 2, false);
        // Vanilla round-robin: a -> worker 0, b -> worker 1.
        let a = s.register(1, Flags::NONE, None).unwrap();
        let b = s.register(2, Flags::NONE, None).unwrap();
        let mut rng = s.activator_rng(0);
        let _ = s.activate(a, Ready::READABLE, None, 0, &mut rng);
        let w0 = s.worker(0);
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let mut rng = s2.activator_rng(1);
            let _ = s2.activate(b, Ready::READABLE, None, 1, &mut rng);
            let _ = s2.activate(a, Ready::READABLE, None, 1, &mut rng);
        });
        let report = s.exit(w0, 2);
        assert!(report.stranded.is_empty());
        t.join().unwrap();
        let mut ctxs = [s.worker(1)];
        assert_eq!(drain(&s, &mut ctxs), 2);
        assert_eq!(s.phase(a), Phase::Idle);
        assert_eq!(s.phase(b), Phase::Idle);
    });
}

/// No lost wake-up: a worker going to sleep and an activation queuing work
/// for it — either the worker sees the work, or the activation names it to
/// be woken.
#[test]
fn park_vs_push() {
    model(|| {
        let s = small(Policy::Cpu, 2, false);
        let id = s.register(1, Flags::NONE, None).unwrap();
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let mut rng = s2.activator_rng(1);
            s2.activate(id, Ready::READABLE, Some(1), 0, &mut rng)
        });
        let w1 = s.worker(1);
        let sleeps = s.prepare_park(&w1);
        let act = t.join().unwrap();
        let woken = matches!(act, Activation::Queued { wake: Some(1), .. });
        assert!(
            !sleeps || woken,
            "worker 1 sleeps with work queued and nobody wakes it"
        );
    });
}

/// The same with a lone worker (one queue, but not the shared mode's): an
/// activation from outside the workers (skq-rt's virtual sources) must
/// claim it. Before the fix its push claimed nobody, and the worker slept
/// with the work queued.
#[test]
fn park_vs_push_lone_worker() {
    for policy in [Policy::Cpu, Policy::Vanilla] {
        model(move || {
            let s = small(policy, 1, false);
            let id = s.register(1, Flags::NONE, None).unwrap();
            let s2 = s.clone();
            let t = thread::spawn(move || {
                let mut rng = s2.activator_rng(1);
                s2.activate(id, Ready::READABLE, Some(0), 0, &mut rng)
            });
            let w0 = s.worker(0);
            let sleeps = s.prepare_park(&w0);
            let act = t.join().unwrap();
            let woken = matches!(act, Activation::Queued { wake: Some(0), .. });
            assert!(
                !sleeps || woken,
                "{policy}: the lone worker sleeps with work queued and nobody wakes it"
            );
        });
    }
}

/// Stealing on demand, no timer: worker 0 is busy with a batch, an
/// activation queues work behind it, and idle worker 1 makes its steal
/// attempt and goes to sleep. Either worker 1 took the work, or it stays
/// awake (it saw the push), or the activation names it to be woken: it never
/// sleeps unwoken while stealable work waits behind a busy worker.
#[test]
fn thief_sleep_vs_push_behind_a_busy_worker() {
    model(|| {
        let s = small(Policy::Cpu, 2, true);
        let busy = s.register(1, Flags::NONE, None).unwrap();
        let id = s.register(2, Flags::NONE, None).unwrap();
        let mut rng = s.activator_rng(0);
        let _ = s.activate(busy, Ready::READABLE, Some(0), 0, &mut rng);
        let mut w0 = s.worker(0);
        let mut ev = Vec::new();
        assert_eq!(s.wait(&mut w0, 1, &mut ev, 1), 1, "worker 0 is busy");
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let mut rng = s2.activator_rng(1);
            s2.activate(id, Ready::READABLE, Some(0), 2, &mut rng)
        });
        let mut w1 = s.worker(1);
        let took = s.steal(&mut w1);
        let sleeps = took == 0 && s.prepare_park(&w1);
        let act = t.join().unwrap();
        let woken = matches!(act, Activation::Queued { wake: Some(1), .. });
        assert!(
            !sleeps || woken,
            "worker 1 sleeps while work waits behind busy worker 0, and nobody wakes it"
        );
    });
}

/// Elastic workers: worker 1 parks and rejoins while worker 0 steals and an
/// activator queues work routed to worker 1. Every activation is delivered
/// exactly once by somebody; nothing is left queued on a closed queue.
#[test]
fn park_and_rejoin_vs_activation_and_stealing() {
    // Three threads: bound preemptions at 2 to keep CI time in hand.
    model_bounded(2, || {
        let s = small(Policy::Cpu, 2, true);
        let a = s.register(1, Flags::NONE, None).unwrap();
        let b = s.register(2, Flags::NONE, None).unwrap();
        let mut rng = s.activator_rng(0);
        // `a` is queued on worker 1 (CPU 1).
        let _ = s.activate(a, Ready::READABLE, Some(1), 0, &mut rng);
        let s1 = s.clone();
        let parker = thread::spawn(move || {
            let mut c1 = s1.worker(1);
            let report = s1.park_worker(&mut c1, 1).unwrap();
            assert!(report.stranded.is_empty());
            assert!(s1.rejoin(&mut c1));
            c1
        });
        let s0 = s.clone();
        let thief = thread::spawn(move || {
            let mut c0 = s0.worker(0);
            let _ = s0.steal(&mut c0);
            c0
        });
        let _ = s.activate(b, Ready::READABLE, Some(1), 2, &mut rng);
        let c1 = parker.join().unwrap();
        let c0 = thief.join().unwrap();
        let mut ctxs = [c0, c1];
        assert_eq!(drain(&s, &mut ctxs), 2);
        assert_eq!(s.phase(a), Phase::Idle);
        assert_eq!(s.phase(b), Phase::Idle);
        assert_eq!(s.live_workers(), 2);
    });
}

/// The worker loop (`Scheduler::next_step`) executed by a model driver:
/// a readiness set with a doorbell (epoll + eventfd) and a parker per
/// worker, all loom condition variables. Two idle workers run the real loop
/// while a "kernel" thread makes one source ready: whoever polls harvests it
/// and the core routes it to worker 1 (its CPU). The loop's handshakes (the
/// poller role, followers, promotion, `wake_via`'s doorbell or parker) must
/// deliver it exactly once and leave nobody asleep for ever: a lost wake-up
/// is a deadlock, which loom reports.
mod worker_loop {
    use loom::sync::{Condvar, Mutex};

    use super::*;
    use skq_core::{Done, Readiness, SourceId, Step, WakeVia, WorkerCtx};

    #[derive(Default)]
    struct SetState {
        ready: Vec<SourceId>,
        doorbell: bool,
        shutdown: bool,
        /// Per worker: a targeted wake-up pending (a blocked signal): it
        /// ends that worker's next blocking poll, or the current one.
        signal: [bool; 2],
    }

    /// The kernel side, modeled.
    struct Os {
        set: Mutex<SetState>,
        set_cv: Condvar,
        parked: [Mutex<bool>; 2],
        park_cv: [Condvar; 2],
    }

    impl Os {
        fn new() -> Os {
            Os {
                set: Mutex::new(SetState::default()),
                set_cv: Condvar::new(),
                parked: [Mutex::new(false), Mutex::new(false)],
                park_cv: [Condvar::new(), Condvar::new()],
            }
        }

        fn wake(&self, s: &Scheduler, w: usize) {
            match s.wake_via(w) {
                WakeVia::Doorbell => {
                    self.set.lock().unwrap().doorbell = true;
                    self.set_cv.notify_all();
                }
                WakeVia::Targeted => {
                    self.set.lock().unwrap().signal[w] = true;
                    self.set_cv.notify_all();
                }
                WakeVia::Parker => {
                    *self.parked[w].lock().unwrap() = true;
                    self.park_cv[w].notify_all();
                }
            }
        }

        fn shutdown(&self, s: &Scheduler) {
            s.shut_down();
            self.set.lock().unwrap().shutdown = true;
            self.set_cv.notify_all();
            for w in 0..2 {
                *self.parked[w].lock().unwrap() = true;
                self.park_cv[w].notify_all();
            }
        }

        /// Takes what the set holds (at most `max` when blocking), blocking
        /// until something is there when `block`; then activates it as
        /// skq-rt's harvest does.
        fn harvest(&self, s: &Scheduler, ctx: &mut WorkerCtx, block: bool, max: usize) {
            let me = ctx.id();
            let ready = {
                let mut g = self.set.lock().unwrap();
                while block && g.ready.is_empty() && !g.doorbell && !g.signal[me] && !g.shutdown {
                    g = self.set_cv.wait(g).unwrap();
                }
                g.doorbell = false;
                let k = if block {
                    g.signal[me] = false;
                    g.ready.len().min(max)
                } else {
                    g.ready.len()
                };
                g.ready.drain(..k).collect::<Vec<_>>()
            };
            for id in ready {
                if let Activation::Queued { wake: Some(w), .. } =
                    s.activate_harvested(id, Ready::READABLE, Some(1), 1, ctx.rng(), me)
                {
                    if w != me {
                        self.wake(s, w);
                    }
                }
            }
        }

        fn park(&self, w: usize) {
            let mut g = self.parked[w].lock().unwrap();
            while !*g {
                g = self.park_cv[w].wait(g).unwrap();
            }
            *g = false;
        }
    }

    /// One `wait` of worker `ctx`, executing the core's steps. Returns the
    /// events delivered (0 after shutdown).
    fn wait(s: &Scheduler, os: &Os, ctx: &mut WorkerCtx) -> usize {
        let mut out = Vec::new();
        let mut call = s.begin_wait(ctx, 0, None, Readiness::Polled);
        let mut done = Done::Begin;
        let mut owed = Vec::new();
        loop {
            let step = s.next_step(ctx, &mut call, done, 1, &mut out, 4);
            ctx.drain_wakes_into(&mut owed);
            for w in owed.drain(..) {
                if w != ctx.id() {
                    os.wake(s, w);
                }
            }
            done = match step {
                Step::Deliver(n) => return n,
                Step::Return => return 0,
                Step::Harvest => {
                    os.harvest(s, ctx, false, usize::MAX);
                    Done::Harvested
                }
                Step::Poll(_) => {
                    os.harvest(s, ctx, true, call.poll_max());
                    Done::Polled
                }
                Step::Park(_) => {
                    os.park(ctx.id());
                    Done::Woke
                }
                Step::Wake => Done::Woke,
                Step::Surplus => unreachable!("no elastic target here"),
            };
        }
    }

    fn cpu_pair(pollers: usize) -> Arc<Scheduler> {
        let mut c = Config::new(Policy::Cpu, 2);
        c.capacity = 4;
        c.pollers = pollers;
        Arc::new(Scheduler::new(c).unwrap())
    }

    /// Runs `body` on two worker threads, each with its context, puts
    /// `ready` in the set, joins them, and returns what `body` counted as
    /// delivered.
    fn run_two<F>(s: &Arc<Scheduler>, ready: SourceId, body: F) -> usize
    where
        F: Fn(usize, &Scheduler, &Os, &mut WorkerCtx, &AtomicUsize) + Send + Sync + 'static,
    {
        let os = Arc::new(Os::new());
        let delivered = Arc::new(AtomicUsize::new(0));
        let body = Arc::new(body);
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (s, os, delivered, body) =
                    (s.clone(), os.clone(), delivered.clone(), body.clone());
                thread::spawn(move || {
                    let mut ctx = s.worker(w);
                    body(w, &s, &os, &mut ctx, &delivered);
                })
            })
            .collect();
        os.set.lock().unwrap().ready.push(ready);
        os.set_cv.notify_all();
        for t in workers {
            t.join().unwrap();
        }
        delivered.load(Ordering::SeqCst)
    }

    /// Two workers run the real loop; one readiness for worker 1's CPU
    /// must be delivered once, to worker 1, with nobody left asleep.
    fn delivers_once_to_its_worker(pollers: usize) {
        model(move || {
            let s = cpu_pair(pollers);
            let id = s.register(1, Flags::NONE, None).unwrap();
            let delivered = run_two(&s, id, |w, s, os, ctx, delivered| {
                let n = wait(s, os, ctx);
                if n > 0 {
                    assert_eq!(w, 1, "routed to worker 1 (its CPU)");
                    delivered.fetch_add(n, Ordering::SeqCst);
                    os.shutdown(s);
                }
            });
            assert_eq!(delivered, 1);
        });
    }

    #[test]
    fn leader_follower_delivers_once_and_loses_no_wake_up() {
        delivers_once_to_its_worker(1);
    }

    #[test]
    fn prioritized_harvest_delivers_once_and_loses_no_wake_up() {
        prioritized_harvest(false);
    }

    /// The same with stealing on: worker 0, idle, looks at worker 1's
    /// queue (the regular event is pinned, so it may not take it).
    #[test]
    fn prioritized_harvest_with_stealing_delivers_once_and_loses_no_wake_up() {
        prioritized_harvest(true);
    }

    /// With a high-priority source (whole-list polls, the harvest before
    /// the fill, the harvester taking the high event): worker 1 has a
    /// regular event queued and a high-priority readiness arrives in the
    /// set. Both are delivered exactly once and nobody is left asleep.
    fn prioritized_harvest(steal: bool) {
        // With stealing the interleavings multiply (a thief's look, its
        // retry on a locked queue, the park): one preemption runs in
        // seconds and still found the thief spinning on a locked queue
        // (`steal.rs`); with two it passes too, in about 400 s here.
        model_bounded(if steal { 1 } else { 3 }, move || {
            let mut c = Config::new(Policy::Hybrid, 2);
            c.capacity = 4;
            c.pollers = 0;
            c.steal = steal;
            let s = Arc::new(Scheduler::new(c).unwrap());
            let hi = s.register(1, Flags::HIGH_PRIORITY, None).unwrap();
            let r = s.register(2, Flags::PINNED, Some(1)).unwrap();
            let mut rng = s.activator_rng(1);
            let _ = s.activate(r, Ready::READABLE, None, 0, &mut rng);
            let delivered = run_two(&s, hi, |_, s, os, ctx, delivered| {
                // Two waits at most: each worker can deliver both.
                for _ in 0..2 {
                    let n = wait(s, os, ctx);
                    if n == 0 {
                        break;
                    }
                    if delivered.fetch_add(n, Ordering::SeqCst) + n == 2 {
                        os.shutdown(s);
                    }
                }
            });
            assert_eq!(delivered, 2);
        });
    }

    /// Both workers may block in the set; a readiness harvested by worker 0
    /// for worker 1 wakes worker 1 by a targeted wake-up, which must not be
    /// lost whether worker 1 is blocked, about to block, or leaving.
    #[test]
    fn several_pollers_deliver_once_and_lose_no_targeted_wake_up() {
        delivers_once_to_its_worker(0);
    }
}
