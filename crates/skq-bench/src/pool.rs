//! `skq pool`: several `skq bench` runs of one sweep, pooled per point.
//!
//! One point's p99 rests on its own few thousand samples: the SKQ §6.8
//! probe sends ~600 requests a second, so an 8-s point's p99 is set by its
//! ~50 slowest replies and moves by tens of percent between runs of the
//! same build. Pooling merges, per configuration and offered load, the
//! histograms every run wrote (`skq load --hdr-log`: the load connections'
//! latency untagged, the probe's, the high-priority client's and the
//! best-effort client's tagged `probe`, `high`, `batch`), so the percentiles
//! rest on all the runs' samples at once.
//!
//! By default only points that passed every self-check and were not
//! disturbed are pooled, from runs the host did not delay as a whole
//! ([`crate::overshoot::run_level`]); `--all` takes every measured point. The table
//! says how many points went into each cell. The growth line per
//! configuration follows [`crate::priority`]'s rule on the pooled figures:
//! "low" is the lowest load with a pooled point, "peak" the highest load
//! whose pooled regular p99 is within the SLO (the runs' mean SLO for that
//! configuration). The same pooled regular p99s give the configuration's
//! max load at SLO, interpolated as one run's summary does.
//!
//! The same points' server CPU and context switches are pooled too: the
//! CPU-seconds summed over the runs divided by the replies summed over them
//! (`achieved_rps` × measured seconds, the denominator of one run's figure),
//! so one short point's tick of noise weighs no more than its replies.
//! `--cpu-vs NAME` divides each configuration's pooled CPU per reply by
//! that of the configuration NAME of the same workload group at the same
//! load: the main job's CPU at equal load over many runs instead of one
//! run's 1.5-s points. The ratio is paired by run: only the runs in which
//! both points were pooled enter it, numerator and denominator alike, so a
//! run the baseline lost to a failed check does not leave the other
//! configuration's figure weighted towards a different hour of the host
//! (one run's CPU per reply moves by a tenth between runs of the same
//! build). The per-run ratios' range and count are printed beside it.
//!
//! Pooling only the points that passed is not neutral between
//! configurations: where one configuration's slow points fail a check
//! more often than another's (the generator falls behind a server whose
//! tail is long, say), leaving them out favours it. So the regular
//! latency of every measured point is pooled beside the kept points', and
//! without `--all` the text names each configuration whose max load at SLO
//! would differ with every point pooled, and each point whose left-out
//! attempts put its pooled p99 on the other side of the SLO.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;

use skq_report::result::LOG_TAGS;
use skq_report::slo::max_load_at_slo;

use crate::hdr;
use crate::output::SummaryFile;
use crate::priority::low_and_peak;
use crate::sweep::PointRecord;

/// `skq pool` arguments.
#[derive(Args, Debug, Clone)]
pub struct PoolArgs {
    /// Output folders of `skq bench` runs of the same sweep (each holds
    /// points.json, summary.json and hdr/).
    #[arg(required = true, num_args = 1..)]
    pub dirs: Vec<PathBuf>,
    /// Pool every measured point, also those that failed a self-check or
    /// were disturbed (default: only points that passed every check).
    #[arg(long)]
    pub all: bool,
    /// Also write the pooled figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Divide each configuration's pooled server CPU per reply by that of
    /// the configuration of this name in the same workload group, at each
    /// load (e.g. `--cpu-vs epoll-shared`).
    #[arg(long, value_name = "NAME")]
    pub cpu_vs: Option<String>,
}

/// The classes of connection a log carries: (tag, name in the table).
/// The tagged ones are named by their tag ([`LOG_TAGS`]).
pub const CLASSES: [(Option<&str>, &str); 4] = [
    (None, "regular"),
    (Some(LOG_TAGS[0]), LOG_TAGS[0]),
    (Some(LOG_TAGS[1]), LOG_TAGS[1]),
    (Some(LOG_TAGS[2]), LOG_TAGS[2]),
];

/// One class's pooled latency at one point (µs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PooledClass {
    /// `regular`, `probe`, `high` or `batch`.
    pub class: String,
    /// Points whose histogram of this class went in.
    pub points: usize,
    /// Samples pooled.
    pub count: u64,
    /// Pooled percentiles and maximum (µs).
    pub p50_us: f64,
    /// See `p50_us`.
    pub p99_us: f64,
    /// See `p50_us`.
    pub p999_us: f64,
    /// See `p50_us`.
    pub max_us: f64,
}

/// One configuration at one offered load, pooled over the runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PooledPoint {
    /// Configuration label.
    pub config: String,
    /// Offered load fraction.
    pub load: f64,
    /// Offered load (requests/s; the mean over the runs that measured it).
    pub target_rps: f64,
    /// Runs that measured this point.
    pub measured: usize,
    /// Of those, points left out (a failed self-check, disturbed, or no
    /// interval log), each with its run folder and reason.
    pub left_out: Vec<String>,
    /// The classes with at least one histogram, in [`CLASSES`] order.
    pub classes: Vec<PooledClass>,
    /// Server CPU (user + system) per reply over the pooled points that
    /// measured it, µs: CPU-seconds summed over the runs divided by the
    /// replies summed over them.
    pub cpu_us_per_reply: Option<f64>,
    /// Pooled points behind `cpu_us_per_reply`.
    pub cpu_points: usize,
    /// Server context switches per reply, (voluntary, involuntary), pooled
    /// the same way.
    pub ctx_per_reply: Option<(f64, f64)>,
    /// The regular class's p99 pooled over every measured point with an
    /// interval log, those left out included (µs): what `--all` would give.
    pub every_p99_us: Option<f64>,
    /// Points behind `every_p99_us`.
    pub every_points: usize,
    /// The points behind `cpu_us_per_reply`, one per run: the CPU ratios
    /// pair them by run.
    pub cpu_runs: Vec<RunCpu>,
}

/// One run's server CPU at one pooled point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunCpu {
    /// Index of the run in the order given.
    pub run: usize,
    /// Server CPU-seconds (user + system) over the measured window.
    pub cpu_s: f64,
    /// Replies in that window.
    pub replies: f64,
}

