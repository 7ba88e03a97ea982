//! Elastic workers in virtual time: the simulator drives the real core's
//! `ResourceManager`, `park_worker` and `rejoin` under a step schedule. Every
//! request is served (none stranded on a parked worker), the count reaches the
//! maximum after the step up, leaves it after the step down, and stays within
//! [min, max]; both harvest models.

use std::sync::Arc;

use skq_core::{Config, ElasticConfig, Policy};
use skq_proto::profile::RateProfile;
use skq_proto::workload::{ServiceSpec, Workload};
use skq_sim::core_model::{self, CoreOpts, Harvest};
use skq_sim::params::Overheads;
use skq_sim::workload::{Scenario, Service};

#[test]
fn the_worker_count_follows_a_step_and_nothing_is_stranded() {
    let workers = 8;
    let step_s = 0.05;
    let mean_ns = 10_000.0;
    let capacity = workers as f64 * 1e9 / mean_ns;
    let requests = (1.1 * step_s * capacity) as usize;
    let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, mean_ns));
    for harvest in [Harvest::Immediate, Harvest::Runtime] {
        let mut sc = Scenario::at_load(svc.clone(), workers, 64, 1.0, requests, 5);
        sc.warmup = 0;
        let mut opts = CoreOpts {
            harvest,
            ..CoreOpts::default()
        };
        opts.rate_profile = Some(Arc::new(
            RateProfile::parse(&format!("steps=0.1,0.9,0.1@{step_s}")).unwrap(),
        ));
        let mut e = ElasticConfig::new(2, workers);
        e.period_ns = 2_000_000;
        e.backlog_check_ns = 100_000;
        opts.elastic = Some(e);
        let cfg = Config::new(Policy::Hybrid, workers);
        let out = core_model::run(&cfg, &Overheads::default(), &opts, &sc).unwrap();
        assert_eq!(out.stranded, 0, "{harvest:?}");
        assert_eq!(out.summary.completed, requests as u64, "{harvest:?}");
        let step = (step_s * 1e9) as u64;
        let at = |t: u64| {
            out.active
                .iter()
                .take_while(|&&(x, _)| x <= t)
                .last()
                .map(|&(_, a)| a)
                .unwrap()
        };
        assert!(at(step - 1) < workers, "{harvest:?}: {:?}", out.active);
        assert_eq!(
            at(step + 4_000_000),
            workers,
            "{harvest:?}: two periods after the step"
        );
        assert!(at(3 * step - 1) < workers, "{harvest:?}: {:?}", out.active);
        assert!(out.active.iter().all(|&(_, a)| (2..=workers).contains(&a)));
    }
}
