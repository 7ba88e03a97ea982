//! Everything a sweep leaves behind, built from its records and summaries:
//!
//! | file           | content                                                  |
//! |----------------|----------------------------------------------------------|
//! | `summary.txt`  | the run's facts ([`run_lines`]) and the terminal tables  |
//! | `summary.csv`  | the summary table as CSV, plus an `rss` column           |
//! | `summary.json` | run info, settings and one [`CurveSummary`] per curve    |
//! | `points.csv`   | one row per planned point ([`POINT_COLUMNS`])            |
//! | `points.json`  | one [`PointRecord`] per planned point, full results      |
//! | `report.html`  | self-contained report with inline SVG plots              |
//! | `plots/`       | each group's p99-against-load chart as its own SVG file ([`plot_files`]) |
//! | `points/`, `hdr/`, `logs/` | per-point generator JSON, HdrHistogram interval logs, process output |
//!
//! Every text, CSV, JSON and HTML output shows the server's cost beside its
//! latency: CPU time and context switches (voluntary+involuntary) per reply
//! (`server CPU µs/req`, `ctx sw/req vol+invol` in the summary table and its
//! JSON; `server_cpu_s`, `server_ctx_voluntary`, `server_ctx_involuntary` in
//! `points.csv`; `server_ctx_switches` in `points.json`; a per-load table of
//! each in `summary.txt` and the report).
//!
//! Every one of them says whether emulated RSS was on, over which CPUs and
//! with what migration period, or why it was off ([`RunInfo::rss`]; the
//! `rss` field and column of every point record), and whether a signal
//! interrupted the sweep.
//!
//! Every one of them says how much CPU processes outside the run used while
//! each point ran ([`crate::disturbance`]): `disturbance_cpu` and
//! `disturbed` in `points.csv`, `disturbance` in `points.json`, a per-load
//! table (`!` marks a disturbed point) in `summary.txt` and the report, and
//! per configuration the disturbed decisive points (`disturbed/decisive` in
//! the summary table; `disturbed`, `decisive_points` and
//! `max_disturbance_cpu` in `summary.json`), with their total in
//! [`disturbance_line`]. Decisive points whose p99 came from a short
//! episode ([`crate::episode`]) are listed after it ([`episode_lines`];
//! `episodes` of each curve in `summary.json`).
//!
//! Every one of them names how each server was started
//! ([`crate::peers::ServerSetup`]: the command line, nginx's whole
//! configuration, what a tokio mode does), in `summary.txt`, the report's
//! "Servers" section and `summary.json`'s `servers`.
//!
//! Rendering goes through `skq_report` ([`skq_report::table`],
//! [`skq_report::plot`], [`skq_report::html`]); this module only chooses
//! what to show.

mod html;
mod tables;

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub use html::{report_html, report_model};
pub use tables::{
    load_table, p99_table, parse_points_csv, points_table, summary_csv, summary_table, PointMetric,
    PointRow, POINT_COLUMNS,
};
pub use tables::{server_table, ServerMetric};

use crate::peers::ServerSetup;

use crate::config::{Settings, Sweep};
use crate::crosscheck::CrossCheck;
use crate::rss::RssStatus;
use crate::summary::CurveSummary;
use crate::sweep::PointRecord;

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
    /// Emulated RSS as it was in force.
    #[serde(default)]
    pub rss: RssStatus,
    /// A signal stopped the sweep before its end.
    #[serde(default)]
    pub interrupted: bool,
    /// The wrk cross-checks of the curves that asked for one
    /// ([`crate::crosscheck`]).
    #[serde(default)]
    pub cross_checks: Vec<CrossCheck>,
}

/// The run's facts every text output starts with: emulated RSS, and the
/// interruption when there was one.
pub fn run_lines(run: &RunInfo) -> Vec<String> {
    let mut lines = vec![format!("emulated RSS: {}", run.rss.describe())];
    if run.interrupted {
        lines.push(INTERRUPTED.to_string());
    }
    lines
}

/// The cross-check section of the text summaries (empty without one).
pub fn cross_check_lines(run: &RunInfo) -> Vec<String> {
    if run.cross_checks.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![
        "cross-check: wrk, an independent closed-loop client, on a fresh server with the curve's connections (saturation), beside skq load's peak and its nearest point:".to_string(),
    ];
    lines.extend(run.cross_checks.iter().map(|c| format!("  {}", c.line())));
    lines
}

