//! Fixture results: a fake [`Runner`] whose points follow a simple queueing
//! shape, so the whole harness (plan, saturation stop, summaries, outputs)
//! runs without servers or a load generator.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use hdrhistogram::Histogram;
use skq_bench::config::{self, Curve, Settings, Sweep};
use skq_bench::disturbance::Disturbance;
use skq_bench::sweep::{PlannedPoint, PointFiles, Runner};
use skq_report::result::{Checks, CtxSwitches, Estimate, Latency, Meta, PointResult};

/// The built-in default's shape with six configurations and vanilla as the
/// baseline, which the fixtures' efficiencies are tuned to (the harness's
/// behaviour does not depend on which modes a sweep names).
pub fn six_mode_sweep() -> Sweep {
    let mut f = config::default_file();
    f.matrix.as_mut().unwrap().modes =
        ["vanilla", "shared", "cpu", "best2+steal", "hybrid", "tokio"]
            .map(String::from)
            .to_vec();
    f.sweep.baseline = Some("vanilla".into());
    // The fixtures' curves are tuned to this grid (the default's before 0.85 was added).
    f.sweep.loads = Some(vec![0.2, 0.4, 0.6, 0.75, 0.9]);
    // ... and to the settings' 1.5-s points (the built-in default's are 8 s).
    f.sweep.point_secs = Some(1.5);
    Sweep::from_file(&f, 2).unwrap()
}

/// Emulation overshoot the fixtures add to the nominal S̄ (µs).
pub const OVERSHOOT_US: f64 = 50.0;

/// Fraction of the ideal capacity each mode reaches in the fixtures.
pub fn efficiency(mode: &str) -> f64 {
    match mode {
        "vanilla" => 0.55,
        "shared" => 0.8,
        "hybrid" => 0.9,
        "tokio" => 0.75,
        _ => 0.7,
    }
}

/// The fixture result of one point.
pub fn fixture_result(curve: &Curve, settings: &Settings, p: &PlannedPoint) -> PointResult {
    let s = curve.load.nominal_service_us.unwrap_or(100.0) + OVERSHOOT_US;
    let rho = p.target_rps * s / (curve.workers as f64 * 1e6) / efficiency(&curve.mode);
    let (p99, achieved) = if rho < 1.0 {
        (s * (2.0 + 3.0 * rho / (1.0 - rho)), p.target_rps)
    } else {
        (s * 1000.0, p.target_rps / rho * 0.98)
    };
    let est = |v: f64| Estimate {
        value: v,
        ci_low: v * 0.95,
        ci_high: v * 1.05,
    };
    let latency = Latency {
        count: (achieved * settings.point_secs) as u64,
        mean: p99 / 3.0,
        p50: est(p99 / 4.0),
        p90: est(p99 / 2.0),
        p99: est(p99),
        p999: est(p99 * 1.5),
        max: p99 * 2.0,
    };
    let rate_error_pct = (achieved - p.target_rps) / p.target_rps * 100.0;
    let mut checks = Checks {
        rate_error_pct,
        rate_ok: rate_error_pct.abs() <= 5.0,
        ad_statistic: Some(0.4),
        ad_ok: true,
        ad_threshold_us: None,
        ad_scheduled: None,
        ad_reference: None,
        lag1_rank_corr: 0.01,
        independence_ok: true,
        decorrelation_stride: 1,
        effective_n: 0,
        lateness_p99_us: 20.0,
        lateness_ok: true,
        read_lag_p99_us: Some(5.0),
        read_lag_ok: true,
        pass: true,
        notes: Vec::new(),
    };
    if !checks.rate_ok {
        checks.pass = false;
        checks
            .notes
            .push(format!("achieved rate {rate_error_pct:.1}% off target"));
    }
    // One deliberate failure under the SLO so reports show a FAIL.
    if curve.mode == "cpu" && (p.load - 0.4).abs() < 1e-9 {
        checks.independence_ok = false;
        checks.lag1_rank_corr = 0.3;
        checks.pass = false;
        checks
            .notes
            .push("latency samples correlated (lag-1 rank 0.30)".into());
    }
    let sent = (p.target_rps * settings.point_secs) as u64;
    PointResult {
        meta: Meta {
            protocol: curve.load.protocol.clone(),
            workload: curve.workload.clone(),
            nominal_service_us: curve.load.nominal_service_us,
            scale: curve.load.scale,
            service_mode: curve.server.service.as_str().into(),
            connections: curve.connections,
            threads: curve.load.threads,
            cores_seen: 2,
            seed: Some(p.seed),
            duration_s: settings.point_secs,
            warmup_s: settings.warmup_secs,
        },
        target_rps: p.target_rps,
        achieved_rps: achieved,
        sent,
        received: (achieved * settings.point_secs) as u64,
        raw_latency: latency.clone(),
        latency,
        measured_service_us: Some(s),
        requested_service_us: curve.load.nominal_service_us,
        checks,
        ..Default::default()
    }
}

