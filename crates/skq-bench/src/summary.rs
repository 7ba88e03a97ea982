//! Per-configuration verdicts: S̄, SLO, maximum load at SLO, ratios to the
//! vanilla baseline of the same run and to the theoretical bound, and the
//! self-check status.
//!
//! Maximum load at SLO is computed with [`skq_report::slo::max_load_at_slo`]
//! over `(offered load, p99)` points: points are ordered by what was asked,
//! which stays monotone even when a saturated server's achieved rate folds
//! back; below the SLO the two agree (the sweep stops a curve whose achieved
//! rate falls short).
//!
//! Self-check status: `PASS` when every point at or under the SLO passed all
//! of the generator's checks with zero correctness errors, and the first
//! point over the SLO (the crossing, which the answer interpolates to) passed
//! the generator-integrity checks (Poisson arrivals, send lateness) with zero
//! correctness errors. Past the knee a rate shortfall and correlated samples
//! are expected, so those checks do not count there, nor do any points
//! beyond the crossing. `FAIL` lists the failing points. `ERROR` when the runner
//! failed before the curve produced its answer; `NO DATA` when nothing was
//! measured.
//!
//! Decisive points: those the answer rests on, the same ones the self-check
//! judges (every point at or under the SLO, and the crossing). Each curve
//! counts them and lists those that were disturbed (processes outside the
//! run used more CPU than the sweep's `disturbed_above` while they ran,
//! [`crate::disturbance`], the host delayed the server's threads, which
//! its emulated service's overshoot shows, [`crate::overshoot`], or the
//! point's tail came from seconds in which the host held the whole machine,
//! [`crate::episode::host_held`]); [`strict_problems`] turns failed
//! self-checks and disturbed decisive points into the reasons `skq bench
//! --strict` fails. Each curve also lists its decisive points whose p99
//! came from a short episode ([`crate::episode`]): information, not a
//! problem, unless the host held it (then it is also disturbed).

use serde::{Deserialize, Serialize};
use skq_report::result::PointResult;
use skq_report::slo::max_load_at_slo;

use crate::bound;
use crate::config::{Curve, Settings, Sweep};
use crate::sweep::{self, Outcome, PointRecord};

/// Self-check verdict of a curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", content = "notes", rename_all = "kebab-case")]
pub enum SelfCheck {
    /// All points that define the answer passed.
    Pass,
    /// Some did not: one note per failing point.
    Fail(Vec<String>),
    /// The runner failed (server died, never ready, generator failed).
    Error(String),
    /// Nothing measured.
    NoData,
}

impl SelfCheck {
    /// `PASS`, `FAIL`, `ERROR` or `NO DATA`.
    pub fn label(&self) -> &'static str {
        match self {
            SelfCheck::Pass => "PASS",
            SelfCheck::Fail(_) => "FAIL",
            SelfCheck::Error(_) => "ERROR",
            SelfCheck::NoData => "NO DATA",
        }
    }
}