/// One configuration's CPU per reply against the `--cpu-vs` configuration
/// at one load, over the runs where both were pooled.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuRatio {
    /// Configuration label.
    pub config: String,
    /// Offered load fraction.
    pub load: f64,
    /// Pooled CPU per reply ÷ the baseline's, both summed over the same runs.
    pub ratio: f64,
    /// Runs in which both points were pooled.
    pub runs: usize,
    /// Smallest and largest ratio of one run's two points.
    pub min: f64,
    /// See `min`.
    pub max: f64,
}

impl PooledPoint {
    /// The pooled figures of `class`, if any run had them.
    pub fn class(&self, class: &str) -> Option<&PooledClass> {
        self.classes.iter().find(|c| c.class == class)
    }
}

/// A configuration's growth from its lowest pooled load to its pooled peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PooledGrowth {
    /// Configuration label.
    pub config: String,
    /// Mean of the runs' SLOs for it (µs), when they had one.
    pub slo_us: Option<f64>,
    /// Lowest load with a pooled point.
    pub low_load: f64,
    /// Highest load whose pooled regular p99 is within the SLO (the
    /// lowest load when none is).
    pub peak_load: f64,
    /// `(class, p99 at low, p99 at peak)` for every class present at both.
    pub p99_us: Vec<(String, f64, f64)>,
    /// Loads some run measured but none pooled (every point left out):
    /// the peak cannot be judged past the first of them.
    pub unpooled_loads: Vec<f64>,
    /// Maximum load at SLO from the pooled regular p99s (requests/s),
    /// interpolated as `skq bench` does ([`max_load_at_slo`]); `None`
    /// without an SLO or when the lowest pooled load is already over it.
    pub max_load_rps: Option<f64>,
    /// No pooled point exceeded the SLO: the maximum is at least
    /// `max_load_rps`.
    pub max_load_is_lower_bound: bool,
    /// The same from every measured point's regular latency
    /// ([`PooledPoint::every_p99_us`]), left-out points included.
    pub every_max_load_rps: Option<f64>,
    /// See `every_max_load_rps` and `max_load_is_lower_bound`.
    pub every_max_load_is_lower_bound: bool,
}

/// Everything `skq pool` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pooled {
    /// The run folders.
    pub runs: Vec<PathBuf>,
    /// Whether points that failed a check were pooled too.
    pub all: bool,
    /// Per configuration (in the first run's order) and load.
    pub points: Vec<PooledPoint>,
    /// Per configuration.
    pub growth: Vec<PooledGrowth>,
    /// With `--cpu-vs NAME`: NAME, and per configuration of a group where
    /// NAME ran, per load at which some run pooled both, the pooled CPU per
    /// reply ÷ NAME's over those runs.
    pub cpu_vs: Option<String>,
    /// See `cpu_vs`.
    pub cpu_ratios: Vec<CpuRatio>,
    /// Runs the host delayed as a whole, each with the verdict's line: their
    /// points are left out unless `all`.
    pub delayed_runs: Vec<(PathBuf, String)>,
}

/// One `skq bench` output folder as read.
#[derive(Clone, Debug)]
pub struct RunDir {
    /// The folder.
    pub dir: PathBuf,
    /// Its points.json.
    pub records: Vec<PointRecord>,
    /// SLO per configuration label, from its summary.json (µs).
    pub slo_us: BTreeMap<String, f64>,
    /// Curve index → label `name [workload · workers · connections · …]`,
    /// from its summary.json: one sweep may run a name over several
    /// workloads (the main job's `hybrid` on exponential and bimodal-1).
    pub labels: BTreeMap<usize, String>,
}

impl RunDir {
    /// Reads `dir/points.json` and, when present, `dir/summary.json`.
    pub fn read(dir: &Path) -> Result<RunDir> {
        let points = dir.join("points.json");
        let text = std::fs::read_to_string(&points).with_context(|| {
            format!(
                "reading {} (is {} an `skq bench --out` folder?)",
                points.display(),
                dir.display()
            )
        })?;
        let records: Vec<PointRecord> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not skq bench's points.json", points.display()))?;
        let mut slo_us = BTreeMap::new();
        let mut labels = BTreeMap::new();
        let summary = dir.join("summary.json");
        if let Ok(text) = std::fs::read_to_string(&summary) {
            let s: SummaryFile = serde_json::from_str(&text)
                .with_context(|| format!("{}: not skq bench's summary.json", summary.display()))?;
            for c in &s.curves {
                let label = format!("{} [{}]", c.spec.name, c.spec.group());
                if let Some(slo) = c.slo_us {
                    slo_us.insert(label.clone(), slo);
                }
                labels.insert(c.curve, label);
            }
        }
        Ok(RunDir {
            dir: dir.to_path_buf(),
            records,
            slo_us,
            labels,
        })
    }

    /// A point's configuration label: its curve's from summary.json, else
    /// the name points.json gives.
    fn label_of(&self, rec: &PointRecord) -> String {
        self.labels
            .get(&rec.curve)
            .cloned()
            .unwrap_or_else(|| rec.config.clone())
    }

    /// Where a point's interval log is now: the folder's `hdr/` under the
    /// recorded file name (folders move after a run), else the recorded path.
    fn log_of(&self, recorded: &Path) -> PathBuf {
        let moved = recorded.file_name().map(|f| self.dir.join("hdr").join(f));
        match moved {
            Some(p) if p.exists() => p,
            _ => recorded.to_path_buf(),
        }
    }
}

/// Loads are compared as parts per million (sweeps list them as decimals).
fn load_key(load: f64) -> i64 {
    (load * 1e6).round() as i64
}

