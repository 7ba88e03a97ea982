//! What an idle worker would pay to harvest a busy worker's epoll set by
//! nesting it into its own (docs/ARCHITECTURE.md, "An idle worker
//! harvesting a busy owner's set").
//!
//! Times pairs of `epoll_ctl` calls in a loop, each thread on its own
//! objects (nothing shared between threads but the kernel):
//!
//! * `fd`: `ADD` then `DEL` of an eventfd in a set (what moving one source
//!   between sets costs, `Skq::follow_home`);
//! * `nest`: `ADD` then `DEL` of an epoll set (holding `--sources`
//!   eventfds) in another set: the nesting a busy owner's set would need
//!   for every busy spell while another worker idles;
//! * `arm`: `MOD` of a set that stays nested, to `IN | ONESHOT` and back to
//!   no events: arming a permanent nesting instead of adding it.
//!
//! Then the price of nesting on the common path, a wake-up: one thread
//! rings an eventfd, a second (on the other CPU) wakes, takes it and rings
//! back; the second blocks either in the set that holds the eventfd
//! (`direct`) or in a set that nests that set (`nested`), which costs it a
//! second `epoll_wait` (the nested set's, to fetch the source) and the
//! kernel a second readiness callback. Reported: ns per round trip and the
//! waking thread's CPU time per wake-up.
//!
//! With `--threads 2` the two threads run at once, each pinned to its own
//! CPU, on disjoint sets: a figure per thread near the one-thread figure
//! means the calls scale; a much higher one means they serialize on
//! something the threads share.
//!
//! `cargo run --release -p skq-rt --example nest_cost -- [--threads N]
//! [--pairs N] [--sources N] [--runs N] [--only fd|nest|arm|wake]`

use std::os::fd::AsRawFd;
use std::sync::{Arc, Barrier};
use std::thread;

use clap::Parser;

use skq_rt::sys::cpu::monotonic_ns;
use skq_rt::sys::epoll::{self, Epoll};
use skq_rt::sys::eventfd::EventFd;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Fd,
    Nest,
    Arm,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Fd => "fd (ADD+DEL of an eventfd)",
            Op::Nest => "nest (ADD+DEL of an epoll set)",
            Op::Arm => "arm (MOD of a nested set, on and off)",
        }
    }
}

/// Times epoll_ctl pairs (an eventfd added and deleted, an epoll set nested
/// and taken out, a nested set armed and disarmed; ns per pair per thread)
/// and an eventfd wake-up through a set and through a set nesting it.
#[derive(clap::Parser, Debug)]
#[command(name = "nest_cost")]
struct Args {
    /// Threads timing ctl pairs at once, each on its own CPU and sets.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    threads: u32,
    /// Pairs per timed run (a tenth of them for the wake-up round trips).
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(10..))]
    pairs: u64,
    /// Eventfds in the nested set.
    #[arg(long, default_value_t = 64)]
    sources: usize,
    /// Timed runs of each part.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    runs: u32,
    /// Only this part.
    #[arg(long, value_parser = ["fd", "nest", "arm", "wake"])]
    only: Option<String>,
}

/// One thread's objects: an outer set, an inner set holding `sources`
/// eventfds, and a loose eventfd.
struct Kit {
    outer: Epoll,
    inner: Epoll,
    loose: EventFd,
    _held: Vec<EventFd>,
}

impl Kit {
    fn new(sources: usize) -> Kit {
        let inner = Epoll::new().expect("epoll_create1");
        let held: Vec<EventFd> = (0..sources)
            .map(|i| {
                let e = EventFd::new().expect("eventfd");
                inner.add(e.as_raw_fd(), epoll::IN, i as u64).expect("add");
                e
            })
            .collect();
        Kit {
            outer: Epoll::new().expect("epoll_create1"),
            inner,
            loose: EventFd::new().expect("eventfd"),
            _held: held,
        }
    }

    /// ns per pair over `pairs` pairs of `op`.
    fn time(&self, op: Op, pairs: usize) -> f64 {
        let inner = self.inner.as_raw_fd();
        let loose = self.loose.as_raw_fd();
        if op == Op::Arm {
            self.outer.add(inner, 0, 1).expect("nest");
        }
        let t0 = monotonic_ns();
        for _ in 0..pairs {
            match op {
                Op::Fd => {
                    self.outer.add(loose, epoll::IN, 1).expect("add");
                    self.outer.delete(loose).expect("del");
                }
                Op::Nest => {
                    self.outer.add(inner, epoll::IN, 1).expect("nest");
                    self.outer.delete(inner).expect("unnest");
                }
                Op::Arm => {
                    self.outer
                        .modify(inner, epoll::IN | epoll::ONESHOT, 1)
                        .expect("arm");
                    self.outer.modify(inner, 0, 1).expect("disarm");
                }
            }
        }
        let ns = (monotonic_ns() - t0) as f64 / pairs as f64;
        if op == Op::Arm {
            self.outer.delete(inner).expect("unnest");
        }
        ns
    }
}

