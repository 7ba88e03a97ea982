//! The tables every output shows: the per-configuration summary, a metric
//! at each offered load, `points.csv` (written and read back), and the
//! report's compact list of points.

use anyhow::Result;
use skq_report::table::{Align, Table};

use super::opt;
use crate::bound;
use crate::config::Sweep;
use crate::summary::CurveSummary;
use crate::sweep::{Outcome, PointRecord};

/// The summary table (terminal, summary.txt and HTML; summary.csv adds a
/// column, see [`summary_csv`]).
pub fn summary_table(summaries: &[CurveSummary], baseline: &str) -> Table {
    summary_with(summaries, baseline, None)
}

/// `summary.csv`: the summary table with an `rss` column (emulated RSS as
/// the points ran, [`crate::rss::RssStatus::label`]), so the file says it on
/// its own.
pub fn summary_csv(summaries: &[CurveSummary], baseline: &str, rss: &str) -> String {
    summary_with(summaries, baseline, Some(rss)).to_csv()
}

fn summary_with(summaries: &[CurveSummary], baseline: &str, rss: Option<&str>) -> Table {
    let ratio = format!("× {baseline}");
    let mut head = vec![
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
        "high-pri/probe p99 µs low→peak",
        "server CPU µs/req",
        "ctx sw/req vol+invol",
        "disturbed/decisive",
    ];
    if rss.is_some() {
        head.push("rss");
    }
    let mut t = Table::new(head);
    for c in [3, 4, 5, 6, 7, 8, 9, 10, 13, 15, 16, 17] {
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
        let mut row = vec![
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
            crate::priority::PrioritySummary::cell(s.priority.as_ref()),
            opt(s.cpu_s_per_request.map(|c| c * 1e6), 1),
            s.ctx_switches_per_request
                .map_or_else(|| "-".into(), |c| c.cell()),
            s.disturbed_cell(),
        ];
        row.extend(rss.map(str::to_string));
        t.push(row);
    }
    t
}

/// Columns of `points.csv`. `server_ctx_voluntary` and
/// `server_ctx_involuntary` are the server's context switches over the
/// window of `server_cpu_s` (counts; divide by `achieved_rps` × the
/// measured seconds for a figure per reply). `disturbance_cpu` is the CPU
/// used by processes outside the run over the same window, in CPUs;
/// `service_overshoot_us` how far emulated service overshot what the
/// requests asked, `host_delayed` whether that was past the sweep's limit
/// ([`crate::overshoot`]); `disturbed` whether either was found: the CPU
/// figure above the sweep's `disturbed_above` ([`crate::disturbance`]) or
/// the host delaying the server.
pub const POINT_COLUMNS: [&str; 37] = [
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
    "server_ctx_voluntary",
    "server_ctx_involuntary",
    "rss",
    "imbalance_pct",
    "steals_per_s",
    "migrations_per_s",
    "wakeups_per_event",
    "behind_busy_per_event",
    "disturbance_cpu",
    "disturbed",
    "service_overshoot_us",
    "host_delayed",
    "host_held",
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
    /// Server context switches per reply received, `voluntary+involuntary`.
    CtxSwitchesPerRequest,
    /// CPUs used by processes outside the run; `!` marks a disturbed point.
    Disturbance,
}

impl PointMetric {
    fn cell(self, r: &PointRecord) -> Option<String> {
        let x = r.result()?;
        match self {
            PointMetric::P99 => {
                let mark = if x.checks.pass { "" } else { "*" };
                Some(format!("{:.0}{mark}", x.latency.p99.value))
            }
            PointMetric::P50 => Some(format!("{:.0}", x.latency.p50.value)),
            PointMetric::ServerCpuPerRequest => {
                let cpu = x.server_cpu.as_ref()?;
                let replies = x.window_replies();
                (replies > 0.0).then(|| format!("{:.1}", (cpu.user_s + cpu.sys_s) * 1e6 / replies))
            }
            PointMetric::CtxSwitchesPerRequest => r
                .ctx_switches_per_reply()
                .map(|(v, i)| format!("{v:.2}+{i:.2}")),
            PointMetric::Disturbance => r.disturbance().map(|d| d.cell()),
        }
    }
}

