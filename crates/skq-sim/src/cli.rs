//! The `skq sim` subcommand.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use skq_proto::workload::{ServiceSpec, Workload};

use crate::bounds::{slo_bounds_with, BoundsOpts};
use crate::compare::{compare, overlay_csv, read_bench_path, CompareOpts};
use crate::headline::{self, HeadlineOpts};
use crate::machine::{parse_cpu_list, HintSource, Machine};
use crate::model::{run_point, CoreOpts, Model, Overheads};
use crate::output::{html, p99_svg, table, to_csv, to_json};
use crate::sweep::{max_load, progress, KneeSearch, Sweep};
use crate::workload::{Arrivals, Scenario, Service, Trace};

/// Arguments of `skq sim`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    about = "Discrete-event simulator driving the real scheduling core in virtual time",
    long_about = "Simulates open-loop Poisson (or trace) arrivals over many connections, served either by \
the real skq-core scheduler under a runtime mode (vanilla, shared, queue, cpu, best2, hybrid, +steal) \
with configurable overheads, or by zero-overhead reference models (centralized-fcfs = M/G/n, \
partitioned-fcfs = n×M/G/1, partitioned-fcfs-conn, centralized-ps, partitioned-ps). \
Prints p50/p99/p99.9 against load and the maximum load at SLO. The same --seed gives identical output."
)]
pub struct SimArgs {
    /// Models to run, comma-separated: reference models and/or runtime modes (`best2+steal`, ...).
    #[arg(
        long,
        short = 'm',
        value_delimiter = ',',
        default_value = "centralized-fcfs,partitioned-fcfs,vanilla,shared,hybrid"
    )]
    pub model: Vec<String>,
    /// Worker threads of the simulated server.
    #[arg(long, default_value_t = 16)]
    pub workers: usize,
    /// Threads for independent points (default: all CPUs). Does not change results.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the headline table (max load at SLO of every mode × workload at --workers, default 16).
    #[arg(long)]
    pub headline: bool,
    /// Print centralized/partitioned FCFS max load at SLO for the workload (the bounds API).
    #[arg(long)]
    pub bounds: bool,
    /// Measure simulated events per second on one thread.
    #[arg(long)]
    pub bench_speed: bool,
    /// Compare with measured `skq bench` results: its result directory or a points.json-style file (exits non-zero if a clear measured ordering is contradicted).
    #[arg(long, value_name = "FILE")]
    pub compare: Option<PathBuf>,
    /// With --compare: relative gap above which a measured ordering is clear.
    #[arg(long, default_value_t = 0.1)]
    pub clear_gap: f64,
    /// Workload, arrivals and the load sweep.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// The overhead model.
    #[command(flatten)]
    pub costs: CostArgs,
    /// CPU placement and harvest.
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// Priority probe and best-effort clients.
    #[command(flatten)]
    pub prio: PriorityArgs,
    /// The core's tunables.
    #[command(flatten)]
    pub tunables: TunableArgs,
    /// Output files.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Service-time workload, arrivals and the load sweep of `skq sim`.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Workload and arrivals")]
pub struct ShapeArgs {
    /// Service-time workload (BRIEF §9): fixed, exponential, bimodal-1, bimodal-2, gis, skewed-mix, uniform-10, uniform-20;
    /// or zippydb (RocksDB under ZippyDB: each request costs what skq_proto::zippydb::CostModel, fitted to real
    /// RocksDB calls, says for its operation and scan length, times --scale; --scale 50 matches the bench's dilate 49).
    #[arg(long, default_value = "exponential")]
    pub workload: String,
    /// Mean service time S̄ in µs for the parametric workloads.
    #[arg(long, default_value_t = 10.0)]
    pub mean_us: f64,
    /// Scale factor applied to every service class.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Resample service times (µs, one per line) from this file instead of --workload.
    #[arg(long, value_name = "FILE")]
    pub service_samples: Option<PathBuf>,
    /// Replay arrivals from a CSV trace (`arrival_us,connection[,service_us]`), time-scaled to each load.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Client connections (each one source in the core).
    #[arg(long, default_value_t = 256)]
    pub connections: usize,
    /// Offered loads as fractions of capacity n/S̄: `from:to:step` or a comma list.
    #[arg(long, default_value = "0.1:0.95:0.05")]
    pub loads: String,
    /// Requests per load point, warm-up included.
    #[arg(long, default_value_t = 200_000)]
    pub requests: usize,
    /// Fraction of each point's requests discarded as warm-up.
    #[arg(long, default_value_t = 0.1)]
    pub warmup: f64,
    /// Seed of every random draw; same seed, same output.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// SLO on p99 in µs (default 10 × S̄).
    #[arg(long)]
    pub slo_us: Option<f64>,
}