/// The verdict on one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurveSummary {
    /// Index in the sweep.
    pub curve: usize,
    /// The configuration.
    pub spec: Curve,
    /// Nominal S̄ (µs).
    pub nominal_service_us: Option<f64>,
    /// Measured S̄ (µs), receive-weighted over the curve's points.
    pub measured_service_us: Option<f64>,
    /// SLO used (µs).
    pub slo_us: Option<f64>,
    /// Maximum load at SLO (requests/s).
    pub max_load_rps: Option<f64>,
    /// True when no point exceeded the SLO (the maximum is at least this).
    pub max_load_is_lower_bound: bool,
    /// Maximum load as a fraction of capacity N/S̄ (measured S̄ when known).
    pub max_load_fraction: Option<f64>,
    /// Ratio to the baseline configuration (`[sweep] baseline`, by default
    /// vanilla) of the same group in this run.
    #[serde(alias = "vs_vanilla")]
    pub vs_baseline: Option<f64>,
    /// Centralized-FCFS maximum load at SLO (requests/s), when available.
    pub bound_rps: Option<f64>,
    /// Ratio to the bound.
    pub vs_bound: Option<f64>,
    /// Self-check verdict.
    pub self_check: SelfCheck,
    /// CPUs the load generator saw (from its results).
    pub cores_seen: Option<usize>,
    /// Service mode the results report (`spin`, `emulate`).
    pub service_mode: String,
    /// Points measured.
    pub measured_points: usize,
    /// Priority experiment figures (probe, best-effort), when the curve
    /// ran that traffic.
    #[serde(default)]
    pub priority: Option<crate::priority::PrioritySummary>,
    /// Server CPU-seconds per request: the server's CPU time (user +
    /// system, measured window) summed over the measured points, divided by
    /// the replies received in them. None when no point measured server CPU.
    #[serde(default)]
    pub cpu_s_per_request: Option<f64>,
    /// Server context switches per request, voluntary and involuntary: the
    /// switches of the server's threads (measured window, as for
    /// `cpu_s_per_request`) summed over the measured points, divided by the
    /// replies received in them. None when no point measured them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx_switches_per_request: Option<CtxSwitchesPerRequest>,
    /// Measured points that decide the answer: every point at or under the
    /// SLO and the first one over it (the points the self-check judges).
    #[serde(default)]
    pub decisive_points: usize,
    /// The decisive points that were disturbed, one line each.
    #[serde(default)]
    pub disturbed: Vec<String>,
    /// Largest disturbance (CPUs used outside the run) among the decisive
    /// points, when measured.
    #[serde(default)]
    pub max_disturbance_cpu: Option<f64>,
    /// The decisive points whose p99 came from a short episode
    /// ([`crate::episode`]), one line each. Information only: no verdict
    /// and no `--strict` problem.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episodes: Vec<String>,
}

impl CurveSummary {
    /// `disturbed/decisive` as the tables show it (`-` with no decisive
    /// point), e.g. `0/4`.
    pub fn disturbed_cell(&self) -> String {
        if self.decisive_points == 0 {
            "-".into()
        } else {
            format!("{}/{}", self.disturbed.len(), self.decisive_points)
        }
    }
}

/// Why a sweep's figures should not be published: one line per curve whose
/// self-check is not `PASS` (a decisive point failed a check, the runner
/// failed, nothing was measured) and per disturbed decisive point. Empty:
/// `skq bench --strict` succeeds.
pub fn strict_problems(summaries: &[CurveSummary]) -> Vec<String> {
    let mut out = Vec::new();
    for s in summaries {
        let who = format!("{} [{}]", s.spec.name, s.spec.group());
        match &s.self_check {
            SelfCheck::Pass => {}
            SelfCheck::Fail(notes) => {
                out.extend(notes.iter().map(|n| format!("self-check failed: {n}")))
            }
            SelfCheck::Error(e) => out.push(format!("{who}: error: {e}")),
            SelfCheck::NoData => out.push(format!("{who}: no point measured")),
        }
        out.extend(s.disturbed.iter().map(|d| format!("disturbed: {d}")));
    }
    out
}

/// Context switches per request of a server, split by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CtxSwitchesPerRequest {
    /// Voluntary switches (a thread blocked) per request.
    pub voluntary: f64,
    /// Involuntary switches (a thread was preempted) per request.
    pub involuntary: f64,
}

impl CtxSwitchesPerRequest {
    /// `vol+invol` with two decimals each, as the tables show it.
    pub fn cell(&self) -> String {
        format!("{:.2}+{:.2}", self.voluntary, self.involuntary)
    }
}