/// Writes an interval log (values in ns) shaped like the fixture latency.
pub fn write_hdr_log(path: &Path, r: &PointResult) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut h = Histogram::<u64>::new(3).unwrap();
    let l = &r.latency;
    let marks = [
        (0.0, l.p50.value / 4.0),
        (0.5, l.p50.value),
        (0.9, l.p90.value),
        (0.99, l.p99.value),
        (0.999, l.p999.value),
    ];
    for i in 0..2000 {
        let q = i as f64 / 2000.0;
        let k = marks.iter().rposition(|m| m.0 <= q).unwrap();
        let (q0, v0) = marks[k];
        let (q1, v1) = marks.get(k + 1).copied().unwrap_or((1.0, l.max));
        let v = v0 + (v1 - v0) * (q - q0) / (q1 - q0);
        h.record((v * 1000.0) as u64).unwrap();
    }
    skq_bench::hdr::write_interval_log(path, &[(None, &h)]).unwrap();
}

/// A runner returning fixture results; `fail` names configurations whose
/// server "never becomes ready" at the given load index.
#[derive(Default)]
pub struct FakeRunner {
    /// (configuration name, point index) that fail.
    pub fail: Vec<(String, usize)>,
    /// Every call, in order: (configuration, load).
    pub calls: Vec<(String, f64)>,
    /// The seed of every call, in the same order.
    pub seeds: Vec<u64>,
    /// Write interval logs beside the results.
    pub hdr: bool,
    /// What [`Runner::rss_label`] reports (default `off`).
    pub rss: Option<String>,
    /// Configurations whose server context switches are not measured.
    pub no_switches: Vec<String>,
    /// The last point's switches ([`fixture_switches`]), until taken.
    pub switches: Option<CtxSwitches>,
    /// (configuration name, point index, CPUs) of planted disturbances;
    /// every other point measures 0.01 CPU under a 0.05 threshold.
    pub disturb: Vec<(String, usize, f64)>,
    /// The last point's disturbance, until taken.
    pub disturbance: Option<Disturbance>,
    /// (configuration name, point index, attempts) whose first `attempts`
    /// measurements the host delays: their emulated service overshoots by
    /// [`DELAYED_OVERSHOOT_US`] instead of [`OVERSHOOT_US`].
    pub delay: Vec<(String, usize, usize)>,
    /// Measurements so far of each (configuration name, point index).
    pub attempts: std::collections::HashMap<(String, usize), usize>,
    /// (configuration name, point index) whose tail two of eight one-second
    /// intervals hold ([`plant_episode`]); the other points have no intervals.
    pub episode: Vec<(String, usize)>,
    /// (configuration name, point index, attempts) whose first `attempts`
    /// measurements hold an episode in seconds where the host held the
    /// machine ([`plant_held_episode`]).
    pub held: Vec<(String, usize, usize)>,
    /// Answer the host gate's probes ([`Runner::probe_host`]); otherwise
    /// the runner cannot probe and the gate is skipped.
    pub probe: bool,
    /// How many probes, from the first, find the host busy (9 of the
    /// sleeps late on CPU 1); the rest find it quiet.
    pub host_busy: usize,
    /// `calls.len()` at each probe: which measurement it came before.
    pub probed_before: Vec<usize>,
    /// How many starts, from the first, the generator ends at the end of
    /// the warm-up (the host stalled it) when the gate's warm-up limit is on.
    pub stalled_starts: usize,
    /// Per call: whether the gate's warm-up limit was on.
    pub warmup_limit: Vec<bool>,
}

/// Gives `r` eight one-second intervals of which the first two read twice
/// its p99 and the other six a quarter of it: a tail episode
/// (`skq_bench::episode`).
pub fn plant_episode(r: &mut PointResult) {
    let p99 = r.latency.p99.value;
    r.intervals = (0..8)
        .map(|k| skq_report::result::IntervalPoint {
            start_s: k as f64,
            offered_rps: r.target_rps,
            achieved_rps: r.target_rps,
            p50_us: Some(p99 / 8.0),
            p99_us: Some(if k < 2 { 2.0 * p99 } else { p99 / 4.0 }),
            ..Default::default()
        })
        .collect();
}

/// [`plant_episode`], and in the episode's two seconds the server's sleeps
/// overran (180 µs against 50) and the generator stalled (30 ms against 2):
/// the host held the machine (`skq_bench::episode::host_held`).
pub fn plant_held_episode(r: &mut PointResult) {
    plant_episode(r);
    for (k, i) in r.intervals.iter_mut().enumerate() {
        i.service_overshoot_us = Some(if k < 2 { 180.0 } else { 50.0 });
        i.generator_stall_ms = Some(if k < 2 { 30.0 } else { 2.0 });
    }
}

/// The overshoot of a point the host delays (µs).
pub const DELAYED_OVERSHOOT_US: f64 = 450.0;

