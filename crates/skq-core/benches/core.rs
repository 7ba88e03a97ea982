//! Cost of one activation -> dequeue -> release cycle through the core, per
//! policy: uncontended (one thread) and with a second thread running the same
//! cycle on another worker at the same time. Baseline beside it: the same
//! cycle through a plain `Mutex<VecDeque>` (what any queue costs).

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use criterion::{criterion_group, criterion_main, Criterion};
use skq_core::{Config, FastRng, Flags, Ready, Scheduler};

const MODES: [&str; 7] = [
    "vanilla",
    "shared",
    "queue",
    "cpu",
    "best2",
    "best2+steal",
    "hybrid",
];

fn cycle(
    s: &Scheduler,
    ctx: &mut skq_core::WorkerCtx,
    rng: &mut FastRng,
    id: skq_core::SourceId,
    cpu: u32,
    now: &mut u64,
    ev: &mut Vec<skq_core::Event>,
) {
    *now += 100;
    let _ = s.activate(id, Ready::READABLE, Some(cpu), *now, rng);
    black_box(s.wait(ctx, *now + 50, ev, 8));
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cycle");
    g.bench_function("baseline-mutex-vecdeque", |b| {
        let q = Mutex::new(VecDeque::with_capacity(64));
        b.iter(|| {
            q.lock().unwrap().push_back(black_box(1u64));
            black_box(q.lock().unwrap().pop_front());
        })
    });
    for mode in MODES {
        // One worker: every activation lands on the measured worker, so the
        // cycle is always activate -> deliver -> release (the policy code
        // still runs in full).
        g.bench_function(format!("{mode}/uncontended"), |b| {
            let s = Scheduler::new(Config::parse_mode(mode, 1).unwrap()).unwrap();
            let mut ctx = s.worker(0);
            let id = s.register(1, Flags::NONE, Some(0)).unwrap();
            let (mut now, mut ev) = (0u64, Vec::with_capacity(8));
            let mut rng = FastRng::new(1);
            b.iter(|| cycle(&s, &mut ctx, &mut rng, id, 0, &mut now, &mut ev));
        });
        g.bench_function(format!("{mode}/contended-2-threads"), |b| {
            let s = Arc::new(Scheduler::new(Config::parse_mode(mode, 2).unwrap()).unwrap());
            let stop = Arc::new(AtomicBool::new(false));
            let other = {
                let (s, stop) = (s.clone(), stop.clone());
                thread::spawn(move || {
                    let mut ctx = s.worker(1);
                    let id = s.register(2, Flags::NONE, Some(1)).unwrap();
                    let (mut now, mut ev) = (0u64, Vec::with_capacity(8));
                    let mut rng = FastRng::new(2);
                    while !stop.load(Ordering::Relaxed) {
                        cycle(&s, &mut ctx, &mut rng, id, 1, &mut now, &mut ev);
                    }
                })
            };
            let mut ctx = s.worker(0);
            let id = s.register(1, Flags::NONE, Some(0)).unwrap();
            let (mut now, mut ev) = (0u64, Vec::with_capacity(8));
            let mut rng = FastRng::new(1);
            b.iter(|| cycle(&s, &mut ctx, &mut rng, id, 0, &mut now, &mut ev));
            stop.store(true, Ordering::Relaxed);
            other.join().unwrap();
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
