//! Everything a sweep leaves behind, built from its records and summaries:
//!
//! | file           | content                                                  |
//! |----------------|----------------------------------------------------------|
//! | `summary.txt`  | the terminal table                                       |
//! | `summary.csv`  | the same table as CSV                                    |
//! | `summary.json` | run info, settings and one [`CurveSummary`] per curve    |
//! | `points.csv`   | one row per planned point ([`POINT_COLUMNS`])            |
//! | `points.json`  | one [`PointRecord`] per planned point, full results      |
//! | `report.html`  | self-contained report with inline SVG plots              |
//! | `points/`, `hdr/`, `logs/` | per-point generator JSON, HdrHistogram interval logs, process output |
//!
//! Rendering goes through `skq_report` ([`skq_report::table`],
//! [`skq_report::plot`], [`skq_report::html`]); this module only chooses
//! what to show.

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use skq_report::html::Report;
use skq_report::plot::{self, Labels, Series};
use skq_report::result::PointResult;
use skq_report::table::{Align, Table};

use crate::bound;
use crate::config::{Settings, Sweep};
use crate::hdr;
use crate::summary::{CurveSummary, SelfCheck};
use crate::sweep::{Outcome, PointRecord};

/// Facts about the run shown in every output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Start time, UTC, `YYYY-MM-DD HH:MM:SS`.
    pub started: String,
    /// The command line.
    pub command: String,
    /// CPUs the harness may use.
    pub cpus: usize,
    /// Wall time of the sweep, seconds.
    pub wall_s: f64,
    /// 1-minute load average before the sweep (`/proc/loadavg`).
    #[serde(default)]
    pub loadavg_before: Option<f64>,
    /// 1-minute load average after the sweep.
    #[serde(default)]
    pub loadavg_after: Option<f64>,
}

/// The 1-minute load average, when `/proc/loadavg` is readable.
pub fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A warning when the machine was busy as the sweep began: the 1-minute
/// load average *before* it above half the CPUs. The figure after the sweep
/// is shown too, but not judged: the sweep's own generator and server raise
/// it (a spinning generator thread alone adds about 1).
pub fn busy_machine_warning(run: &RunInfo) -> Option<String> {
    let before = run.loadavg_before?;
    (before > 0.5 * run.cpus as f64).then(|| {
        format!(
            "the machine was busy: 1-minute load average {before:.2} before the sweep on {} CPUs \
             ({} after, which includes the sweep's own processes); if that work went on, it \
             competed with the server and the load generator and inflated latencies (see the \
             generator's lateness check)",
            run.cpus,
            run.loadavg_after.map_or("?".into(), |v| format!("{v:.2}")),
        )
    })
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryFile {
    /// Run facts.
    pub run: RunInfo,
    /// Sweep settings.
    pub settings: Settings,
    /// One per curve.
    pub curves: Vec<CurveSummary>,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The summary table (terminal, CSV and HTML).
pub fn summary_table(summaries: &[CurveSummary], baseline: &str) -> Table {
    let ratio = format!("× {baseline}");
    let mut t = Table::new([
        "config",
        "workload",
        "service",
        "workers",
        "conns",
        "S̄ nominal µs",
        "S̄ measured µs",
        "SLO µs",
        "max load @SLO req/s",
        "of N/S̄",
        ratio.as_str(),
        "× bound",
        "self-check",
        "cores",
    ]);
    for c in [3, 4, 5, 6, 7, 8, 9, 10, 13] {
        t = t.align(c, Align::Right);
    }
    for s in summaries {
        let max = match (s.max_load_rps, s.max_load_is_lower_bound) {
            (Some(m), true) => format!("≥{m:.0}"),
            (Some(m), false) => format!("{m:.0}"),
            (None, _) if s.measured_points > 0 => "below first point".into(),
            (None, _) => "-".into(),
        };
        let bound = match (s.vs_bound, s.bound_rps) {
            (Some(r), _) => format!("{r:.2}"),
            (None, Some(_)) => "-".into(),
            (None, None) => bound::MISSING.into(),
        };
        t.push([
            s.spec.name.clone(),
            s.spec.workload.clone(),
            s.service_mode.clone(),
            s.spec.workers.to_string(),
            s.spec.connections.to_string(),
            opt(s.nominal_service_us, 1),
            opt(s.measured_service_us, 1),
            opt(s.slo_us, 0),
            max,
            opt(s.max_load_fraction, 2),
            opt(s.vs_baseline, 2),
            bound,
            s.self_check.label().to_string(),
            s.cores_seen.map_or("-".into(), |c| c.to_string()),
        ]);
    }
    t
}

/// Columns of `points.csv`.
pub const POINT_COLUMNS: [&str; 24] = [
    "config",
    "mode",
    "workload",
    "workers",
    "service",
    "load",
    "target_rps",
    "status",
    "saturated",
    "achieved_rps",
    "sent",
    "received",
    "p50_us",
    "p99_us",
    "p99_ci_low_us",
    "p99_ci_high_us",
    "p999_us",
    "max_us",
    "measured_service_us",
    "errors",
    "checks_pass",
    "notes",
    "server_cpu_s",
    "client_cpu_s",
];

/// One row of `points.csv`, typed (what [`parse_points_csv`] returns).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PointRow {
    /// Cells by [`POINT_COLUMNS`] order.
    pub cells: Vec<String>,
}

impl PointRow {
    /// A cell by column name (empty when unknown).
    pub fn get(&self, col: &str) -> &str {
        POINT_COLUMNS
            .iter()
            .position(|c| *c == col)
            .and_then(|i| self.cells.get(i))
            .map_or("", String::as_str)
    }

    /// A numeric cell (`None` when empty or not a number).
    pub fn num(&self, col: &str) -> Option<f64> {
        self.get(col).parse().ok()
    }
}

/// What a per-load table shows in each cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointMetric {
    /// p99 latency (µs); `*` marks a point that failed a self-check.
    P99,
    /// Median latency (µs).
    P50,
    /// Server CPU time (user + system) per reply received, µs.
    ServerCpuPerRequest,
}

