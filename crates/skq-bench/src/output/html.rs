//! `report.html`: one self-contained page with the run's facts, the
//! tables, and per group a p99-versus-throughput plot and a latency CDF.
//!
//! The bench builds the page as data ([`report_model`]: text, tables, and charts
//! as [`Chart`] values holding their series) and `skq_report` draws it
//! ([`Report::render`]); nothing here draws, and the drawing code calls
//! nothing back.

use skq_report::html::Report;
use skq_report::plot::{Chart, Labels, Series};

use super::tables::{compact_points, load_table, p99_table, summary_table, PointMetric};
use super::{
    busy_machine_warning, disturbance_heading, disturbance_line, episode_heading,
    host_delay_warning, opt, RunInfo, INTERRUPTED,
};
use crate::bound;
use crate::config::Sweep;
use crate::hdr;
use crate::summary::{CurveSummary, SelfCheck};
use crate::sweep::{Outcome, PointRecord};

/// The HTML report, drawn by `skq_report` from [`report_model`]'s model.
pub fn report_html(
    sweep: &Sweep,
    records: &[PointRecord],
    summaries: &[CurveSummary],
    run: &RunInfo,
) -> String {
    report_model(sweep, records, summaries, run).render()
}

/// The report as data: the run's facts, the tables, the self-check
/// failures, then per group its charts, and every point at the end.
pub fn report_model(
    sweep: &Sweep,
    records: &[PointRecord],
    summaries: &[CurveSummary],
    run: &RunInfo,
) -> Report {
    let mut r = header(sweep, summaries, run);
    r = tables(r, sweep, records, summaries, run);
    r = self_check_failures(r, summaries);
    r = disturbed_points(r, sweep, summaries);
    let mut groups: Vec<String> = Vec::new();
    for c in &sweep.curves {
        if !groups.contains(&c.group()) {
            groups.push(c.group());
        }
    }
    for g in &groups {
        let members: Vec<&CurveSummary> =
            summaries.iter().filter(|s| s.spec.group() == *g).collect();
        r = group_charts(r, sweep, g, &members, records);
    }
    r = servers(r, sweep);
    r.heading("All points")
        .table(&compact_points(sweep, records))
}

/// Every disturbed decisive point as an alert, under a heading that counts
/// them, after the run's total.
fn disturbed_points(mut r: Report, sweep: &Sweep, summaries: &[CurveSummary]) -> Report {
    let n: usize = summaries.iter().map(|s| s.disturbed.len()).sum();
    if n == 0 {
        return r;
    }
    r = r
        .heading(format!("Disturbed decisive points ({n})"))
        .paragraph(disturbance_line(summaries, &sweep.settings));
    for s in summaries {
        for d in &s.disturbed {
            r = r.alert(format!("disturbed: {d}"));
        }
    }
    r
}

/// How each server was started: command line, what it is, and the files it
/// was given (nginx's configuration) verbatim.
fn servers(mut r: Report, sweep: &Sweep) -> Report {
    r = r.heading("Servers").paragraph(
        "How each configuration's server was started; PORT and WORKDIR stand for the port and \
         the private folder each point picks. Peers are configured as their documentation \
         advises and given the same number of workers as the skq servers they are compared with.",
    );
    for s in crate::peers::server_setups(&sweep.curves) {
        r = r
            .paragraph(format!("{}: {}", s.configs.join(", "), s.about))
            .pre(s.command.clone());
        for (name, text) in &s.files {
            r = r.paragraph(format!("WORKDIR/{name}:")).pre(text.clone());
        }
    }
    r
}

/// The title, the header box of the run's facts, and the alerts about the
/// run as a whole.
fn header(sweep: &Sweep, summaries: &[CurveSummary], run: &RunInfo) -> Report {
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
    r
}