/// Pools `runs` (see the module documentation); with `cpu_vs`, the CPU
/// ratios against that configuration.
pub fn pool(runs: &[RunDir], all: bool, cpu_vs: Option<&str>) -> Result<Pooled> {
    if runs.is_empty() {
        bail!("nothing to pool: no run folders given");
    }
    // Configuration order: first appearance over the runs.
    let mut configs: Vec<String> = Vec::new();
    for r in runs {
        for rec in &r.records {
            let label = r.label_of(rec);
            if !configs.contains(&label) {
                configs.push(label);
            }
        }
    }
    /// One configuration at one load, as the runs are read.
    struct Cell {
        load: f64,
        measured: usize,
        target_sum: f64,
        left_out: Vec<String>,
        /// (index in [`CLASSES`], one run's histogram).
        hists: Vec<(usize, Histogram<u64>)>,
        /// Every measured point's regular histogram, left out or not.
        every: Vec<Histogram<u64>>,
        /// Server CPU-seconds and the replies they served, per run.
        cpu_runs: Vec<RunCpu>,
        /// Server context switches (voluntary, involuntary) and replies.
        ctx: (u64, u64),
        ctx_replies: f64,
    }
    let mut cells: BTreeMap<(usize, i64), Cell> = BTreeMap::new();
    let mut delayed_runs = Vec::new();
    for (run, r) in runs.iter().enumerate() {
        let run_delayed = crate::overshoot::run_level(r.records.iter().filter_map(|x| x.result()))
            .filter(|o| o.delayed);
        if let Some(o) = &run_delayed {
            delayed_runs.push((r.dir.clone(), o.describe()));
        }
        for rec in &r.records {
            let Some(result) = rec.result() else {
                continue;
            };
            let label = r.label_of(rec);
            let ci = configs.iter().position(|c| *c == label).expect("listed");
            let cell = cells
                .entry((ci, load_key(rec.load)))
                .or_insert_with(|| Cell {
                    load: rec.load,
                    measured: 0,
                    target_sum: 0.0,
                    left_out: Vec::new(),
                    hists: Vec::new(),
                    every: Vec::new(),
                    cpu_runs: Vec::new(),
                    ctx: (0, 0),
                    ctx_replies: 0.0,
                });
            cell.measured += 1;
            cell.target_sum += rec.target_rps;
            let why = if run_delayed.is_some() && !all {
                Some("the host delayed most of its run")
            } else if !result.checks.pass && !all {
                Some("failed a self-check")
            } else if rec.disturbed() && !all {
                Some("disturbed")
            } else {
                None
            };
            let mut by_tag = match &rec.outcome {
                crate::sweep::Outcome::Measured {
                    hdr_log: Some(log), ..
                } => {
                    let read = hdr::read_classes(&r.log_of(log));
                    // A point left out only adds to the every-point figure:
                    // an unreadable log there is skipped, not an error.
                    if why.is_some() {
                        read.ok()
                    } else {
                        Some(read?)
                    }
                }
                _ => None,
            };
            if let Some(h) = by_tag.as_ref().and_then(|m| m.get(&None)) {
                cell.every.push(h.clone());
            }
            if let Some(why) = why {
                cell.left_out.push(format!("{}: {why}", r.dir.display()));
                continue;
            }
            let replies = result.window_replies();
            if replies > 0.0 {
                if let Some(c) = &result.server_cpu {
                    cell.cpu_runs.push(RunCpu {
                        run,
                        cpu_s: c.user_s + c.sys_s,
                        replies,
                    });
                }
                if let Some(x) = rec.ctx_switches() {
                    cell.ctx.0 += x.voluntary;
                    cell.ctx.1 += x.involuntary;
                    cell.ctx_replies += replies;
                }
            }
            let Some(by_tag) = by_tag.as_mut() else {
                cell.left_out
                    .push(format!("{}: no interval log", r.dir.display()));
                continue;
            };
            for (k, (tag, _)) in CLASSES.iter().enumerate() {
                if let Some(h) = by_tag.remove(&tag.map(String::from)) {
                    cell.hists.push((k, h));
                }
            }
        }
    }
    let mut points = Vec::new();
    for ((ci, _), cell) in cells {
        let Cell {
            load,
            measured,
            target_sum,
            left_out,
            hists,
            every,
            cpu_runs,
            ctx,
            ctx_replies,
        } = cell;
        let mut classes = Vec::new();
        for (k, (_, name)) in CLASSES.iter().enumerate() {
            let mine: Vec<_> = hists
                .iter()
                .filter(|(c, _)| *c == k)
                .map(|(_, h)| h)
                .collect();
            let Some(merged) = merge(&mine)? else {
                continue;
            };
            // skq load logs nanoseconds.
            let us = |q: f64| merged.value_at_quantile(q) as f64 / 1e3;
            classes.push(PooledClass {
                class: (*name).into(),
                points: mine.len(),
                count: merged.len(),
                p50_us: us(0.5),
                p99_us: us(0.99),
                p999_us: us(0.999),
                max_us: merged.max() as f64 / 1e3,
            });
        }
        points.push(PooledPoint {
            config: configs[ci].clone(),
            load,
            target_rps: target_sum / measured as f64,
            measured,
            left_out,
            classes,
            cpu_us_per_reply: per_reply_us(cpu_runs.iter()),
            cpu_points: cpu_runs.len(),
            ctx_per_reply: (ctx_replies > 0.0)
                .then(|| (ctx.0 as f64 / ctx_replies, ctx.1 as f64 / ctx_replies)),
            cpu_runs,
            every_p99_us: merge(&every.iter().collect::<Vec<_>>())?
                .map(|m| m.value_at_quantile(0.99) as f64 / 1e3),
            every_points: every.len(),
        });
    }
    let cpu_ratios = cpu_vs.map_or_else(Vec::new, |base| cpu_ratios(&points, base));
    let growth = configs
        .iter()
        .filter_map(|c| growth_of(c, &points, runs))
        .collect();
    Ok(Pooled {
        runs: runs.iter().map(|r| r.dir.clone()).collect(),
        all,
        points,
        growth,
        cpu_vs: cpu_vs.map(String::from),
        cpu_ratios,
        delayed_runs,
    })
}

