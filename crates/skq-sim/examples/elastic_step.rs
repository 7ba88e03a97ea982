//! The simulator's view of elastic workers (issue 15): the real core's
//! `ResourceManager` parking and waking up to 16 workers under a step
//! schedule 10% -> 90% -> 10% of capacity, in virtual time, against the same
//! 16 workers fixed. Poisson arrivals, exponential service.
//!
//! `cargo run --release -p skq-sim --example elastic_step -- [STEP_S] [MEAN_US] [SEEDS] [CHECK_US]`
//! (defaults: 0.5 s per step, S = 10 µs, 3 seeds, backlog checked every
//! 2000 µs as in the runtime).

use std::sync::Arc;

use skq_core::{Config, ElasticConfig, Policy};
use skq_proto::profile::RateProfile;
use skq_proto::workload::{ServiceSpec, Workload};
use skq_sim::core_model::{self, CoreOpts};
use skq_sim::params::Overheads;
use skq_sim::workload::{Scenario, Service};

const WORKERS: usize = 16;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: f64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let step_s = arg(1, 0.5);
    let mean_us = arg(2, 10.0);
    let seeds = arg(3, 3.0) as u64;
    let check_us = arg(4, 2000.0);
    let service = Service::Spec(ServiceSpec::new(Workload::Exponential, mean_us * 1e3));
    let capacity = WORKERS as f64 * 1e6 / mean_us;
    // Operational time at the capacity rate: (0.1 + 0.9 + 0.1) steps' worth.
    let requests = (1.1 * step_s * capacity) as usize;
    let profile = Arc::new(RateProfile::parse(&format!("steps=0.1,0.9,0.1@{step_s}")).unwrap());
    println!(
        "simulated: {WORKERS} workers, hybrid, exponential S = {mean_us} us, Poisson arrivals, \
         steps 0.1 -> 0.9 -> 0.1 of {capacity:.0} req/s, {step_s} s each, {requests} requests, \
         elastic min 1 (20 ms periods, backlog checked every {check_us} us), default overheads"
    );
    println!("seed  fixed p99 us  elastic p99 us  x fixed  mean active  worker-time x fixed  up ms  down ms");
    for seed in 1..=seeds {
        let mut sc = Scenario::at_load(service.clone(), WORKERS, 256, 1.0, requests, seed);
        sc.warmup = 0;
        let cfg = Config::new(Policy::Hybrid, WORKERS);
        let ov = Overheads::default();
        let fixed = CoreOpts {
            rate_profile: Some(profile.clone()),
            ..CoreOpts::default()
        };
        let mut elastic = fixed.clone();
        let mut ecfg = ElasticConfig::new(1, WORKERS);
        ecfg.backlog_check_ns = (check_us * 1e3) as u64;
        elastic.elastic = Some(ecfg);
        let f = core_model::run(&cfg, &ov, &fixed, &sc)?;
        let e = core_model::run(&cfg, &ov, &elastic, &sc)?;
        anyhow::ensure!(f.stranded == 0 && e.stranded == 0, "requests stranded");
        let span_ns = 3.0 * step_s * 1e9;
        let mean_active = e.active_worker_ns / span_ns;
        let step = (step_s * 1e9) as u64;
        let first = |from: u64, want: &dyn Fn(usize) -> bool| {
            e.active
                .iter()
                .find(|&&(t, a)| t >= from && want(a))
                .map_or("-".to_string(), |&(t, _)| {
                    format!("{:.1}", (t - from) as f64 / 1e6)
                })
        };
        println!(
            "{seed:>4}  {:>12.1}  {:>14.1}  {:>7.2}  {:>11.2}  {:>19.2}  {:>5}  {:>7}",
            f.summary.latency.p99.value,
            e.summary.latency.p99.value,
            e.summary.latency.p99.value / f.summary.latency.p99.value,
            mean_active,
            mean_active / WORKERS as f64,
            first(step, &|a| a == WORKERS),
            first(2 * step, &|a| a < WORKERS),
        );
    }
    Ok(())
}