/// The summary table, the wrk cross-checks, and the per-load tables.
fn tables(
    mut r: Report,
    sweep: &Sweep,
    records: &[PointRecord],
    summaries: &[CurveSummary],
    run: &RunInfo,
) -> Report {
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
             schedule (Poisson arrivals, send lateness) with no correctness errors. server CPU \
             µs/req and ctx sw/req vol+invol: the server's CPU time and its threads' voluntary + \
             involuntary context switches over the measured points, per reply received. \
             disturbed/decisive: of the points that decide max load (every point at or under the \
             SLO and the first over it), those during which processes outside the run used more \
             CPU than the threshold.",
        )
        .table(&summary_table(summaries, &sweep.settings.baseline))
        .paragraph(disturbance_line(summaries, &sweep.settings));
    if let Some(w) = host_delay_warning(records) {
        r = r.alert(w);
    }
    if let Some(head) = episode_heading(summaries) {
        r = r.paragraph(head);
        for e in summaries.iter().flat_map(|s| &s.episodes) {
            r = r.alert(format!("episode: {e}"));
        }
    }
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
    r.heading("p99 at each offered load")
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
        .table(&load_table(sweep, records, PointMetric::ServerCpuPerRequest))
        .heading("Server context switches per request at each offered load")
        .paragraph(
            "Context switches of the server's threads (and of its worker processes, for nginx) \
             per reply received, over the same window as its CPU time, as voluntary+involuntary: \
             voluntary when a thread blocked (an idle wait, a wake-up handed to another thread), \
             involuntary when it was preempted. Summed over /proc/PID/task/*/status before and \
             after the point, so threads that exited in between are not counted; - where they \
             were not recorded.",
        )
        .table(&load_table(sweep, records, PointMetric::CtxSwitchesPerRequest))
        .heading("Disturbance at each offered load")
        .paragraph(format!(
            "{} Interrupt time (irq + softirq) is left out: the run's own loopback traffic is \
             processed there. Counters tick every 10 ms, so the figure is good to a few ticks per \
             window (about ±0.02 CPU over 2 s on 2 CPUs); negative figures read 0.",
            disturbance_heading(&sweep.settings)
        ))
        .table(&load_table(sweep, records, PointMetric::Disturbance))
}

/// One alert per failed self-check, under a heading that counts them.
fn self_check_failures(mut r: Report, summaries: &[CurveSummary]) -> Report {
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
    r
}

/// A group's section: p99 against throughput with the bounds and the SLO,
/// the latency CDF near the configured load, and the curves over time.
fn group_charts(
    mut r: Report,
    sweep: &Sweep,
    g: &str,
    members: &[&CurveSummary],
    records: &[PointRecord],
) -> Report {
    let s = &sweep.settings;
    r = r.heading(g);
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
    r = r.chart(
        caption,
        Chart::P99VsLoad {
            labels,
            series,
            bounds,
            slo,
        },
    );
    let (cdf, coarse) = cdf_series(members, records, s.cdf_load);
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
    r = r.chart(
        caption,
        Chart::Cdf {
            labels,
            series: cdf,
        },
    );
    over_time(r, g, members, records, s.point_secs)
}