impl PointMetric {
    fn cell(self, x: &PointResult) -> Option<String> {
        match self {
            PointMetric::P99 => {
                let mark = if x.checks.pass { "" } else { "*" };
                Some(format!("{:.0}{mark}", x.latency.p99.value))
            }
            PointMetric::P50 => Some(format!("{:.0}", x.latency.p50.value)),
            PointMetric::ServerCpuPerRequest => {
                let cpu = x.server_cpu.as_ref()?;
                let replies = x.achieved_rps * x.meta.duration_s;
                (replies > 0.0).then(|| format!("{:.1}", (cpu.user_s + cpu.sys_s) * 1e6 / replies))
            }
        }
    }
}

/// p99 (µs) of every curve at each load fraction of the sweep, with the
/// offered rate in the column header when all curves share it.
pub fn p99_table(sweep: &Sweep, records: &[PointRecord]) -> Table {
    load_table(sweep, records, PointMetric::P99)
}

/// `metric` of every curve at each load fraction of the sweep ("-" where the
/// point was not measured), with the offered rate in the column header when
/// all curves share it.
pub fn load_table(sweep: &Sweep, records: &[PointRecord], metric: PointMetric) -> Table {
    let loads = &sweep.settings.loads;
    let rate_of = |l: f64| -> Option<f64> {
        let rates: Vec<f64> = records
            .iter()
            .filter(|r| (r.load - l).abs() < 1e-9)
            .map(|r| r.target_rps)
            .collect();
        let first = *rates.first()?;
        rates
            .iter()
            .all(|r| (r - first).abs() < 0.5)
            .then_some(first)
    };
    let mut head = vec!["config".to_string(), "group".to_string()];
    head.extend(loads.iter().map(|&l| match rate_of(l) {
        Some(r) => format!("{l} ({r:.0}/s)"),
        None => format!("load {l}"),
    }));
    let mut t = Table::new(head.iter().map(String::as_str));
    for c in 2..head.len() {
        t = t.align(c, Align::Right);
    }
    for (i, c) in sweep.curves.iter().enumerate() {
        let mut row = vec![c.name.clone(), c.group()];
        for &l in loads {
            let cell = records
                .iter()
                .find(|r| r.curve == i && (r.load - l).abs() < 1e-9)
                .and_then(|r| r.result())
                .and_then(|x| metric.cell(x))
                .unwrap_or_else(|| "-".to_string());
            row.push(cell);
        }
        t.push(row);
    }
    t
}

