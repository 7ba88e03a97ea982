//! The host gate: before each measurement of a point, a short probe of the
//! run's CPUs, and a wait while it finds the host holding them.
//!
//! On the 2-CPU development VM most points that fail the generator's
//! lateness check fail because the host took the generator's CPU away, in
//! stretches that last seconds to minutes: over the main-job sweeps of
//! 2026-12-03 to 12-06, a point whose first second lost under 10 ms of the
//! generator's loop to such stalls failed the check 6 times in 714, one
//! that lost 10–20 ms 17 times in 188, and one that lost more 19 times in
//! 60 (docs/MEASUREMENT.md, "A gate before every point"). The sweep-level
//! gate of `scripts/bench/quiet-loop.sh` waits for a quiet host before a
//! whole sweep; this one waits before each point, so a point is measured
//! once the host has let go rather than measured again after it.
//!
//! The probe ([`probe`]) runs on every CPU of the run at once, one thread
//! pinned to each: `sleeps` sleeps of 500 µs, counting those that overshot
//! by more than [`LATE_US`] (a quiet CPU overshoots by the timer slack,
//! 50–100 µs), then [`SPIN`] of reading the clock, summing the gaps over
//! [`GAP_US`] (time the thread did not run). A CPU passes when at most
//! `max_late` sleeps were late; the spin figures are recorded beside it.
//! [`wait_for_quiet`] probes, and while a CPU fails waits
//! [`GateSpec::retry_every`] and probes again, up to
//! [`GateSpec::max_wait`]; then the point is measured either way and its
//! record says so ([`GateOutcome`]).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A sleep that overshot its 500 µs by more than this is late (µs).
pub const LATE_US: f64 = 200.0;
/// Sleeps per CPU per probe by default (about 0.12 s).
pub const DEFAULT_SLEEPS: u32 = 200;
/// Spinning per CPU per probe, after the sleeps.
pub const SPIN: Duration = Duration::from_millis(100);
/// A gap between two clock reads over this is time the thread lost (µs):
/// the generator's own stall threshold.
pub const GAP_US: f64 = 50.0;
/// Longest wait before a point by default.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(120);
/// Pause between two probes that failed.
pub const DEFAULT_RETRY_EVERY: Duration = Duration::from_secs(5);
/// The generator ends a gated point's run at the end of its warm-up when
/// the machine's stalls took more than this many ms per second of it from
/// the generator's loop (`skq load --abort-if-warmup-stalled`). Over the
/// main and async sweeps of 2026-12-03 to 12-06, every point whose
/// generator lost 20 ms a second or more failed its checks, a third of
/// those at 15–20 ms, 2% at 10–15 and none below; a point whose first
/// second lost under 5 ms went on to lose 12 ms a second or more 3% of the
/// time, over 10 ms 30–56% (`scripts/bench/stall-onset.py`).
pub const DEFAULT_WARMUP_STALL_MS_PER_S: f64 = 10.0;

/// The error of a point whose generator ended its run at the end of the
/// warm-up because the machine stalled it (the generator's last line):
/// nothing was measured, and the host gate starts the point again.
#[derive(Debug, Clone, PartialEq)]
pub struct StartStalled(pub String);

impl std::fmt::Display for StartStalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the host stalled the generator in the warm-up: {}",
            self.0
        )
    }
}

impl std::error::Error for StartStalled {}

/// One CPU's probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuProbe {
    /// The CPU.
    pub cpu: usize,
    /// Sleeps of 500 µs made.
    pub sleeps: u32,
    /// Of them, how many overshot by more than [`LATE_US`].
    pub late: u32,
    /// Largest overshoot (µs).
    pub max_overshoot_us: f64,
    /// Time lost while spinning in gaps over [`GAP_US`] (ms).
    pub spin_lost_ms: f64,
    /// Seconds spun.
    pub spin_s: f64,
}

/// A probe of every CPU of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostProbe {
    /// One per CPU, in CPU order.
    pub cpus: Vec<CpuProbe>,
}

impl HostProbe {
    /// The most late sleeps on one CPU.
    pub fn worst_late(&self) -> u32 {
        self.cpus.iter().map(|c| c.late).max().unwrap_or(0)
    }

