//! Per-point time series for experiments with a time-varying load (issue
//! 15): the server's CPU use and its active worker count over the point,
//! on the same time axis as the generator's per-interval offered rate and
//! p99 (`PointResult::intervals`): seconds from the start of the measured
//! window, negative during the warm-up.
//!
//! * **Server CPU use** comes from sampling the server process tree's CPU
//!   time (`/proc/PID/stat`, [`crate::procstat::tree_cpu_time`]) every
//!   `interval_ms` while the generator runs; each sample pair gives the CPU
//!   cores used over that span (utime+stime ÷ wall time). The /proc figures
//!   have clock-tick resolution (10 ms), so short intervals are coarse.
//! * **Active workers** are the resource manager's decisions from the
//!   server's `--stats-json` (elastic skq curves), as a step function from
//!   each decision on; with a fixed worker count (no decisions) the count is
//!   the configured `workers`, flat.
//!
//! Both clocks are CLOCK_MONOTONIC on the same machine: the generator's
//! `schedule_start_ns` plus the warm-up is the origin, the server's
//! decisions are `started_ns + ms`, and the harness stamps its CPU samples
//! with [`skq_sys::cpu::monotonic_ns`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::serverstats::ServerPointStats;

/// One point's time series (seconds from the start of the measured window).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointSeries {
    /// `(start of the span, CPU cores used over it)`.
    pub server_cpu: Vec<(f64, f64)>,
    /// `(time, active workers from then on)`.
    pub workers: Vec<(f64, f64)>,
    /// True when the worker count was fixed (no elastic decisions).
    pub workers_fixed: bool,
}

/// A CPU-time reading: `(CLOCK_MONOTONIC ns, user+system CPU seconds)`.
pub type CpuSample = (u64, f64);

/// Samples the CPU time of the process tree of `pid` every `period` until
/// `stop` is set, with a last sample when it is.
pub fn sample_cpu(pid: u32, period: Duration, stop: &AtomicBool) -> Vec<CpuSample> {
    sample_every(period, stop, || {
        crate::procstat::tree_cpu_time(pid)
            .ok()
            .map(|t| t.user_s + t.sys_s)
    })
}

/// Calls `read` every `period` until `stop` is set, and once more when it
/// is, keeping each reading it gives with the clock (CLOCK_MONOTONIC ns)
/// read right after it. A period missed (the thread held off its CPU) is
/// skipped, not caught up.
fn sample_every<T>(
    period: Duration,
    stop: &AtomicBool,
    mut read: impl FnMut() -> Option<T>,
) -> Vec<(u64, T)> {
    let mut out = Vec::new();
    let mut take = |out: &mut Vec<(u64, T)>| {
        if let Some(v) = read() {
            out.push((skq_sys::cpu::monotonic_ns(), v));
        }
    };
    let period_ns = period.as_nanos().max(1) as u64;
    let first = skq_sys::cpu::monotonic_ns();
    take(&mut out);
    let mut next = first + period_ns;
    while !stop.load(Ordering::Relaxed) {
        let now = skq_sys::cpu::monotonic_ns();
        if now >= next {
            take(&mut out);
            next += period_ns * ((now - next) / period_ns + 1);
        } else {
            std::thread::sleep(Duration::from_nanos(next - now).min(Duration::from_millis(20)));
        }
    }
    take(&mut out);
    out
}

/// A steal reading: `(CLOCK_MONOTONIC ns, steal ticks)` of the run's CPUs
/// (`/proc/stat`, [`crate::disturbance::MachineCpu::read_for`]).
pub type StealSample = (u64, u64);

/// How often [`sample_steal`] reads `/proc/stat` while a point runs: a
/// tenth of a second, so a hold of the host's (100 ms on the 2-CPU VMs,
/// docs/MEASUREMENT.md, "Both CPUs busy at once") lands in the right
/// second, at ten short wake-ups a second of the harness.
pub const STEAL_PERIOD: Duration = Duration::from_millis(100);

/// Samples the steal time of `cpus` (the whole machine when empty) every
/// `period` until `stop` is set, with a last sample when it is: time the
/// hypervisor kept those vCPUs from running while they had work.
pub fn sample_steal(cpus: &[usize], period: Duration, stop: &AtomicBool) -> Vec<StealSample> {
    sample_every(period, stop, || {
        crate::disturbance::MachineCpu::read_for(cpus)
            .ok()
            .map(|m| m.steal)
    })
}

