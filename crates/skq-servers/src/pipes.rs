//! SKQ's pipe scalability benchmark (SKQ paper §6.1).
//!
//! Each worker registers 12 socketpairs that are always readable (one byte
//! is written once and never read), so every event is immediately ready
//! again: the handler serves a fixed service time (5 µs by default, spun on
//! the CPU or emulated by an absolute-deadline sleep), calls `still_ready`,
//! and the source is redelivered after the worker's next `wait`. Throughput
//! (events/s) therefore measures the event path itself: harvest, scheduling
//! decision, queue, delivery and release. Configurations are compared with a
//! baseline measured in the same run (`--baseline`, default `epoll-1to1`).
//!
//! Besides every skq mode, two plain-Linux baselines run the same loop with
//! no skq scheduling: `epoll-1to1` (each worker its own epoll holding its own
//! pipes, level-triggered, as a 1:1 server would) and `epoll-shared` (one
//! epoll set holding every pipe with `EPOLLONESHOT`, each worker waiting on
//! it and re-arming each pipe after serving it: the Linux floating model).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use skq_net::Mode;
use skq_rt::{Events, Flags, Interest, Skq};

use crate::service::{Deliver, ServiceMode};

/// `skq pipes` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct PipesArgs {
    /// Modes to compare: skq modes, epoll-1to1 and epoll-shared.
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = pipe_mode,
        default_value = "epoll-1to1,epoll-shared,vanilla,shared,cpu"
    )]
    pub modes: Vec<Mode>,
    /// The mode every ratio is taken against (measured in the same run).
    #[arg(long, value_parser = pipe_mode, default_value = "epoll-1to1")]
    pub baseline: Mode,
    /// Worker counts for spun service.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub workers: Vec<usize>,
    /// Per-event service time for spun service, µs.
    #[arg(long, default_value_t = 5.0)]
    pub spin_us: f64,
    /// Worker count for the emulated-service run (0 = skip it).
    #[arg(long, default_value_t = 8)]
    pub emulated_workers: usize,
    /// Per-event service time for the emulated run, µs (sleep overshoot on
    /// VMs is ~40–80 µs, so keep this well above that).
    #[arg(long, default_value_t = 500.0)]
    pub emulated_us: f64,
    /// Pipes per worker.
    #[arg(long, default_value_t = 12)]
    pub pipes_per_worker: usize,
    /// Seconds per configuration.
    #[arg(long, default_value_t = 2.0)]
    pub duration: f64,
    /// Pin worker w to its CPU.
    #[arg(long)]
    pub pin: bool,
    /// skq modes: in an epoll set of more than this many workers, a poller
    /// whose events are short takes every ready event instead of one
    /// (0..=64; 64: never; default 8, the core's).
    #[arg(long)]
    pub batch_polls_above: Option<usize>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// One measured configuration.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PipeResult {
    /// Mode name.
    pub mode: String,
    /// Workers.
    pub workers: usize,
    /// spin or emulate.
    pub service: String,
    /// Per-event service, µs.
    pub service_us: f64,
    /// Events per second over the run.
    pub events_per_s: f64,
    /// Events per second relative to the baseline at the same workers and service.
    pub ratio_to_baseline: Option<f64>,
    /// Imbalance of busy time between workers.
    pub imbalance: f64,
    /// skq modes: the core's `batch_polls_above` the run used (`None` for
    /// the epoll baselines).
    pub batch_polls_above: Option<usize>,
    /// Steals over the run.
    pub steals: u64,
}

/// One configuration's shape, whatever serves it.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Worker threads.
    pub workers: usize,
    /// Spin or emulate.
    pub service: ServiceMode,
    /// Per-event service (ns).
    pub service_ns: u32,
    /// Always-readable pipes per worker.
    pub pipes_per_worker: usize,
    /// How long to count.
    pub duration: Duration,
    /// Pin worker w to its CPU.
    pub pin: bool,
    /// skq modes: `Config::batch_polls_above` (`None`: the core's default).
    pub batch_polls_above: Option<usize>,
}

/// A mode the pipe benchmark runs, parsed once at the flag: an skq policy
/// (with its steal setting), `epoll-1to1` or `epoll-shared`.
pub fn pipe_mode(s: &str) -> Result<Mode, String> {
    match s.parse::<Mode>().map_err(|e| e.to_string())? {
        m @ (Mode::Skq { .. } | Mode::Epoll1to1 | Mode::EpollShared) => Ok(m),
        _ => Err(format!(
            "`{s}`: the pipe benchmark runs skq modes, epoll-1to1 and epoll-shared"
        )),
    }
}

/// Runs one configuration (an skq mode, `epoll-1to1` or `epoll-shared`)
/// and returns its events/s.
pub fn measure(mode: Mode, setup: &Setup) -> anyhow::Result<PipeResult> {
    match mode {
        Mode::Epoll1to1 => measure_epoll(false, setup),
        Mode::EpollShared => measure_epoll(true, setup),
        Mode::Skq { .. } => measure_skq(mode, setup),
        other => bail!("{other}: the pipe benchmark runs skq modes, epoll-1to1 and epoll-shared"),
    }
}

