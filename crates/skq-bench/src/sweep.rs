//! The sweep loop: for each curve, offered load rises point by point until
//! the curve saturates; then the next curve starts.
//!
//! The loop does not know how a point is measured: a [`Runner`] does that
//! ([`crate::process::ProcessRunner`] runs real servers and the real load
//! generator; tests use fakes that return fixture results). A runner error
//! ends its curve (the server died or never became ready, the generator
//! failed) and is recorded; the sweep goes on with the next curve.
//!
//! Cancellation: once [`Progress::cancelled`] says so (Ctrl-C), the points
//! not yet run are recorded as skipped.
//!
//! Saturation: after each point the loop compares it with the curve's SLO
//! (`slo_factor × S̄`, S̄ measured so far or nominal). A point whose p99 is
//! above `stop_p99_factor × SLO`, or whose achieved rate is below
//! `stop_rate_ratio ×` the rate its schedule sent, saturates the curve: higher loads would only
//! take time and tell nothing new, so they are recorded as skipped.
//!
//! Measured again: a point whose generator fell behind or whose server the
//! host delayed ([`crate::overshoot`]; `retries`, the attempt with the
//! fewest such faults kept, then the least late), and, once the curve is
//! done, a point whose p99 crossed the SLO below a load that met it or
//! though most of its own seconds met it (`crossing_attempts`, the median
//! attempt kept: [`confirm_crossings`]).
//! Once every curve is done each point's overshoot is judged again against
//! the whole sweep's ([`Outcome::Measured`]'s `overshoot`).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skq_report::result::{CtxSwitches, PointResult};

use crate::config::{Curve, Settings, Sweep};
use crate::disturbance::Disturbance;
use crate::overshoot::{self, Overshoot};

/// One planned load point of a curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedPoint {
    /// Index of the curve in [`Sweep::curves`].
    pub curve: usize,
    /// Index of the point within the curve.
    pub index: usize,
    /// Offered load as a fraction of the curve's capacity.
    pub load: f64,
    /// Offered load in requests/s.
    pub target_rps: f64,
    /// Seed of this measurement's arrival schedule and request mix
    /// (`skq load --seed`).
    pub seed: u64,
}

impl PlannedPoint {
    /// The same point with a schedule of its own for measurement `again`
    /// (1, 2, ...) of it, so a point measured again is not the same sample
    /// of arrivals again.
    pub fn again(&self, again: u64) -> PlannedPoint {
        PlannedPoint {
            seed: derive_seed(self.seed, again),
            ..self.clone()
        }
    }
}

/// The seed of every configuration's point at load index `index` of a run
/// seeded `run_seed`: loads get unrelated schedules, and configurations
/// compared at one load get the same one.
pub fn point_seed(run_seed: u64, index: usize) -> u64 {
    derive_seed(run_seed, index as u64 + 1)
}

/// A seed drawn from (`seed`, `salt`) by the generator's own RNG, so
/// nearby pairs give unrelated seeds (and none of the small offsets
/// `skq load` adds per thread or role lands on another point's).
fn derive_seed(seed: u64, salt: u64) -> u64 {
    use rand::{Rng, SeedableRng};
    rand::rngs::SmallRng::seed_from_u64(seed ^ salt.rotate_left(32)).gen()
}

/// Added to a crossing's measurement number to make its seed, apart from
/// the lateness retries' (1, 2, ...).
const CROSSING_SALT: u64 = 1 << 20;

/// The points to run, curve by curve, in order.
pub fn plan(sweep: &Sweep) -> Vec<Vec<PlannedPoint>> {
    sweep
        .curves
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            sweep
                .settings
                .loads
                .iter()
                .enumerate()
                .map(|(i, &load)| PlannedPoint {
                    curve: ci,
                    index: i,
                    load,
                    target_rps: load * c.load.capacity_rps,
                    seed: point_seed(sweep.settings.seed, i),
                })
                .collect()
        })
        .collect()
}

/// Fixed cost per point beyond warm-up and measurement: server start-up,
/// the generator's connection set-up and shutdown (an estimate).
pub const POINT_OVERHEAD: Duration = Duration::from_millis(400);

/// Upper bound of the sweep's wall time if no curve saturates early and no
/// point is re-measured: every point runs, and one point per curve (the
/// saturated one) waits out the generator's full drain.
pub fn estimate(sweep: &Sweep) -> Duration {
    let s = &sweep.settings;
    let per_point = Duration::from_secs_f64(s.point_secs + s.warmup_secs) + POINT_OVERHEAD;
    let curves = sweep.curves.len() as u32;
    per_point * curves * s.loads.len() as u32 + Duration::from_secs_f64(s.drain_secs) * curves
}