/// The fixture server context switches of a point: two voluntary per reply
/// received, and as involuntary the runner's call number (1-based), which
/// tells attempts at one point apart.
pub fn fixture_switches(r: &PointResult, call: usize) -> CtxSwitches {
    CtxSwitches {
        voluntary: 2 * r.received,
        involuntary: call as u64,
    }
}

impl Runner for FakeRunner {
    fn run_point(
        &mut self,
        curve: &Curve,
        s: &Settings,
        p: &PlannedPoint,
        files: &PointFiles,
    ) -> Result<PointResult> {
        self.calls.push((curve.name.clone(), p.load));
        self.seeds.push(p.seed);
        self.switches = None;
        let limit = s
            .host_gate
            .as_ref()
            .is_some_and(|g| g.warmup_stall_ms_per_s.is_some());
        self.warmup_limit.push(limit);
        if limit && self.stalled_starts > 0 {
            self.stalled_starts -= 1;
            return Err(skq_bench::hostgate::StartStalled(
                "not measured: 40.0 ms of stalls in a 0.5-s warm-up (fixture)".into(),
            )
            .into());
        }
        if self
            .fail
            .iter()
            .any(|(n, i)| *n == curve.name && *i == p.index)
        {
            bail!("server not ready on 127.0.0.1:1 after 10s (fixture)");
        }
        let mut r = fixture_result(curve, s, p);
        let n = self
            .attempts
            .entry((curve.name.clone(), p.index))
            .or_default();
        *n += 1;
        if self
            .delay
            .iter()
            .any(|(c, i, k)| *c == curve.name && *i == p.index && *n <= *k)
        {
            r.measured_service_us = r.requested_service_us.map(|s| s + DELAYED_OVERSHOOT_US);
        }
        if self
            .episode
            .iter()
            .any(|(c, i)| *c == curve.name && *i == p.index)
        {
            plant_episode(&mut r);
        }
        if self
            .held
            .iter()
            .any(|(c, i, k)| *c == curve.name && *i == p.index && *n <= *k)
        {
            plant_held_episode(&mut r);
        }
        if self.hdr {
            write_hdr_log(&files.hdr_log, &r);
        }
        self.switches = (!self.no_switches.contains(&curve.name))
            .then(|| fixture_switches(&r, self.calls.len()));
        let cpu = self
            .disturb
            .iter()
            .find(|(n, i, _)| *n == curve.name && *i == p.index)
            .map_or(0.01, |d| d.2);
        self.disturbance = Some(Disturbance {
            cpu,
            disturbed: cpu > s.disturbed_above,
            machine_busy_cpu: 1.0 + cpu,
            server_cpu: 0.8,
            generator_cpu: 0.2,
            irq_cpu: 0.05,
            window_s: s.point_secs,
        });
        Ok(r)
    }

    fn rss_label(&self) -> String {
        self.rss.clone().unwrap_or_else(|| "off".into())
    }

    fn take_ctx_switches(&mut self) -> Option<CtxSwitches> {
        self.switches.take()
    }

    fn take_disturbance(&mut self) -> Option<Disturbance> {
        self.disturbance.take()
    }

    fn probe_host(&mut self, sleeps: u32) -> Option<skq_bench::hostgate::HostProbe> {
        if !self.probe {
            return None;
        }
        let busy = self.probed_before.len() < self.host_busy;
        self.probed_before.push(self.calls.len());
        let cpu = |cpu: usize, late: u32| skq_bench::hostgate::CpuProbe {
            cpu,
            sleeps,
            late,
            max_overshoot_us: if late > 0 { 900.0 } else { 95.0 },
            spin_lost_ms: 0.2,
            spin_s: 0.1,
        };
        Some(skq_bench::hostgate::HostProbe {
            cpus: vec![cpu(0, 0), cpu(1, if busy { 9 } else { 0 })],
        })
    }
}

/// The run facts of a fake sweep started by `command` (2 CPUs, 1 s).
pub fn run_info(command: &str) -> skq_bench::output::RunInfo {
    skq_bench::output::RunInfo {
        started: "2026-01-01 00:00:00".into(),
        command: command.into(),
        cpus: 2,
        wall_s: 1.0,
        ..Default::default()
    }
}

/// A fresh, empty temporary folder.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("skq-bench-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes an executable script at `path` through a child process (`install`),
/// never through a file handle of this process. Tests run on several threads
/// and another test's fork can inherit a write handle this process holds for
/// an instant; executing a file some process still has open for writing fails
/// with ETXTBSY ("Text file busy"). A handle held only by the exited child
/// cannot leak that way.
pub fn write_executable(path: &Path, script: &str) {
    let src = path.with_extension("src");
    std::fs::write(&src, script).unwrap();
    let status = std::process::Command::new("install")
        .args(["-m", "0755"])
        .arg(&src)
        .arg(path)
        .status()
        .expect("running install");
    assert!(status.success(), "install {} failed", path.display());
}
