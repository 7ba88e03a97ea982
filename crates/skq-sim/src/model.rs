//! What serves the requests of a scenario: a reference model or the real core
//! under one of the runtime's modes, and the overheads charged to the latter.

use std::fmt;

use anyhow::anyhow;
use skq_report::result::{Checks, Errors, Meta, PointResult};

use crate::reference::Reference;
use crate::stats::Summary;
use crate::workload::Scenario;

/// Costs the core-driven model charges on top of service times (ns). The
/// reference models are zero-overhead by definition and ignore them.
///
/// The defaults are order-of-magnitude guesses for a Linux user-space runtime
/// on a VM, to be calibrated from `skq bench` measurements:
/// `event_ns` ≈ one `epoll_wait` + `read` + `write` share per event,
/// `steal_ns` ≈ a contended lock handoff plus cold queue lines,
/// `wake_ns` ≈ an eventfd/futex wake-up until the thread runs,
/// `miss_ns` = SKQ's default hybrid penalty (1000 cycles ≈ 0.5 µs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overheads {
    /// Paid by a worker for every event it processes (including empty ones).
    pub event_ns: u64,
    /// Extra cost of processing an event taken from another worker's queue.
    pub steal_ns: u64,
    /// Delay between deciding to wake an idle worker and it running.
    pub wake_ns: u64,
    /// Cache-miss penalty when a connection is served off its home worker
    /// (the worker on the CPU that receives its packets).
    pub miss_ns: u64,
}

impl Overheads {
    /// No overhead at all (for cross-checks against the reference models).
    pub const ZERO: Overheads = Overheads {
        event_ns: 0,
        steal_ns: 0,
        wake_ns: 0,
        miss_ns: 0,
    };
}

/// Defaults calibrated from the runtime's own benchmarks on the 2-core
/// development VM (2026-11-22):
/// * `event_ns` 250: `skq pipes` with 1 worker and 5 µs spun service ran
///   190,636 events/s, i.e. 5.246 µs per event, 246 ns of it the runtime
///   (harvest, scheduling, queue, release);
/// * `steal_ns` 400: criterion `cycle/best2+steal/contended-2-threads`
///   (508 ns) minus `cycle/best2/contended-2-threads` (106 ns);
/// * `miss_ns` 500: SKQ's cache-miss penalty (1000 cycles ≈ 0.5 µs);
/// * `wake_ns` 5000: `cargo run --release -p skq-rt --example wakeup`
///   measured an idle poller woken by readiness in 5.3 µs p50 (21.6 µs p99);
///   a parked follower reached through the poller takes 25.8 µs p50 (two
///   hops, each charged `wake_ns` by the `runtime` harvest model).
impl Default for Overheads {
    fn default() -> Self {
        Overheads {
            event_ns: 250,
            steal_ns: 400,
            wake_ns: 5_000,
            miss_ns: 500,
        }
    }
}

impl fmt::Display for Overheads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "event {} ns, steal {} ns, wake-up {} ns, cache miss {} ns",
            self.event_ns, self.steal_ns, self.wake_ns, self.miss_ns
        )
    }
}

/// A model to simulate.
#[derive(Clone, Debug)]
pub enum Model {
    /// An idealized queueing model.
    Reference(Reference),
    /// The real core under a runtime mode (`Config::parse_mode` syntax).
    Core(Box<skq_core::Config>),
}

impl Model {
    /// Parses a reference-model name or a runtime mode (`hybrid`,
    /// `best2+steal`, ...) for `workers` workers.
    pub fn parse(s: &str, workers: usize) -> anyhow::Result<Model> {
        if let Ok(r) = s.parse::<Reference>() {
            return Ok(Model::Reference(r));
        }
        match skq_core::Config::parse_mode(s, workers) {
            Ok(cfg) => Ok(Model::Core(Box::new(cfg))),
            Err(e) => Err(anyhow!(
                "model `{s}`: not a reference model ({}) nor a runtime mode: {e}",
                Reference::ALL.map(|r| r.name()).join(", ")
            )),
        }
    }

    /// The name used in outputs.
    pub fn name(&self) -> String {
        match self {
            Model::Reference(r) => r.name().to_string(),
            Model::Core(c) => c.mode_name(),
        }
    }
}