/// The plain-epoll baselines: one epoll per worker (level-triggered), or one
/// shared epoll set with `EPOLLONESHOT` and a re-arm per served event.
fn measure_epoll(shared: bool, setup: &Setup) -> anyhow::Result<PipeResult> {
    let Setup {
        workers,
        service,
        service_ns,
        pipes_per_worker,
        duration,
        pin,
        ..
    } = *setup;
    use skq_sys::epoll::{Epoll, IN, ONESHOT};
    let epolls: Arc<Vec<Epoll>> = Arc::new(
        (0..if shared { 1 } else { workers })
            .map(|_| Epoll::new())
            .collect::<std::io::Result<_>>()?,
    );
    let flags = if shared { IN | ONESHOT } else { IN };
    let mut pipes = Vec::new();
    for w in 0..workers {
        for i in 0..pipes_per_worker {
            let (mut tx, rx) = UnixStream::pair()?;
            rx.set_nonblocking(true)?;
            tx.write_all(b"x")?;
            let ep = &epolls[if shared { 0 } else { w }];
            ep.add(rx.as_raw_fd(), flags, rx.as_raw_fd() as u64)?;
            pipes.push((tx, rx, w, i));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<Vec<crossbeam_utils::CachePadded<AtomicU64>>> =
        Arc::new((0..workers).map(|_| Default::default()).collect());
    let busy: Arc<Vec<crossbeam_utils::CachePadded<AtomicU64>>> =
        Arc::new((0..workers).map(|_| Default::default()).collect());
    let ready = Arc::new(Barrier::new(workers + 1));
    let mut handles = Vec::new();
    for w in 0..workers {
        let (epolls, stop, counts, busy, ready) = (
            epolls.clone(),
            stop.clone(),
            counts.clone(),
            busy.clone(),
            ready.clone(),
        );
        handles.push(thread::spawn(move || -> anyhow::Result<()> {
            if pin {
                skq_sys::cpu::pin_to_nth_allowed_cpu(w)?;
            }
            service.prepare_thread();
            let ep = &epolls[if shared { 0 } else { w }];
            let mut events = Vec::with_capacity(16);
            ready.wait();
            while !stop.load(Ordering::Relaxed) {
                ep.wait_ns(&mut events, Some(10_000_000))?;
                for ev in events.iter() {
                    let spent = service.serve(service_ns);
                    busy[w].fetch_add(u64::from(spent), Ordering::Relaxed);
                    if shared {
                        ep.modify(ev.u64 as i32, IN | ONESHOT, ev.u64)?;
                    }
                }
                counts[w].fetch_add(events.len() as u64, Ordering::Relaxed);
            }
            Ok(())
        }));
    }
    ready.wait();
    let total = |c: &[crossbeam_utils::CachePadded<AtomicU64>]| -> u64 {
        c.iter().map(|x| x.load(Ordering::Relaxed)).sum()
    };
    let t0 = Instant::now();
    let base = total(&counts);
    thread::sleep(duration);
    let delivered = total(&counts) - base;
    let secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
    }
    drop(pipes);
    let busy: Vec<u64> = busy.iter().map(|b| b.load(Ordering::Relaxed)).collect();
    Ok(PipeResult {
        mode: if shared { "epoll-shared" } else { "epoll-1to1" }.to_string(),
        workers,
        service: service.to_string(),
        service_us: service_ns as f64 / 1000.0,
        events_per_s: delivered as f64 / secs,
        ratio_to_baseline: None,
        imbalance: skq_net::stats::imbalance(busy.into_iter()),
        batch_polls_above: None,
        steals: 0,
    })
}

fn measure_skq(mode: Mode, setup: &Setup) -> anyhow::Result<PipeResult> {
    let Setup {
        workers,
        service,
        service_ns,
        pipes_per_worker,
        duration,
        pin,
        batch_polls_above,
    } = *setup;
    let mut cfg = mode
        .core_config(workers)
        .context("an skq mode has a core configuration")??;
    if let Some(n) = batch_polls_above {
        cfg.batch_polls_above = n;
    }
    let skq = Skq::new(cfg)?;
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(Barrier::new(workers + 1));
    let mut handles = Vec::new();
    for w in 0..workers {
        let mut worker = skq.worker(w);
        let (skq, stop, count, ready) = (skq.clone(), stop.clone(), count.clone(), ready.clone());
        handles.push(thread::spawn(move || -> anyhow::Result<()> {
            if pin {
                skq.pin_current_thread(w)?;
            }
            service.prepare_thread();
            let mut pipes = Vec::new();
            for i in 0..pipes_per_worker {
                let (mut tx, rx) = UnixStream::pair()?;
                rx.set_nonblocking(true)?;
                tx.write_all(b"x")?;
                skq.register(
                    rx.as_raw_fd(),
                    (w * pipes_per_worker + i) as u64,
                    Interest::READABLE,
                    Flags::NONE,
                    Some(w),
                )?;
                pipes.push((tx, rx));
            }
            ready.wait();
            let mut events = Events::with_capacity(16);
            let mut mine = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let n = worker.wait(&mut events, Some(Duration::from_millis(10)))?;
                for ev in events.iter().take(n) {
                    service.serve(service_ns);
                    worker.still_ready(ev);
                }
                mine += n as u64;
            }
            count.fetch_add(mine, Ordering::Relaxed);
            drop(worker);
            drop(pipes);
            Ok(())
        }));
    }
    ready.wait();
    let t0 = Instant::now();
    let base: u64 = skq.stats().iter().map(|s| s.delivered).sum();
    thread::sleep(duration);
    let delivered: u64 = skq.stats().iter().map(|s| s.delivered).sum::<u64>() - base;
    let secs = t0.elapsed().as_secs_f64();
    let stats = skq.stats();
    stop.store(true, Ordering::Relaxed);
    skq.shutdown();
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("worker panicked"))??;
    }
    Ok(PipeResult {
        mode: mode.to_string(),
        workers,
        service: service.to_string(),
        service_us: service_ns as f64 / 1000.0,
        events_per_s: delivered as f64 / secs,
        ratio_to_baseline: None,
        imbalance: skq_rt::imbalance_of(&stats),
        batch_polls_above: Some(skq.config().batch_polls_above),
        steals: stats.iter().map(|s| s.steals_made).sum(),
    })
}