/// The rows of `points.csv`. Numbers are written with Rust's shortest
/// round-trip formatting, so parsing them back gives the same `f64`.
pub fn points_table(sweep: &Sweep, records: &[PointRecord]) -> Table {
    let mut t = Table::new(POINT_COLUMNS);
    for r in records {
        let c = &sweep.curves[r.curve];
        let mut row = vec![
            c.name.clone(),
            c.mode.clone(),
            c.workload.clone(),
            c.workers.to_string(),
            c.service.as_str().to_string(),
            r.load.to_string(),
            r.target_rps.to_string(),
        ];
        match &r.outcome {
            Outcome::Measured {
                result: x,
                saturated,
                ..
            } => {
                let cpu = |t: &skq_report::result::CpuTime| (t.user_s + t.sys_s).to_string();
                row.extend([
                    "measured".to_string(),
                    saturated.to_string(),
                    x.achieved_rps.to_string(),
                    x.sent.to_string(),
                    x.received.to_string(),
                    x.latency.p50.value.to_string(),
                    x.latency.p99.value.to_string(),
                    x.latency.p99.ci_low.to_string(),
                    x.latency.p99.ci_high.to_string(),
                    x.latency.p999.value.to_string(),
                    x.latency.max.to_string(),
                    x.measured_service_us
                        .map_or(String::new(), |v| v.to_string()),
                    x.errors.total().to_string(),
                    x.checks.pass.to_string(),
                    x.checks.notes.join("; "),
                    x.server_cpu.as_ref().map_or(String::new(), cpu),
                    cpu(&x.client_cpu),
                ]);
            }
            Outcome::Failed { error } => {
                row.push("failed".into());
                row.extend(std::iter::repeat_n(String::new(), 13));
                row.push(error.clone());
            }
            Outcome::Skipped => row.push("skipped".into()),
        }
        t.push(row);
    }
    t
}

/// Reads `points.csv` back.
pub fn parse_points_csv(text: &str) -> Result<Vec<PointRow>> {
    let mut recs = skq_report::csv::parse(text)?;
    anyhow::ensure!(!recs.is_empty(), "points.csv is empty");
    let header = recs.remove(0);
    anyhow::ensure!(
        header == POINT_COLUMNS,
        "points.csv: unexpected header {header:?}"
    );
    Ok(recs.into_iter().map(|cells| PointRow { cells }).collect())
}

