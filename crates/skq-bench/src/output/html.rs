//! `report.html`: one self-contained page with the run's facts, the
//! tables, and per group a p99-versus-throughput plot and a latency CDF.

use skq_report::html::Report;
use skq_report::plot::{self, Labels, Series};

use super::tables::{compact_points, load_table, p99_table, summary_table, PointMetric};
use super::{busy_machine_warning, opt, RunInfo, INTERRUPTED};
use crate::bound;
use crate::config::Sweep;
use crate::hdr;
use crate::summary::{CurveSummary, SelfCheck};
use crate::sweep::{Outcome, PointRecord};

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
        .meta("emulated RSS", run.rss.describe())
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
    if run.rss.refused() {
        r = r.alert(format!(
            "emulated RSS was asked for but is off: {}",
            run.rss.off_reason.as_deref().unwrap_or("?")
        ));
    }
    if run.interrupted {
        r = r.alert(INTERRUPTED);
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
             (the column header names it) of the same workload, workers, connections \
             and service mode in this run. self-check: PASS when every point \
             under the SLO passed the load generator's checks and the first point over it kept its \
             schedule (Poisson arrivals, send lateness) with no correctness errors.",
        )
        .table(&summary_table(summaries, &sweep.settings.baseline));
    if !run.cross_checks.is_empty() {
        r = r
            .heading("Cross-check with wrk")
            .paragraph(
                "wrk, an independent closed-loop HTTP client, drove a fresh server of each curve \
                 with the curve's connections for one point's duration. A closed loop saturates \
                 the server, so its requests/s should agree with the highest rate skq load \
                 achieved; the nearest point is the curve's point whose achieved rate is closest \
                 to wrk's.",
            )
            .table(&cross_check_table(&run.cross_checks));
    }
    r = r
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

/// The cross-checks as a table.
fn cross_check_table(checks: &[crate::crosscheck::CrossCheck]) -> skq_report::table::Table {
    use skq_report::table::{Align, Table};
    let mut t = Table::new([
        "config",
        "wrk req/s",
        "wrk p50 µs",
        "wrk p99 µs",
        "server CPU µs/reply",
        "skq load peak req/s",
        "peak ÷ wrk",
        "nearest point: load",
        "achieved req/s",
        "p50 µs",
        "p99 µs",
    ]);
    for c in 1..11 {
        t = t.align(c, Align::Right);
    }
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for c in checks {
        let mut row = vec![c.config.clone()];
        match &c.wrk {
            Ok(w) => {
                row.extend([
                    format!("{:.0}", w.rps),
                    format!("{:.0}", w.p50_us),
                    format!("{:.0}", w.p99_us),
                    c.server_cpu_per_reply_us
                        .map_or("-".into(), |v| format!("{v:.1}")),
                    f(c.peak_achieved_rps),
                    c.peak_achieved_rps.map_or("-".into(), |p| {
                        format!("{:.2}", p / w.rps.max(f64::MIN_POSITIVE))
                    }),
                ]);
                match &c.matched {
                    Some(m) => row.extend([
                        format!("{:.2}", m.load),
                        format!("{:.0}", m.achieved_rps),
                        format!("{:.0}", m.p50_us),
                        format!("{:.0}", m.p99_us),
                    ]),
                    None => row.extend(std::iter::repeat_n("-".to_string(), 4)),
                }
            }
            Err(e) => {
                row.push(format!("failed: {e}"));
                row.extend(std::iter::repeat_n(String::new(), 9));
            }
        }
        t.push(row);
    }
    t
}
