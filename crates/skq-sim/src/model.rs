//! What serves the requests of a scenario: a reference model or the real core
//! under one of the runtime's modes ([`run_point`]). The knobs of the
//! core-driven model ([`Overheads`], [`CoreOpts`]) live in `params.rs`, below
//! both this module and `core_model.rs`.

use anyhow::anyhow;
use skq_report::result::{Checks, Errors, Meta, PointResult};

use crate::reference::Reference;
use crate::stats::Summary;
use crate::workload::Scenario;

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
    /// Worker CPU per completed request (µs): processing plus the loop's
    /// system calls and context switches at their `Overheads` costs.
    pub cpu_us_per_req: f64,
    /// Voluntary context switches of the workers per completed request.
    pub switches_per_req: f64,
    /// System calls of the worker loop per completed request.
    pub syscalls_per_req: f64,
}

pub use crate::params::{CoreOpts, Overheads};

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
            let done = o.summary.completed.max(1) as f64;
            let c = CoreCounters {
                cpu_us_per_req: o.cpu_ns / done / 1000.0,
                switches_per_req: o.switches as f64 / done,
                syscalls_per_req: o.syscalls as f64 / done,
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
    // Against what the seed's schedule offered over the measured arrivals,
    // as `skq load` compares replies with what it sent: a short run's
    // Poisson sample can fall 5% off the target without any overload.
    let offered = if s.span_s > 0.0 && s.measured > 0 {
        s.measured as f64 / s.span_s
    } else {
        sc.rate_rps
    };
    let rate_error_pct = (achieved - offered) / offered * 100.0;
    let mut notes = vec![
        "simulated in virtual time: the load generator's self-checks do not apply".to_string(),
    ];
    if rate_error_pct.abs() > 5.0 {
        notes.push(format!(
            "served {achieved:.0} req/s of {offered:.0} the schedule offered (target {:.0}): overloaded",
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
            seed: None,
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
        batch_latency: s.batch.clone(),
        measured_service_us: s.measured_service_us,
        // Simulated service is exactly what was drawn: nothing overshoots.
        requested_service_us: None,
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
            ad_reference: None,
            lag1_rank_corr: 0.0,
            independence_ok: true,
            decorrelation_stride: 1,
            effective_n: 0,
            lateness_p99_us: 0.0,
            lateness_ok: true,
            read_lag_p99_us: None,
            read_lag_ok: true,
            pass: stranded == 0,
            notes,
        },
        client_cpu: Default::default(),
        client_busy_s: None,
        client_sent_total: None,
        client_waited_s: None,
        client_preempted: None,
        client_floor: None,
        client_stalls: None,
        server_cpu: None,
        intervals: Vec::new(),
        schedule_start_ns: None,
        warmup_host_steal_ms: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Service;
    use skq_proto::workload::{ServiceSpec, Workload};

    fn point(load: f64, requests: usize, seed: u64) -> PointResult {
        let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, 10_000.0));
        let sc = Scenario::at_load(svc, 4, 64, load, requests, seed);
        let model = Model::Reference(Reference::CentralizedFcfs);
        run_point(&model, &sc, &Overheads::default(), &CoreOpts::default())
            .unwrap()
            .result
    }

    #[test]
    fn the_rate_check_compares_with_what_the_schedule_offered() {
        // 300 Poisson arrivals: the sample's rate is off the target by more
        // than 5% for some seeds, with the server far from overload.
        let mut off_target = 0;
        for seed in 0..20 {
            let r = point(0.3, 300, seed);
            let vs_target = (r.achieved_rps - r.target_rps) / r.target_rps * 100.0;
            off_target += usize::from(vs_target.abs() > 5.0);
            assert!(r.checks.rate_ok, "seed {seed}: {:?}", r.checks.notes);
            assert!(r.checks.rate_error_pct.abs() <= 5.0, "seed {seed}");
        }
        assert!(off_target > 0, "no seed drew a sample 5% off the target");
        // Overloaded, it still fails.
        let r = point(1.5, 3000, 1);
        assert!(!r.checks.rate_ok, "{:?}", r.checks);
        assert!(r.checks.notes.iter().any(|n| n.contains("overloaded")));
    }
}