/// Builds the HTML report.
pub fn report_html(
    sweep: &Sweep,
    records: &[PointRecord],
    summaries: &[CurveSummary],
    run: &RunInfo,
) -> String {
    let modes: Vec<String> = {
        let mut m: Vec<String> = summaries.iter().map(|s| s.service_mode.clone()).collect();
        m.sort();
        m.dedup();
        m
    };
    let s = &sweep.settings;
    let mut r = Report::new("skq bench: maximum load at SLO")
        .meta("started (UTC)", run.started.clone())
        .meta("command", run.command.clone())
        .meta("CPUs (harness)", run.cpus.to_string())
        .meta("service mode", modes.join(", "))
        .meta(
            "SLO",
            format!(
                "{} × S̄ (S̄ measured from the replies; nominal when not reported)",
                s.slo_factor
            ),
        )
        .meta(
            "points",
            format!(
                "{} s measured + {} s warm-up each; loads {:?} of N/S̄",
                s.point_secs, s.warmup_secs, s.loads
            ),
        )
        .meta("wall time", format!("{:.0} s", run.wall_s))
        .meta(
            "load average (1 min) before / after",
            format!(
                "{} / {}",
                run.loadavg_before.map_or("?".into(), |v| format!("{v:.2}")),
                run.loadavg_after.map_or("?".into(), |v| format!("{v:.2}"))
            ),
        );
    if let Some(w) = busy_machine_warning(run) {
        r = r.alert(w);
    }
    if summaries.iter().any(|s| s.bound_rps.is_none()) {
        r = r.alert(format!(
            "theoretical bound: {}; the × bound column and the bound lines are absent",
            bound::MISSING
        ));
    }
    r = r
        .heading("Summary")
        .paragraph(
            "max load @SLO: highest throughput whose p99 stays within the SLO, interpolated between \
             the last point under and the first point over it (≥ when no point went over; \
             \"below first point\" when the lowest load already missed it). of N/S̄: that load as a \
             fraction of workers / measured S̄. × baseline: ratio to the baseline configuration \
             (vanilla unless the sweep names another) of the same workload, workers, connections \
             and service mode in this run. self-check: PASS when every point \
             under the SLO passed the load generator's checks and the first point over it kept its \
             schedule (Poisson arrivals, send lateness) with no correctness errors.",
        )
        .table(&summary_table(summaries, &sweep.settings.baseline))
        .heading("p99 at each offered load")
        .paragraph(
            "p99 latency (µs) of every configuration at each offered load, with the offered rate \
             when all configurations share it; * marks a point that failed a self-check; - a point \
             not run because the curve had saturated before it.",
        )
        .table(&p99_table(sweep, records))
        .heading("Median latency at each offered load")
        .paragraph("p50 latency (µs); medians are far less sensitive than p99 to stalls of a shared machine.")
        .table(&load_table(sweep, records, PointMetric::P50))
        .heading("Server CPU per request at each offered load")
        .paragraph(
            "CPU time of the server process (user + system) per reply received, µs: what each \
             request costs the server, idle wake-ups included; - where the server's CPU time was \
             not recorded.",
        )
        .table(&load_table(sweep, records, PointMetric::ServerCpuPerRequest));
    let failing = summaries
        .iter()
        .filter(|s| matches!(s.self_check, SelfCheck::Fail(_) | SelfCheck::Error(_)))
        .count();
    if failing > 0 {
        r = r.heading(format!(
            "Self-check failures ({failing} of {} configurations)",
            summaries.len()
        ));
    }
    for sm in summaries {
        match &sm.self_check {
            SelfCheck::Fail(notes) => {
                for n in notes {
                    r = r.alert(format!("self-check FAILED: {n}"));
                }
            }
            SelfCheck::Error(e) => {
                r = r.alert(format!(
                    "{} [{}]: ERROR: {e}",
                    sm.spec.name,
                    sm.spec.group()
                ))
            }
            _ => {}
        }
    }
    let mut groups: Vec<String> = Vec::new();
    for c in &sweep.curves {
        if !groups.contains(&c.group()) {
            groups.push(c.group());
        }
    }
    for g in &groups {
        let members: Vec<&CurveSummary> =
            summaries.iter().filter(|s| s.spec.group() == *g).collect();
        r = r.heading(g.clone());
        let series: Vec<Series> = members
            .iter()
            .map(|m| {
                let pts = records
                    .iter()
                    .filter(|p| p.curve == m.curve)
                    .filter_map(|p| p.result().map(|x| (x.achieved_rps, x.latency.p99.value)))
                    .collect();
                Series::new(m.spec.name.clone(), pts)
            })
            .collect();
        let slos: Vec<f64> = members.iter().filter_map(|m| m.slo_us).collect();
        let slo = (!slos.is_empty()).then(|| slos.iter().sum::<f64>() / slos.len() as f64);
        let bounds: Vec<Series> = members
            .first()
            .and_then(|m| {
                m.measured_service_us
                    .or(m.nominal_service_us)
                    .map(|sv| bound::bound_curves(&m.spec, sv))
            })
            .unwrap_or_default();
        let labels = Labels::new(
            format!("p99 vs throughput — {g}"),
            "throughput (req/s)",
            "p99 latency (µs, log)",
        );
        let caption = format!(
            "p99 latency against achieved throughput; dashed red: SLO {} µs (mean of the configurations' SLOs); bound lines: {}",
            opt(slo, 0),
            if bounds.is_empty() { bound::MISSING } else { "dashed grey" }
        );
        r = r.svg(
            caption,
            plot::p99_vs_load_svg(&labels, &series, &bounds, slo),
        );
        let (cdf, coarse) = cdf_series(&members, records, s.cdf_load);
        let labels = Labels::new(
            format!("latency CDF at load ≈ {} — {g}", s.cdf_load),
            "latency (µs)",
            "fraction of requests",
        );
        let caption = if coarse.is_empty() {
            "CDF from the generator's HdrHistogram interval logs".to_string()
        } else {
            format!(
                "CDF; from percentiles only (no interval log) for: {}",
                coarse.join(", ")
            )
        };
        r = r.svg(caption, plot::cdf_svg(&labels, &cdf));
    }
    r = r
        .heading("All points")
        .table(&compact_points(sweep, records));
    r.render()
}

