//! Simulated against measured: read `skq bench` results, simulate the same
//! configurations on the same workload at the same loads, and check that the
//! simulator orders the configurations as the measurements do wherever the
//! measured gap is clear.
//!
//! Input: a JSON array of records, each naming its configuration (`config`,
//! `mode`, `name` or `label`) and carrying one `PointResult` either under
//! `result` / `point` or flattened into the record itself; `workers` is read
//! from the record when present; records whose `status` is not `measured`
//! are skipped. `skq sim --json` writes this shape, and so does `skq bench`
//! (`points.json`); given a `skq bench` result directory, `summary.json`
//! supplies each configuration's mode and workers.
//!
//! Service times come from the measurement (`measured_service_us`, BRIEF §8),
//! with the catalogue shape of `meta.workload` rescaled to the measured mean
//! (except for per-connection workloads such as `gis`, simulated as
//! catalogued); the SLO defaults to 10 × the measured mean. Configurations
//! the simulator cannot model (e.g. `tokio`) are listed and skipped.

use std::fmt::Write as _;

use anyhow::{bail, Context};
use serde_json::Value;
use skq_proto::workload::{ServiceSpec, Workload};
use skq_report::result::PointResult;
use skq_report::slo::{max_load_at_slo, MaxLoad};

use crate::bounds::spec_with_mean;
use crate::model::{CoreOpts, Model, Overheads, PointOutcome};
use crate::sweep::{find_knee, KneeSearch, Sweep};
use crate::workload::{Scenario, Service};

/// One configuration's measured points.
#[derive(Clone, Debug)]
pub struct MeasuredCurve {
    /// Configuration name.
    pub config: String,
    /// `skq bench` curve index, when given.
    pub curve: Option<u64>,
    /// Workload of the points (`meta.workload`).
    pub workload: String,
    /// Runtime mode, when known apart from the name (from `summary.json`).
    pub mode: Option<String>,
    /// Workers, if the records said.
    pub workers: Option<usize>,
    /// Points in input order.
    pub points: Vec<PointResult>,
}

/// Parses `skq bench` JSON into curves, grouped by configuration (first-seen order).
pub fn read_bench_json(text: &str) -> anyhow::Result<Vec<MeasuredCurve>> {
    let v: Value = serde_json::from_str(text).context("bench results are not valid JSON")?;
    let arr = match &v {
        Value::Array(a) => a.clone(),
        Value::Object(o) => match o.get("points").or_else(|| o.get("results")) {
            Some(Value::Array(a)) => a.clone(),
            _ => bail!("bench results: expected an array of records (or an object with `points`)"),
        },
        _ => bail!("bench results: expected an array of records"),
    };
    let mut curves: Vec<MeasuredCurve> = Vec::new();
    for (i, rec) in arr.iter().enumerate() {
        // `skq bench` points.json: failed and skipped points carry no result.
        if rec
            .get("status")
            .and_then(Value::as_str)
            .is_some_and(|s| s != "measured")
        {
            continue;
        }
        let config = ["config", "mode", "name", "label"]
            .iter()
            .find_map(|k| rec.get(k).and_then(Value::as_str))
            .with_context(|| format!("record {i}: no `config` name"))?
            .to_string();
        let body = rec
            .get("result")
            .or_else(|| rec.get("point"))
            .unwrap_or(rec);
        let point: PointResult = serde_json::from_value(body.clone())
            .with_context(|| format!("record {i} ({config}): not a PointResult"))?;
        let workers = rec
            .get("workers")
            .and_then(Value::as_u64)
            .map(|w| w as usize);
        // One curve per `skq bench` curve index, else per (name, workload).
        let curve = rec.get("curve").and_then(Value::as_u64);
        let workload = point.meta.workload.clone();
        let same = |c: &MeasuredCurve| match curve {
            Some(_) => c.curve == curve,
            None => c.config == config && c.workload == workload,
        };
        match curves.iter_mut().find(|c| same(c)) {
            Some(c) => c.points.push(point),
            None => curves.push(MeasuredCurve {
                config,
                curve,
                workload,
                mode: rec.get("mode").and_then(Value::as_str).map(str::to_string),
                workers,
                points: vec![point],
            }),
        }
    }
    if curves.is_empty() {
        bail!("bench results contain no records");
    }
    Ok(curves)
}

