//! Wake-up latency of an idle skq worker: time from `UserEvent::notify()` on
//! another thread to the idle worker's `wait()` returning the event.
//!
//! * `poller`: the only idle worker blocks in `epoll_pwait2` (one hop: the
//!   eventfd write wakes it);
//! * `follower`: the event is pinned to a worker parked on its condition
//!   variable while another idle worker polls (two hops: poller harvests,
//!   then signals the follower).
//!
//! `cargo run --release -p skq-rt --example wakeup [samples]`; prints p50/p99.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use skq_rt::sys::cpu::monotonic_ns;
use skq_rt::{Config, Events, Flags, Skq};

fn measure(follower: bool, samples: usize) -> Vec<u64> {
    let skq = Skq::new(Config::parse_mode("cpu", 2).unwrap()).unwrap();
    let target = if follower { 1 } else { 0 };
    let ev = if follower {
        // Pinned to worker 1; worker 0 idles as the poller.
        let efd = skq_rt::sys::eventfd::EventFd::new().unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&efd);
        skq.register(fd, 1, skq_rt::Interest::READABLE, Flags::PINNED, Some(1))
            .unwrap();
        Arc::new(Source::Raw(efd))
    } else {
        Arc::new(Source::User(skq.user_event(1, Flags::NONE).unwrap()))
    };
    let sent = Arc::new(AtomicU64::new(0));
    let go = Arc::new(Barrier::new(2));
    let mut helpers = Vec::new();
    if follower {
        let mut w0 = skq.worker(0);
        let skq2 = skq.clone();
        helpers.push(thread::spawn(move || {
            let mut e = Events::with_capacity(4);
            while !skq2.is_shutdown() {
                let _ = w0.wait(&mut e, Some(Duration::from_millis(50)));
            }
        }));
    }
    let mut w = skq.worker(target);
    let (sent2, go2, ev2) = (sent.clone(), go.clone(), ev.clone());
    let sender = thread::spawn(move || {
        for _ in 0..samples {
            go2.wait();
            thread::sleep(Duration::from_micros(500)); // let the worker go idle
            sent2.store(monotonic_ns(), Ordering::SeqCst);
            ev2.notify();
        }
    });
    let mut out = Vec::with_capacity(samples);
    let mut e = Events::with_capacity(4);
    for _ in 0..samples {
        go.wait();
        loop {
            let n = w.wait(&mut e, Some(Duration::from_secs(1))).unwrap();
            if n > 0 {
                out.push(monotonic_ns() - sent.load(Ordering::SeqCst));
                ev.reset();
                break;
            }
        }
    }
    sender.join().unwrap();
    skq.shutdown();
    for h in helpers {
        h.join().unwrap();
    }
    out
}

enum Source {
    User(skq_rt::UserEvent),
    Raw(skq_rt::sys::eventfd::EventFd),
}

impl Source {
    fn notify(&self) {
        match self {
            Source::User(u) => u.notify().unwrap(),
            Source::Raw(e) => e.notify().unwrap(),
        }
    }
    fn reset(&self) {
        match self {
            Source::User(u) => {
                u.reset();
            }
            Source::Raw(e) => {
                e.drain();
            }
        }
    }
}

fn main() {
    let samples: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    println!("skq wake-up latency, {samples} samples each, {cores} cores seen");
    for (name, follower) in [("poller (1 hop)", false), ("follower (2 hops)", true)] {
        let mut v = measure(follower, samples);
        v.sort_unstable();
        let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
        println!(
            "{name:<18} p50 {:>7.1} µs  p90 {:>7.1} µs  p99 {:>7.1} µs",
            q(0.5),
            q(0.9),
            q(0.99)
        );
    }
}