/// What the simulated runtime's work costs (`skq sim`'s overhead model).
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Overheads")]
pub struct CostArgs {
    /// Overhead: cost per event a worker processes (ns).
    #[arg(long, default_value_t = Overheads::default().event_ns)]
    pub event_ns: u64,
    /// Overhead: extra cost per stolen event (ns).
    #[arg(long, default_value_t = Overheads::default().steal_ns)]
    pub steal_ns: u64,
    /// Overhead: wake-up latency of an idle worker (ns).
    #[arg(long, default_value_t = Overheads::default().wake_ns)]
    pub wake_ns: u64,
    /// Overhead: cache-miss penalty when a connection is served off its home worker (ns).
    #[arg(long, default_value_t = Overheads::default().miss_ns)]
    pub miss_ns: u64,
    /// Overhead: CPU of one system call of the worker loop (ns; counted in
    /// CPU per request, not charged as delay).
    #[arg(long, default_value_t = Overheads::default().syscall_ns)]
    pub syscall_ns: u64,
    /// Overhead: CPU of one voluntary context switch (ns; counted like
    /// --syscall-ns).
    #[arg(long, default_value_t = Overheads::default().switch_ns)]
    pub switch_ns: u64,
    /// Overhead: a harvest holds its readiness set's lock this long (ns;
    /// 0 = no lock modelled). With --harvest runtime.
    #[arg(long, default_value_t = Overheads::default().set_hold_ns)]
    pub set_hold_ns: u64,
    /// Overhead: lock time per ready source harvested (ns).
    #[arg(long, default_value_t = Overheads::default().set_item_ns)]
    pub set_item_ns: u64,
    /// Events per wait() (as `skq serve rpc --batch`, default 1).
    #[arg(long, default_value_t = 1)]
    pub max_events: usize,
    /// Requests read per event before still_ready().
    #[arg(long, default_value_t = 32)]
    pub max_reads: usize,
    /// The handler calls the runtime's cooperative checkpoint every this
    /// many µs of an event's processing, as `skq serve rpc --checkpoint-us`
    /// (unset: never). Each harvests the worker's readiness set when nobody
    /// polls it (a system call) and hands the worker's queued events to
    /// other workers.
    #[arg(long, value_name = "US")]
    pub checkpoint_us: Option<f64>,
}

/// Where the simulated workers and the connections' packets run, and when readiness reaches the core.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "CPU placement and harvest")]
pub struct PlacementArgs {
    /// Probability that an arrival moves its connection's incoming CPU.
    #[arg(long, default_value_t = 0.0)]
    pub migrate_prob: f64,
    /// CPUs the server's workers may run on (a CPU list, e.g. `1` or `0-3`);
    /// workers are spread over them, wrapping around, as skq-rt places them
    /// (default: worker w on CPU w). `skq bench` confines the server to the
    /// first half of the CPUs: `--server-cpus 0` on a 2-CPU machine.
    #[arg(long, value_name = "CPUS")]
    pub server_cpus: Option<String>,
    /// Every connection's packets are processed on this CPU (loopback with a
    /// one-thread generator pinned there, as `skq bench` does on the other
    /// half of the CPUs); default: connection i on worker i's CPU.
    #[arg(long, conflicts_with = "rss")]
    pub client_cpu: Option<u32>,
    /// Each connection's packets are processed on a CPU of this list chosen
    /// by a hash of the connection (RPS/RSS), e.g. `0-1`.
    #[arg(long, value_name = "CPUS")]
    pub rss: Option<String>,
    /// Topology of the simulated CPUs: `flat` (separate cores, one LLC, one
    /// node: the 2-CPU VM) or `smt=2,llc=8,node=16` (consecutive CPUs per
    /// core, LLC and node; 0 = all). CPU hints map to workers through it.
    #[arg(long, default_value = "flat")]
    pub topology: String,
    /// When readiness reaches the core: `immediate` (at arrival) or `runtime`
    /// (harvested by skq-rt's poller or by workers entering wait()).
    #[arg(long, default_value = "immediate")]
    pub harvest: String,
}