/// A figure the server reports about itself, per point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerMetric {
    /// Busiest vs least busy worker's processing time, percent.
    Imbalance,
    /// Steals per second (skq driver).
    Steals,
    /// Migrations per second, all reasons (skq driver).
    Migrations,
    /// Idle workers claimed by a push per event delivered (skq driver).
    Wakeups,
    /// Events queued behind a busy worker per event delivered (skq driver).
    BehindBusy,
}

/// `metric` of every curve at each load fraction, from the server's own
/// statistics ("-" where the point was not measured or the server does not
/// count it).
pub fn server_table(sweep: &Sweep, records: &[PointRecord], metric: ServerMetric) -> Table {
    let loads = &sweep.settings.loads;
    let mut head = vec!["config".to_string(), "group".to_string()];
    head.extend(loads.iter().map(|l| format!("load {l}")));
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
                .and_then(|r| r.server_stats())
                .and_then(|s| match metric {
                    ServerMetric::Imbalance => Some(format!("{:.1}", s.imbalance_pct)),
                    ServerMetric::Steals => s.steals_per_s.map(|v| format!("{v:.0}")),
                    ServerMetric::Migrations => s.migrations_per_s.map(|v| format!("{v:.0}")),
                    ServerMetric::Wakeups => s.wakeups_per_event.map(|v| format!("{v:.3}")),
                    ServerMetric::BehindBusy => s.behind_busy_per_event.map(|v| format!("{v:.3}")),
                })
                .unwrap_or_else(|| "-".to_string());
            row.push(cell);
        }
        t.push(row);
    }
    t
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
                .and_then(|r| metric.cell(r))
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
            c.service_label(),
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
                let switches = r.ctx_switches();
                row.push(switches.map_or(String::new(), |c| c.voluntary.to_string()));
                row.push(switches.map_or(String::new(), |c| c.involuntary.to_string()));
            }
            Outcome::Failed { error } => {
                row.push("failed".into());
                row.extend(std::iter::repeat_n(String::new(), 13));
                row.push(error.clone());
            }
            Outcome::Skipped => row.push("skipped".into()),
        }
        row.resize(POINT_COLUMNS.len() - 11, String::new());
        row.push(r.rss.clone());
        let s = r.server_stats();
        let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        row.push(num(s.map(|s| s.imbalance_pct)));
        row.push(num(s.and_then(|s| s.steals_per_s)));
        row.push(num(s.and_then(|s| s.migrations_per_s)));
        row.push(num(s.and_then(|s| s.wakeups_per_event)));
        row.push(num(s.and_then(|s| s.behind_busy_per_event)));
        let d = r.disturbance();
        let o = r.overshoot();
        row.push(num(d.map(|d| d.cpu)));
        row.push(if d.is_some() || o.is_some() {
            r.disturbed().to_string()
        } else {
            String::new()
        });
        row.push(num(r.result().and_then(|x| x.service_overshoot_us())));
        row.push(o.map_or(String::new(), |o| o.delayed.to_string()));
        row.push(r.result().map_or(String::new(), |x| {
            crate::episode::host_held(x).is_some().to_string()
        }));
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

/// The report's list of every planned point: outcome, rates, p99, checks.
pub(super) fn compact_points(sweep: &Sweep, records: &[PointRecord]) -> Table {
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
        "disturbance CPU",
    ]);
    for c in (2..=6).chain([9]) {
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
                // `!`: the host delayed the server ([`crate::overshoot`]).
                format!(
                    "{}{}",
                    opt(x.measured_service_us, 1),
                    if r.overshoot().is_some_and(|o| o.delayed) {
                        "!"
                    } else {
                        ""
                    }
                ),
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
            r.disturbance().map_or_else(String::new, |d| d.cell()),
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
