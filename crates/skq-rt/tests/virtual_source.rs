//! Virtual sources (no fd, activated directly): every activation is
//! followed by a delivery, whoever activates (foreign threads, workers, the
//! source's own handler) and however the workers sleep (pollers, parked
//! followers, elastic surplus), under every scheduling mode. Counted, not
//! timed: each activator bumps a counter before activating, each handler
//! reads it, and the test waits (with a deadline that fails, never hangs)
//! until every handler has seen its counter's final value.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use skq_rt::{Activation, Config, Events, Flags, Phase, Skq, VirtualSource, VIRTUAL_READY};

/// Sources activated from foreign threads: tokens `0..FOREIGN`.
const FOREIGN: usize = 4;
/// Two relay sources whose handlers activate each other: tokens 4 and 5.
const RELAY: usize = FOREIGN;
/// A source whose handler activates itself while it is processed: token 6.
const SELF: usize = FOREIGN + 2;
const SOURCES: usize = FOREIGN + 3;
/// Hops of the relay and re-activations of the self source.
const HOPS: u64 = 300;
const WORKERS: usize = 3;
/// Any wait below ends the test with a failure after this long.
const DEADLINE: Duration = Duration::from_secs(30);

struct Shared {
    sources: Vec<VirtualSource>,
    /// Per source: bumped by the activator before each activation.
    bumped: Vec<AtomicU64>,
    /// Per source: the highest `bumped` value a handler read.
    seen: Vec<AtomicU64>,
    delivered: Vec<AtomicU64>,
}

impl Shared {
    fn activate(&self, i: usize) {
        self.bumped[i].fetch_add(1, Ordering::SeqCst);
        let a = self.sources[i].activate();
        assert_ne!(a, Activation::Stale, "a live source's activation is stale");
    }

    /// Waits until the handler of every source in `which` has seen its
    /// counter's current value.
    fn settle(&self, what: &str, which: std::ops::Range<usize>) {
        let start = Instant::now();
        loop {
            let lagging: Vec<_> = which
                .clone()
                .filter(|&i| {
                    self.seen[i].load(Ordering::SeqCst) < self.bumped[i].load(Ordering::SeqCst)
                })
                .collect();
            if lagging.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{what}: activations of sources {lagging:?} never delivered \
                 (bumped {:?}, seen {:?})",
                self.bumped,
                self.seen
            );
            thread::sleep(Duration::from_micros(200));
        }
    }
}

fn handle(sh: &Shared, token: usize) {
    let b = sh.bumped[token].load(Ordering::SeqCst);
    sh.seen[token].fetch_max(b, Ordering::SeqCst);
    sh.delivered[token].fetch_add(1, Ordering::SeqCst);
    // Activations from a worker: the relay hands over to its twin, the self
    // source re-activates itself while it is being processed.
    if (RELAY..RELAY + 2).contains(&token) {
        let total =
            sh.bumped[RELAY].load(Ordering::SeqCst) + sh.bumped[RELAY + 1].load(Ordering::SeqCst);
        if total < HOPS {
            sh.activate(RELAY + (token - RELAY + 1) % 2);
        }
    } else if token == SELF && b < HOPS {
        sh.activate(SELF);
    }
}

/// Shuts the instance down when dropped, so a failed assertion ends the
/// workers' waits instead of leaving them blocked.
struct ShutdownOnDrop(Arc<Skq>);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