/// For a group whose points have per-interval data (a rate profile or
/// `interval_ms`): offered rate, p99 per interval, active workers and
/// server CPU use on a shared time axis (the measured window), one line per
/// measured point, in stacked strips.
fn over_time(
    r: Report,
    group: &str,
    members: &[&CurveSummary],
    records: &[PointRecord],
    window_s: f64,
) -> Report {
    let points: Vec<(String, &PointRecord)> = members
        .iter()
        .flat_map(|m| {
            let mine: Vec<&PointRecord> = records
                .iter()
                .filter(|p| p.curve == m.curve)
                .filter(|p| {
                    p.series().is_some() || p.result().is_some_and(|x| !x.intervals.is_empty())
                })
                .collect();
            let many = mine.len() > 1;
            mine.into_iter().map(move |p| {
                let label = if many {
                    format!("{} @ {:.2}", m.spec.name, p.load)
                } else {
                    m.spec.name.clone()
                };
                (label, p)
            })
        })
        .collect();
    if points.is_empty() {
        return r;
    }
    let x = (0.0, window_s);
    let interval = |f: &dyn Fn(&skq_report::result::IntervalPoint) -> Option<f64>| -> Vec<Series> {
        points
            .iter()
            .map(|(label, p)| {
                let pts = p.result().map_or_else(Vec::new, |x| {
                    x.intervals
                        .iter()
                        .filter_map(|i| f(i).map(|v| (i.start_s, v)))
                        .collect()
                });
                Series::new(label.clone(), pts)
            })
            .collect()
    };
    let offered = interval(&|i| Some(i.offered_rps));
    let p99 = interval(&|i| i.p99_us);
    let workers: Vec<Series> = points
        .iter()
        .map(|(label, p)| {
            let pts = p
                .series()
                .map_or_else(Vec::new, |s| step_points(&s.workers, x));
            Series::new(label.clone(), pts)
        })
        .collect();
    let cpu: Vec<Series> = points
        .iter()
        .map(|(label, p)| {
            let pts = p.series().map_or_else(Vec::new, |s| {
                s.server_cpu
                    .iter()
                    .copied()
                    .filter(|&(t, _)| t >= x.0 && t <= x.1)
                    .collect()
            });
            Series::new(label.clone(), pts)
        })
        .collect();
    let strip = |what: &str, unit: &str, series: Vec<Series>| Chart::TimeSeries {
        labels: Labels::new(
            format!("{what} — {group}"),
            "time in the measured window (s)",
            unit,
        ),
        series,
        x_range: x,
    };
    r.heading(format!("Over time — {group}"))
        .paragraph(
            "Per interval of the measured window, on one time axis: the rate the generator \
             offered and the p99 of the requests scheduled in each interval (skq load \
             --interval-ms); the server's active workers (the resource manager's decisions from \
             its --stats-json; flat at the configured count when the count is fixed); and the \
             server's CPU use, sampled from /proc every interval (user + system, in cores).",
        )
        .chart(
            "offered rate per interval",
            strip("offered rate", "req/s", offered),
        )
        .chart("p99 per interval", strip("p99 per interval", "µs", p99))
        .chart(
            "active workers",
            strip("active workers", "workers", workers),
        )
        .chart("server CPU use", strip("server CPU use", "cores", cpu))
}

/// A step function's drawing points from `(time, value from then on)`
/// pairs, clipped to `range`: the value before the range's start carries
/// into it.
fn step_points(steps: &[(f64, f64)], range: (f64, f64)) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut current: Option<f64> = None;
    for &(t, v) in steps {
        if t <= range.0 {
            current = Some(v);
            continue;
        }
        if t > range.1 {
            break;
        }
        if let Some(c) = current {
            if out.is_empty() {
                out.push((range.0, c));
            }
            out.push((t, c));
        }
        out.push((t, v));
        current = Some(v);
    }
    if let Some(c) = current {
        if out.is_empty() {
            out.push((range.0, c));
        }
        out.push((range.1, c));
    }
    out
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
        "ctx sw/reply vol+invol",
        "skq load peak req/s",
        "peak ÷ wrk",
        "nearest point: load",
        "achieved req/s",
        "p50 µs",
        "p99 µs",
    ]);
    for c in 1..12 {
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
                    c.server_ctx_per_reply.map_or("-".into(), |c| c.cell()),
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
                row.extend(std::iter::repeat_n(String::new(), 10));
            }
        }
        t.push(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::step_points;

    #[test]
    fn steps_are_clipped_and_carry_into_the_window() {
        // Decided 8 before the window, 2 at 3 s, 8 at 5 s, 1 after the end.
        let steps = [(-1.0, 8.0), (3.0, 2.0), (5.0, 8.0), (20.0, 1.0)];
        assert_eq!(
            step_points(&steps, (0.0, 10.0)),
            vec![
                (0.0, 8.0),
                (3.0, 8.0),
                (3.0, 2.0),
                (5.0, 2.0),
                (5.0, 8.0),
                (10.0, 8.0)
            ]
        );
        // First decision inside the window: nothing drawn before it.
        assert_eq!(
            step_points(&[(2.0, 4.0)], (0.0, 10.0)),
            vec![(2.0, 4.0), (10.0, 4.0)]
        );
        assert!(step_points(&[], (0.0, 1.0)).is_empty());
    }
}