/// Where a runner may write the files of one point.
#[derive(Clone, Debug, PartialEq)]
pub struct PointFiles {
    /// The generator's JSON result.
    pub json: PathBuf,
    /// The generator's HdrHistogram interval log.
    pub hdr_log: PathBuf,
    /// Server output (stdout and stderr).
    pub server_log: PathBuf,
    /// Generator output.
    pub load_log: PathBuf,
}

impl PointFiles {
    /// The files of point `p` of `curve` under `dir`.
    pub fn under(dir: &std::path::Path, curve: &Curve, p: &PlannedPoint) -> PointFiles {
        let stem = format!("{}_{:.3}", curve.slug(), p.load);
        PointFiles {
            json: dir.join("points").join(format!("{stem}.json")),
            hdr_log: dir.join("hdr").join(format!("{stem}.hlog")),
            server_log: dir.join("logs").join(format!("{stem}.server.log")),
            load_log: dir.join("logs").join(format!("{stem}.load.log")),
        }
    }

    /// Where the server's own statistics (`--stats-json`: per-worker
    /// counters) are kept, beside its log: `….server.log` → `….stats.json`.
    pub fn server_stats(&self) -> PathBuf {
        let name = self
            .server_log
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("server.log");
        let stem = name.strip_suffix(".server.log").unwrap_or(name);
        self.server_log.with_file_name(format!("{stem}.stats.json"))
    }
}

/// Measures load points.
pub trait Runner {
    /// Runs one point of `curve` and returns the generator's result (with
    /// `server_cpu` filled when measured). An error ends the curve.
    fn run_point(
        &mut self,
        curve: &Curve,
        settings: &Settings,
        point: &PlannedPoint,
        files: &PointFiles,
    ) -> anyhow::Result<PointResult>;

    /// Emulated RSS as the points run (recorded in every [`PointRecord`]):
    /// `off`, or the CPUs and migration period ([`crate::rss::RssStatus::label`]).
    fn rss_label(&self) -> String {
        "off".into()
    }

    /// The server's own figures for the point just run, taken once
    /// (None when the server wrote none).
    fn take_server_stats(&mut self) -> Option<crate::serverstats::ServerPointStats> {
        None
    }

    /// Server CPU use and active workers over the point just run, taken
    /// once (None when the curve asked for no per-interval series).
    fn take_series(&mut self) -> Option<crate::series::PointSeries> {
        None
    }

    /// Context switches of the server's threads over the point just run
    /// (the window of `server_cpu`), taken once (None when not measured).
    fn take_ctx_switches(&mut self) -> Option<CtxSwitches> {
        None
    }

    /// CPU used on the machine by processes outside the run over the point
    /// just run ([`crate::disturbance`]), taken once (None when not measured).
    fn take_disturbance(&mut self) -> Option<Disturbance> {
        None
    }

    /// Probes the run's CPUs for the host gate ([`crate::hostgate`]):
    /// `sleeps` sleeps per CPU. None when this runner cannot (the gate is
    /// then skipped).
    fn probe_host(&mut self, _sleeps: u32) -> Option<crate::hostgate::HostProbe> {
        None
    }
}

/// What happened to one planned point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
// One per planned point, a few dozen per sweep: a measured point's figures
// stay inline rather than boxed one by one.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    /// Measured.
    Measured {
        /// The generator's result.
        result: Box<PointResult>,
        /// The interval log, when the generator wrote one.
        hdr_log: Option<PathBuf>,
        /// This point saturated the curve (its successors were skipped).
        saturated: bool,
        /// The server's own figures (imbalance, steals/s, migrations/s),
        /// when it wrote a statistics file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<crate::serverstats::ServerPointStats>,
        /// Server CPU use and active workers over time, for curves with
        /// per-interval series (`interval_ms`, `rate_profile`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        series: Option<crate::series::PointSeries>,
        /// Context switches of the server's threads over the same window
        /// as the result's `server_cpu`, when measured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server_ctx_switches: Option<CtxSwitches>,
        /// CPU used by processes outside the run over the same window,
        /// when measured ([`crate::disturbance`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        disturbance: Option<Disturbance>,
        /// How far emulated service overshot what was asked, judged
        /// against the whole sweep's median ([`crate::overshoot`]); None
        /// where not judged.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        overshoot: Option<Overshoot>,
        /// What the host gate did before the kept attempt, when on
        /// ([`crate::hostgate`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host_gate: Option<crate::hostgate::GateOutcome>,
    },
    /// The runner failed; the curve ended here.
    Failed {
        /// One line: what went wrong.
        error: String,
    },
    /// Not run: the curve had saturated or failed before.
    Skipped,
}

