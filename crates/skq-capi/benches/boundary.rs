//! Per-call cost of the C boundary beside the Rust API, in the same run.
//!
//! `cargo bench -p skq-capi --bench boundary` — each operation is timed
//! through skq-rt directly (the baseline) and through the `skq_*` C
//! functions. A round alternates the two in 15 chunks each and keeps each
//! side's median chunk (the machine may be shared); three rounds; it prints
//! ns per call of every round, the C/Rust ratio of each round and their
//! spread, with the CPU count seen.
//! The operations touch no network: a wait on an idle worker with a zero
//! timeout, a user event's notify + wait + reset round trip, and a stats
//! snapshot.

use std::hint::black_box;
use std::ptr;
use std::time::{Duration, Instant};

use skq_capi::api::*;
use skq_rt::{Config, Events, Flags, Policy, Skq};

const ROUNDS: usize = 3;
const CHUNKS: usize = 15;

fn time(iters: u64, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / iters as f64
}

/// One round: `a` and `b` alternated in CHUNKS chunks; each side's median.
fn round(iters: u64, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..CHUNKS {
        ta.push(time(iters / CHUNKS as u64, &mut a));
        tb.push(time(iters / CHUNKS as u64, &mut b));
    }
    ta.sort_by(f64::total_cmp);
    tb.sort_by(f64::total_cmp);
    (ta[CHUNKS / 2], tb[CHUNKS / 2])
}

fn report(name: &str, rust: &[f64], c: &[f64]) {
    let ratios: Vec<f64> = rust.iter().zip(c).map(|(r, c)| c / r).collect();
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    println!(
        "{name:<22} rust ns/call [{}]  c ns/call [{}]  c/rust [{}]  spread {lo:.3}..{hi:.3}",
        fmt(rust),
        fmt(c),
        ratios
            .iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` would pass
    // nothing: run a tiny round then, so the target stays compiled and run.
    let quick = !std::env::args().any(|a| a == "--bench");
    let iters: u64 = if quick { 1_500 } else { 600_000 };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("boundary: {cpus} CPUs seen, {iters} calls per round, {ROUNDS} rounds");

    // Rust side.
    let rs = Skq::new(Config::new(Policy::Cpu, 1)).unwrap();
    let mut rw = rs.worker(0);
    let mut revs = Events::with_capacity(16);
    let rue = rs.user_event(1, Flags::NONE).unwrap();

    // C side, an identical instance.
    let mut cfg = std::mem::MaybeUninit::<skq_config>::uninit();
    let mut cskq = ptr::null_mut();
    let mut cw = ptr::null_mut();
    let mut cue = ptr::null_mut();
    // SAFETY: every pointer is a valid out-parameter; handles come from the
    // calls before them.
    unsafe {
        assert_eq!(skq_config_init(cfg.as_mut_ptr(), SKQ_POLICY_CPU, 1), 0);
        assert_eq!(skq_new(cfg.as_ptr(), &mut cskq), 0);
        assert_eq!(skq_worker_new(cskq, 0, &mut cw), 0);
        assert_eq!(skq_user_event_new(cskq, 1, 0, &mut cue), 0);
    }
    let mut cevs = [skq_event::default(); 16];
    let mut cstats = [skq_worker_stats::default(); 1];

    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (x, y) = round(
            iters,
            || {
                black_box(rw.wait(&mut revs, Some(Duration::ZERO)).unwrap());
            },
            || {
                // SAFETY: live handle, buffer of 16 events.
                black_box(unsafe { skq_worker_wait(cw, cevs.as_mut_ptr(), 16, 0) });
            },
        );
        a.push(x);
        b.push(y);
    }
    report("wait(timeout 0, idle)", &a, &b);

    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (x, y) = round(
            iters / 10,
            || {
                rue.notify().unwrap();
                assert_eq!(rw.wait(&mut revs, None).unwrap(), 1);
                black_box(rue.reset());
            },
            || {
                // SAFETY: live handles, buffer of 16 events.
                unsafe {
                    skq_user_event_notify(cue);
                    assert_eq!(skq_worker_wait(cw, cevs.as_mut_ptr(), 16, -1), 1);
                    skq_user_event_reset(cue, ptr::null_mut());
                }
            },
        );
        a.push(x);
        b.push(y);
    }
    report("notify+wait+reset", &a, &b);

    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (x, y) = round(
            iters,
            || {
                black_box(rs.stats());
            },
            || {
                // SAFETY: live handle, room for one entry.
                black_box(unsafe { skq_stats(cskq, cstats.as_mut_ptr(), 1) });
            },
        );
        a.push(x);
        b.push(y);
    }
    report("stats", &a, &b);

    drop(rue);
    // SAFETY: live handles, each destroyed once.
    unsafe {
        skq_user_event_free(cue);
        skq_worker_exit(cw, ptr::null_mut());
        skq_free(cskq);
    }
}