/// Reads a `skq bench` output: a JSON file of records, or a result directory
/// holding `points.json` (and `summary.json`, whose curve specs give each
/// configuration's mode and worker count).
pub fn read_bench_path(path: &std::path::Path) -> anyhow::Result<Vec<MeasuredCurve>> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };
    if !path.is_dir() {
        return read_bench_json(&read(path)?);
    }
    let mut curves = read_bench_json(&read(&path.join("points.json"))?)?;
    let summary = path.join("summary.json");
    if summary.exists() {
        let v: Value =
            serde_json::from_str(&read(&summary)?).context("summary.json is not valid JSON")?;
        for c in v
            .get("curves")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(spec) = c.get("spec") else { continue };
            let idx = c.get("curve").and_then(Value::as_u64);
            let name = spec.get("name").and_then(Value::as_str);
            let wl = spec.get("workload").and_then(Value::as_str);
            let hit = |m: &MeasuredCurve| match (m.curve, idx) {
                (Some(a), Some(b)) => a == b,
                _ => Some(m.config.as_str()) == name && Some(m.workload.as_str()) == wl,
            };
            if let Some(m) = curves.iter_mut().find(|m| hit(m)) {
                m.mode = m
                    .mode
                    .take()
                    .or_else(|| spec.get("mode").and_then(Value::as_str).map(str::to_string));
                m.workers = m.workers.or_else(|| {
                    spec.get("workers")
                        .and_then(Value::as_u64)
                        .map(|w| w as usize)
                });
            }
        }
    }
    Ok(curves)
}

/// Settings of a comparison.
#[derive(Clone, Debug)]
pub struct CompareOpts {
    /// Workers when the records do not say.
    pub workers: Option<usize>,
    /// SLO (µs); default 10 × the measured mean service time.
    pub slo_us: Option<f64>,
    /// A measured gap counts as clear above this relative difference.
    pub clear_gap: f64,
    /// Requests per simulated point.
    pub requests: usize,
    /// Seed.
    pub seed: u64,
    /// Threads.
    pub threads: usize,
    /// Overheads of the core-driven models.
    pub overheads: Overheads,
    /// Application model.
    pub opts: CoreOpts,
}

/// One configuration, measured and simulated.
#[derive(Clone, Debug)]
pub struct CompareRow {
    /// Configuration.
    pub config: String,
    /// Workload.
    pub workload: String,
    /// SLO used (µs).
    pub slo_us: f64,
    /// Index of the measured curve in the input.
    pub curve_index: usize,
    /// Measured maximum load at SLO (requests/s).
    pub measured: Option<MaxLoad>,
    /// Simulated maximum load at SLO (requests/s).
    pub simulated: Option<MaxLoad>,
    /// Simulated points at the measured loads.
    pub sim_points: Vec<PointOutcome>,
}

/// The comparison.
#[derive(Clone, Debug, Default)]
pub struct CompareReport {
    /// Configurations compared.
    pub rows: Vec<CompareRow>,
    /// Configurations skipped, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Pairs (better, worse) of one workload with a clear measured gap, and
    /// whether the simulator agrees on their order.
    pub pairs: Vec<(String, String, bool)>,
}

impl CompareReport {
    /// Pairs whose simulated order contradicts a clear measured order.
    pub fn disagreements(&self) -> usize {
        self.pairs.iter().filter(|p| !p.2).count()
    }