/// A planned point and its outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointRecord {
    /// Curve index.
    pub curve: usize,
    /// Curve label (repeated for readers of points.json).
    pub config: String,
    /// Load fraction.
    pub load: f64,
    /// Offered load (requests/s).
    pub target_rps: f64,
    /// Emulated RSS while it ran ([`Runner::rss_label`]).
    #[serde(default)]
    pub rss: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl PointRecord {
    /// The server's own figures, when measured and written.
    pub fn server_stats(&self) -> Option<&crate::serverstats::ServerPointStats> {
        match &self.outcome {
            Outcome::Measured { server, .. } => server.as_ref(),
            _ => None,
        }
    }

    /// The point's time series, when measured with per-interval series.
    pub fn series(&self) -> Option<&crate::series::PointSeries> {
        match &self.outcome {
            Outcome::Measured { series, .. } => series.as_ref(),
            _ => None,
        }
    }

    /// The server's context switches over the point, when measured.
    pub fn ctx_switches(&self) -> Option<CtxSwitches> {
        match &self.outcome {
            Outcome::Measured {
                server_ctx_switches,
                ..
            } => *server_ctx_switches,
            _ => None,
        }
    }

    /// The CPU used by processes outside the run over the point, when
    /// measured.
    pub fn disturbance(&self) -> Option<&Disturbance> {
        match &self.outcome {
            Outcome::Measured { disturbance, .. } => disturbance.as_ref(),
            _ => None,
        }
    }

    /// The point's service overshoot and its verdict, when judged.
    pub fn overshoot(&self) -> Option<&Overshoot> {
        match &self.outcome {
            Outcome::Measured { overshoot, .. } => overshoot.as_ref(),
            _ => None,
        }
    }

    /// Whether the point was measured and found disturbed: processes
    /// outside the run used CPU beside it ([`crate::disturbance`]), the
    /// host delayed the server's threads ([`crate::overshoot`]), or the
    /// point's tail came from seconds in which the host held the machine
    /// ([`crate::episode::host_held`]).
    pub fn disturbed(&self) -> bool {
        self.disturbance().is_some_and(|d| d.disturbed)
            || self.overshoot().is_some_and(|o| o.delayed)
            || self
                .result()
                .is_some_and(|r| crate::episode::host_held(r).is_some())
    }

    /// (voluntary, involuntary) server context switches per reply received
    /// in the measured window (the denominator of server CPU per reply),
    /// when measured.
    pub fn ctx_switches_per_reply(&self) -> Option<(f64, f64)> {
        let x = self.result()?;
        self.ctx_switches()?.per_reply(x.window_replies())
    }

    /// What the host gate did before the kept attempt, when it was on.
    pub fn host_gate(&self) -> Option<&crate::hostgate::GateOutcome> {
        match &self.outcome {
            Outcome::Measured { host_gate, .. } => host_gate.as_ref(),
            _ => None,
        }
    }

    /// The result, when measured.
    pub fn result(&self) -> Option<&PointResult> {
        match &self.outcome {
            Outcome::Measured { result, .. } => Some(result),
            _ => None,
        }
    }
}

/// SLO (µs) for a curve given the points measured so far: the configured
/// `slo_us`, else `slo_factor × S̄` with S̄ the receive-weighted mean of
/// the measured service times, else the nominal S̄.
pub fn slo_us(curve: &Curve, settings: &Settings, results: &[&PointResult]) -> Option<f64> {
    if let Some(s) = curve.load.slo_us {
        return Some(s);
    }
    service_us(curve, results).map(|(s, _)| s * settings.slo_factor)
}

/// The curve's S̄ (µs) and whether it was measured (`true`) or nominal.
pub fn service_us(curve: &Curve, results: &[&PointResult]) -> Option<(f64, bool)> {
    let (mut sum, mut weight) = (0.0, 0.0);
    for r in results {
        if let Some(s) = r.measured_service_us.filter(|s| s.is_finite() && *s > 0.0) {
            let w = r.received.max(1) as f64;
            sum += s * w;
            weight += w;
        }
    }
    if weight > 0.0 {
        Some((sum / weight, true))
    } else {
        curve.load.nominal_service_us.map(|s| (s, false))
    }
}