/// Round trips between a ringer on `cpus[0]` and a waiter on `cpus[1]`
/// that blocks in the eventfd's set or in a set nesting it; returns (ns per
/// round trip, the waiter's CPU ns per wake-up).
fn wake(nested: bool, trips: usize, cpus: &[u32]) -> (f64, f64) {
    let to_waiter = Arc::new(EventFd::new().expect("eventfd"));
    let to_ringer = Arc::new(EventFd::new().expect("eventfd"));
    let go = Arc::new(Barrier::new(2));
    let (tw, tr, g2) = (to_waiter.clone(), to_ringer.clone(), go.clone());
    let cpu_w = cpus.get(1).or(cpus.first()).copied();
    let waiter = thread::spawn(move || {
        if let Some(c) = cpu_w {
            let _ = skq_rt::sys::cpu::pin_current_thread(c);
        }
        let inner = Epoll::new().expect("epoll_create1");
        inner.add(tw.as_raw_fd(), epoll::IN, 7).expect("add");
        let outer = Epoll::new().expect("epoll_create1");
        outer.add(inner.as_raw_fd(), epoll::IN, 8).expect("nest");
        let mut evs = Vec::with_capacity(8);
        g2.wait();
        let c0 = skq_rt::sys::cpu::thread_cputime_ns();
        for _ in 0..trips {
            loop {
                let n = if nested {
                    let n = outer.wait(&mut evs, -1).expect("wait");
                    if n == 0 {
                        continue;
                    }
                    inner.wait(&mut evs, 0).expect("harvest")
                } else {
                    inner.wait(&mut evs, -1).expect("wait")
                };
                if n > 0 {
                    break;
                }
            }
            tw.drain();
            tr.notify().expect("notify");
        }
        skq_rt::sys::cpu::thread_cputime_ns() - c0
    });
    if let Some(&c) = cpus.first() {
        let _ = skq_rt::sys::cpu::pin_current_thread(c);
    }
    go.wait();
    let t0 = monotonic_ns();
    for _ in 0..trips {
        to_waiter.notify().expect("notify");
        while !to_ringer.wait_readable(-1).expect("poll") {}
        to_ringer.drain();
    }
    let ns = (monotonic_ns() - t0) as f64 / trips as f64;
    let cpu = waiter.join().unwrap() as f64 / trips as f64;
    (ns, cpu)
}

fn main() {
    let a = Args::parse();
    let (threads, pairs, runs) = (a.threads as usize, a.pairs as usize, a.runs as usize);
    let cpus = skq_rt::sys::cpu::allowed_cpus().unwrap_or_default();
    println!(
        "nest_cost: {} thread(s), {} pairs per run, inner set of {} eventfds, {} runs, CPUs allowed {:?}",
        a.threads, a.pairs, a.sources, a.runs, cpus
    );
    let wanted = |name: &str| !matches!(a.only.as_deref(), Some(o) if o != name);
    for (op, name) in [(Op::Fd, "fd"), (Op::Nest, "nest"), (Op::Arm, "arm")] {
        if !wanted(name) {
            continue;
        }
        let mut per_run = Vec::new();
        for _ in 0..runs {
            let go = Arc::new(Barrier::new(threads));
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let go = go.clone();
                    let cpu = cpus.get(t % cpus.len().max(1)).copied();
                    let sources = a.sources;
                    thread::spawn(move || {
                        if let Some(c) = cpu {
                            let _ = skq_rt::sys::cpu::pin_current_thread(c);
                        }
                        let kit = Kit::new(sources);
                        kit.time(op, pairs / 10); // warm
                        go.wait();
                        kit.time(op, pairs)
                    })
                })
                .collect();
            let ns: Vec<f64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            per_run.push(ns.iter().sum::<f64>() / ns.len() as f64);
        }
        let text: Vec<String> = per_run.iter().map(|v| format!("{v:.0}")).collect();
        let mut s = per_run.clone();
        s.sort_by(f64::total_cmp);
        println!(
            "{:<40} ns per pair per thread: median {:.0} (runs {})",
            op.name(),
            s[s.len() / 2],
            text.join(", ")
        );
    }
    let trips = (pairs / 10).max(1);
    for nested in [false, true] {
        if !wanted("wake") {
            break;
        }
        let runs: Vec<(f64, f64)> = (0..runs).map(|_| wake(nested, trips, &cpus)).collect();
        let mut rt: Vec<f64> = runs.iter().map(|r| r.0).collect();
        let mut cpu: Vec<f64> = runs.iter().map(|r| r.1).collect();
        rt.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        println!(
            "wake-up, waiter blocked {:<28} round trip median {:.0} ns (range {:.0}-{:.0}), waiter CPU per wake-up median {:.0} ns (range {:.0}-{:.0}), {} trips per run",
            if nested { "in a set nesting the set" } else { "in the eventfd's set" },
            rt[rt.len() / 2],
            rt[0],
            rt[rt.len() - 1],
            cpu[cpu.len() / 2],
            cpu[0],
            cpu[cpu.len() - 1],
            trips
        );
    }
}
