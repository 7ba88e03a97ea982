//! `skq bench`: arguments and entry point.
//!
//! Without arguments it runs the built-in default ([`crate::config::default_file`]):
//! the RPC server with 8 workers, emulated exponential and bimodal-1 service
//! with S̄ = 500 µs, configurations hybrid, cpu, epoll-1to1, epoll-shared and
//! tokio (ratios against epoll-1to1), six loads each (0.2 … 0.9, with 0.85
//! near the knee: [`crate::config::DEFAULT_LOADS`]), 8-s points
//! ([`crate::config::DEFAULT_POINT_SECS`]), with emulated RSS over every CPU
//! where the machine allows it; about 9 minutes at most on two cores, less
//! when curves saturate early (`--point-secs 1.5`: about 2¾). `--config FILE` replaces the
//! default (schema in [`crate::config`]); the other flags override either.
//!
//! Exit status: 0 when the sweep ran to its end (whatever its self-checks
//! said), 2 when it could not run or was interrupted, and with `--strict`
//! [`EXIT_STRICT`] (3) when it ran but a configuration's answer rests on a
//! failed self-check or a disturbed point ([`crate::summary::strict_problems`]);
//! every output is written first in every case that ran.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::capacity;
use crate::config::{self, ConfigEntry, Curve, MatrixEntry, ServiceMode, Sweep, SweepFile};
use crate::crosscheck;
use crate::interrupt;
use crate::output::{self, RunInfo};
use crate::process::{allowed_cpus, ProcessRunner};
use crate::rss::{cpu_list, RssEnv, RssSpec};
use crate::summary;
use crate::sweep::{self, PlannedPoint, PointRecord, Progress};

/// `skq bench` arguments.
#[derive(clap::Args, Debug, Default)]
pub struct BenchArgs {
    /// Sweep description (TOML; schema in the skq-bench rustdoc, example in
    /// crates/skq-bench/examples/sweep.toml). Default: the built-in sweep.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Configurations: skq policies (vanilla, shared, queue, cpu, best2,
    /// hybrid, optionally +steal), epoll-1to1, epoll-shared, tokio,
    /// memcached, nginx, kv-tpc or kv-MODE (e.g. kv-hybrid, kv-epoll-1to1).
    #[arg(long, value_delimiter = ',', value_name = "MODE,...")]
    pub modes: Vec<String>,
    /// Workloads (exponential, bimodal-1, ...), crossed with --modes.
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    pub workloads: Vec<String>,
    /// Server worker threads.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Service mode of the skq server: spin or emulate.
    #[arg(long, value_name = "spin|emulate")]
    pub service: Option<ServiceMode>,
    /// Mean service time S̄ in µs (parametric workloads).
    #[arg(long, value_name = "US")]
    pub mean_us: Option<f64>,
    /// Offered loads as fractions of capacity N/S̄, e.g. 0.1,0.3,0.5.
    #[arg(long, value_delimiter = ',', value_name = "F,...")]
    pub loads: Vec<f64>,
    /// Measured seconds per point.
    #[arg(long, value_name = "S")]
    pub point_secs: Option<f64>,
    /// Warm-up seconds per point (discarded).
    #[arg(long, value_name = "S")]
    pub warmup_secs: Option<f64>,
    /// SLO as a multiple of the mean service time.
    #[arg(long, value_name = "K")]
    pub slo_factor: Option<f64>,
    /// Load fraction whose latency CDF the report plots.
    #[arg(long, value_name = "F")]
    pub cdf_load: Option<f64>,
    /// Load connections per point.
    #[arg(long)]
    pub connections: Option<usize>,
    /// Emulated RSS: run servers and generators in a network namespace whose
    /// loopback spreads flows over these CPUs with RPS (`all`, a list such
    /// as `0,1` or `0-3`, or `off`). Default: the sweep's `rss` setting
    /// (`all` for the built-in sweep, `off` for files that do not set it).
    #[arg(long, value_name = "CPUS|all|off")]
    pub rss: Option<RssSpec>,
    /// Move flows every N ms while a point runs: the RPS mask alternates
    /// between the whole --rss set and one of its CPUs in turn (0 = never).
    #[arg(long, value_name = "N")]
    pub rss_migrate_ms: Option<u64>,
    /// Output folder (default `results/bench-<timestamp>`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the plan and its worst-case duration, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Mark a point disturbed when processes outside the run (the machine's
    /// busy CPU from /proc/stat: user + nice + system + steal, less the
    /// server's and the load generator's CPU) used more than this many CPUs
    /// on average while it ran (default 0.05; the figure is good to a few
    /// 10 ms ticks per point).
    #[arg(long, value_name = "CPUS")]
    pub disturbed_above: Option<f64>,
    /// For scripts that publish figures: after writing every output, exit
    /// with status 3 when a configuration's answer rests on a point that
    /// failed a self-check or was disturbed (the decisive points: every
    /// point at or under the SLO and the first over it), or when a
    /// configuration has no answer (runner error, nothing measured).
    #[arg(long)]
    pub strict: bool,
    /// The run's seed: each load's arrival schedule and request mix derive
    /// from it, the same at that load for every configuration (default: the
    /// file's `seed`, else drawn at random; printed either way, so
    /// `--seed` repeats a run's schedules).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Before each measurement of a point, probe every CPU of the run (200
    /// sleeps of 500 µs, then 0.1 s of spinning, about 0.25 s) and, while
    /// more than N sleeps on a CPU overshot by over 200 µs (the host holding
    /// it), wait 5 s and probe again; and have the generator end a start at
    /// the end of its warm-up, measuring nothing, when the machine's stalls
    /// took more of it than --host-gate-warmup allows, the point starting
    /// again 5 s later (all within --host-gate-wait). The point's record
    /// keeps the probe, the waits and the starts. Off by default (the
    /// file's `host_gate`).
    #[arg(long, value_name = "N")]
    pub host_gate: Option<u32>,
    /// Longest wait of --host-gate before measuring a point all the same
    /// (default 120).
    #[arg(long, value_name = "S")]
    pub host_gate_wait: Option<f64>,
    /// With --host-gate: the ms per second of warm-up the machine's stalls
    /// may take from the generator's loop before it ends the start (default
    /// 10; 0: never ends one).
    #[arg(long, value_name = "MS_PER_S")]
    pub host_gate_warmup: Option<f64>,
}