/// Whether a measured point saturates its curve (see the module docs).
pub fn saturated(
    r: &PointResult,
    target_rps: f64,
    slo_us: Option<f64>,
    settings: &Settings,
) -> bool {
    let p99 = r.latency.p99.value;
    let over_slo = slo_us.is_some_and(|slo| p99.is_nan() || p99 > settings.stop_p99_factor * slo);
    // Against what the seed's schedule sent: a short window's Poisson count
    // can fall 10% under the target's (500 req/s over 1 s: 450 is 2.2
    // standard deviations down), and a server that answered every request
    // has not saturated.
    let secs = r.meta.duration_s;
    let offered = if r.sent > 0 && secs > 0.0 {
        r.sent as f64 / secs
    } else {
        target_rps
    };
    let rate_short = r.achieved_rps < settings.stop_rate_ratio * offered;
    over_slo || rate_short
}

/// Progress callbacks (the CLI draws a bar; tests ignore them).
pub trait Progress {
    /// A point is about to run.
    fn start(&mut self, _curve: &Curve, _point: &PlannedPoint) {}
    /// `n` planned points are done (measured, failed or skipped).
    fn advance(&mut self, _n: u64) {}
    /// A line worth showing above the bar (errors, saturation).
    fn note(&mut self, _line: &str) {}
    /// Whether the sweep should stop (Ctrl-C): the points not yet run are
    /// recorded as skipped.
    fn cancelled(&self) -> bool {
        false
    }
}

/// A [`Progress`] that shows nothing.
pub struct Quiet;
impl Progress for Quiet {}

/// One measured attempt at a point: the generator's result and what the
/// runner measured beside it.
struct Attempt {
    result: PointResult,
    server: Option<crate::serverstats::ServerPointStats>,
    series: Option<crate::series::PointSeries>,
    ctx_switches: Option<CtxSwitches>,
    disturbance: Option<Disturbance>,
    gate: Option<crate::hostgate::GateOutcome>,
}

/// One measurement of `p`, after the host gate when it is on. With the
/// gate's warm-up limit, a start the generator ended at the end of its
/// warm-up ([`crate::hostgate::StartStalled`]: the host stalled it, nothing
/// was measured) is followed by a pause and the gate again, within the
/// gate's longest wait; the last start allowed measures whatever its
/// warm-up saw.
fn attempt(
    runner: &mut dyn Runner,
    curve: &Curve,
    settings: &Settings,
    p: &PlannedPoint,
    files: &PointFiles,
    progress: &mut dyn Progress,
) -> anyhow::Result<Attempt> {
    let Some(spec) = &settings.host_gate else {
        let result = runner.run_point(curve, settings, p, files)?;
        return Ok(finish(runner, result, None));
    };
    let mut waited = Duration::ZERO;
    let (mut probes, mut stalled_starts) = (0, 0);
    // Whether the last probe passed, and what it read.
    let mut last: Option<(bool, crate::hostgate::HostProbe)> = None;
    loop {
        let left = crate::hostgate::GateSpec {
            max_wait: spec.max_wait.saturating_sub(waited),
            ..spec.clone()
        };
        if let Some(g) = host_gate(runner, curve, &left, p, progress) {
            waited += Duration::from_secs_f64(g.waited_s);
            probes += g.probes;
            last = Some((g.passed, g.last));
        }
        // The generator may end this start early only while a pause and
        // another start fit in the longest wait.
        let may_end_early = spec.warmup_stall_ms_per_s.is_some()
            && waited + spec.retry_every <= spec.max_wait
            && !progress.cancelled();
        let run = if may_end_early {
            runner.run_point(curve, settings, p, files)
        } else {
            let mut s = settings.clone();
            if let Some(g) = &mut s.host_gate {
                g.warmup_stall_ms_per_s = None;
            }
            runner.run_point(curve, &s, p, files)
        };
        match run {
            Err(e)
                if may_end_early && e.downcast_ref::<crate::hostgate::StartStalled>().is_some() =>
            {
                progress.note(&format!(
                    "{} [{}]: load {:.2}: {e:#}; starting it again in {:.0} s",
                    curve.name,
                    curve.group(),
                    p.load,
                    spec.retry_every.as_secs_f64()
                ));
                stalled_starts += 1;
                pause(spec.retry_every, progress);
                waited += spec.retry_every;
            }
            run => {
                let mut result = run?;
                // A runner that cannot probe still has its ended starts
                // recorded.
                let gate = (probes > 0 || stalled_starts > 0).then(|| {
                    let (passed, last) = last.unwrap_or_default();
                    crate::hostgate::GateOutcome {
                        probes,
                        waited_s: waited.as_secs_f64(),
                        passed: passed || probes == 0,
                        last,
                        stalled_starts,
                    }
                });
                if let Some(g) = &gate {
                    result.checks.notes.push(g.note(spec));
                }
                return Ok(finish(runner, result, gate));
            }
        }
    }
}