    /// A text report.
    pub fn render(&self) -> String {
        let mut s = String::from(
            "| config | workload | SLO p99 µs | measured max load (req/s) | simulated |\n|---|---|---:|---:|---:|\n",
        );
        let f = |m: &Option<MaxLoad>| match m {
            None => "miss".to_string(),
            Some(m) if m.lower_bound => format!("≥{:.0}", m.load),
            Some(m) => format!("{:.0}", m.load),
        };
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {} | {} |",
                r.config,
                r.workload,
                r.slo_us,
                f(&r.measured),
                f(&r.simulated)
            );
        }
        for (c, why) in &self.skipped {
            let _ = writeln!(s, "skipped {c}: {why}");
        }
        let _ = writeln!(
            s,
            "\nclear measured orderings: {}, simulator disagrees on {}",
            self.pairs.len(),
            self.disagreements()
        );
        for (a, b, ok) in &self.pairs {
            let _ = writeln!(
                s,
                "  {a} > {b}: {}",
                if *ok { "agrees" } else { "DISAGREES" }
            );
        }
        s
    }
}

/// Pairs with a clear measured gap (relative difference above `gap`), and
/// whether the simulated knees order them the same way. A missing knee
/// (`None`) counts as zero.
pub fn ordering_pairs(rows: &[(String, f64, f64)], gap: f64) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for (i, a) in rows.iter().enumerate() {
        for b in &rows[i + 1..] {
            let (hi, lo) = if a.1 >= b.1 { (a, b) } else { (b, a) };
            if hi.1 > 0.0 && (hi.1 - lo.1) / hi.1 > gap {
                out.push((hi.0.clone(), lo.0.clone(), hi.2 > lo.2));
            }
        }
    }
    out
}

/// Runs the comparison, workload by workload.
pub fn compare(curves: &[MeasuredCurve], o: &CompareOpts) -> anyhow::Result<CompareReport> {
    let mut workloads: Vec<&str> = Vec::new();
    for c in curves {
        if !workloads.contains(&c.workload.as_str()) {
            workloads.push(&c.workload);
        }
    }
    let mut report = CompareReport::default();
    for wl in workloads {
        let group: Vec<usize> = (0..curves.len())
            .filter(|&i| curves[i].workload == wl)
            .collect();
        compare_workload(curves, &group, o, &mut report)?;
    }
    Ok(report)
}

/// The curves `group` of `curves`, all of one workload.
fn compare_workload(
    curves: &[MeasuredCurve],
    group: &[usize],
    o: &CompareOpts,
    report: &mut CompareReport,
) -> anyhow::Result<()> {
    let all: Vec<&PointResult> = group.iter().flat_map(|&i| &curves[i].points).collect();
    let first = all[0];
    let workload: Workload = first
        .meta
        .workload
        .parse()
        .map_err(|e: String| anyhow::anyhow!("bench results: {e}"))?;
    let measured_us: Vec<f64> = all.iter().filter_map(|p| p.measured_service_us).collect();
    let nominal = ServiceSpec {
        workload,
        mean_ns: first.meta.nominal_service_us.unwrap_or(10.0) * 1000.0
            / first.meta.scale.max(1e-12),
        scale: first.meta.scale,
    };
    // Per-connection workloads (gis): the measured mean reflects which class
    // each connection drew, which the simulation redraws itself; rescaling the
    // classes to that mean would count the draw twice.
    let spec = if measured_us.is_empty() || workload.per_connection() {
        nominal
    } else {
        spec_with_mean(
            nominal,
            measured_us.iter().sum::<f64>() / measured_us.len() as f64 * 1000.0,
        )
    };
    let slo_us = o.slo_us.unwrap_or(10.0 * spec.mean() / 1000.0);
    let mut rows = Vec::new();
    for &ci in group {
        let c = &curves[ci];
        let Some(workers) = c.workers.or(o.workers) else {
            bail!(
                "bench results do not say how many workers `{}` had; pass --workers",
                c.config
            );
        };
        let model = match Model::parse(c.mode.as_deref().unwrap_or(&c.config), workers) {
            Ok(m) => m,
            Err(e) => {
                report.skipped.push((c.config.clone(), format!("{e:#}")));
                continue;
            }
        };
        let conns = c.points[0].meta.connections.max(1);
        let base = Scenario::at_load(Service::Spec(spec), workers, conns, 0.5, o.requests, o.seed);
        let mpts: Vec<(f64, f64)> = c
            .points
            .iter()
            .map(|p| (p.target_rps, p.latency.p99.value))
            .collect();
        let measured = max_load_at_slo(&mpts, slo_us);
        let loads: Vec<f64> = c
            .points
            .iter()
            .map(|p| p.target_rps * spec.mean() / 1e9 / workers as f64)
            .collect();
        let sweep = Sweep {
            models: vec![model.clone()],
            base: base.clone(),
            loads,
            overheads: o.overheads,
            opts: o.opts.clone(),
        };
        let sim_points = sweep.run(o.threads, None)?;
        let (simulated, _) = find_knee(
            &model,
            &base,
            slo_us,
            &o.overheads,
            &o.opts,
            &KneeSearch::default(),
            o.threads,
        )?;
        rows.push(CompareRow {
            config: c.config.clone(),
            workload: c.workload.clone(),
            slo_us,
            curve_index: ci,
            measured,
            simulated,
            sim_points,
        });
    }
    let knees: Vec<(String, f64, f64)> = rows
        .iter()
        .map(|r| {
            (
                r.config.clone(),
                r.measured.map_or(0.0, |m| m.load),
                r.simulated.map_or(0.0, |m| m.load),
            )
        })
        .collect();
    report.pairs.extend(
        ordering_pairs(&knees, o.clear_gap)
            .into_iter()
            .map(|(a, b, ok)| {
                (
                    format!("{a} [{}]", all[0].meta.workload),
                    format!("{b} [{}]", all[0].meta.workload),
                    ok,
                )
            }),
    );
    report.rows.extend(rows);
    Ok(())
}

