//! Load sweeps: many independent points, run in parallel, results in a fixed
//! order, and maximum load at SLO with the same code as `skq bench`.
//!
//! Determinism: a point's result depends only on its scenario (seed included),
//! never on which thread ran it or when; results are put back in input order.
//! So the output is bit-identical for any `--threads`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use skq_report::slo::{max_load_at_slo, MaxLoad};

use crate::model::{run_point, CoreOpts, Model, Overheads, PointOutcome};
use crate::workload::Scenario;

/// Runs `f` over `items` on up to `threads` threads; results in input order.
/// `bar`, when given, advances once per item.
pub fn par_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    bar: Option<&ProgressBar>,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let threads = threads.clamp(1, items.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                out.lock().expect("no panics while holding the lock")[i] = Some(r);
                if let Some(b) = bar {
                    b.inc(1);
                }
            });
        }
    });
    out.into_inner()
        .expect("threads joined")
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect()
}

/// A progress bar on stderr (drawn only when stderr is a terminal).
pub fn progress(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(what.to_string());
    bar
}

/// One sweep: several models over several loads of one base scenario.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// Models to run.
    pub models: Vec<Model>,
    /// The scenario; its rate is replaced by each load.
    pub base: Scenario,
    /// Offered loads as fractions of capacity (`λ·S̄/n`).
    pub loads: Vec<f64>,
    /// Overheads for core-driven models.
    pub overheads: Overheads,
    /// Application-model knobs.
    pub opts: CoreOpts,
}

impl Sweep {
    /// Scenario of one load (same seed at every load: common random numbers).
    pub fn scenario(&self, load: f64) -> Scenario {
        let mut sc = self.base.clone();
        sc.rate_rps = load * sc.workers as f64 * 1e9 / sc.service.mean_ns();
        sc
    }

    /// Runs every (model, load) pair; results model-major, loads in order.
    pub fn run(
        &self,
        threads: usize,
        bar: Option<&ProgressBar>,
    ) -> anyhow::Result<Vec<PointOutcome>> {
        let jobs: Vec<(usize, f64)> = (0..self.models.len())
            .flat_map(|m| self.loads.iter().map(move |&l| (m, l)))
            .collect();
        par_map(&jobs, threads, bar, |&(m, load)| {
            run_point(
                &self.models[m],
                &self.scenario(load),
                &self.overheads,
                &self.opts,
            )
        })
        .into_iter()
        .collect()
    }
}

/// Maximum load at SLO (requests/s) of one model's points, from (offered
/// load, p99) pairs — the definition `skq bench` uses.
pub fn max_load(points: &[&PointOutcome], slo_us: f64) -> Option<MaxLoad> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.result.target_rps, p.result.latency.p99.value))
        .collect();
    max_load_at_slo(&pts, slo_us)
}

/// Where and how finely [`find_knee`] looks, in fractions of capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KneeSearch {
    /// Lowest load tried.
    pub lo: f64,
    /// Highest load tried.
    pub hi: f64,
    /// Evenly spaced loads of the first pass.
    pub coarse: usize,
    /// Loads strictly inside the bracket of the crossing, second pass.
    pub fine: usize,
}

impl Default for KneeSearch {
    fn default() -> Self {
        KneeSearch {
            lo: 0.05,
            hi: 0.995,
            coarse: 20,
            fine: 12,
        }
    }
}

/// Maximum load at SLO of `model` on `base` (rate replaced per load), by a
/// coarse pass that stops after the first batch of `threads` loads to cross
/// the SLO, then a fine pass inside the bracket. Deterministic for any
/// `threads` except in how many coarse points past the knee are also run;
/// those never change the answer, which only looks at the first crossing.
pub fn find_knee(
    model: &Model,
    base: &Scenario,
    slo_us: f64,
    ov: &Overheads,
    opts: &CoreOpts,
    search: &KneeSearch,
    threads: usize,
) -> anyhow::Result<(Option<MaxLoad>, Vec<PointOutcome>)> {
    let sweep = Sweep {
        models: vec![model.clone()],
        base: base.clone(),
        loads: Vec::new(),
        overheads: *ov,
        opts: opts.clone(),
    };
    let run = |loads: &[f64]| -> anyhow::Result<Vec<PointOutcome>> {
        par_map(loads, threads, None, |&l| {
            run_point(model, &sweep.scenario(l), ov, opts)
        })
        .into_iter()
        .collect()
    };
    let coarse = linspace(search.lo, search.hi, search.coarse);
    let mut pts = Vec::new();
    let mut crossed = None;
    for chunk in coarse.chunks(threads.max(1)) {
        let start = pts.len();
        pts.extend(run(chunk)?);
        if let Some(i) = pts[start..]
            .iter()
            .position(|p| p.result.latency.p99.value > slo_us)
        {
            crossed = Some(start + i);
            break;
        }
    }
    if let Some(i) = crossed.filter(|&i| i > 0 && search.fine > 0) {
        let fine = linspace(coarse[i - 1], coarse[i], search.fine + 2);
        pts.extend(run(&fine[1..=search.fine])?);
    }
    pts.sort_by(|a, b| a.load.total_cmp(&b.load));
    let refs: Vec<&PointOutcome> = pts.iter().collect();
    Ok((max_load(&refs, slo_us), pts))
}

/// `n` loads evenly spaced over `[lo, hi]`.
pub fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    match n {
        0 => Vec::new(),
        1 => vec![lo],
        _ => (0..n)
            .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn par_map_keeps_order_for_any_thread_count() {
        let items: Vec<u64> = (0..50).collect();
        let one = par_map(&items, 1, None, |x| x * x);
        let many = par_map(&items, 7, None, |x| x * x);
        assert_eq!(one, many);
        assert_eq!(one[49], 49 * 49);
    }

    #[test]
    fn linspace_ends() {
        let v = linspace(0.1, 0.9, 5);
        assert_eq!((v.len(), v[0], v[4]), (5, 0.1, 0.9));
        assert!((v[2] - 0.5).abs() < 1e-12);
    }
}