/// An attempt from its result and what the runner measured beside it.
fn finish(
    runner: &mut dyn Runner,
    result: PointResult,
    gate: Option<crate::hostgate::GateOutcome>,
) -> Attempt {
    Attempt {
        result,
        server: runner.take_server_stats(),
        series: runner.take_series(),
        ctx_switches: runner.take_ctx_switches(),
        disturbance: runner.take_disturbance(),
        gate,
    }
}

/// Sleeps `d` in short steps, so Ctrl-C is not held up by a pause.
fn pause(d: Duration, progress: &dyn Progress) {
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end && !progress.cancelled() {
        std::thread::sleep(Duration::from_millis(100).min(d));
    }
}

/// The host gate before one measurement ([`crate::hostgate::wait_for_quiet`]
/// with the runner's probe), saying above the bar when it waits.
fn host_gate(
    runner: &mut dyn Runner,
    curve: &Curve,
    spec: &crate::hostgate::GateSpec,
    p: &PlannedPoint,
    progress: &mut dyn Progress,
) -> Option<crate::hostgate::GateOutcome> {
    // The waits are announced as they happen; cancellation is read between
    // probes. Both need the progress, which the closures share by cell.
    let progress = std::cell::RefCell::new(progress);
    crate::hostgate::wait_for_quiet(
        spec,
        |n| runner.probe_host(n),
        |d| pause(d, *progress.borrow()),
        |probe, waited| {
            progress.borrow_mut().note(&format!(
                "{} [{}]: load {:.2}: host busy ({}), waiting{}",
                curve.name,
                curve.group(),
                p.load,
                probe.describe(),
                if waited.is_zero() {
                    String::new()
                } else {
                    format!(" ({:.0} s so far)", waited.as_secs_f64())
                }
            ))
        },
        || progress.borrow().cancelled(),
    )
}

/// How late the generator was at p99, sending and reading (µs).
fn generator_delay(c: &skq_report::result::Checks) -> f64 {
    c.lateness_p99_us + c.read_lag_p99_us.unwrap_or(0.0)
}

/// The faults that make an attempt worth measuring again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Faults {
    /// The generator fell behind its schedule (the lateness or the
    /// read-lag check failed).
    late: bool,
    /// The host delayed the server: its emulated service overshot
    /// `reference` past the limit ([`crate::overshoot`]).
    delayed: bool,
    /// The point's tail came from seconds in which the host held the
    /// machine ([`crate::episode::host_held`]).
    held: bool,
}

impl Faults {
    fn of(r: &PointResult, reference: Option<f64>) -> Faults {
        let c = &r.checks;
        Faults {
            late: !(c.lateness_ok && c.read_lag_ok),
            delayed: overshoot::delayed(r, reference),
            held: crate::episode::host_held(r).is_some(),
        }
    }

    fn count(self) -> u8 {
        u8::from(self.late) + u8::from(self.delayed) + u8::from(self.held)
    }

    fn any(self) -> bool {
        self.count() > 0
    }
}