fn run(name: &str, cfg: Config) {
    let skq = Skq::new(cfg).unwrap();
    let guard = ShutdownOnDrop(skq.clone());
    let sources = (0..SOURCES)
        .map(|t| skq.virtual_source(t as u64, Flags::NONE).unwrap())
        .collect();
    let sh = Arc::new(Shared {
        sources,
        bumped: (0..SOURCES).map(|_| AtomicU64::new(0)).collect(),
        seen: (0..SOURCES).map(|_| AtomicU64::new(0)).collect(),
        delivered: (0..SOURCES).map(|_| AtomicU64::new(0)).collect(),
    });
    let n = skq.config().workers;
    let workers: Vec<_> = (0..n)
        .map(|w| {
            let mut worker = skq.worker(w);
            let (sh, skq) = (sh.clone(), skq.clone());
            thread::spawn(move || {
                let mut events = Events::with_capacity(4);
                // No timeout: a worker that polled its queue by timer would
                // hide a lost wake-up. Shutdown ends the wait.
                loop {
                    let n = worker.wait(&mut events, None).unwrap();
                    if n == 0 && skq.is_shutdown() {
                        return;
                    }
                    for ev in &events {
                        assert_eq!(ev.ready, VIRTUAL_READY);
                        let t = ev.token as usize;
                        assert_eq!(ev.source, sh.sources[t].id());
                        handle(&sh, t);
                    }
                }
            })
        })
        .collect();

    // 1. One at a time from a foreign thread, every worker idle (pollers
    //    blocked, followers parked) in between; half of it with only one
    //    worker active (the others parked as elastic surplus).
    thread::sleep(Duration::from_millis(20));
    for k in 0..24 {
        if k == 12 {
            skq.set_active(1);
        }
        let i = k % FOREIGN;
        sh.activate(i);
        sh.settle(&format!("{name}: idle round {k}"), i..i + 1);
        thread::sleep(Duration::from_millis(2));
    }
    skq.set_active(n);

    // 2. Bursts from several foreign threads at once.
    let bursts: Vec<_> = (0..3)
        .map(|t| {
            let sh = sh.clone();
            thread::spawn(move || {
                for k in 0..3000 {
                    sh.activate((t + k) % FOREIGN);
                    if k % 500 == 0 {
                        thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        })
        .collect();
    for b in bursts {
        b.join().unwrap();
    }
    sh.settle(&format!("{name}: foreign bursts"), 0..FOREIGN);

    // 3. From workers: the relay and the self-activating source.
    sh.activate(RELAY);
    sh.activate(SELF);
    let start = Instant::now();
    while sh.bumped[RELAY].load(Ordering::SeqCst) + sh.bumped[RELAY + 1].load(Ordering::SeqCst)
        < HOPS
        || sh.bumped[SELF].load(Ordering::SeqCst) < HOPS
    {
        assert!(
            start.elapsed() < DEADLINE,
            "{name}: activations from workers stalled (bumped {:?})",
            sh.bumped
        );
        thread::sleep(Duration::from_micros(200));
    }
    sh.settle(&format!("{name}: worker activations"), RELAY..SOURCES);

    // Coalescing: never more deliveries than activations, at least one
    // per source activated.
    for i in 0..SOURCES {
        let (d, b) = (
            sh.delivered[i].load(Ordering::SeqCst),
            sh.bumped[i].load(Ordering::SeqCst),
        );
        assert!(
            d >= 1 && d <= b,
            "{name}: source {i}: {d} deliveries for {b} activations"
        );
    }
    drop(guard); // shuts the instance down
    for w in workers {
        w.join().unwrap();
    }
}

#[test]
fn every_activation_is_delivered_in_every_mode() {
    for mode in [
        "vanilla",
        "shared",
        "queue",
        "cpu",
        "cpu+steal",
        "best2",
        "best2+steal",
        "hybrid",
        "hybrid-steal",
    ] {
        run(mode, Config::parse_mode(mode, WORKERS).unwrap());
    }
}

#[test]
fn every_activation_is_delivered_to_a_lone_worker() {
    // One worker, one queue: the activation must still claim it (its queue
    // is not a shared one) and wake it from its poll.
    for mode in ["vanilla", "shared", "cpu", "best2", "hybrid"] {
        run(
            &format!("{mode}, one worker"),
            Config::parse_mode(mode, 1).unwrap(),
        );
    }
}

#[test]
fn every_activation_is_delivered_with_several_pollers_and_sets() {
    for (name, pollers, groups) in [
        ("cpu, every idle worker polls", 0, 1),
        ("hybrid, every idle worker polls", 0, 1),
        ("cpu, a set per worker", 1, WORKERS),
        ("hybrid, two pollers per set of two sets", 2, 2),
    ] {
        let mode = name.split(',').next().unwrap();
        let mut cfg = Config::parse_mode(mode, WORKERS).unwrap();
        cfg.pollers = pollers;
        cfg.poll_groups = groups;
        run(name, cfg);
    }
}

#[test]
fn a_dropped_source_is_never_delivered_to_the_slot_s_next_owner() {
    let skq = Skq::new(Config::parse_mode("cpu", 1).unwrap()).unwrap();
    let mut worker = skq.worker(0);
    let mut events = Events::with_capacity(8);
    let old = skq.virtual_source(1, Flags::NONE).unwrap();
    let old_id = old.id();
    assert!(matches!(old.activate(), Activation::Queued { .. }));
    assert_eq!(old.activate(), Activation::Coalesced);
    drop(old); // queued: its delivery is dropped
    let new = skq.virtual_source(2, Flags::NONE).unwrap();
    assert_eq!(new.id().index(), old_id.index(), "the slot is reused");
    assert_ne!(new.id(), old_id);
    assert_eq!(skq.core().phase(old_id), Phase::Free);
    let mut rng = skq.core().activator_rng(1);
    assert_eq!(
        skq.core()
            .activate(old_id, VIRTUAL_READY, None, 0, &mut rng),
        Activation::Stale
    );
    let n = worker
        .wait(&mut events, Some(Duration::from_millis(50)))
        .unwrap();
    assert_eq!(n, 0, "the dropped source was delivered: {events:?}");
    // The new owner's own activation is delivered, with its token.
    let _ = new.activate();
    assert_eq!(worker.wait(&mut events, Some(DEADLINE)).unwrap(), 1);
    let ev = events.iter().next().unwrap();
    assert_eq!(
        (ev.token, ev.source, ev.ready),
        (2, new.id(), VIRTUAL_READY)
    );
    // Activated while being processed: redelivered once after release.
    assert_eq!(new.activate(), Activation::Deferred);
    assert_eq!(new.activate(), Activation::Deferred);
    assert_eq!(worker.wait(&mut events, Some(DEADLINE)).unwrap(), 1);
    assert_eq!(
        worker
            .wait(&mut events, Some(Duration::from_millis(50)))
            .unwrap(),
        0
    );
}

#[test]
fn pinned_needs_a_worker_and_goes_to_it() {
    let skq = Skq::new(Config::parse_mode("hybrid", 2).unwrap()).unwrap();
    let e = skq.virtual_source(1, Flags::PINNED).unwrap_err();
    assert!(e.to_string().contains("Worker::virtual_source"), "{e}");
    let mut w1 = skq.worker(1);
    let pinned = w1.virtual_source(3, Flags::PINNED).unwrap();
    let mut events = Events::with_capacity(4);
    for _ in 0..5 {
        let a = pinned.activate();
        assert!(matches!(a, Activation::Queued { worker: 1, .. }), "{a:?}");
        assert_eq!(w1.wait(&mut events, Some(DEADLINE)).unwrap(), 1);
        assert_eq!(events.iter().next().unwrap().token, 3);
        w1.release();
    }
}