/// A high-priority probe client and a best-effort client beside the regular load.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Priority and best-effort clients")]
pub struct PriorityArgs {
    /// Connections 0..K form a high-priority client (registered HIGH_PRIORITY;
    /// traffic share K/connections); reported apart as high_priority_latency.
    #[arg(long, default_value_t = 0)]
    pub high_conns: usize,
    /// Register the --high-conns connections as regular (still reported
    /// apart): the same probe without priority, SKQ §6.8's comparison run.
    #[arg(long)]
    pub probe_regular: bool,
    /// The last K connections form a best-effort client (registered BATCH),
    /// its own Poisson stream of --batch-rps requests of --batch-service-us
    /// each, on top of the offered load; reported apart as batch_latency.
    #[arg(long, default_value_t = 0)]
    pub batch_conns: usize,
    /// Best-effort requests per second (with --batch-conns).
    #[arg(long, default_value_t = 100.0)]
    pub batch_rps: f64,
    /// Service time of every best-effort request (µs).
    #[arg(long, default_value_t = 20_000.0)]
    pub batch_service_us: f64,
    /// Priority diffusion: workers that take best-effort requests, e.g.
    /// 14,15; the others never run them (core models only).
    #[arg(long)]
    pub batch_workers: Option<String>,
}

/// The scheduling core's tunables (as `skq serve rpc` takes them); unset = the core's default.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Core tunables")]
pub struct TunableArgs {
    /// Core tunable: events taken per steal (1..=8).
    #[arg(long)]
    pub steal_k: Option<usize>,
    /// Core tunable: optional safety-net steal retry interval of an idle
    /// worker (µs; off by default: thieves are woken on demand).
    #[arg(long)]
    pub steal_retry_us: Option<f64>,
    /// Core tunable: a poller leaving to work wakes a follower to poll only
    /// if its processing time per event is at least this (µs; 0 = always).
    #[arg(long)]
    pub promote_min_us: Option<f64>,
    /// Core tunable: readiness sets (poll groups) the workers are split
    /// into, each harvested by its own group (1..=workers; default: one set
    /// per worker for `cpu` without stealing when every worker has a CPU of
    /// its own, else one shared set). With --harvest runtime.
    #[arg(long)]
    pub poll_groups: Option<usize>,
    /// Core tunable: most workers blocked in one readiness set at once (0,
    /// the default: every idle worker; 1: leader/follower). With --harvest
    /// runtime.
    #[arg(long)]
    pub pollers: Option<usize>,
    /// Core tunable: with several pollers, a set of more than this many
    /// workers takes every ready event per poll while the poller's events
    /// are short (0..=64; 64: never; default 8). With --harvest runtime.
    #[arg(long)]
    pub batch_polls_above: Option<usize>,
    /// Core tunable: hybrid cache-miss penalty (ns).
    #[arg(long)]
    pub penalty_ns: Option<u64>,
    /// Core tunable: high-priority share of a wait's batch (1..=100 %).
    #[arg(long)]
    pub rtshare: Option<u32>,
    /// Core tunable: target waits per second per worker (0 = off).
    #[arg(long)]
    pub rtfreq: Option<u32>,
}

/// Files `skq sim` writes besides its terminal table.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Output files")]
pub struct OutputArgs {
    /// Write every point as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write every point as JSON (records of `config` + PointResult).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the p99-against-load plot as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write a self-contained HTML report (table, plot, points).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl SimArgs {
    fn overheads(&self) -> Overheads {
        Overheads {
            event_ns: self.costs.event_ns,
            steal_ns: self.costs.steal_ns,
            wake_ns: self.costs.wake_ns,
            miss_ns: self.costs.miss_ns,
            syscall_ns: self.costs.syscall_ns,
            switch_ns: self.costs.switch_ns,
            set_hold_ns: self.costs.set_hold_ns,
            set_item_ns: self.costs.set_item_ns,
        }
    }