/// One histogram from several (`None` from none).
fn merge(hists: &[&Histogram<u64>]) -> Result<Option<Histogram<u64>>> {
    let Some(first) = hists.first() else {
        return Ok(None);
    };
    let mut merged = Histogram::new_from(*first);
    merged.auto(true);
    for h in hists {
        merged
            .add(*h)
            .map_err(|e| anyhow::anyhow!("merging histograms: {e:?}"))?;
    }
    Ok(Some(merged))
}

/// The workload group of a label `name [group]` (empty without one).
fn group_of(label: &str) -> &str {
    label
        .find(" [")
        .map_or("", |i| label[i + 2..].trim_end_matches(']'))
}

/// CPU-seconds over replies (µs per reply) of some runs' points; `None`
/// without replies.
fn per_reply_us<'a>(runs: impl Iterator<Item = &'a RunCpu>) -> Option<f64> {
    let (cpu_s, replies) = runs.fold((0.0, 0.0), |(c, n), r| (c + r.cpu_s, n + r.replies));
    (replies > 0.0).then(|| cpu_s * 1e6 / replies)
}

/// Each configuration's CPU per reply divided by `base`'s of the same group
/// at the same load, both pooled over the runs that pooled both points.
fn cpu_ratios(points: &[PooledPoint], base: &str) -> Vec<CpuRatio> {
    let mut out = Vec::new();
    for p in points {
        let group = group_of(&p.config);
        let label = if group.is_empty() {
            base.to_string()
        } else {
            format!("{base} [{group}]")
        };
        let Some(theirs) = points
            .iter()
            .find(|b| b.config == label && load_key(b.load) == load_key(p.load))
        else {
            continue;
        };
        // The runs that pooled both points, each with its own pair.
        let pairs: Vec<(&RunCpu, &RunCpu)> = p
            .cpu_runs
            .iter()
            .filter_map(|m| Some((m, theirs.cpu_runs.iter().find(|t| t.run == m.run)?)))
            .collect();
        let mine = per_reply_us(pairs.iter().map(|(m, _)| *m));
        let base_us = per_reply_us(pairs.iter().map(|(_, t)| *t));
        let (Some(mine), Some(base_us)) = (mine, base_us.filter(|&b| b > 0.0)) else {
            continue;
        };
        let per_run: Vec<f64> = pairs
            .iter()
            .filter_map(|(m, t)| {
                let m = per_reply_us(std::iter::once(*m))?;
                let t = per_reply_us(std::iter::once(*t)).filter(|&t| t > 0.0)?;
                Some(m / t)
            })
            .collect();
        out.push(CpuRatio {
            config: p.config.clone(),
            load: p.load,
            ratio: mine / base_us,
            runs: pairs.len(),
            min: per_run.iter().copied().fold(f64::INFINITY, f64::min),
            max: per_run.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        });
    }
    out
}

fn growth_of(config: &str, points: &[PooledPoint], runs: &[RunDir]) -> Option<PooledGrowth> {
    // (point, its pooled regular p99) for the loads where anything pooled.
    let mine: Vec<(&PooledPoint, f64)> = points
        .iter()
        .filter(|p| p.config == config)
        .filter_map(|p| Some((p, p.class("regular")?.p99_us)))
        .collect();
    let unpooled_loads = points
        .iter()
        .filter(|p| p.config == config && p.class("regular").is_none())
        .map(|p| p.load)
        .collect();
    let slos: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.slo_us.get(config).copied())
        .collect();
    let slo_us = (!slos.is_empty()).then(|| slos.iter().sum::<f64>() / slos.len() as f64);
    let (&(low, _), &(peak, _)) = low_and_peak(&mine, |p| p.0.target_rps, |p| p.1, slo_us)?;
    let max = slo_us.and_then(|slo| {
        let pts: Vec<(f64, f64)> = mine.iter().map(|(p, p99)| (p.target_rps, *p99)).collect();
        max_load_at_slo(&pts, slo)
    });
    let every_max = slo_us.and_then(|slo| {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.config == config)
            .filter_map(|p| Some((p.target_rps, p.every_p99_us?)))
            .collect();
        max_load_at_slo(&pts, slo)
    });
    let p99_us = CLASSES
        .iter()
        .filter_map(|(_, name)| {
            let (a, b) = (low.class(name)?, peak.class(name)?);
            Some(((*name).to_string(), a.p99_us, b.p99_us))
        })
        .collect();
    Some(PooledGrowth {
        config: config.into(),
        slo_us,
        low_load: low.load,
        peak_load: peak.load,
        p99_us,
        unpooled_loads,
        max_load_rps: max.map(|m| m.load),
        max_load_is_lower_bound: max.is_some_and(|m| m.lower_bound),
        every_max_load_rps: every_max.map(|m| m.load),
        every_max_load_is_lower_bound: every_max.is_some_and(|m| m.lower_bound),
    })
}