    /// `cpu0 3/200 late, 0.4 ms lost; cpu1 …`.
    pub fn describe(&self) -> String {
        self.cpus
            .iter()
            .map(|c| {
                format!(
                    "cpu{} {}/{} sleeps late, {:.1} ms of {:.1} s spinning lost",
                    c.cpu, c.late, c.sleeps, c.spin_lost_ms, c.spin_s
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Probes `cpus` at once, one pinned thread each (see the module docs).
/// An empty list probes nothing.
pub fn probe(cpus: &[usize], sleeps: u32) -> std::io::Result<HostProbe> {
    let out: Vec<std::io::Result<CpuProbe>> = std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| s.spawn(move || probe_one(cpu, sleeps)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a probe thread does not panic"))
            .collect()
    });
    Ok(HostProbe {
        cpus: out.into_iter().collect::<std::io::Result<Vec<_>>>()?,
    })
}

fn probe_one(cpu: usize, sleeps: u32) -> std::io::Result<CpuProbe> {
    skq_sys::cpu::pin_current_thread(cpu as u32)?;
    let (mut late, mut max_over) = (0, 0.0f64);
    for _ in 0..sleeps {
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_micros(500));
        let over = t0.elapsed().as_secs_f64() * 1e6 - 500.0;
        max_over = max_over.max(over);
        if over > LATE_US {
            late += 1;
        }
    }
    let start = skq_sys::cpu::monotonic_ns();
    let end = start + SPIN.as_nanos() as u64;
    let (mut prev, mut lost) = (start, 0u64);
    while prev < end {
        let t = skq_sys::cpu::monotonic_ns();
        if (t - prev) as f64 > GAP_US * 1e3 {
            lost += t - prev;
        }
        prev = t;
    }
    Ok(CpuProbe {
        cpu,
        sleeps,
        late,
        max_overshoot_us: max_over,
        spin_lost_ms: lost as f64 / 1e6,
        spin_s: (prev - start) as f64 / 1e9,
    })
}

/// What the gate asks of the host, and how long it waits for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateSpec {
    /// Most late sleeps (of `sleeps`) a CPU may have.
    pub max_late: u32,
    /// Sleeps per CPU per probe.
    pub sleeps: u32,
    /// Longest wait before measuring anyway.
    pub max_wait: Duration,
    /// Pause between two probes.
    pub retry_every: Duration,
    /// Have the generator end the run at the end of its warm-up when the
    /// machine's stalls took more than this many ms per second of it
    /// (`None`: measure whatever the warm-up saw); the point then starts
    /// again after a pause, within the same longest wait.
    #[serde(default)]
    pub warmup_stall_ms_per_s: Option<f64>,
}

impl GateSpec {
    /// The gate at `max_late` with the default probe size and waits.
    pub fn new(max_late: u32) -> GateSpec {
        GateSpec {
            max_late,
            sleeps: DEFAULT_SLEEPS,
            max_wait: DEFAULT_MAX_WAIT,
            retry_every: DEFAULT_RETRY_EVERY,
            warmup_stall_ms_per_s: Some(DEFAULT_WARMUP_STALL_MS_PER_S),
        }
    }
}

/// What the gate did before one measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GateOutcome {
    /// Probes taken (1 when the first passed).
    pub probes: u32,
    /// Seconds waited between probes.
    pub waited_s: f64,
    /// Whether the last probe passed (false: measured after the longest
    /// wait all the same).
    pub passed: bool,
    /// The last probe.
    pub last: HostProbe,
    /// Starts the generator ended at the end of their warm-up because the
    /// machine stalled it ([`StartStalled`]), each followed by a pause.
    #[serde(default)]
    pub stalled_starts: u32,
}

impl GateOutcome {
    /// One line for the point's notes.
    pub fn note(&self, spec: &GateSpec) -> String {
        let line = self.probe_note(spec);
        if self.stalled_starts == 0 {
            return line;
        }
        format!(
            "{line}; {} start(s) ended at the warm-up's end, the machine having stalled the generator more than {:.0} ms a second",
            self.stalled_starts,
            spec.warmup_stall_ms_per_s.unwrap_or(0.0)
        )
    }