/// Measures one point; while the generator fell behind its schedule or the
/// host delayed the server or held the machine through the point's tail
/// ([`Faults`], judged against `reference`, the sweep's median overshoot so
/// far) it is measured again, up to
/// `settings.retries` times, and the attempt with the fewest faults, then
/// the lowest send lateness plus read lag, is kept (with the runner's
/// figures of that same attempt), with a note saying how many attempts it
/// took and why. A late generator or a delayed server says nothing about
/// the server's design, and one hiccup of a shared machine should not end
/// a curve.
fn measure(
    runner: &mut dyn Runner,
    curve: &Curve,
    settings: &Settings,
    p: &PlannedPoint,
    files: &PointFiles,
    reference: Option<f64>,
    progress: &mut dyn Progress,
) -> anyhow::Result<Attempt> {
    let mut best = attempt(runner, curve, settings, p, files, progress)?;
    let mut attempts = 1;
    let mut seen = Faults::default();
    let rank = |a: &Attempt| {
        (
            Faults::of(&a.result, reference).count(),
            generator_delay(&a.result.checks),
        )
    };
    loop {
        let f = Faults::of(&best.result, reference);
        if !f.any() || attempts > settings.retries || progress.cancelled() {
            break;
        }
        seen.late |= f.late;
        seen.delayed |= f.delayed;
        seen.held |= f.held;
        let c = &best.result.checks;
        let why = if f.late {
            format!(
                "generator {:.0} µs late at p99 sending, {} reading{}",
                c.lateness_p99_us,
                c.read_lag_p99_us
                    .map_or("n/a".into(), |l| format!("{l:.0} µs")),
                best.result
                    .generator_preemption()
                    .map_or(String::new(), |s| format!(" ({s})"))
            )
        } else if f.delayed {
            let o = overshoot::judge(&best.result, reference).expect("judged delayed above");
            format!("the host delayed the server: {}", o.describe())
        } else {
            let e = crate::episode::host_held(&best.result).expect("judged held above");
            format!(
                "the host held the machine through the tail: {}",
                e.describe()
            )
        };
        progress.note(&format!(
            "{} [{}]: load {:.2}: {why}, measuring again",
            curve.name,
            curve.group(),
            p.load,
        ));
        // The kept attempt's interval log must survive the next attempt.
        let kept_log = files.hdr_log.with_extension("hlog.kept");
        let had_log = std::fs::rename(&files.hdr_log, &kept_log).is_ok();
        let again = attempt(
            runner,
            curve,
            settings,
            &p.again(u64::from(attempts)),
            files,
            progress,
        )?;
        attempts += 1;
        if rank(&again).partial_cmp(&rank(&best)) == Some(std::cmp::Ordering::Less) {
            best = again;
            let _ = std::fs::remove_file(&kept_log);
        } else if had_log {
            let _ = std::fs::rename(&kept_log, &files.hdr_log);
        }
    }
    if attempts > 1 {
        let mut reasons = Vec::new();
        if seen.late {
            reasons.push("the generator fell behind its schedule");
        }
        if seen.delayed {
            reasons.push("the host delayed the server (emulated service overshot)");
        }
        if seen.held {
            reasons.push("the host held the machine through the point's tail");
        }
        let because = reasons.join(" and ");
        best.result.checks.notes.push(format!(
            "info: measured {attempts} times because {because}; kept the attempt with the fewest such faults, then the lowest send lateness plus read lag"
        ));
        // The point's JSON file holds the kept attempt, as points.json does.
        if let Ok(text) = serde_json::to_string_pretty(&best.result) {
            let _ = std::fs::write(&files.json, text);
        }
    }
    Ok(best)
}