/// Steal time (ms) in each of the intervals that start at `starts_s`
/// (seconds from `origin_ns`, in order; the last one ends at `end_s`): each
/// rise between two readings counts in the interval of the later reading,
/// so a figure is good to a sampling period and a clock tick (`tick_s`).
/// Rises before the first interval or after `end_s` count nowhere.
pub fn steal_per_interval(
    samples: &[StealSample],
    origin_ns: u64,
    starts_s: &[f64],
    end_s: f64,
    tick_s: f64,
) -> Vec<f64> {
    let mut ms = vec![0.0; starts_s.len()];
    for w in samples.windows(2) {
        let rise = w[1].1.saturating_sub(w[0].1);
        if rise == 0 {
            continue;
        }
        let at = (w[1].0 as f64 - origin_ns as f64) / 1e9;
        if at > end_s {
            continue;
        }
        if let Some(k) = starts_s.iter().rposition(|&s| s <= at) {
            ms[k] += rise as f64 * tick_s * 1e3;
        }
    }
    ms
}

/// Steal time (ms) that the readings taken before `origin_ns` saw rise:
/// the warm-up's, when the samples start with the generator and `origin_ns`
/// is the measured window's start (good to a reading and a tick, `tick_s`).
pub fn steal_before(samples: &[StealSample], origin_ns: u64, tick_s: f64) -> f64 {
    samples
        .windows(2)
        .filter(|w| w[1].0 < origin_ns)
        .map(|w| w[1].1.saturating_sub(w[0].1) as f64 * tick_s * 1e3)
        .sum()
}

/// CPU cores used between consecutive samples, timed from `origin_ns`.
/// Spans shorter than a millisecond (the final sample right after a
/// periodic one) are merged into the next reading rather than reported.
pub fn cpu_use(samples: &[CpuSample], origin_ns: u64) -> Vec<(f64, f64)> {
    let secs = |ns: u64| (ns as f64 - origin_ns as f64) / 1e9;
    let mut out = Vec::new();
    let mut prev: Option<CpuSample> = None;
    for &(ns, cpu) in samples {
        match prev {
            None => prev = Some((ns, cpu)),
            Some((pns, pcpu)) => {
                let wall = ns.saturating_sub(pns) as f64 / 1e9;
                if wall < 1e-3 {
                    continue;
                }
                out.push((secs(pns), ((cpu - pcpu) / wall).max(0.0)));
                prev = Some((ns, cpu));
            }
        }
    }
    out
}

/// Active workers over time: the server's elastic decisions timed from
/// `origin_ns`, or `workers` flat from `start_s` to `end_s` when the server
/// made none.
pub fn active_workers(
    stats: Option<&ServerPointStats>,
    origin_ns: u64,
    workers: usize,
    start_s: f64,
    end_s: f64,
) -> (Vec<(f64, f64)>, bool) {
    let decisions = stats.and_then(|s| s.started_ns.map(|t| (t, &s.elastic)));
    match decisions {
        Some((started, d)) if !d.is_empty() => {
            let at = |ms: f64| (started as f64 + ms * 1e6 - origin_ns as f64) / 1e9;
            let mut out: Vec<(f64, f64)> = d.iter().map(|&(ms, _, n)| (at(ms), n as f64)).collect();
            if let Some(&(_, n)) = out.last() {
                out.push((end_s.max(out.last().map_or(end_s, |l| l.0)), n));
            }
            (out, false)
        }
        _ => (
            vec![(start_s, workers as f64), (end_s, workers as f64)],
            true,
        ),
    }
}