/// The pooled figures as text: a per-point table, then one growth line per
/// configuration.
pub fn render(p: &Pooled) -> String {
    let mut out = format!("pooled {} runs:", p.runs.len());
    for r in &p.runs {
        out.push_str(&format!(" {}", r.display()));
    }
    out.push('\n');
    out.push_str(if p.all {
        "points: every measured point (--all)\n"
    } else {
        "points: those that passed every self-check and were not disturbed (--all pools every measured point)\n"
    });
    for (dir, why) in &p.delayed_runs {
        out.push_str(&format!(
            "{} {}: {why}\n",
            if p.all {
                "pooled all the same"
            } else {
                "left out whole"
            },
            dir.display()
        ));
    }
    let width = p
        .points
        .iter()
        .map(|x| x.config.len())
        .max()
        .unwrap_or(6)
        .max(6);
    out.push_str(&format!(
        "{:<width$} {:>5} {:>6} {:>7} {:>10}",
        "config", "load", "pooled", "CPU µs", "switches"
    ));
    for (_, name) in CLASSES {
        out.push_str(&format!(" {:>8} {:>9}", format!("{name} n"), "p99 µs"));
    }
    out.push('\n');
    for x in &p.points {
        let pooled = x.measured - x.left_out.len();
        out.push_str(&format!(
            "{:<width$} {:>5.2} {:>6} {:>7} {:>10}",
            x.config,
            x.load,
            format!("{pooled}/{}", x.measured),
            x.cpu_us_per_reply.map_or("-".into(), |c| format!("{c:.1}")),
            x.ctx_per_reply
                .map_or("-".into(), |(v, i)| format!("{v:.2}+{i:.2}")),
        ));
        for (_, name) in CLASSES {
            match x.class(name) {
                Some(c) => out.push_str(&format!(" {:>8} {:>9.0}", c.count, c.p99_us)),
                None => out.push_str(&format!(" {:>8} {:>9}", "-", "-")),
            }
        }
        out.push('\n');
    }
    out.push_str(
        "\np99 growth, lowest load → peak (the highest load whose pooled regular p99 is within the SLO):\n",
    );
    for g in &p.growth {
        let slo = g
            .slo_us
            .map_or("no SLO".into(), |s| format!("SLO {s:.0} µs"));
        let parts: Vec<String> = g
            .p99_us
            .iter()
            .map(|(c, lo, hi)| format!("{c} {lo:.0}→{hi:.0} ({:.2}×)", hi / lo.max(1e-9)))
            .collect();
        let gaps = if g.unpooled_loads.is_empty() {
            String::new()
        } else {
            let loads: Vec<String> = g.unpooled_loads.iter().map(|l| format!("{l:.2}")).collect();
            format!(" [no point pooled at {}]", loads.join(", "))
        };
        let mut max = match (g.max_load_rps, g.max_load_is_lower_bound) {
            (Some(m), false) => format!("; max load at SLO {m:.0} req/s"),
            (Some(m), true) => format!("; max load at SLO ≥ {m:.0} req/s"),
            (None, _) => String::new(),
        };
        if !p.all {
            if let Some(every) = selection_changes_max_load(g) {
                max.push_str(&format!(" ({every})"));
            }
        }
        out.push_str(&format!(
            "{}: {:.2} → {:.2} ({slo}): {}{gaps}{max}\n",
            g.config,
            g.low_load,
            g.peak_load,
            parts.join(", ")
        ));
    }
    if !p.all {
        let flips = selection_flips(p);
        if !flips.is_empty() {
            out.push_str(&format!(
                "\npoints whose left-out attempts put the pooled regular p99 on the other side of the SLO (the kept points favour, or hurt, that configuration; --all pools them):\n{}\n",
                flips.join("\n")
            ));
        }
    }
    if let Some(base) = &p.cpu_vs {
        out.push_str(&format!(
            "\nserver CPU per reply × {base} at equal load (CPU-seconds over replies, pooled over the runs that pooled both points; [each run's ratio, from–to; runs]):\n"
        ));
        if p.cpu_ratios.is_empty() {
            out.push_str(&format!(
                "  none: no configuration named {base} measured server CPU at a load another did\n"
            ));
        }
        let mut configs: Vec<&str> = Vec::new();
        for r in &p.cpu_ratios {
            if !configs.contains(&r.config.as_str()) {
                configs.push(&r.config);
            }
        }
        for c in configs {
            let cells: Vec<String> = p
                .cpu_ratios
                .iter()
                .filter(|r| r.config == c)
                .map(|r| {
                    format!(
                        "{:.2}: {:.3} [{:.2}–{:.2}; {}]",
                        r.load, r.ratio, r.min, r.max, r.runs
                    )
                })
                .collect();
            out.push_str(&format!("  {c}: {}\n", cells.join(", ")));
        }
    }
    let left: Vec<String> = p
        .points
        .iter()
        .flat_map(|x| {
            x.left_out
                .iter()
                .map(move |w| format!("  {} at {:.2}: {w}", x.config, x.load))
        })
        .collect();
    if !left.is_empty() {
        out.push_str(&format!(
            "\nleft out ({}):\n{}\n",
            left.len(),
            left.join("\n")
        ));
    }
    out
}

/// How the max load at SLO reads from every measured point, when that
/// disagrees with the kept points' figure: two figures more than 1% apart,
/// unless the lower of them is a lower bound ("≥"), which the higher then
/// agrees with; or only one of them exists. A sweep's points past its
/// crossing often fail a check (the server saturated), so the kept figure
/// is often "≥ L" where every point's crosses just above L: no disagreement.
fn selection_changes_max_load(g: &PooledGrowth) -> Option<String> {
    let kept = (g.max_load_rps, g.max_load_is_lower_bound);
    let every = (g.every_max_load_rps, g.every_max_load_is_lower_bound);
    let agree = match (kept, every) {
        ((Some(a), la), (Some(b), lb)) => {
            let close = (a - b).abs() <= 0.01 * a.max(b);
            // "≥ a" holds for any b above it (and the other way round).
            close || (la && b >= a) || (lb && a >= b)
        }
        ((None, _), (None, _)) => true,
        _ => false,
    };
    if agree {
        return None;
    }
    Some(match every {
        (Some(m), false) => format!("every point measured: {m:.0} req/s"),
        (Some(m), true) => format!("every point measured: ≥ {m:.0} req/s"),
        (None, _) => "every point measured: over the SLO at its lowest load".into(),
    })
}

/// The points with something left out whose every-point regular p99 and
/// kept p99 (or the absence of one) fall on different sides of their
/// configuration's SLO, one line each.
fn selection_flips(p: &Pooled) -> Vec<String> {
    let mut out = Vec::new();
    for x in p.points.iter().filter(|x| !x.left_out.is_empty()) {
        let Some(slo) = p
            .growth
            .iter()
            .find(|g| g.config == x.config)
            .and_then(|g| g.slo_us)
        else {
            continue;
        };
        let Some(every) = x.every_p99_us else {
            continue;
        };
        let kept = x.class("regular").map(|c| c.p99_us);
        let flips = match kept {
            Some(k) => (k <= slo) != (every <= slo),
            // Nothing kept: the load is already named as unpooled; it
            // matters here only where every point would have met the SLO.
            None => every <= slo,
        };
        if !flips {
            continue;
        }
        let pooled = x.measured - x.left_out.len();
        let kept = kept.map_or("none pooled".into(), |k| format!("p99 {k:.0} µs"));
        out.push(format!(
            "  {} at {:.2}: {pooled} of {} points kept, {kept}; every point ({}) {every:.0} µs; SLO {slo:.0} µs",
            x.config, x.load, x.measured, x.every_points
        ));
    }
    out
}