/// One simulated load point.
#[derive(Clone, Debug)]
pub struct PointOutcome {
    /// Model name.
    pub model: String,
    /// Offered load as a fraction of capacity (`λ·S̄/n`).
    pub load: f64,
    /// The result, in the schema `skq load` writes.
    pub result: PointResult,
    /// Simulated events.
    pub events: u64,
    /// Core-driven runs only: requests never served, empty deliveries,
    /// stolen deliveries, off-home deliveries, final imbalance.
    pub core: Option<CoreCounters>,
}

/// Counters of a core-driven run (see [`crate::core_model::CoreOutcome`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoreCounters {
    /// Requests never served.
    pub stranded: u64,
    /// Deliveries with nothing to read.
    pub empty_events: u64,
    /// Deliveries charged the steal cost.
    pub stolen: u64,
    /// Deliveries charged the cache-miss penalty.
    pub off_home: u64,
    /// `Scheduler::imbalance()` at the end.
    pub imbalance: f64,
}

/// Application-model knobs (used by core-driven runs only).
pub use crate::core_model::CoreOpts;

/// Simulates one scenario under one model.
pub fn run_point(
    model: &Model,
    sc: &Scenario,
    ov: &Overheads,
    opts: &CoreOpts,
) -> anyhow::Result<PointOutcome> {
    sc.validate()?;
    let (summary, events, core) = match model {
        Model::Reference(r) => {
            let (s, e) = r.run(sc);
            (s, e, None)
        }
        Model::Core(cfg) => {
            let o = crate::core_model::run(cfg, ov, opts, sc)?;
            let c = CoreCounters {
                stranded: o.stranded,
                empty_events: o.empty_events,
                stolen: o.stolen,
                off_home: o.off_home,
                imbalance: o.imbalance,
            };
            (o.summary, o.events, Some(c))
        }
    };
    let stranded = core.map_or(0, |c: CoreCounters| c.stranded);
    Ok(PointOutcome {
        model: model.name(),
        load: sc.load(),
        result: to_point_result(sc, &summary, stranded),
        events,
        core,
    })
}

/// Fills the load generator's result schema from a simulated run.
fn to_point_result(sc: &Scenario, s: &Summary, stranded: u64) -> PointResult {
    let sent = (sc.requests.min(s.completed as usize + stranded as usize) - sc.warmup) as u64;
    let achieved = if s.served_span_s > 0.0 {
        s.measured as f64 / s.served_span_s
    } else {
        0.0
    };
    let rate_error_pct = (achieved - sc.rate_rps) / sc.rate_rps * 100.0;
    let mut notes = vec![
        "simulated in virtual time: the load generator's self-checks do not apply".to_string(),
    ];
    if rate_error_pct.abs() > 5.0 {
        notes.push(format!(
            "served {achieved:.0} req/s of {:.0} offered: overloaded",
            sc.rate_rps
        ));
    }
    if stranded > 0 {
        notes.push(format!("{stranded} requests were never served"));
    }
    PointResult {
        meta: Meta {
            protocol: "rpc".into(),
            workload: sc.service.name(),
            nominal_service_us: sc.service.nominal_us(),
            scale: sc.service.scale(),
            service_mode: "simulated".into(),
            connections: sc.connections,
            threads: 1,
            cores_seen: sc.workers,
            duration_s: s.span_s,
            warmup_s: sc.warmup as f64 / sc.rate_rps,
        },
        target_rps: sc.rate_rps,
        achieved_rps: achieved,
        sent,
        received: s.measured,
        latency: s.latency.clone(),
        raw_latency: s.latency.clone(),
        probe_latency: None,
        high_priority_latency: s.high.clone(),
        measured_service_us: s.measured_service_us,
        errors: Errors {
            missing: stranded,
            ..Errors::default()
        },
        checks: Checks {
            rate_error_pct,
            rate_ok: rate_error_pct.abs() <= 5.0,
            ad_statistic: None,
            ad_ok: true,
            ad_threshold_us: None,
            ad_scheduled: None,
            lag1_rank_corr: 0.0,
            independence_ok: true,
            decorrelation_stride: 1,
            effective_n: 0,
            lateness_p99_us: 0.0,
            lateness_ok: true,
            pass: stranded == 0,
            notes,
        },
        client_cpu: Default::default(),
        server_cpu: None,
    }
}