/// The series of one point: `samples` from [`sample_cpu`], the origin (start
/// of the measured window), the server's figures, the configured workers
/// and the window's extent (warm-up before 0, measured seconds after).
pub fn build(
    samples: &[CpuSample],
    origin_ns: u64,
    stats: Option<&ServerPointStats>,
    workers: usize,
    warmup_s: f64,
    measured_s: f64,
) -> PointSeries {
    let (workers, workers_fixed) = active_workers(stats, origin_ns, workers, -warmup_s, measured_s);
    PointSeries {
        server_cpu: cpu_use(samples, origin_ns),
        workers,
        workers_fixed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(elastic: Vec<(f64, Option<f64>, usize)>, started_ns: Option<u64>) -> ServerPointStats {
        ServerPointStats {
            imbalance_pct: 0.0,
            busiest_ms: 0.0,
            least_busy_ms: 0.0,
            steals_per_s: None,
            migrations_per_s: None,
            wakeups_per_event: None,
            behind_busy_per_event: None,
            secs: 1.0,
            elastic,
            started_ns,
        }
    }

    #[test]
    fn cpu_use_is_cores_per_span_on_the_window_clock() {
        let s = 1_000_000_000u64;
        // Origin at 10 s; 0.5 CPU-s over 9.5..10 s, then 2 CPU-s over 10..11 s,
        // and a final reading 0.1 ms later that is merged away.
        let samples = [
            (9 * s + s / 2, 1.0),
            (10 * s, 1.5),
            (11 * s, 3.5),
            (11 * s + 100_000, 3.5),
        ];
        let u = cpu_use(&samples, 10 * s);
        assert_eq!(u, vec![(-0.5, 1.0), (0.0, 2.0)]);
        assert!(cpu_use(&samples[..1], 0).is_empty());
    }

    #[test]
    fn steal_lands_in_the_interval_of_the_reading_that_saw_it() {
        let s = 1_000_000_000u64;
        let ms = s / 1000;
        // Origin at 10 s, intervals at 0, 1 and 2 s (ending at 3 s). Ten
        // ticks seen at 10.95 s (interval 0), none until five at 12.05 s
        // (interval 2), one during the warm-up and two after the end.
        let samples = [
            (9 * s + 500 * ms, 0),
            (9 * s + 900 * ms, 1),
            (10 * s + 850 * ms, 1),
            (10 * s + 950 * ms, 11),
            (11 * s + 950 * ms, 11),
            (12 * s + 50 * ms, 16),
            (13 * s + 100 * ms, 18),
        ];
        let v = steal_per_interval(&samples, 10 * s, &[0.0, 1.0, 2.0], 3.0, 0.01);
        assert_eq!(v.len(), 3);
        assert!((v[0] - 100.0).abs() < 1e-9, "{v:?}");
        assert_eq!(v[1], 0.0);
        assert!((v[2] - 50.0).abs() < 1e-9, "{v:?}");
        assert!(steal_per_interval(&samples[..1], 0, &[0.0], 1.0, 0.01)
            .iter()
            .all(|&x| x == 0.0));
        // The warm-up's tick, seen at 9.9 s, is the steal before the
        // window; the window's own (from 10.95 s on) are not.
        assert!((steal_before(&samples, 10 * s, 0.01) - 10.0).abs() < 1e-9);
        assert_eq!(steal_before(&samples, 9 * s + 900 * ms, 0.01), 0.0);
        assert_eq!(steal_before(&samples[..1], 10 * s, 0.01), 0.0);
    }

    #[test]
    fn workers_follow_decisions_or_stay_fixed() {
        // Server started 2 s before the window; decisions at 2.5 s and 4 s.
        let st = stats(
            vec![(2500.0, Some(5.0), 8), (4000.0, None, 2)],
            Some(1_000_000_000),
        );
        let (w, fixed) = active_workers(Some(&st), 3_000_000_000, 8, -1.0, 5.0);
        assert!(!fixed);
        assert_eq!(w, vec![(0.5, 8.0), (2.0, 2.0), (5.0, 2.0)]);
        // No decisions (fixed count, or a driver without the scheduler).
        let (w, fixed) = active_workers(Some(&stats(vec![], Some(1))), 0, 8, -1.0, 5.0);
        assert!(fixed);
        assert_eq!(w, vec![(-1.0, 8.0), (5.0, 8.0)]);
        let (w, _) = active_workers(None, 0, 4, 0.0, 2.0);
        assert_eq!(w, vec![(0.0, 4.0), (2.0, 4.0)]);
    }

    #[test]
    fn sampling_stops_when_told_and_readings_rise() {
        let stop = AtomicBool::new(false);
        let (cpu, steal) = std::thread::scope(|sc| {
            let (period, stop) = (Duration::from_millis(5), &stop);
            let c = sc.spawn(move || sample_cpu(std::process::id(), period, stop));
            let st = sc.spawn(move || sample_steal(&[], period, stop));
            // Burn some CPU so the readings can rise.
            let t = std::time::Instant::now();
            let mut x = 0u64;
            while t.elapsed() < Duration::from_millis(60) {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            std::hint::black_box(x);
            stop.store(true, Ordering::Relaxed);
            (c.join().unwrap(), st.join().unwrap())
        });
        // First, periodic and last readings, in time order, never falling
        // (cumulative counters: this process's CPU, the machine's steal).
        assert!(
            cpu.len() >= 3 && steal.len() >= 3,
            "{} and {}",
            cpu.len(),
            steal.len()
        );
        assert!(cpu.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert!(steal
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
    }
}