/// What the outputs of an interrupted sweep say.
pub const INTERRUPTED: &str =
    "interrupted: a signal stopped the sweep; the points after it were not run (skipped)";

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

/// The warning when the host delayed most of the run
/// ([`crate::overshoot::run_level`]); None when it did not or too few
/// points had emulated service.
pub fn host_delay_warning(records: &[PointRecord]) -> Option<String> {
    crate::overshoot::run_level(records.iter().filter_map(|r| r.result()))
        .filter(|o| o.delayed)
        .map(|o| o.describe())
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
    /// How each server was started.
    #[serde(default)]
    pub servers: Vec<ServerSetup>,
    /// The run's emulated service overshoot as a whole
    /// ([`crate::overshoot::run_level`]; absent with fewer than ten
    /// emulated points, and in files from before 2026-12-03 evening).
    #[serde(default)]
    pub run_overshoot: Option<crate::overshoot::RunOvershoot>,
}

/// The run's total of disturbed decisive points, one line.
pub fn disturbance_line(summaries: &[CurveSummary], settings: &Settings) -> String {
    let decisive: usize = summaries.iter().map(|s| s.decisive_points).sum();
    let disturbed: usize = summaries.iter().map(|s| s.disturbed.len()).sum();
    format!(
        "disturbed decisive points: {disturbed} of {decisive} (processes outside the run used more \
         than {} CPU while the point ran, the server's emulated service overshot the run's \
         median by more than {:.0} µs or {:.0}% of the service asked, or the point's tail came \
         from seconds in which the host held the machine; the points at or under the SLO and \
         the first over it decide max load)",
        settings.disturbed_above,
        crate::overshoot::SLACK_US,
        crate::overshoot::SLACK_FRACTION * 100.0
    )
}

/// The line that counts the decisive points whose p99 came from a short
/// episode ([`crate::episode`]); None when there is none.
pub fn episode_heading(summaries: &[CurveSummary]) -> Option<String> {
    let decisive: usize = summaries.iter().map(|s| s.decisive_points).sum();
    let n: usize = summaries.iter().map(|s| s.episodes.len()).sum();
    (n > 0).then(|| {
        format!(
            "tail episodes at decisive points: {n} of {decisive} (with at most {:.0}% of a \
             point's one-second intervals set aside, its p99 is over {}× every other \
             interval's: a host stall or a burst held the tail; information, but for those \
             the host held, counted as disturbed above)",
            crate::episode::MAX_SHARE * 100.0,
            crate::episode::FACTOR
        )
    })
}

/// [`episode_heading`], then one line per episode (`  episode: …`), each
/// line ending in a newline; None when there is none.
pub fn episode_lines(summaries: &[CurveSummary]) -> Option<String> {
    let mut out = episode_heading(summaries)? + "\n";
    for e in summaries.iter().flat_map(|s| &s.episodes) {
        out.push_str(&format!("  episode: {e}\n"));
    }
    Some(out)
}

/// The servers section of `summary.txt`: each way a server was started,
/// with the files it was given.
pub fn server_setup_lines(setups: &[ServerSetup]) -> String {
    let mut out = String::from("servers (PORT and WORKDIR stand for what each point picks):\n");
    for s in setups {
        out.push_str(&format!(
            "  {}: {}\n    {}\n",
            s.configs.join(", "),
            s.about,
            s.command
        ));
        for (name, text) in &s.files {
            out.push_str(&format!("    WORKDIR/{name}:\n"));
            for l in text.lines() {
                out.push_str(&format!("      {l}\n"));
            }
        }
    }
    out
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
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
    let setups = crate::peers::server_setups(&sweep.curves);
    w(
        "summary.txt",
        format!(
            "{}\n{}{}\n{}{}{}p99 (µs) at each offered load (* = the point failed a self-check):\n{}\np50 (µs) at each offered load:\n{}\nserver CPU (user + system) per reply, µs:\n{}\nserver context switches per reply, voluntary+involuntary:\n{}\n{}\n{}\n{}{}",
            run_lines(run).join("\n"),
            table.to_text(),
            disturbance_line(summaries, &sweep.settings),
            host_delay_warning(records)
                .map(|w| format!("warning: {w}\n"))
                .unwrap_or_default(),
            episode_lines(summaries).unwrap_or_default(),
            cross_check_lines(run)
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<String>(),
            p99_table(sweep, records).to_text(),
            load_table(sweep, records, PointMetric::P50).to_text(),
            load_table(sweep, records, PointMetric::ServerCpuPerRequest).to_text(),
            load_table(sweep, records, PointMetric::CtxSwitchesPerRequest).to_text(),
            disturbance_heading(&sweep.settings),
            load_table(sweep, records, PointMetric::Disturbance).to_text(),
            server_lines(sweep, records),
            server_setup_lines(&setups),
        ),
    )?;
    w(
        "summary.csv",
        summary_csv(summaries, &sweep.settings.baseline, &run.rss.label()),
    )?;
    let file = SummaryFile {
        run: run.clone(),
        settings: sweep.settings.clone(),
        curves: summaries.to_vec(),
        servers: setups,
        run_overshoot: crate::overshoot::run_level(records.iter().filter_map(|r| r.result())),
    };
    w("summary.json", serde_json::to_string_pretty(&file)?)?;
    w("points.csv", points_table(sweep, records).to_csv())?;
    w("points.json", serde_json::to_string_pretty(records)?)?;
    let model = report_model(sweep, records, summaries, run);
    w("report.html", model.render())?;
    let plots = dir.join("plots");
    std::fs::create_dir_all(&plots).with_context(|| format!("creating {}", plots.display()))?;
    for (name, svg) in plot_files(&model) {
        w(&format!("plots/{name}"), svg)?;
    }
    Ok(())
}