    fn core_opts(&self) -> anyhow::Result<CoreOpts> {
        if !(0.0..=1.0).contains(&self.placement.migrate_prob) {
            bail!(
                "--migrate-prob must be in 0..=1, got {}",
                self.placement.migrate_prob
            );
        }
        if self.costs.max_events == 0 || self.costs.max_reads == 0 {
            bail!("--max-events and --max-reads must be at least 1");
        }
        let checkpoint_ns = match self.costs.checkpoint_us {
            None => 0,
            Some(us) if us.is_finite() && us >= 0.001 => (us * 1e3).round() as u64,
            Some(us) => bail!("--checkpoint-us must be at least 0.001 (1 ns), got {us}"),
        };
        Ok(CoreOpts {
            max_events: self.costs.max_events,
            max_reads: self.costs.max_reads,
            migrate_prob: self.placement.migrate_prob,
            harvest: self
                .placement
                .harvest
                .parse()
                .map_err(|e| anyhow::anyhow!("--harvest: {e}"))?,
            machine: self.machine()?,
            elastic: None,
            rate_profile: None,
            checkpoint_ns,
        })
    }

    fn machine(&self) -> anyhow::Result<Machine> {
        let list = |opt: &str, v: &Option<String>| -> anyhow::Result<Vec<u32>> {
            v.as_deref().map_or(Ok(Vec::new()), |s| {
                parse_cpu_list(s).map_err(|e| anyhow::anyhow!("--{opt}: {e}"))
            })
        };
        let hints = match (self.placement.client_cpu, &self.placement.rss) {
            (Some(_), Some(_)) => bail!("--client-cpu and --rss exclude each other"),
            (Some(c), None) => HintSource::Client(c),
            (None, Some(_)) => HintSource::Rss(list("rss", &self.placement.rss)?),
            (None, None) => HintSource::Workers,
        };
        let m = Machine {
            server_cpus: list("server-cpus", &self.placement.server_cpus)?,
            hints,
            shape: self
                .placement
                .topology
                .parse()
                .map_err(|e| anyhow::anyhow!("--topology {}: {e}", self.placement.topology))?,
        };
        m.validate()?;
        Ok(m)
    }

    fn threads(&self) -> usize {
        self.threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1)
    }

    fn service(&self) -> anyhow::Result<Service> {
        if let Some(p) = &self.shape.service_samples {
            let text = read(p)?;
            let mut v = Vec::new();
            for (i, l) in text.lines().enumerate() {
                let l = l.trim();
                if l.is_empty() || l.starts_with('#') {
                    continue;
                }
                let us: f64 = l
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                    .with_context(|| {
                        format!(
                            "--service-samples {}: line {}: `{l}` is not a service time in µs",
                            p.display(),
                            i + 1
                        )
                    })?;
                v.push((us * 1000.0).round() as u64);
            }
            if v.is_empty() {
                bail!("--service-samples {}: no samples", p.display());
            }
            return Ok(Service::Samples(v.into()));
        }
        if self.shape.workload == "zippydb" {
            if !(self.shape.scale.is_finite() && self.shape.scale > 0.0) {
                bail!("--scale must be positive, got {}", self.shape.scale);
            }
            return Ok(zippydb_service(self.shape.scale, self.shape.seed));
        }
        let workload: Workload = self
            .shape
            .workload
            .parse()
            .map_err(|e| anyhow::anyhow!("--workload: {e}"))?;
        if !(self.shape.mean_us.is_finite() && self.shape.mean_us > 0.0) {
            bail!("--mean-us must be positive, got {}", self.shape.mean_us);
        }
        if !(self.shape.scale.is_finite() && self.shape.scale > 0.0) {
            bail!("--scale must be positive, got {}", self.shape.scale);
        }
        Ok(Service::Spec(ServiceSpec {
            workload,
            mean_ns: self.shape.mean_us * 1000.0,
            scale: self.shape.scale,
        }))
    }

    fn models(&self) -> anyhow::Result<Vec<Model>> {
        let mut out = Vec::new();
        for name in &self.model {
            let mut m =
                Model::parse(name.trim(), self.workers).with_context(|| "--model".to_string())?;
            self.tune(&mut m)?;
            out.push(m);
        }
        Ok(out)
    }

    /// Applies the core tunables given on the command line.
    fn tune(&self, m: &mut Model) -> anyhow::Result<()> {
        if let Model::Core(cfg) = m {
            if let Some(k) = self.tunables.steal_k {
                cfg.steal_k = k;
            }
            if let Some(us) = self.tunables.steal_retry_us {
                cfg.steal_retry_ns = (us * 1000.0).round() as u64;
            }
            if let Some(us) = self.tunables.promote_min_us {
                cfg.promote_min_ns = (us * 1000.0).round() as u64;
            }
            if let Some(p) = self.tunables.pollers {
                cfg.pollers = p;
            }
            if let Some(n) = self.tunables.batch_polls_above {
                cfg.batch_polls_above = n;
            }
            if let Some(g) = self.tunables.poll_groups {
                cfg.poll_groups = g;
            }
            if let Some(p) = self.tunables.penalty_ns {
                cfg.penalty_ns = p;
            }
            if let Some(s) = self.tunables.rtshare {
                cfg.rtshare = s;
            }
            if let Some(f) = self.tunables.rtfreq {
                cfg.rtfreq = f;
            }
            if let Some(list) = &self.prio.batch_workers {
                let ws = skq_core::parse_cpu_list(list).map_err(|_| {
                    anyhow::anyhow!(
                        "--batch-workers `{list}`: not a worker list (e.g. 14,15 or 12-15)"
                    )
                })?;
                cfg.batch_workers = ws.iter().fold(0u64, |m, &w| m | 1u64 << (w as u64).min(63));
            }
            cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        Ok(())
    }

    fn scenario(&self) -> anyhow::Result<Scenario> {
        let service = self.service()?;
        if !(0.0..1.0).contains(&self.shape.warmup) {
            bail!("--warmup must be in 0..1, got {}", self.shape.warmup);
        }
        let mut sc = Scenario::at_load(
            service,
            self.workers,
            self.shape.connections,
            0.5,
            self.shape.requests,
            self.shape.seed,
        );
        sc.warmup = (self.shape.requests as f64 * self.shape.warmup) as usize;
        sc.high_conns = self.prio.high_conns;
        sc.probe_regular = self.prio.probe_regular;
        sc.batch_conns = self.prio.batch_conns;
        sc.batch_rps = self.prio.batch_rps;
        if !(self.prio.batch_service_us.is_finite() && self.prio.batch_service_us > 0.0) {
            bail!(
                "--batch-service-us must be positive, got {}",
                self.prio.batch_service_us
            );
        }
        sc.batch_service_ns = (self.prio.batch_service_us * 1000.0).round() as u64;
        if let Some(p) = &self.shape.trace {
            let t = Trace::parse(&read(p)?).with_context(|| format!("--trace {}", p.display()))?;
            sc.arrivals = Arrivals::Trace(Arc::new(t));
        }
        sc.validate()?;
        Ok(sc)
    }
}