/// A curve whose p99 crosses the SLO at one load and meets it again at a
/// higher one has a crossing that one stall of the machine can make: a
/// single point of 1.5 s decides where the curve ends, and with it the
/// max load at SLO (the main job's epoll-shared read 0.40 and 0.53 of its
/// capacity that way, against 0.83 in runs without the spike;
/// docs/results/bench-default-2026-11-27-night-README.md). The same holds
/// for a crossing whose own seconds met the SLO in at least half of its
/// intervals (`episode::seconds_meeting`): its p99 came from the others,
/// and the loads above it may be over the SLO for the same reason or for
/// their own (the main job's hybrid at bimodal-1 0.6 on 2026-12-06 read
/// 10.2 ms from four alternate seconds of 14.4–15.5 ms, the other four
/// 3.4–3.7 ms: max load 0.59 of the M/G/8 bound, against 0.91–0.95 in
/// the four runs before it). So the first such crossing is measured
/// again until it has `settings.crossing_attempts` attempts, and the
/// attempt with the median p99 is kept (with its files and the runner's
/// figures), with a note giving every attempt's p99. Then the next such
/// crossing, if the curve still has one; each point at most once. The
/// median rejects one spike in three; a crossing that holds in two of
/// three stays. Points under the SLO are never measured again, so
/// nothing is chosen for looking good.
// The sweep's state, passed down as it is: bundling it for this one caller
// would only rename it.
#[allow(clippy::too_many_arguments)]
fn confirm_crossings(
    runner: &mut dyn Runner,
    curve: &Curve,
    settings: &Settings,
    points: &[PlannedPoint],
    out_dir: &std::path::Path,
    recs: &mut [PointRecord],
    confirmed: &mut [bool],
    reference: Option<f64>,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    while settings.crossing_attempts > 1 && !progress.cancelled() {
        let results: Vec<Option<&PointResult>> = recs.iter().map(|r| r.result()).collect();
        let measured: Vec<&PointResult> = results.iter().flatten().copied().collect();
        let Some(slo) = slo_us(curve, settings, &measured) else {
            return Ok(());
        };
        let over = |r: &Option<&PointResult>| r.is_some_and(|r| r.latency.p99.value > slo);
        let Some(i) = results.iter().position(over) else {
            return Ok(());
        };
        let met_later = results[i + 1..]
            .iter()
            .any(|r| r.is_some_and(|r| r.latency.p99.value <= slo));
        // Most of the crossing's own seconds met the SLO: its p99 came
        // from the others (a stall, a burst), as a spike's does.
        let seconds = results[i]
            .and_then(|r| crate::episode::seconds_meeting(r, slo))
            .filter(|&(met, n)| 2 * met >= n);
        let why = match (met_later, seconds) {
            _ if confirmed[i] => return Ok(()),
            (true, _) => "below a load that met it".to_string(),
            (false, Some((met, n))) => format!("though {met} of its {n} seconds met it"),
            (false, None) => return Ok(()),
        };
        confirmed[i] = true;
        let p = &points[i];
        let files = PointFiles::under(out_dir, curve, p);
        let Outcome::Measured { result, .. } = &recs[i].outcome else {
            return Ok(());
        };
        progress.note(&format!(
            "{} [{}]: load {:.2}: p99 {:.0} µs over the SLO ({:.0} µs) {why}, measuring again",
            curve.name,
            curve.group(),
            p.load,
            result.latency.p99.value,
            slo
        ));
        // Every attempt's interval log is kept aside until one is chosen.
        let aside = |k: usize| files.hdr_log.with_extension(format!("hlog.attempt{k}"));
        let _ = std::fs::rename(&files.hdr_log, aside(0));
        let mut attempts: Vec<Attempt> = Vec::new();
        for k in 1..settings.crossing_attempts as usize {
            if progress.cancelled() {
                break;
            }
            // A schedule of its own for each (numbered apart from the
            // lateness retries' inside `measure`).
            let again = p.again(CROSSING_SALT + k as u64);
            match measure(runner, curve, settings, &again, &files, reference, progress) {
                Ok(a) => attempts.push(a),
                Err(e) => {
                    // The point keeps its first attempt, files included.
                    let _ = std::fs::rename(aside(0), &files.hdr_log);
                    for k in 1..=attempts.len() {
                        let _ = std::fs::remove_file(aside(k));
                    }
                    if let Ok(text) = serde_json::to_string_pretty(&**result) {
                        let _ = std::fs::write(&files.json, text);
                    }
                    return Err(e);
                }
            }
            let _ = std::fs::rename(&files.hdr_log, aside(k));
        }
        let first = match std::mem::replace(&mut recs[i].outcome, Outcome::Skipped) {
            Outcome::Measured {
                result,
                server,
                series,
                server_ctx_switches,
                disturbance,
                host_gate,
                ..
            } => Attempt {
                result: *result,
                server,
                series,
                ctx_switches: server_ctx_switches,
                disturbance,
                gate: host_gate,
            },
            _ => unreachable!("checked above"),
        };
        attempts.insert(0, first);
        let p99s: Vec<f64> = attempts
            .iter()
            .map(|a| a.result.latency.p99.value)
            .collect();
        let mut order: Vec<usize> = (0..attempts.len()).collect();
        order.sort_by(|&a, &b| p99s[a].total_cmp(&p99s[b]));
        // The median; of two, the higher (the crossing stands unless
        // outvoted).
        let keep = order[attempts.len() / 2];
        for k in 0..attempts.len() {
            if k == keep {
                let _ = std::fs::rename(aside(k), &files.hdr_log);
            } else {
                let _ = std::fs::remove_file(aside(k));
            }
        }
        let mut kept = attempts.swap_remove(keep);
        kept.result.checks.notes.push(format!(
            "info: p99 over the SLO {why}: measured {} times (p99 {} µs), kept the median",
            p99s.len(),
            p99s.iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if let Ok(text) = serde_json::to_string_pretty(&kept.result) {
            let _ = std::fs::write(&files.json, text);
        }
        let sat = saturated(&kept.result, p.target_rps, Some(slo), settings);
        recs[i].outcome = Outcome::Measured {
            result: Box::new(kept.result),
            hdr_log: files.hdr_log.exists().then(|| files.hdr_log.clone()),
            saturated: sat,
            server: kept.server,
            series: kept.series,
            server_ctx_switches: kept.ctx_switches,
            disturbance: kept.disturbance,
            overshoot: None, // judged once the sweep is done
            host_gate: kept.gate,
        };
    }
    Ok(())
}

/// Runs the whole sweep and returns one record per planned point, in plan order.
pub fn run(
    sweep: &Sweep,
    out_dir: &std::path::Path,
    runner: &mut dyn Runner,
    progress: &mut dyn Progress,
) -> Vec<PointRecord> {
    let mut records: Vec<PointRecord> = Vec::new();
    let rss = runner.rss_label();
    for (curve, points) in sweep.curves.iter().zip(plan(sweep)) {
        let first = records.len();
        let record = |p: &PlannedPoint, outcome| PointRecord {
            curve: p.curve,
            config: curve.name.clone(),
            load: p.load,
            target_rps: p.target_rps,
            rss: rss.clone(),
            outcome,
        };
        let mut confirmed = vec![false; points.len()];
        // The next point to measure; the ones from there on are recorded
        // as skipped once the curve has stopped for good.
        let mut next = 0;
        loop {
            let mut stopped = false;
            while next < points.len() && !stopped && !progress.cancelled() {
                let p = &points[next];
                next += 1;
                progress.start(curve, p);
                let files = PointFiles::under(out_dir, curve, p);
                // Judged against every point measured so far, every curve's.
                let reference = overshoot::reference(records.iter().filter_map(|r| r.result()));
                match measure(
                    runner,
                    curve,
                    &sweep.settings,
                    p,
                    &files,
                    reference,
                    progress,
                ) {
                    Ok(Attempt {
                        result,
                        server,
                        series,
                        ctx_switches,
                        disturbance,
                        gate,
                    }) => {
                        // S̄ measured so far: the curve's kept attempts and this one.
                        let refs: Vec<&PointResult> = records[first..]
                            .iter()
                            .filter_map(|r| r.result())
                            .chain(std::iter::once(&result))
                            .collect();
                        let slo = slo_us(curve, &sweep.settings, &refs);
                        let sat = saturated(&result, p.target_rps, slo, &sweep.settings);
                        if sat {
                            stopped = true;
                            progress.note(&format!(
                                "{} [{}]: saturated at load {:.2} (p99 {:.0} µs, achieved {:.0}/{:.0} req/s)",
                                curve.name,
                                curve.group(),
                                p.load,
                                result.latency.p99.value,
                                result.achieved_rps,
                                p.target_rps
                            ));
                        }
                        let hdr_log = files.hdr_log.exists().then(|| files.hdr_log.clone());
                        records.push(record(
                            p,
                            Outcome::Measured {
                                result: Box::new(result),
                                hdr_log,
                                saturated: sat,
                                server,
                                series,
                                server_ctx_switches: ctx_switches,
                                disturbance,
                                overshoot: None, // judged once the sweep is done
                                host_gate: gate,
                            },
                        ));
                    }
                    Err(e) => {
                        let error = format!("{e:#}");
                        progress.note(&format!(
                            "{} [{}]: load {:.2}: {error}",
                            curve.name,
                            curve.group(),
                            p.load
                        ));
                        records.push(record(p, Outcome::Failed { error }));
                        stopped = true;
                    }
                }
                progress.advance(1);
            }
            let reference = overshoot::reference(records.iter().filter_map(|r| r.result()));
            let recs = &mut records[first..];
            if let Err(e) = confirm_crossings(
                runner,
                curve,
                &sweep.settings,
                &points,
                out_dir,
                recs,
                &mut confirmed,
                reference,
                progress,
            ) {
                // The curve keeps what it had; the failed attempt is reported.
                progress.note(&format!(
                    "{} [{}]: measuring a crossing again failed: {e:#}",
                    curve.name,
                    curve.group()
                ));
            }
            // A point that stopped the curve as saturated and, measured
            // again for its crossing, no longer is: the loads above it
            // are measured after all.
            let resume = matches!(
                records[first..].last().map(|r| &r.outcome),
                Some(Outcome::Measured {
                    saturated: false,
                    ..
                })
            ) && stopped
                && next < points.len()
                && !progress.cancelled();
            if !resume {
                break;
            }
            progress.note(&format!(
                "{} [{}]: load {:.2} no longer saturated once measured again, going on",
                curve.name,
                curve.group(),
                points[next - 1].load
            ));
        }
        for p in &points[next..] {
            records.push(record(p, Outcome::Skipped));
            progress.advance(1);
        }
    }
    judge_overshoots(&mut records);
    records
}

/// Judges every measured point's service overshoot against the whole
/// sweep's median ([`crate::overshoot`]), the verdict the summary uses.
pub fn judge_overshoots(records: &mut [PointRecord]) {
    let reference = overshoot::reference(records.iter().filter_map(|r| r.result()));
    for r in records.iter_mut() {
        if let Outcome::Measured {
            result,
            overshoot: verdict,
            ..
        } = &mut r.outcome
        {
            *verdict = overshoot::judge(result, reference);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PointFiles;
    use std::path::PathBuf;

    #[test]
    fn server_statistics_are_kept_beside_the_server_log() {
        let logs = PathBuf::from("out/logs");
        let f = PointFiles {
            json: PathBuf::from("out/points/hybrid_exponential_0.750.json"),
            hdr_log: PathBuf::from("out/hdr/hybrid_exponential_0.750.hlog"),
            server_log: logs.join("hybrid_exponential_0.750.server.log"),
            load_log: logs.join("hybrid_exponential_0.750.load.log"),
        };
        assert_eq!(
            f.server_stats(),
            logs.join("hybrid_exponential_0.750.stats.json")
        );
    }
}