/// The report's p99-against-load charts as `(file name, SVG document)`, one
/// per group, named `p99-<group>.svg` with the group's title reduced to
/// lower-case letters, digits and dashes (e.g. `p99-exponential-8-workers-64-conns-emulate-rpc.svg`),
/// so a page such as `docs/RESULTS.md` can show one as an image.
pub fn plot_files(model: &skq_report::html::Report) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for b in &model.blocks {
        if let skq_report::html::Block::Chart {
            chart: chart @ skq_report::plot::Chart::P99VsLoad { labels, .. },
            ..
        } = b
        {
            let group = labels.title.rsplit(" — ").next().unwrap_or(&labels.title);
            let mut name = format!("p99-{}", slug(group));
            let base = name.clone();
            let mut k = 2;
            while out.iter().any(|(n, _)| *n == format!("{name}.svg")) {
                name = format!("{base}-{k}");
                k += 1;
            }
            out.push((format!("{name}.svg"), chart.svg()));
        }
    }
    out
}

/// `s` in lower case with every run of other characters than ASCII letters
/// and digits turned into one dash, none at either end.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// The heading of the per-load disturbance table.
pub fn disturbance_heading(settings: &Settings) -> String {
    format!(
        "CPU used by processes outside the run while each point ran, in CPUs (/proc/stat user + \
         nice + system + steal, less the server's and the generator's CPU; ! = disturbed, above {}):",
        settings.disturbed_above
    )
}

/// The server's own figures per point (imbalance, steals/s, migrations/s,
/// wake-ups and events behind a busy worker per event), or nothing when no
/// server wrote statistics.
pub fn server_lines(sweep: &Sweep, records: &[PointRecord]) -> String {
    if records.iter().all(|r| r.server_stats().is_none()) {
        return String::new();
    }
    format!(
        "worker imbalance, busiest vs least busy processing time (%), from the server's statistics:\n{}\nsteals per second (skq scheduler):\n{}\nmigrations per second (skq scheduler, all reasons):\n{}\nidle workers claimed by a push per event delivered (skq scheduler; a wake-up unless the harvester claims itself):\n{}\nevents queued behind a busy worker per event delivered (skq scheduler):\n{}",
        server_table(sweep, records, ServerMetric::Imbalance).to_text(),
        server_table(sweep, records, ServerMetric::Steals).to_text(),
        server_table(sweep, records, ServerMetric::Migrations).to_text(),
        server_table(sweep, records, ServerMetric::Wakeups).to_text(),
        server_table(sweep, records, ServerMetric::BehindBusy).to_text()
    )
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
    fn slugs_keep_letters_and_digits_only() {
        assert_eq!(
            slug("exponential · 8 workers · 64 conns · emulate · rpc"),
            "exponential-8-workers-64-conns-emulate-rpc"
        );
        assert_eq!(slug("  sphinx-ro (24 conns)  "), "sphinx-ro-24-conns");
        assert_eq!(slug("··"), "");
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc_string(0), "1970-01-01 00:00:00");
        assert_eq!(utc_string(1_700_000_000), "2023-11-14 22:13:20");
        assert_eq!(utc_string(951_782_400), "2000-02-29 00:00:00");
    }
}