/// Per curve, the CDF at the measured load closest to `load`; also the
/// names whose CDF had to come from percentiles.
fn cdf_series(
    members: &[&CurveSummary],
    records: &[PointRecord],
    load: f64,
) -> (Vec<Series>, Vec<String>) {
    let mut series = Vec::new();
    let mut coarse = Vec::new();
    for m in members {
        let best = records
            .iter()
            .filter(|p| p.curve == m.curve && p.result().is_some())
            .min_by(|a, b| (a.load - load).abs().total_cmp(&(b.load - load).abs()));
        let Some(p) = best else { continue };
        let Outcome::Measured {
            result, hdr_log, ..
        } = &p.outcome
        else {
            continue;
        };
        let from_log = hdr_log
            .as_ref()
            .and_then(|path| hdr::read_log(path).ok())
            .map(|h| {
                let f = hdr::unit_to_us(&h, result);
                hdr::cdf_points(&h, f, 400)
            });
        let pts = match from_log {
            Some(pts) if !pts.is_empty() => pts,
            _ => {
                coarse.push(m.spec.name.clone());
                hdr::cdf_from_percentiles(result)
            }
        };
        series.push(Series::new(format!("{} @ {:.2}", m.spec.name, p.load), pts));
    }
    (series, coarse)
}

fn compact_points(sweep: &Sweep, records: &[PointRecord]) -> Table {
    let mut t = Table::new([
        "config",
        "group",
        "load",
        "target req/s",
        "achieved req/s",
        "p99 µs",
        "S̄ meas. µs",
        "status",
        "checks",
    ]);
    for c in 2..=6 {
        t = t.align(c, Align::Right);
    }
    for r in records {
        let c = &sweep.curves[r.curve];
        let (achieved, p99, sv, status, checks) = match &r.outcome {
            Outcome::Measured {
                result: x,
                saturated,
                ..
            } => (
                format!("{:.0}", x.achieved_rps),
                format!("{:.0}", x.latency.p99.value),
                opt(x.measured_service_us, 1),
                if *saturated {
                    "saturated".to_string()
                } else {
                    "measured".to_string()
                },
                point_check(x),
            ),
            Outcome::Failed { error } => (
                String::new(),
                String::new(),
                String::new(),
                "failed".into(),
                error.clone(),
            ),
            Outcome::Skipped => (
                String::new(),
                String::new(),
                String::new(),
                "skipped".into(),
                String::new(),
            ),
        };
        t.push([
            c.name.clone(),
            c.group(),
            format!("{:.2}", r.load),
            format!("{:.0}", r.target_rps),
            achieved,
            p99,
            sv,
            status,
            checks,
        ]);
    }
    t
}

/// `PASS`, `FAIL` or `FAIL: notes` for one point.
fn point_check(x: &skq_report::result::PointResult) -> String {
    let mut why = x.checks.notes.clone();
    if x.errors.total() > 0 {
        why.push(format!("{} correctness errors", x.errors.total()));
    }
    match (x.checks.pass && x.errors.total() == 0, why.is_empty()) {
        (true, _) => "PASS".into(),
        (false, true) => "FAIL".into(),
        (false, false) => format!("FAIL: {}", why.join("; ")),
    }
}

/// Writes every output file into `dir` (which must exist).
pub fn write_all(
    dir: &Path,
    sweep: &Sweep,
    records: &[PointRecord],
    summaries: &[CurveSummary],
    run: &RunInfo,
) -> Result<()> {
    let w = |name: &str, text: String| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    };
    let table = summary_table(summaries, &sweep.settings.baseline);
    w(
        "summary.txt",
        format!(
            "{}\np99 (µs) at each offered load (* = the point failed a self-check):\n{}\np50 (µs) at each offered load:\n{}\nserver CPU (user + system) per reply, µs:\n{}",
            table.to_text(),
            p99_table(sweep, records).to_text(),
            load_table(sweep, records, PointMetric::P50).to_text(),
            load_table(sweep, records, PointMetric::ServerCpuPerRequest).to_text()
        ),
    )?;
    w("summary.csv", table.to_csv())?;
    let file = SummaryFile {
        run: run.clone(),
        settings: sweep.settings.clone(),
        curves: summaries.to_vec(),
    };
    w("summary.json", serde_json::to_string_pretty(&file)?)?;
    w("points.csv", points_table(sweep, records).to_csv())?;
    w("points.json", serde_json::to_string_pretty(records)?)?;
    w("report.html", report_html(sweep, records, summaries, run))?;
    Ok(())
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of a Unix time in seconds.
pub fn utc_string(unix_s: u64) -> String {
    let (days, secs) = (unix_s / 86_400, unix_s % 86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc_string(0), "1970-01-01 00:00:00");
        assert_eq!(utc_string(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(utc_string(951_782_400), "2000-02-29 00:00:00");
    }
}