/// `skq pipes`.
pub fn run(a: PipesArgs) -> anyhow::Result<()> {
    if a.modes.is_empty() || a.workers.is_empty() {
        bail!("--modes and --workers need at least one value each");
    }
    if !(a.duration > 0.0 && a.duration <= 600.0) {
        bail!(
            "--duration {} is out of range: allowed (0, 600] seconds",
            a.duration
        );
    }
    if let Some(n) = a.batch_polls_above {
        // Refused before anything runs, by the core's own range check.
        let mut c = skq_rt::Config::new(skq_rt::Policy::Hybrid, 1);
        c.batch_polls_above = n;
        c.validate()?;
    }
    if a.pipes_per_worker == 0 || a.pipes_per_worker > 4096 {
        bail!(
            "--pipes-per-worker {} is out of range: allowed 1..=4096",
            a.pipes_per_worker
        );
    }
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let mut plan: Vec<(Mode, usize, ServiceMode, u32)> = Vec::new();
    for &w in &a.workers {
        for &m in &a.modes {
            plan.push((m, w, ServiceMode::Spin, (a.spin_us * 1000.0) as u32));
        }
    }
    if a.emulated_workers > 0 {
        for &m in &a.modes {
            plan.push((
                m,
                a.emulated_workers,
                ServiceMode::Emulate,
                (a.emulated_us * 1000.0) as u32,
            ));
        }
    }
    if !a.modes.contains(&a.baseline) {
        bail!(
            "--baseline {}: not among --modes ({})",
            a.baseline,
            a.modes
                .iter()
                .map(Mode::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    println!(
        "skq pipes: {} pipes per worker, always readable; {cores} cores seen; {:.1} s per configuration; ratios against {} measured in the same run",
        a.pipes_per_worker, a.duration, a.baseline
    );
    if let Some(n) = a.batch_polls_above {
        println!("skq pipes: skq modes with --batch-polls-above {n} (the core's default is 8)");
    }
    let mut results: Vec<PipeResult> = Vec::new();
    for (i, (mode, w, svc, ns)) in plan.iter().enumerate() {
        eprint!("\r[{}/{}] {mode} × {w} ({svc})        ", i + 1, plan.len());
        let setup = Setup {
            workers: *w,
            service: *svc,
            service_ns: *ns,
            pipes_per_worker: a.pipes_per_worker,
            duration: Duration::from_secs_f64(a.duration),
            pin: a.pin,
            batch_polls_above: a.batch_polls_above,
        };
        let r = measure(*mode, &setup)
            .with_context(|| format!("configuration {mode} with {w} workers"))?;
        results.push(r);
    }
    eprintln!();
    let base: Vec<(usize, String, f64)> = results
        .iter()
        .filter(|r| r.mode == a.baseline.to_string())
        .map(|r| (r.workers, r.service.clone(), r.events_per_s))
        .collect();
    for r in &mut results {
        r.ratio_to_baseline = base
            .iter()
            .find(|(w, s, _)| *w == r.workers && *s == r.service)
            .map(|(_, _, v)| r.events_per_s / v);
    }
    println!(
        "{:<14} {:>7} {:>8} {:>10} {:>14} {:>10} {:>10} {:>8}",
        "mode", "workers", "service", "per-event", "events/s", "vs base", "imbalance", "steals"
    );
    for r in &results {
        let ratio = r
            .ratio_to_baseline
            .map_or("-".to_string(), |x| format!("{x:.3}"));
        println!(
            "{:<14} {:>7} {:>8} {:>8.1}µs {:>14.0} {:>10} {:>9.1}% {:>8}",
            r.mode,
            r.workers,
            r.service,
            r.service_us,
            r.events_per_s,
            ratio,
            r.imbalance * 100.0,
            r.steals
        );
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&results)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