fn read(p: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
}

fn write(p: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))
}

/// Parses `from:to:step` or `a,b,c` into loads.
pub fn parse_loads(s: &str) -> anyhow::Result<Vec<f64>> {
    let bad = || {
        format!("--loads `{s}`: expected `from:to:step` or a comma list of fractions of capacity")
    };
    let loads: Vec<f64> = if s.contains(':') {
        let p: Vec<f64> = s
            .split(':')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .with_context(bad)?;
        let [a, b, step] = p[..] else { bail!(bad()) };
        if !(step > 0.0 && b >= a) {
            bail!(bad());
        }
        let n = ((b - a) / step + 1e-9).floor() as usize + 1;
        (0..n).map(|i| a + step * i as f64).collect()
    } else {
        s.split(',')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .with_context(bad)?
    };
    if loads.is_empty() || loads.iter().any(|&l| !(l > 0.0 && l < 10.0)) {
        bail!("--loads `{s}`: every load must be in (0, 10) (fractions of capacity)");
    }
    Ok(loads)
}

/// Entry point of `skq sim`.
pub fn run(a: SimArgs) -> anyhow::Result<()> {
    if a.workers == 0 || a.workers > 64 {
        bail!("--workers must be in 1..=64, got {}", a.workers);
    }
    if a.headline {
        return run_headline(&a);
    }
    if a.bench_speed {
        return bench_speed(&a);
    }
    if let Some(p) = &a.compare {
        return run_compare(&a, p);
    }
    let sc = a.scenario()?;
    let slo_us = a
        .shape
        .slo_us
        .unwrap_or(10.0 * sc.service.mean_ns() / 1000.0);
    if a.bounds {
        let o = BoundsOpts {
            requests: a.shape.requests,
            seed: a.shape.seed,
            threads: a.threads(),
            connections: a.shape.connections,
        };
        let b = slo_bounds_with(&sc.service, a.workers, slo_us, &o)?;
        let f = |m: Option<skq_report::slo::MaxLoad>| {
            m.map_or("SLO missed at 5% load".into(), |m| {
                format!(
                    "{:.0} req/s ({:.3} of capacity)",
                    m.load,
                    m.load / b.capacity_rps
                )
            })
        };
        println!(
            "{} workers, {}, SLO p99 ≤ {slo_us:.1} µs",
            a.workers,
            sc.service.name()
        );
        println!("centralized FCFS (M/G/n):   {}", f(b.centralized));
        println!("partitioned FCFS (n×M/G/1): {}", f(b.partitioned));
        return Ok(());
    }
    let sweep = Sweep {
        models: a.models()?,
        base: sc,
        loads: parse_loads(&a.shape.loads)?,
        overheads: a.overheads(),
        opts: a.core_opts()?,
    };
    let n = sweep.models.len() * sweep.loads.len();
    let bar = progress(n, "sim");
    let points = sweep.run(a.threads(), Some(&bar))?;
    bar.finish_and_clear();
    println!(
        "skq sim: {} workers, {} connections, workload {} (S̄ = {:.2} µs), SLO p99 ≤ {slo_us:.1} µs, {} requests/point, seed {}",
        a.workers,
        a.shape.connections,
        sweep.base.service.name(),
        sweep.base.service.mean_ns() / 1000.0,
        a.shape.requests,
        a.shape.seed
    );
    println!(
        "overheads of runtime modes: {} (reference models: none)",
        sweep.overheads
    );
    let cap = a.workers as f64 * 1e9 / sweep.base.service.mean_ns();
    for m in &sweep.models {
        let name = m.name();
        let pts: Vec<_> = points.iter().filter(|p| p.model == name).collect();
        println!("\n== {name}");
        print!("{}", table(&pts));
        match max_load(&pts, slo_us) {
            None => println!("max load at SLO: none (SLO missed at the lowest load)"),
            Some(k) => println!(
                "max load at SLO: {}{:.0} req/s ({:.3} of capacity)",
                if k.lower_bound { "≥ " } else { "" },
                k.load,
                k.load / cap
            ),
        }
    }
    if let Some(p) = &a.output.csv {
        write(p, &to_csv(&points))?;
    }
    if let Some(p) = &a.output.json {
        write(p, &to_json(&points)?)?;
    }
    let title = format!(
        "skq sim: {} workers, {}",
        a.workers,
        sweep.base.service.name()
    );
    if let Some(p) = &a.output.svg {
        write(p, &p99_svg(&title, &points, slo_us))?;
    }
    if let Some(p) = &a.output.html {
        let params = vec![
            ("service mode".to_string(), "simulated".to_string()),
            ("workers".to_string(), a.workers.to_string()),
            ("connections".to_string(), a.shape.connections.to_string()),
            (
                "workload".to_string(),
                format!(
                    "{} (S̄ = {:.2} µs)",
                    sweep.base.service.name(),
                    sweep.base.service.mean_ns() / 1000.0
                ),
            ),
            ("SLO".to_string(), format!("p99 ≤ {slo_us:.1} µs")),
            (
                "requests per point".to_string(),
                a.shape.requests.to_string(),
            ),
            ("seed".to_string(), a.shape.seed.to_string()),
            (
                "overheads (runtime modes)".to_string(),
                sweep.overheads.to_string(),
            ),
        ];
        write(p, &html(&title, &params, &points, slo_us))?;
    }
    Ok(())
}