/// Summaries of every curve, in sweep order.
pub fn summarize(sweep: &Sweep, records: &[PointRecord]) -> Vec<CurveSummary> {
    let mut out: Vec<CurveSummary> = sweep
        .curves
        .iter()
        .enumerate()
        .map(|(i, c)| summarize_curve(i, c, &sweep.settings, records))
        .collect();
    for i in 0..out.len() {
        let b = &sweep.settings.baseline;
        let base = out
            .iter()
            .find(|o| {
                (o.spec.mode == *b || o.spec.name == *b) && o.spec.group() == out[i].spec.group()
            })
            .and_then(|o| o.max_load_rps);
        out[i].vs_baseline = match (out[i].max_load_rps, base) {
            (Some(m), Some(b)) if b > 0.0 => Some(m / b),
            _ => None,
        };
    }
    out
}

fn summarize_curve(
    i: usize,
    curve: &Curve,
    settings: &Settings,
    records: &[PointRecord],
) -> CurveSummary {
    let mine: Vec<&PointRecord> = records.iter().filter(|r| r.curve == i).collect();
    let measured: Vec<(&PointRecord, &PointResult)> = mine
        .iter()
        .filter_map(|r| r.result().map(|x| (*r, x)))
        .collect();
    let results: Vec<&PointResult> = measured.iter().map(|(_, x)| *x).collect();
    let service = sweep::service_us(curve, &results);
    let slo = sweep::slo_us(curve, settings, &results);
    let max = slo.and_then(|slo| {
        let pts: Vec<(f64, f64)> = measured
            .iter()
            .map(|(r, x)| (r.target_rps, x.latency.p99.value))
            .collect();
        max_load_at_slo(&pts, slo)
    });
    let max_load_rps = max.map(|m| m.load);
    // The plan's capacity N/S̄ used the nominal S̄; judge with the measured one.
    let capacity = match (service, curve.load.nominal_service_us) {
        (Some((measured, true)), Some(nominal)) => curve.load.capacity_rps * nominal / measured,
        _ => curve.load.capacity_rps,
    };
    let bound_rps = match (service, slo) {
        (Some((s, _)), Some(slo)) => bound::bound_for(curve, s, slo),
        _ => None,
    };
    let error = mine.iter().find_map(|r| match &r.outcome {
        Outcome::Failed { error } => Some(error.clone()),
        _ => None,
    });
    // Points in load order; the first one over the SLO is the crossing.
    let mut ordered = measured.clone();
    ordered.sort_by(|a, b| a.0.target_rps.total_cmp(&b.0.target_rps));
    let over = |x: &PointResult| {
        let p99 = x.latency.p99.value;
        slo.is_some_and(|s| p99.is_nan() || p99 > s)
    };
    let crossing = ordered.iter().position(|(_, x)| over(x));
    let decisive: Vec<&PointRecord> = ordered
        .iter()
        .enumerate()
        .filter(|(i, (_, x))| !over(x) || Some(*i) == crossing)
        .map(|(_, (r, _))| *r)
        .collect();
    let mut disturbed: Vec<String> = Vec::new();
    for r in &decisive {
        let at = format!("{} [{}] at load {:.2}", curve.name, curve.group(), r.load);
        if let Some(d) = r.disturbance().filter(|d| d.disturbed) {
            disturbed.push(format!(
                "{at}: {:.2} CPU used outside the run (threshold {})",
                d.cpu, settings.disturbed_above
            ));
        }
        if let Some(o) = r.overshoot().filter(|o| o.delayed) {
            disturbed.push(format!(
                "{at}: the host delayed the server: {}",
                o.describe()
            ));
        }
        if let Some(e) = r.result().and_then(crate::episode::host_held) {
            disturbed.push(format!(
                "{at}: the host held the machine through the tail: p99 {:.0} µs from {} of {} \
                 one-second intervals",
                e.p99_us,
                e.starts_s.len(),
                e.intervals
            ));
        }
    }
    let episodes: Vec<String> = decisive
        .iter()
        .filter_map(|r| {
            let e = crate::episode::tail_episode(r.result()?)?;
            Some(format!(
                "{} [{}] at load {:.2}: {}",
                curve.name,
                curve.group(),
                r.load,
                e.describe()
            ))
        })
        .collect();
    let max_disturbance_cpu = decisive
        .iter()
        .filter_map(|r| r.disturbance().map(|d| d.cpu))
        .reduce(f64::max);
    let self_check = if let Some(e) = error.filter(|_| max.is_none_or(|m| m.lower_bound)) {
        SelfCheck::Error(e)
    } else if measured.is_empty() {
        SelfCheck::NoData
    } else {
        let notes: Vec<String> = ordered
            .iter()
            .enumerate()
            .filter(|(i, (_, x))| {
                let clean = x.errors.total() == 0;
                if !over(x) {
                    !(x.checks.pass && clean)
                } else if Some(*i) == crossing {
                    // Past the knee, rate shortfall and correlated samples
                    // are expected; the generator's integrity is not.
                    !(x.checks.ad_ok && x.checks.lateness_ok && x.checks.read_lag_ok && clean)
                } else {
                    false
                }
            })
            .map(|(_, (r, x))| {
                let mut why = x.checks.notes.clone();
                if x.errors.total() > 0 {
                    why.push(format!("{} correctness errors", x.errors.total()));
                }
                if why.is_empty() {
                    why.push("checks failed".into());
                }
                format!(
                    "{} [{}] at load {:.2}: {}",
                    curve.name,
                    curve.group(),
                    r.load,
                    why.join("; ")
                )
            })
            .collect();
        if notes.is_empty() {
            SelfCheck::Pass
        } else {
            SelfCheck::Fail(notes)
        }
    };
    let modes: Vec<&str> = results
        .iter()
        .map(|x| x.meta.service_mode.as_str())
        .filter(|m| !m.is_empty())
        .collect();
    let service_mode = match modes.first() {
        Some(m) if modes.iter().all(|o| o == m) => m.to_string(),
        Some(_) => format!("mixed ({})", modes.join(",")),
        None => curve.server.service.as_str().to_string(),
    };
    let (cpu_s, replies) = results
        .iter()
        .filter_map(|x| x.server_cpu.map(|c| (c.user_s + c.sys_s, x.received)))
        .fold((0.0, 0u64), |(c, n), (dc, dn)| (c + dc, n + dn));
    let cpu_s_per_request = (replies > 0).then(|| cpu_s / replies as f64);
    let (switches, replies) = measured
        .iter()
        .filter_map(|(r, x)| r.ctx_switches().map(|c| (c, x.received)))
        .fold(((0u64, 0u64), 0u64), |((v, i), n), (c, dn)| {
            ((v + c.voluntary, i + c.involuntary), n + dn)
        });
    let ctx_switches_per_request = (replies > 0).then(|| CtxSwitchesPerRequest {
        voluntary: switches.0 as f64 / replies as f64,
        involuntary: switches.1 as f64 / replies as f64,
    });
    CurveSummary {
        decisive_points: decisive.len(),
        disturbed,
        max_disturbance_cpu,
        episodes,
        cpu_s_per_request,
        ctx_switches_per_request,
        curve: i,
        spec: curve.clone(),
        nominal_service_us: curve.load.nominal_service_us,
        measured_service_us: service.filter(|s| s.1).map(|s| s.0),
        slo_us: slo,
        max_load_rps,
        max_load_is_lower_bound: max.is_some_and(|m| m.lower_bound),
        max_load_fraction: max_load_rps.map(|m| m / capacity),
        vs_baseline: None,
        bound_rps,
        vs_bound: match (max_load_rps, bound_rps) {
            (Some(m), Some(b)) if b > 0.0 => Some(m / b),
            _ => None,
        },
        self_check,
        cores_seen: results
            .iter()
            .map(|x| x.meta.cores_seen)
            .filter(|&c| c > 0)
            .max(),
        service_mode,
        measured_points: measured.len(),
        priority: crate::priority::PrioritySummary::of(
            curve,
            &measured
                .iter()
                .map(|(r, x)| (r.load, *x))
                .collect::<Vec<_>>(),
            slo,
        ),
    }
}
