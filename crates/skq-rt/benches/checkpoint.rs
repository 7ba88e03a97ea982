//! Cost of `skq_rt::checkpoint()` when nothing needs doing (QStack reports
//! 22 ns for its fastcalldown), beside the clock read it is compared with.
//! The calling thread is an installed worker (its first `wait` returned) of
//! a 2-worker instance with another worker polling, so the fast path is
//! taken: the caller's queue is empty and a poller exists.
//!
//! Then the price of a checkpoint with a readiness set per worker
//! (`Config::poll_groups` = workers): nobody polls the caller's set while
//! it works, so every checkpoint harvests it without blocking (one
//! `epoll_wait` with a zero timeout) before finding nothing to hand on
//! (`checkpoint_own_set_empty`). This is what `skq sim --checkpoint-us`
//! charges as one system call per checkpoint.
//!
//! `flock /tmp/skq-measure.lock cargo bench -p skq-rt --bench checkpoint`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use skq_rt::{Config, Events, Policy, Skq};

fn bench(c: &mut Criterion) {
    let skq = Skq::new(Config::new(Policy::Hybrid, 2)).unwrap();
    // Worker 1 blocks in epoll_wait: the poller.
    let s1 = skq.clone();
    let poller = std::thread::spawn(move || {
        let mut w = s1.worker(1);
        let mut ev = Events::with_capacity(1);
        while !s1.is_shutdown() {
            let _ = w.wait(&mut ev, Some(Duration::from_millis(50)));
        }
    });
    let mut w0 = skq.worker(0);
    let mut ev = Events::with_capacity(1);
    w0.wait(&mut ev, Some(Duration::ZERO)).unwrap();
    // Give worker 1 time to become the poller.
    std::thread::sleep(Duration::from_millis(100));
    let mut g = c.benchmark_group("checkpoint");
    g.bench_function("checkpoint_nothing_to_do", |b| {
        b.iter(|| black_box(skq_rt::checkpoint()))
    });
    g.bench_function("clock_read_monotonic", |b| {
        b.iter(|| black_box(skq_rt::sys::cpu::monotonic_ns()))
    });
    g.finish();
    skq.shutdown();
    poller.join().unwrap();
    drop(w0);

    // A set per worker: this thread becomes worker 0 of a second instance
    // (its first wait installs that instance's checkpoint context here).
    let mut cfg = Config::new(Policy::Hybrid, 2);
    cfg.poll_groups = 2;
    let skq = Skq::new(cfg).unwrap();
    assert_eq!(skq.config().poll_groups, 2);
    let mut w0 = skq.worker(0);
    w0.wait(&mut ev, Some(Duration::ZERO)).unwrap();
    let mut g = c.benchmark_group("checkpoint");
    g.bench_function("checkpoint_own_set_empty", |b| {
        b.iter(|| black_box(skq_rt::checkpoint()))
    });
    g.finish();
    skq.shutdown();
    drop(w0);
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