fn run_headline(a: &SimArgs) -> anyhow::Result<()> {
    let rows = headline::POLICIES
        .iter()
        .chain(headline::REFERENCES.iter())
        .map(|s| s.to_string())
        .collect();
    let o = HeadlineOpts {
        workers: a.workers,
        connections: a.shape.connections,
        mean_ns: a.shape.mean_us * 1000.0,
        requests: a.shape.requests,
        seed: a.shape.seed,
        threads: a.threads(),
        overheads: a.overheads(),
        opts: a.core_opts()?,
        search: KneeSearch {
            lo: 0.05,
            hi: 0.995,
            coarse: 14,
            fine: 8,
        },
        rows,
    };
    let t = Instant::now();
    let h = headline::compute(&o)?;
    print!("{}", h.markdown());
    eprintln!(
        "(computed in {:.1} s on {} threads)",
        t.elapsed().as_secs_f64(),
        o.threads
    );
    Ok(())
}

fn bench_speed(a: &SimArgs) -> anyhow::Result<()> {
    let mut sc = a.scenario()?;
    sc.rate_rps = 0.8 * sc.workers as f64 * 1e9 / sc.service.mean_ns();
    println!(
        "one thread, load 0.8, {} requests, {} workers, workload {}",
        sc.requests,
        sc.workers,
        sc.service.name()
    );
    for m in a.models()? {
        // One untimed run to warm caches and the allocator, then the best of three.
        run_point(&m, &sc, &a.overheads(), &a.core_opts()?)?;
        let mut best = f64::INFINITY;
        let mut events = 0;
        for _ in 0..3 {
            let t = Instant::now();
            let p = run_point(&m, &sc, &a.overheads(), &a.core_opts()?)?;
            best = best.min(t.elapsed().as_secs_f64());
            events = p.events;
        }
        println!(
            "{:24} {:>10} events in {:.3} s: {:6.2} M events/s, {:6.2} M requests/s",
            m.name(),
            events,
            best,
            events as f64 / best / 1e6,
            sc.requests as f64 / best / 1e6
        );
    }
    Ok(())
}