/// `skq bench --strict`'s exit status when the sweep ran but its figures
/// should not be published (the same status `skq load` gives a run whose
/// self-check failed).
pub const EXIT_STRICT: i32 = 3;

/// The error of a `--strict` sweep that ran to its end (every output
/// written) but whose answers rest on failed self-checks or disturbed
/// points: the `skq` binary exits with [`EXIT_STRICT`].
#[derive(Debug)]
pub struct StrictFailed(pub String);

impl std::fmt::Display for StrictFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StrictFailed {}

/// `--strict`'s verdict on a sweep: `Err(StrictFailed)` naming the
/// problems of its curves ([`crate::summary::strict_problems`]) and of the
/// run as a whole (the host delayed most of it,
/// [`crate::overshoot::run_level`]), else `Ok`.
pub fn strict_verdict(
    summaries: &[summary::CurveSummary],
    records: &[PointRecord],
) -> Result<(), StrictFailed> {
    let mut problems = summary::strict_problems(summaries);
    problems.extend(output::host_delay_warning(records));
    if problems.is_empty() {
        return Ok(());
    }
    Err(StrictFailed(format!(
        "--strict: {} problem(s) with the decisive points; the outputs were written all the same: {}",
        problems.len(),
        problems.join(" | ")
    )))
}

