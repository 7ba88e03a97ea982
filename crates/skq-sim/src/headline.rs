//! The headline table: maximum load at SLO (p99 ≤ 10·S̄) of every runtime
//! mode on every catalogue workload, as a fraction of centralized FCFS's.

use std::fmt::Write as _;

use skq_proto::workload::{ServiceSpec, Workload};
use skq_report::slo::MaxLoad;

use crate::model::{CoreOpts, Model, Overheads};
use crate::sweep::{find_knee, par_map, progress, KneeSearch};
use crate::workload::{Scenario, Service};

/// Runtime modes of the table, in row order.
pub const POLICIES: [&str; 7] = [
    "vanilla",
    "shared",
    "queue",
    "cpu",
    "best2",
    "best2+steal",
    "hybrid",
];
/// Reference rows printed below the modes.
pub const REFERENCES: [&str; 3] = [
    "partitioned-fcfs",
    "partitioned-fcfs-conn",
    "centralized-ps",
];
/// Workloads of the table, in column order.
pub const WORKLOADS: [Workload; 6] = [
    Workload::Fixed,
    Workload::Exponential,
    Workload::Bimodal1,
    Workload::Bimodal2,
    Workload::Gis,
    Workload::SkewedMix,
];

/// Parameters of the table.
#[derive(Clone, Debug)]
pub struct HeadlineOpts {
    /// Workers (16 in the table).
    pub workers: usize,
    /// Connections.
    pub connections: usize,
    /// S̄ for the parametric workloads (ns).
    pub mean_ns: f64,
    /// Requests per load point.
    pub requests: usize,
    /// Seed.
    pub seed: u64,
    /// Threads.
    pub threads: usize,
    /// Overheads charged to the core-driven rows.
    pub overheads: Overheads,
    /// Application model.
    pub opts: CoreOpts,
    /// Knee search.
    pub search: KneeSearch,
    /// Rows (modes and reference models).
    pub rows: Vec<String>,
}

/// The table's numbers.
#[derive(Clone, Debug)]
pub struct Headline {
    /// The options it was computed with.
    pub opts: HeadlineOpts,
    /// Centralized FCFS knee per workload (requests/s).
    pub baseline: Vec<Option<MaxLoad>>,
    /// `cells[row][workload]`: knee (requests/s).
    pub cells: Vec<Vec<Option<MaxLoad>>>,
}

fn scenario(o: &HeadlineOpts, w: Workload) -> Scenario {
    let spec = ServiceSpec::new(w, o.mean_ns);
    Scenario::at_load(
        Service::Spec(spec),
        o.workers,
        o.connections,
        0.5,
        o.requests,
        o.seed,
    )
}

/// Computes the table (one knee search per cell, cells in parallel).
pub fn compute(o: &HeadlineOpts) -> anyhow::Result<Headline> {
    let mut models = vec![Model::parse("centralized-fcfs", o.workers)?];
    for r in &o.rows {
        models.push(Model::parse(r, o.workers)?);
    }
    let jobs: Vec<(usize, usize)> = (0..models.len())
        .flat_map(|m| (0..WORKLOADS.len()).map(move |w| (m, w)))
        .collect();
    let bar = progress(jobs.len(), "headline");
    let knees: Vec<anyhow::Result<Option<MaxLoad>>> =
        par_map(&jobs, o.threads, Some(&bar), |&(m, w)| {
            let sc = scenario(o, WORKLOADS[w]);
            let slo_us = 10.0 * sc.service.mean_ns() / 1000.0;
            find_knee(&models[m], &sc, slo_us, &o.overheads, &o.opts, &o.search, 1).map(|(k, _)| k)
        });
    bar.finish_and_clear();
    let mut knees = knees.into_iter();
    let mut grid = Vec::with_capacity(models.len());
    for _ in 0..models.len() {
        grid.push(
            (0..WORKLOADS.len())
                .map(|_| knees.next().expect("one per job"))
                .collect::<anyhow::Result<Vec<_>>>()?,
        );
    }
    let baseline = grid.remove(0);
    Ok(Headline {
        opts: o.clone(),
        baseline,
        cells: grid,
    })
}

impl Headline {
    /// The markdown table with a caption stating every parameter.
    pub fn markdown(&self) -> String {
        let o = &self.opts;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Maximum load at SLO (p99 ≤ 10·S̄) at {} workers, as a fraction of centralized FCFS (M/G/{}) on the same \
             requests. S̄ = {} µs for fixed/exponential/bimodal; gis and skewed-mix use their catalogue times \
             (S̄ = 13.5 and 20.5 µs). {} connections, {} requests per load point, seed {}. Runtime modes drive \
             skq-core with overheads: {}; wait() returns at most {} event(s), at most {} requests read per event; harvest: {:?}. \
             `≥` = SLO still met at the highest load tried; `miss` = missed even at the lowest ({:.0}% of capacity).\n",
            o.workers,
            o.workers,
            o.mean_ns / 1000.0,
            o.connections,
            o.requests,
            o.seed,
            o.overheads,
            o.opts.max_events,
            o.opts.max_reads,
            o.opts.harvest,
            o.search.lo * 100.0,
        );
        s.push_str("| mode |");
        for w in WORKLOADS {
            let _ = write!(s, " {w} |");
        }
        s.push_str("\n|---|");
        s.push_str(&"---:|".repeat(WORKLOADS.len()));
        s.push('\n');
        for (r, row) in o.rows.iter().zip(&self.cells) {
            let _ = write!(s, "| {r} |");
            for (c, b) in row.iter().zip(&self.baseline) {
                let _ = write!(s, " {} |", cell(c, b));
            }
            s.push('\n');
        }
        s.push_str("| *centralized-fcfs (req/s)* |");
        for b in &self.baseline {
            let _ = write!(
                s,
                " {} |",
                b.map_or("–".to_string(), |m| format!("{:.0}", m.load))
            );
        }
        s.push('\n');
        s
    }
}

fn cell(c: &Option<MaxLoad>, base: &Option<MaxLoad>) -> String {
    let Some(b) = base else { return "–".into() };
    match c {
        None => "miss".into(),
        Some(m) if m.lower_bound => format!("≥{:.2}", m.load / b.load),
        Some(m) => format!("{:.2}", m.load / b.load),
    }
}
