//! Writing results: a text table for people, CSV for spreadsheets, JSON in the
//! `skq bench` record shape (`config` + a `PointResult`) for the other tools.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use skq_report::html::Report;
use skq_report::plot::{p99_vs_load_svg, Labels, Series};
use skq_report::result::PointResult;
use skq_report::table::Table;

use crate::model::PointOutcome;
use crate::sweep::max_load;

/// One JSON record: a configuration name and one load point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimRecord {
    /// Model or runtime mode (`centralized-fcfs`, `hybrid`, ...).
    pub config: String,
    /// Workers.
    pub workers: usize,
    /// Offered load as a fraction of capacity (`λ·S̄/n`).
    pub load: f64,
    /// The point, `meta.service_mode = "simulated"`.
    pub result: PointResult,
}

/// The JSON document of a sweep: an array of [`SimRecord`].
pub fn to_json(points: &[PointOutcome]) -> anyhow::Result<String> {
    let recs: Vec<SimRecord> = points
        .iter()
        .map(|p| SimRecord {
            config: p.model.clone(),
            workers: p.result.meta.cores_seen,
            load: p.load,
            result: p.result.clone(),
        })
        .collect();
    Ok(serde_json::to_string_pretty(&recs)?)
}

/// Column names of [`to_csv`].
pub const CSV_HEADER: &str =
    "config,workload,workers,connections,load,target_rps,achieved_rps,mean_us,p50_us,p90_us,\
p99_us,p99_ci_low_us,p99_ci_high_us,p999_us,max_us,measured_service_us,missing,events,high_p99_us,\
cpu_us_per_req,switches_per_req,syscalls_per_req";

/// One CSV line per point, after [`CSV_HEADER`].
pub fn to_csv(points: &[PointOutcome]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for p in points {
        let r = &p.result;
        let l = &r.latency;
        let _ = writeln!(
            s,
            "{},{},{},{},{:.4},{:.1},{:.1},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{},{}",
            p.model,
            r.meta.workload,
            r.meta.cores_seen,
            r.meta.connections,
            p.load,
            r.target_rps,
            r.achieved_rps,
            l.mean,
            l.p50.value,
            l.p90.value,
            l.p99.value,
            l.p99.ci_low,
            l.p99.ci_high,
            l.p999.value,
            l.max,
            r.measured_service_us.map_or(String::new(), |v| format!("{v:.3}")),
            r.errors.missing,
            p.events,
            r.high_priority_latency
                .as_ref()
                .map_or(String::new(), |h| format!("{:.3}", h.p99.value)),
            p.core
                .map_or(String::new(), |c| format!("{:.3}", c.cpu_us_per_req)),
            p.core
                .map_or(String::new(), |c| format!("{:.3}", c.switches_per_req)),
            p.core
                .map_or(String::new(), |c| format!("{:.3}", c.syscalls_per_req)),
        );
    }
    s
}

/// A fixed-width table of one model's points.
pub fn table(points: &[&PointOutcome]) -> String {
    let cost = points.iter().any(|p| p.core.is_some());
    let mut s = String::from("   load    offered/s   achieved/s     p50 µs     p99 µs   p99.9 µs");
    if cost {
        s.push_str("  CPU µs/req  switches/req");
    }
    s.push('\n');
    for p in points {
        let r = &p.result;
        let _ = writeln!(
            s,
            "  {:5.3} {:12.0} {:12.0} {:10.1} {:10.1} {:10.1}{}{}",
            p.load,
            r.target_rps,
            r.achieved_rps,
            r.latency.p50.value,
            r.latency.p99.value,
            r.latency.p999.value,
            p.core.map_or(String::new(), |c| format!(
                " {:11.2} {:13.2}",
                c.cpu_us_per_req, c.switches_per_req
            )),
            match (&r.high_priority_latency, r.errors.missing) {
                (_, m) if m > 0 => format!("  ({m} never served)"),
                (Some(h), _) => format!("  high-priority p99 {:.1}", h.p99.value),
                _ => String::new(),
            } + &match &r.batch_latency {
                Some(b) => format!(
                    "  best-effort {:.0}/s p99 {:.1}",
                    b.count as f64 / r.meta.duration_s.max(1e-9),
                    b.p99.value
                ),
                None => String::new(),
            }
        );
    }
    s
}

/// Names of the models in `points`, in first-seen order.
fn model_names(points: &[PointOutcome]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for p in points {
        if !names.contains(&p.model.as_str()) {
            names.push(&p.model);
        }
    }
    names
}

/// p99 against offered load (fraction of capacity): runtime modes as solid
/// lines, reference models as dashed bounds, and the SLO line.
pub fn p99_svg(title: &str, points: &[PointOutcome], slo_us: f64) -> String {
    let mut series = Vec::new();
    let mut bounds = Vec::new();
    for name in model_names(points) {
        let pts: Vec<&PointOutcome> = points.iter().filter(|p| p.model == name).collect();
        let line = Series::new(
            name,
            pts.iter()
                .map(|p| (p.load, p.result.latency.p99.value))
                .collect(),
        );
        if pts[0].core.is_some() {
            series.push(line);
        } else {
            bounds.push(line);
        }
    }
    let labels = Labels::new(
        title,
        "offered load (fraction of capacity n/S̄)",
        "p99 latency (µs)",
    );
    p99_vs_load_svg(&labels, &series, &bounds, Some(slo_us))
}

/// A self-contained HTML page: parameters, maximum load at SLO per model,
/// the p99 plot and every point.
pub fn html(
    title: &str,
    params: &[(String, String)],
    points: &[PointOutcome],
    slo_us: f64,
) -> String {
    let mut report = Report::new(title);
    for (k, v) in params {
        report = report.meta(k.clone(), v.clone());
    }
    let mut t = Table::new(["model", "max load at SLO (req/s)", "fraction of capacity"]);
    for name in model_names(points) {
        let pts: Vec<&PointOutcome> = points.iter().filter(|p| p.model == name).collect();
        let cap = pts[0].result.target_rps / pts[0].load;
        let (load, frac) = match max_load(&pts, slo_us) {
            None => ("SLO missed at every load".to_string(), "–".to_string()),
            Some(k) => {
                let ge = if k.lower_bound { "≥ " } else { "" };
                (
                    format!("{ge}{:.0}", k.load),
                    format!("{ge}{:.3}", k.load / cap),
                )
            }
        };
        t.push([name.to_string(), load, frac]);
    }
    let mut text = String::new();
    for name in model_names(points) {
        let pts: Vec<&PointOutcome> = points.iter().filter(|p| p.model == name).collect();
        let _ = writeln!(text, "== {name}\n{}", table(&pts));
    }
    report
        .heading("Maximum load at SLO")
        .table(&t)
        .svg(
            format!("p99 against load; SLO {slo_us:.1} µs"),
            p99_svg(title, points, slo_us),
        )
        .heading("Points")
        .pre(text)
        .render()
}