    fn probe_note(&self, spec: &GateSpec) -> String {
        if self.passed && self.probes == 1 && self.waited_s == 0.0 {
            format!(
                "info: host gate passed at once (at most {} of {} sleeps late per CPU): {}",
                spec.max_late,
                spec.sleeps,
                self.last.describe()
            )
        } else if self.passed {
            format!(
                "info: host gate: waited {:.0} s ({} probes) for at most {} of {} sleeps late per CPU: {}",
                self.waited_s,
                self.probes,
                spec.max_late,
                spec.sleeps,
                self.last.describe()
            )
        } else {
            format!(
                "info: host gate: the host stayed busy for {:.0} s ({} probes; at most {} of {} sleeps late per CPU asked), measured all the same: {}",
                self.waited_s,
                self.probes,
                spec.max_late,
                spec.sleeps,
                self.last.describe()
            )
        }
    }
}

/// Probes with `probe_fn` until a probe passes `spec`, waiting
/// `spec.retry_every` (by `pause`) between probes, for at most
/// `spec.max_wait`, or until `cancelled` says so. `None` when the probe
/// could not run (no CPUs to probe, or it failed): the point is measured
/// ungated. `on_wait` hears each failed probe before the pause.
pub fn wait_for_quiet(
    spec: &GateSpec,
    mut probe_fn: impl FnMut(u32) -> Option<HostProbe>,
    mut pause: impl FnMut(Duration),
    mut on_wait: impl FnMut(&HostProbe, Duration),
    cancelled: impl Fn() -> bool,
) -> Option<GateOutcome> {
    let mut waited = Duration::ZERO;
    let mut probes = 0;
    loop {
        let last = probe_fn(spec.sleeps)?;
        probes += 1;
        let passed = last.worst_late() <= spec.max_late;
        if passed || waited + spec.retry_every > spec.max_wait || cancelled() {
            return Some(GateOutcome {
                probes,
                waited_s: waited.as_secs_f64(),
                passed,
                last,
                stalled_starts: 0,
            });
        }
        on_wait(&last, waited);
        pause(spec.retry_every);
        waited += spec.retry_every;
    }
}

/// One line on what the gate did over a sweep, or None when no point was
/// gated. Only the kept attempt of each point keeps its gate's outcome, so
/// the waits before attempts measured again and not kept are not in it
/// (the sweep's log shows every wait).
pub fn summary_line<'a>(
    spec: &GateSpec,
    outcomes: impl IntoIterator<Item = &'a GateOutcome>,
) -> Option<String> {
    let all: Vec<&GateOutcome> = outcomes.into_iter().collect();
    if all.is_empty() {
        return None;
    }
    let waited: Vec<f64> = all
        .iter()
        .filter(|g| g.waited_s > 0.0)
        .map(|g| g.waited_s)
        .collect();
    let busy = all.iter().filter(|g| !g.passed).count();
    let stalled: u32 = all.iter().map(|g| g.stalled_starts).sum();
    let restarted = all.iter().filter(|g| g.stalled_starts > 0).count();
    Some(format!(
        "host gate (at most {} of {} sleeps late per CPU{}), before the kept attempts: {} points gated, {} of them waited ({:.0} s in all, longest {:.0} s), {} measured with the host still busy after {:.0} s; {stalled} start(s) of {restarted} point(s) ended at the warm-up's end",
        spec.max_late,
        spec.sleeps,
        spec.warmup_stall_ms_per_s
            .map_or(String::new(), |l| format!(", warm-up stalls at most {l:.0} ms/s")),
        all.len(),
        waited.len(),
        waited.iter().sum::<f64>(),
        waited.iter().copied().fold(0.0, f64::max),
        busy,
        spec.max_wait.as_secs_f64()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(late: &[u32]) -> HostProbe {
        HostProbe {
            cpus: late
                .iter()
                .enumerate()
                .map(|(cpu, &late)| CpuProbe {
                    cpu,
                    sleeps: 200,
                    late,
                    max_overshoot_us: 90.0,
                    spin_lost_ms: 0.1,
                    spin_s: 0.1,
                })
                .collect(),
        }
    }

    #[test]
    fn waits_until_every_cpu_is_quiet() {
        let spec = GateSpec::new(2);
        let mut script = vec![reading(&[0, 9]), reading(&[5, 0]), reading(&[1, 2])].into_iter();
        let mut pauses = Vec::new();
        let mut heard = 0;
        let g = wait_for_quiet(
            &spec,
            |n| {
                assert_eq!(n, DEFAULT_SLEEPS);
                script.next()
            },
            |d| pauses.push(d),
            |_, _| heard += 1,
            || false,
        )
        .expect("probed");
        assert!(g.passed);
        assert_eq!(g.probes, 3);
        assert_eq!(pauses, vec![DEFAULT_RETRY_EVERY; 2]);
        assert_eq!(heard, 2);
        assert_eq!(g.waited_s, 10.0);
        assert_eq!(g.last.worst_late(), 2);
        assert!(
            g.note(&spec).contains("waited 10 s (3 probes)"),
            "{}",
            g.note(&spec)
        );
    }

    #[test]
    fn gives_up_after_the_longest_wait_and_says_so() {
        let spec = GateSpec {
            max_wait: Duration::from_secs(12),
            ..GateSpec::new(0)
        };
        let mut probes = 0;
        let g = wait_for_quiet(
            &spec,
            |_| {
                probes += 1;
                Some(reading(&[3, 3]))
            },
            |_| {},
            |_, _| {},
            || false,
        )
        .expect("probed");
        // Probes at 0, 5 and 10 s; a fourth would start past 12 s.
        assert_eq!((g.probes, probes, g.passed), (3, 3, false));
        assert!(
            g.note(&spec).contains("stayed busy for 10 s"),
            "{}",
            g.note(&spec)
        );
    }

    #[test]
    fn a_quiet_host_is_probed_once_and_cancelling_stops_the_wait() {
        let spec = GateSpec::new(1);
        let g = wait_for_quiet(&spec, |_| Some(reading(&[1])), |_| {}, |_, _| {}, || false)
            .expect("probed");
        assert_eq!((g.probes, g.passed, g.waited_s), (1, true, 0.0));
        assert!(g.note(&spec).contains("passed at once"));
        let g = wait_for_quiet(&spec, |_| Some(reading(&[7])), |_| {}, |_, _| {}, || true)
            .expect("probed");
        assert_eq!((g.probes, g.passed), (1, false));
        assert!(wait_for_quiet(&spec, |_| None, |_| {}, |_, _| {}, || false).is_none());
    }

    #[test]
    fn the_summary_counts_the_points_that_waited() {
        let spec = GateSpec::new(2);
        let at_once = GateOutcome {
            probes: 1,
            waited_s: 0.0,
            passed: true,
            last: reading(&[0]),
            stalled_starts: 0,
        };
        let waited = |s: f64, passed| GateOutcome {
            probes: 3,
            waited_s: s,
            passed,
            last: reading(&[9]),
            stalled_starts: 1,
        };
        assert_eq!(summary_line(&spec, []), None);
        let outcomes = [at_once.clone(), waited(10.0, true), waited(120.0, false)];
        let line = summary_line(&spec, &outcomes).unwrap();
        assert!(
            line.contains("3 points gated, 2 of them waited (130 s in all, longest 120 s), 1 measured with the host still busy after 120 s; 2 start(s) of 2 point(s)"),
            "{line}"
        );
    }

    #[test]
    fn the_probe_reads_every_cpu_it_is_given() {
        let cpus: Vec<usize> = skq_sys::cpu::allowed_cpus()
            .map(|c| c.into_iter().map(|c| c as usize).take(2).collect())
            .unwrap_or_default();
        if cpus.is_empty() {
            return;
        }
        let p = probe(&cpus, 5).expect("probe");
        assert_eq!(p.cpus.len(), cpus.len());
        for (c, want) in p.cpus.iter().zip(&cpus) {
            assert_eq!((c.cpu, c.sleeps), (*want, 5));
            assert!(c.late <= 5 && c.spin_s >= SPIN.as_secs_f64());
        }
    }
}