fn run_compare(a: &SimArgs, p: &Path) -> anyhow::Result<()> {
    let curves = read_bench_path(p).with_context(|| format!("--compare {}", p.display()))?;
    let o = CompareOpts {
        workers: Some(a.workers),
        slo_us: a.shape.slo_us,
        clear_gap: a.clear_gap,
        requests: a.shape.requests,
        seed: a.shape.seed,
        threads: a.threads(),
        overheads: a.overheads(),
        opts: a.core_opts()?,
    };
    let report = compare(&curves, &o)?;
    print!("{}", report.render());
    if let Some(c) = &a.output.csv {
        write(c, &overlay_csv(&curves, &report))?;
    }
    if report.disagreements() > 0 {
        bail!(
            "the simulator orders {} clearly separated pair(s) differently from the measurements",
            report.disagreements()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_parse() {
        assert_eq!(parse_loads("0.1:0.3:0.1").unwrap().len(), 3);
        assert_eq!(parse_loads("0.5, 0.9").unwrap(), vec![0.5, 0.9]);
        assert!(parse_loads("0:1:0.1")
            .unwrap_err()
            .to_string()
            .contains("--loads"));
        assert!(parse_loads("a").is_err());
    }
}

/// The ZippyDB catalogue entry: a million requests drawn from the very
/// generator `skq load --protocol rocksdb` uses (operation mix, scan lengths)
/// and costed by the model fitted to real RocksDB calls
/// (`skq_proto::zippydb::CostModel::MEASURED`), times `scale`; the simulator
/// resamples them like measured samples.
pub fn zippydb_service(scale: f64, seed: u64) -> Service {
    use rand::SeedableRng;
    use skq_proto::request::Request;
    use skq_proto::zippydb::{CostModel, ZippyDb};
    let z = ZippyDb::new(1_000_000, seed).expect("a valid key space");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ 0x0021_99DB);
    let v: Vec<u64> = (0..1_000_000)
        .map(|i| {
            let mut r = Request::new(i);
            z.draw(&mut rng, &mut r);
            (CostModel::MEASURED.cost_ns(r.op, r.value_len) * scale).round() as u64
        })
        .collect();
    Service::Samples(v.into())
}

#[cfg(test)]
mod zippydb_tests {
    use super::*;
    use skq_proto::zippydb::CostModel;

    #[test]
    fn zippydb_samples_carry_the_operation_mix_and_the_scale() {
        let Service::Samples(v) = zippydb_service(50.0, 3) else {
            panic!("zippydb is resampled")
        };
        let m = CostModel::MEASURED;
        let share = |ns: f64| {
            let want = (ns * 50.0).round() as u64;
            v.iter().filter(|&&x| x == want).count() as f64 / v.len() as f64
        };
        // GET and PUT have one cost each; SEEKs cost more than both.
        assert!((share(m.get_ns) - 0.83).abs() < 0.005);
        assert!((share(m.put_ns) - 0.14).abs() < 0.005);
        let seeks = v
            .iter()
            .filter(|&&x| x as f64 >= 50.0 * m.seek_base_ns)
            .count();
        assert!((seeks as f64 / v.len() as f64 - 0.03).abs() < 0.002);
    }
}