/// Builds the sweep from the default or the file, with flags applied over it.
pub fn build_sweep(a: &BenchArgs, cpus: usize) -> Result<(Sweep, Option<PathBuf>)> {
    let (mut file, file_out) = match &a.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("--config {}", p.display()))?;
            let f = SweepFile::parse(&text).with_context(|| format!("--config {}", p.display()))?;
            let out = f.sweep.out.clone();
            (f, out)
        }
        None => (config::default_file(), None),
    };
    if !a.modes.is_empty() || !a.workloads.is_empty() {
        let old = file.matrix.take().unwrap_or_default();
        file.matrix = Some(MatrixEntry {
            modes: if a.modes.is_empty() {
                old.modes
            } else {
                a.modes.clone()
            },
            connections: old.connections,
            workloads: if a.workloads.is_empty() {
                old.workloads
            } else {
                a.workloads.clone()
            },
        });
        if file.matrix.as_ref().is_some_and(|m| m.modes.is_empty()) {
            anyhow::bail!(
                "--workloads needs --modes (the configuration file has no [matrix] modes)"
            );
        }
    }
    let flags = ConfigEntry {
        workers: a.workers,
        service: a.service,
        mean_us: a.mean_us,
        connections: a.connections,
        ..Default::default()
    };
    file.defaults = flags.over(&file.defaults);
    for c in &mut file.config {
        *c = flags.over(c);
    }
    let sw = &mut file.sweep;
    if !a.loads.is_empty() {
        sw.loads = Some(a.loads.clone());
    }
    sw.point_secs = a.point_secs.or(sw.point_secs);
    sw.warmup_secs = a.warmup_secs.or(sw.warmup_secs);
    sw.slo_factor = a.slo_factor.or(sw.slo_factor);
    sw.cdf_load = a.cdf_load.or(sw.cdf_load);
    sw.rss = a.rss.clone().or(sw.rss.take());
    sw.rss_migrate_ms = a.rss_migrate_ms.or(sw.rss_migrate_ms);
    sw.disturbed_above = a.disturbed_above.or(sw.disturbed_above);
    sw.seed = a.seed.or(sw.seed).or_else(|| Some(rand::random()));
    sw.host_gate = a.host_gate.or(sw.host_gate);
    sw.host_gate_wait_s = a.host_gate_wait.or(sw.host_gate_wait_s);
    sw.host_gate_warmup_ms_per_s = a.host_gate_warmup.or(sw.host_gate_warmup_ms_per_s);
    let what = if a.config.is_some() {
        "--config with flags"
    } else {
        "flags"
    };
    let sweep = Sweep::from_file(&file, cpus).with_context(|| what.to_string())?;
    Ok((sweep, a.out.clone().or(file_out)))
}

/// Progress bar on a terminal; plain lines on stderr otherwise.
struct Bar(ProgressBar);

impl Progress for Bar {
    fn start(&mut self, curve: &Curve, p: &PlannedPoint) {
        self.0.set_message(format!(
            "{} · {} @ {:.2} ({:.0} req/s)",
            curve.name, curve.workload, p.load, p.target_rps
        ));
    }
    fn advance(&mut self, n: u64) {
        self.0.inc(n);
    }
    fn note(&mut self, line: &str) {
        if self.0.is_hidden() {
            eprintln!("skq bench: {line}");
        } else {
            self.0.println(line);
        }
    }
    fn cancelled(&self) -> bool {
        interrupt::interrupted()
    }
}