/// Measured and simulated p99 side by side, one CSV line per measured point.
pub fn overlay_csv(curves: &[MeasuredCurve], report: &CompareReport) -> String {
    let mut s = String::from(
        "config,target_rps,measured_p99_us,simulated_p99_us,measured_p50_us,simulated_p50_us\n",
    );
    for r in &report.rows {
        let Some(c) = curves.get(r.curve_index) else {
            continue;
        };
        for (m, sim) in c.points.iter().zip(&r.sim_points) {
            let _ = writeln!(
                s,
                "{},{:.1},{:.3},{:.3},{:.3},{:.3}",
                r.config,
                m.target_rps,
                m.latency.p99.value,
                sim.result.latency.p99.value,
                m.latency.p50.value,
                sim.result.latency.p50.value
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_gaps_only() {
        let rows = vec![
            ("a".to_string(), 100.0, 90.0),
            ("b".to_string(), 95.0, 99.0),
            ("c".to_string(), 50.0, 60.0),
        ];
        let p = ordering_pairs(&rows, 0.1);
        // a vs b is within 10%: not checked. a > c and b > c are clear.
        assert_eq!(
            p,
            vec![
                ("a".into(), "c".into(), true),
                ("b".into(), "c".into(), true)
            ]
        );
        let rows = vec![
            ("a".to_string(), 100.0, 10.0),
            ("c".to_string(), 50.0, 60.0),
        ];
        assert_eq!(
            ordering_pairs(&rows, 0.1),
            vec![("a".into(), "c".into(), false)]
        );
    }

    #[test]
    fn reads_flattened_and_nested_records() {
        let p = serde_json::to_value(PointResult::default()).unwrap();
        let mut flat = p.clone();
        flat["mode"] = "hybrid".into();
        let skipped = serde_json::json!({ "config": "shared", "status": "skipped" });
        let doc = serde_json::json!([{ "config": "vanilla", "workers": 4, "status": "measured", "result": p }, flat, skipped]);
        let c = read_bench_json(&doc.to_string()).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].config.as_str(), c[0].workers), ("vanilla", Some(4)));
        assert_eq!((c[1].config.as_str(), c[1].workers), ("hybrid", None));
        assert!(read_bench_json("[{}]")
            .unwrap_err()
            .to_string()
            .contains("record 0"));
    }
}