/// Entry point of `skq pool`.
pub fn run(args: PoolArgs) -> Result<()> {
    let runs = args
        .dirs
        .iter()
        .map(|d| RunDir::read(d))
        .collect::<Result<Vec<_>>>()?;
    let pooled = pool(&runs, args.all, args.cpu_vs.as_deref())?;
    print!("{}", render(&pooled));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&pooled)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::Outcome;
    use skq_report::result::PointResult;

    fn hist(values: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for &(v, n) in values {
            h.record_n(v, n).unwrap();
        }
        h
    }

    /// A measured point of configuration `config` (curve `curve`) at
    /// `load`, with the interval log recorded at `hdr_log`.
    fn measured(
        curve: usize,
        config: &str,
        load: f64,
        target_rps: f64,
        result: PointResult,
        hdr_log: PathBuf,
        ctx: Option<skq_report::result::CtxSwitches>,
    ) -> PointRecord {
        PointRecord {
            curve,
            config: config.into(),
            load,
            target_rps,
            rss: String::new(),
            outcome: Outcome::Measured {
                result: Box::new(result),
                hdr_log: Some(hdr_log),
                saturated: false,
                server: None,
                series: None,
                server_ctx_switches: ctx,
                disturbance: None,
                overshoot: None,
                host_gate: None,
            },
        }
    }

    /// A run folder with one configuration at loads 0.1 and 0.5: regular
    /// and high latencies per load as (ns, count) lists, and whether the
    /// 0.5 point passed its checks.
    fn run_dir(
        root: &Path,
        name: &str,
        regular: [&[(u64, u64)]; 2],
        high: [&[(u64, u64)]; 2],
        pass_at_half: bool,
    ) -> RunDir {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("hdr")).unwrap();
        let mut records = Vec::new();
        for (i, load) in [0.1, 0.5].into_iter().enumerate() {
            let file = format!("c-{load}.hlog");
            let (r, h) = (hist(regular[i]), hist(high[i]));
            hdr::write_interval_log(
                &dir.join("hdr").join(&file),
                &[(None, &r), (Some("high"), &h)],
            )
            .unwrap();
            let mut result = PointResult::default();
            result.checks.pass = i == 0 || pass_at_half;
            // Recorded where the run wrote it, not where it lies now.
            let recorded = PathBuf::from("/elsewhere/hdr").join(&file);
            records.push(measured(
                0,
                "c",
                load,
                load * 1000.0,
                result,
                recorded,
                None,
            ));
        }
        RunDir {
            dir,
            records,
            slo_us: [("c".to_string(), 10.0)].into(),
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn pools_each_class_over_the_runs_and_finds_the_pooled_peak() {
        let root = std::env::temp_dir().join(format!("skq-pool-{}", std::process::id()));
        // Run a: 0.5 within the SLO (10 µs); its high p99 there is 20 µs.
        let a = run_dir(
            &root,
            "a",
            [&[(1_000, 100)], &[(2_000, 100)]],
            [&[(1_000, 100)], &[(2_000, 98), (20_000, 2)]],
            true,
        );
        // Run b: 0.5 failed a check; only --all pools it.
        let b = run_dir(
            &root,
            "b",
            [&[(1_000, 100)], &[(50_000, 100)]],
            [&[(3_000, 100)], &[(4_000, 100)]],
            false,
        );
        let p = pool(&[a.clone(), b.clone()], false, None).unwrap();
        assert_eq!(p.points.len(), 2);
        let low = &p.points[0];
        assert_eq!((low.measured, low.left_out.len()), (2, 0));
        let high_low = low.class("high").unwrap();
        assert_eq!((high_low.points, high_low.count), (2, 200));
        // 100 samples at 1 µs and 100 at 3 µs: the pooled p99 is 3 µs.
        assert!((high_low.p99_us - 3.0).abs() < 0.01, "{high_low:?}");
        let half = &p.points[1];
        assert_eq!((half.measured, half.left_out.len()), (2, 1));
        assert_eq!(half.class("regular").unwrap().count, 100);
        // The peak is 0.5 (only run a's point, 2 µs ≤ 10 µs).
        let g = &p.growth[0];
        assert_eq!((g.low_load, g.peak_load, g.slo_us), (0.1, 0.5, Some(10.0)));
        let high = g.p99_us.iter().find(|c| c.0 == "high").unwrap();
        assert!(
            (high.1 - 3.0).abs() < 0.01 && (high.2 - 20.0).abs() < 0.05,
            "{high:?}"
        );
        assert!(render(&p).contains("failed a self-check"));
        // No pooled point crosses the SLO: the top load is a lower bound.
        assert_eq!(
            (g.max_load_rps, g.max_load_is_lower_bound),
            (Some(500.0), true)
        );

        // With --all run b's 0.5 (regular 50 µs) joins, the pooled regular
        // p99 exceeds the SLO and the peak falls back to 0.1.
        let p = pool(&[a, b], true, None).unwrap();
        assert_eq!(p.points[1].class("regular").unwrap().count, 200);
        assert_eq!(p.growth[0].peak_load, 0.1);
        assert!(p.growth[0].unpooled_loads.is_empty());
        // Interpolated between 100 req/s (p99 1 µs) and 500 (p99 ~50 µs).
        let m = p.growth[0].max_load_rps.unwrap();
        assert!(!p.growth[0].max_load_is_lower_bound);
        assert!((m - 173.5).abs() < 0.5, "{m}");

        // A load whose every point failed is named, not silently skipped.
        let c = run_dir(
            &root,
            "c",
            [&[(1_000, 100)], &[(2_000, 100)]],
            [&[(1_000, 100)], &[(2_000, 100)]],
            false,
        );
        let p = pool(&[c], false, None).unwrap();
        assert_eq!(p.growth[0].peak_load, 0.1);
        assert_eq!(p.growth[0].unpooled_loads, vec![0.5]);
        assert!(render(&p).contains("[no point pooled at 0.50]"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn left_out_points_that_would_change_the_verdict_are_named() {
        let root = std::env::temp_dir().join(format!("skq-pool-sel-{}", std::process::id()));
        let flat: [&[(u64, u64)]; 2] = [&[(1_000, 100)], &[(2_000, 100)]];
        let passing = run_dir(&root, "a", flat, flat, true);
        // 0.5 failed a check and was slow (50 µs against the 10 µs SLO).
        let slow_failed = run_dir(&root, "b", [&[(1_000, 100)], &[(50_000, 100)]], flat, false);
        let p = pool(&[passing.clone(), slow_failed.clone()], false, None).unwrap();
        let half = &p.points[1];
        assert_eq!((half.every_points, half.measured), (2, 2));
        assert!((half.every_p99_us.unwrap() - 50.0).abs() < 0.1, "{half:?}");
        let g = &p.growth[0];
        // Kept: 2 µs at 0.5, a lower bound at 500 req/s; every point: the
        // 0.5 point pools to 50 µs and the maximum falls between the loads.
        assert_eq!(
            (g.max_load_rps, g.max_load_is_lower_bound),
            (Some(500.0), true)
        );
        let every = g.every_max_load_rps.unwrap();
        assert!(!g.every_max_load_is_lower_bound && (every - 173.5).abs() < 0.5);
        let text = render(&p);
        assert!(
            text.contains("max load at SLO ≥ 500 req/s (every point measured: 17"),
            "{text}"
        );
        assert!(
            text.contains(
                "c at 0.50: 1 of 2 points kept, p99 2 µs; every point (2) 50 µs; SLO 10 µs"
            ),
            "{text}"
        );
        // --all pools them: nothing to say.
        let text = render(&pool(&[passing.clone(), slow_failed], true, None).unwrap());
        assert!(!text.contains("every point measured") && !text.contains("other side"));

        // A failed point as fast as the kept ones changes nothing.
        let fast_failed = run_dir(&root, "c", flat, flat, false);
        let p = pool(&[passing, fast_failed.clone()], false, None).unwrap();
        let text = render(&p);
        assert!(!text.contains("every point measured") && !text.contains("other side"));

        // Every point of a load left out where they met the SLO: named.
        // The max load reads "≥ 100" kept and "≥ 500" from every point,
        // which agree: no note on the growth line.
        let p = pool(&[fast_failed], false, None).unwrap();
        let text = render(&p);
        assert!(
            text.contains("c at 0.50: 0 of 1 points kept, none pooled; every point (1) 2 µs"),
            "{text}"
        );
        assert_eq!(p.growth[0].every_max_load_rps, Some(500.0));
        assert!(!text.contains("every point measured"), "{text}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn one_name_over_two_workloads_pools_as_two_configurations() {
        let root = std::env::temp_dir().join(format!("skq-pool-w-{}", std::process::id()));
        let mut r = run_dir(
            &root,
            "a",
            [&[(1_000, 100)], &[(2_000, 100)]],
            [&[(1_000, 100)], &[(2_000, 100)]],
            true,
        );
        let mut second = r.records.clone();
        for rec in &mut second {
            rec.curve = 1;
        }
        r.records.extend(second);
        r.labels = [(0, "c [x]".to_string()), (1, "c [y]".to_string())].into();
        r.slo_us = [("c [x]".to_string(), 10.0), ("c [y]".to_string(), 10.0)].into();
        let p = pool(&[r], false, None).unwrap();
        let names: Vec<&str> = p.growth.iter().map(|g| g.config.as_str()).collect();
        assert_eq!(names, ["c [x]", "c [y]"]);
        assert!(p.points.iter().all(|x| x.measured == 1));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// A run of two configurations `a` and `b` of group `g` at load 0.2:
    /// (server CPU-seconds, replies, passed its checks) for each.
    fn cpu_run(root: &Path, name: &str, a: (f64, f64, bool), b: (f64, f64, bool)) -> RunDir {
        use skq_report::result::{CpuTime, CtxSwitches};
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("hdr")).unwrap();
        let mut records = Vec::new();
        for (curve, (cpu_s, replies, pass)) in [a, b].into_iter().enumerate() {
            let file = format!("{curve}.hlog");
            hdr::write_interval_log(
                &dir.join("hdr").join(&file),
                &[(None, &hist(&[(1_000, 10)]))],
            )
            .unwrap();
            let mut result = PointResult::default();
            result.checks.pass = pass;
            result.meta.duration_s = 2.0;
            result.achieved_rps = replies / 2.0;
            result.server_cpu = Some(CpuTime {
                user_s: cpu_s / 4.0,
                sys_s: cpu_s * 3.0 / 4.0,
            });
            let ctx = CtxSwitches {
                voluntary: (2.0 * replies) as u64,
                involuntary: 0,
            };
            let log = dir.join("hdr").join(&file);
            records.push(measured(
                curve,
                ["a", "b"][curve],
                0.2,
                200.0,
                result,
                log,
                Some(ctx),
            ));
        }
        RunDir {
            dir,
            records,
            slo_us: BTreeMap::new(),
            labels: [(0, "a [g]".to_string()), (1, "b [g]".to_string())].into(),
        }
    }

    #[test]
    fn pools_server_cpu_over_the_runs_replies_and_divides_by_the_named_configuration() {
        let root = std::env::temp_dir().join(format!("skq-pool-cpu-{}", std::process::id()));
        // a: 0.04 s over 1,000 replies, then 0.10 s over 4,000 (a failed
        // check): 40 µs alone, 28 µs pooled with --all. b: 30 µs, then 25.
        let r1 = cpu_run(&root, "r1", (0.04, 1000.0, true), (0.03, 1000.0, true));
        let r2 = cpu_run(&root, "r2", (0.10, 4000.0, false), (0.10, 4000.0, true));
        let p = pool(&[r1.clone(), r2.clone()], false, Some("b")).unwrap();
        let cpu = |p: &Pooled, c: &str| {
            let x = p.points.iter().find(|x| x.config == c).unwrap();
            (x.cpu_us_per_reply.unwrap(), x.cpu_points)
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let (a, n) = cpu(&p, "a [g]");
        assert!(
            close(a, 40.0) && n == 1,
            "the failed point left out: {a} {n}"
        );
        let (b, n) = cpu(&p, "b [g]");
        assert!(close(b, 0.13e6 / 5000.0) && n == 2, "{b} {n}");
        let a_point = p.points.iter().find(|x| x.config == "a [g]").unwrap();
        let (v, i) = a_point.ctx_per_reply.unwrap();
        assert!(close(v, 2.0) && close(i, 0.0));
        assert_eq!(p.cpu_vs.as_deref(), Some("b"));
        let ratio = |p: &Pooled, c: &str| {
            p.cpu_ratios
                .iter()
                .find(|r| r.config == c)
                .cloned()
                .unwrap()
        };
        // Paired by run: a's run-2 point failed, so b's run 2 stays out of
        // the ratio too (40 / 30, not 40 / 26 from b's two runs).
        let a_vs_b = ratio(&p, "a [g]");
        assert!(close(a_vs_b.ratio, 40.0 / 30.0), "{a_vs_b:?}");
        assert_eq!(a_vs_b.runs, 1);
        let b_vs_b = ratio(&p, "b [g]");
        assert!(close(b_vs_b.ratio, 1.0) && b_vs_b.runs == 2, "{b_vs_b:?}");
        let text = render(&p);
        assert!(
            text.contains("server CPU per reply × b at equal load"),
            "{text}"
        );
        assert!(text.contains("a [g]: 0.20: 1.333 [1.33–1.33; 1]"), "{text}");
        // --all: CPU-seconds over replies, not a mean of the runs' figures
        // (which would be 32.5 µs).
        let p = pool(&[r1, r2.clone()], true, Some("b")).unwrap();
        assert!(close(cpu(&p, "a [g]").0, 0.14e6 / 5000.0));
        // Both runs pair now: 28 / 26, each run's ratio 4/3 and 1.
        let a_vs_b = ratio(&p, "a [g]");
        assert!(close(a_vs_b.ratio, 28.0 / 26.0), "{a_vs_b:?}");
        assert_eq!(a_vs_b.runs, 2);
        assert!(close(a_vs_b.min, 1.0) && close(a_vs_b.max, 40.0 / 30.0));
        assert!(render(&p).contains("a [g]: 0.20: 1.077 [1.00–1.33; 2]"));
        // A name that ran nowhere: no ratios, and the text says so.
        let p = pool(&[r2], true, Some("nginx")).unwrap();
        assert!(p.cpu_ratios.is_empty());
        assert!(render(&p).contains("none: no configuration named nginx"));
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A run of one configuration, one passing emulated point per overshoot
    /// (500 µs asked), at loads 0.05, 0.10, ...
    fn overshoot_run(root: &Path, name: &str, overshoots: &[f64]) -> RunDir {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("hdr")).unwrap();
        let mut records = Vec::new();
        for (i, o) in overshoots.iter().enumerate() {
            let file = format!("{i}.hlog");
            hdr::write_interval_log(
                &dir.join("hdr").join(&file),
                &[(None, &hist(&[(1_000, 10)]))],
            )
            .unwrap();
            let mut result = PointResult::default();
            result.checks.pass = true;
            result.meta.service_mode = "emulate".into();
            result.requested_service_us = Some(500.0);
            result.measured_service_us = Some(500.0 + o);
            let load = 0.05 * (i + 1) as f64;
            let log = dir.join("hdr").join(&file);
            records.push(measured(0, "c", load, load * 1000.0, result, log, None));
        }
        RunDir {
            dir,
            records,
            slo_us: [("c".to_string(), 10.0)].into(),
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn a_run_the_host_delayed_as_a_whole_is_left_out_unless_all() {
        let root = std::env::temp_dir().join(format!("skq-pool-delayed-{}", std::process::id()));
        let quiet = overshoot_run(&root, "quiet", &[50.0; 10]);
        // Half its points 300 µs over: median 175, fastest tenth 50.
        let mut most = vec![50.0; 5];
        most.extend([300.0; 5]);
        let delayed = overshoot_run(&root, "delayed", &most);
        let p = pool(&[quiet.clone(), delayed.clone()], false, None).unwrap();
        assert_eq!(p.delayed_runs.len(), 1);
        assert_eq!(p.delayed_runs[0].0, delayed.dir);
        for x in &p.points {
            assert_eq!(x.measured, 2, "{x:?}");
            assert_eq!(
                x.left_out,
                [format!(
                    "{}: the host delayed most of its run",
                    delayed.dir.display()
                )]
            );
        }
        let text = render(&p);
        assert!(
            text.contains(&format!(
                "left out whole {}: the host delayed most of the run",
                delayed.dir.display()
            )),
            "{text}"
        );
        // --all pools it and says so.
        let p = pool(&[quiet.clone(), delayed], true, None).unwrap();
        assert!(p.points.iter().all(|x| x.left_out.is_empty()));
        assert!(render(&p).contains("pooled all the same"));
        // The quiet run alone: nothing left out.
        let p = pool(&[quiet], false, None).unwrap();
        assert!(p.delayed_runs.is_empty());
        assert!(p.points.iter().all(|x| x.left_out.is_empty()));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_folder_without_points_is_a_clear_error() {
        let e = RunDir::read(Path::new("/nonexistent/run")).unwrap_err();
        assert!(format!("{e:#}").contains("skq bench --out"), "{e:#}");
        assert!(pool(&[], false, None).is_err());
    }
}