/// `skq bench`.
pub fn run(a: BenchArgs) -> Result<()> {
    let cpus = allowed_cpus();
    let (sweep, out) = build_sweep(&a, cpus.len())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let started = output::utc_string(now);
    let out = out.unwrap_or_else(|| {
        PathBuf::from(format!(
            "results/bench-{}",
            started.replace([' ', ':'], "-")
        ))
    });
    let points: usize = sweep.curves.len() * sweep.settings.loads.len();
    let est = sweep::estimate(&sweep) + crosscheck::estimate(&sweep);
    println!(
        "skq bench: {} configurations × {} loads = {points} points, at most {:.0} s plus re-measured points ({} CPUs); seed {}; output {}",
        sweep.curves.len(),
        sweep.settings.loads.len(),
        est.as_secs_f64(),
        cpus.len(),
        sweep.settings.seed,
        out.display()
    );
    {
        use skq_report::capacity::{default_path, CapacityFile, Machine};
        let path = default_path();
        let (file, desc) = match &path {
            Some(p) => match CapacityFile::read(p) {
                Ok(f) => (f, p.display().to_string()),
                Err(e) => (None, format!("unreadable: {e}")),
            },
            None => (None, "no HOME to find it in".to_string()),
        };
        let machine = Machine::current(cpus.len());
        for line in capacity::capacity_lines(&sweep, file.as_ref(), &machine, &desc) {
            println!("skq bench: {line}");
        }
    }
    if a.dry_run {
        let rss = match sweep.settings.rss.resolve(&cpus)? {
            Some(c) => format!(
                "over CPUs {}{} (the namespace is created when the sweep runs)",
                cpu_list(&c),
                sweep
                    .settings
                    .rss_migrate_ms
                    .map_or(String::new(), |ms| format!(", flows migrate every {ms} ms"))
            ),
            None => "off".into(),
        };
        println!("  emulated RSS: {rss}");
        for (c, pts) in sweep.curves.iter().zip(sweep::plan(&sweep)) {
            let rates: Vec<String> = pts.iter().map(|p| format!("{:.0}", p.target_rps)).collect();
            let sv = c
                .load
                .nominal_service_us
                .map_or("unknown".into(), |s| format!("{s:.1} µs"));
            println!(
                "  {:<14} {}  S̄ {sv}  req/s: {}",
                c.name,
                c.group(),
                rates.join(" ")
            );
        }
        return Ok(());
    }
    std::fs::create_dir_all(&out)
        .with_context(|| format!("--out {}: cannot create it", out.display()))?;
    // Before any other thread exists (see `interrupt::install`).
    if let Err(e) = interrupt::install() {
        println!("skq bench: warning: Ctrl-C is not handled ({e}); an interrupted sweep may leave its network namespace (removed at the next start)");
    }
    // Scratch files (the server's statistics) in a folder of this process's
    // own, so two sweeps on disjoint CPU sets of one machine keep theirs apart.
    let scratch = std::env::temp_dir().join(format!("skq-bench.{}", std::process::id()));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("creating the scratch folder {}", scratch.display()))?;
    let _scratch_gone = RemoveOnDrop(scratch.clone());
    let mut runner = ProcessRunner::from_current_exe(cpus.clone(), scratch)?;
    // Dropped with the runner on every way out of this function.
    let (env, rss) = RssEnv::start(&sweep.settings, &cpus)?;
    if rss.refused() {
        println!(
            "skq bench: emulated RSS off, running without it: {}",
            rss.off_reason.as_deref().unwrap_or("?")
        );
    } else {
        println!("skq bench: emulated RSS {}", rss.describe());
    }
    runner.rss = env;
    runner.rss_label = rss.label();
    let bar = ProgressBar::with_draw_target(Some(points as u64), ProgressDrawTarget::stdout());
    if !std::io::stdout().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} ETA {eta} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut progress = Bar(bar);
    let loadavg_before = output::loadavg();
    let t0 = Instant::now();
    let records = sweep::run(&sweep, &out, &mut runner, &mut progress);
    progress.0.finish_and_clear();
    let cross_checks = if interrupt::interrupted() {
        Vec::new()
    } else {
        crosscheck::run_all(&sweep, &records, &runner, &out, &mut |l| {
            println!("skq bench: cross-check {l}")
        })
    };
    let summaries = summary::summarize(&sweep, &records);
    let info = RunInfo {
        started,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        cpus: cpus.len(),
        wall_s: t0.elapsed().as_secs_f64(),
        loadavg_before,
        loadavg_after: output::loadavg(),
        rss,
        interrupted: interrupt::interrupted(),
        cross_checks,
    };
    output::write_all(&out, &sweep, &records, &summaries, &info)?;
    for line in output::run_lines(&info) {
        println!("{line}");
    }
    print!(
        "{}",
        output::summary_table(&summaries, &sweep.settings.baseline).to_text()
    );
    for line in output::cross_check_lines(&info) {
        println!("{line}");
    }
    println!("p99 (µs) at each offered load (* = the point failed a self-check):");
    print!("{}", output::p99_table(&sweep, &records).to_text());
    let failed = summaries
        .iter()
        .filter(|s| s.self_check != summary::SelfCheck::Pass)
        .count();
    if failed > 0 {
        println!("skq bench: {failed} of {} configurations did not pass their self-checks (details in the report)", summaries.len());
    }
    println!(
        "skq bench: {}",
        output::disturbance_line(&summaries, &sweep.settings)
    );
    if let Some(w) = output::host_delay_warning(&records) {
        println!("skq bench: warning: {w}");
    }
    if let Some(e) = output::episode_lines(&summaries) {
        print!("skq bench: {e}");
    }
    if let Some(w) = output::busy_machine_warning(&info) {
        println!("skq bench: warning: {w}");
    }
    if let Some(spec) = &sweep.settings.host_gate {
        let gated = records.iter().filter_map(|r| r.host_gate());
        if let Some(line) = crate::hostgate::summary_line(spec, gated) {
            println!("skq bench: {line}");
        }
    }
    println!(
        "skq bench: {:.0} s; report {}",
        info.wall_s,
        out.join("report.html").display()
    );
    if info.interrupted {
        anyhow::bail!("interrupted; partial results in {}", out.display());
    }
    if a.strict {
        strict_verdict(&summaries, &records)?;
    }
    Ok(())
}

/// Removes a scratch folder when dropped (every way out of a sweep).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
