//! The generator keeps its schedule against the in-process reference echo
//! server at a few thousand requests per second. Behaviour, not a timing
//! threshold of the test's own: it checks counts and the generator's own
//! lateness verdict. Alone in its test binary, so no other test of this
//! crate runs beside it.
//!
//! A try passes when the verdict passes, or when the send lateness that is
//! left once the machine's stalls are taken out (steps of the generator's
//! loop over `skq_load::worker::STALL_NS`, which its own polls, reads and
//! writes never take at this rate) is within the verdict's bound: the
//! generator's own work kept the schedule, and what it lost the machine took
//! (on the dev VMs, single 32-byte loopback writes stalled 100-650 us several
//! times a second in busy hours, which no generator can keep a 50 us bound
//! through). The generator's deliberate stalls are not the machine's
//! (`loopback.rs::a_stalled_sender_fails_the_lateness_check` checks that they
//! stay in), so a generator that loses its schedule by its own doing fails
//! every try. Up to eight tries of two seconds; the failure names, per try,
//! what the machine took from the generator thread.
//!
//! A try in which the machine kept the generator thread waiting for a CPU
//! for more than [`MACHINE_BUSY`] of the run (its schedstat wait: other
//! jobs on a shared CI host, runnable beside it on its CPU), or whose
//! machine floor (sampled while it spun idle, so a hypervisor's steal
//! shows there too) is over the bound itself, judges nothing:
//! time slices of other threads come in steps below the stall cut too, and
//! no generator keeps a 50 us bound through them. Such tries are retried;
//! when every try was one, the test says so and checks the counts only. On
//! a machine that leaves the generator its CPU, it waits a few ms per run.

use std::time::Duration;

use skq_load::refserver::{RefMode, RefServer};
use skq_load::{LoadConfig, ScheduleKind};
use skq_proto::workload::{ServiceSpec, Workload};

/// Share of a try's run (warm-up and measured window) the generator may
/// wait for a CPU and still be judged.
const MACHINE_BUSY: f64 = 0.02;

#[test]
fn keeps_its_schedule_at_a_few_thousand_requests_per_second() {
    let allowed = skq_sys::cpu::allowed_cpus().unwrap();
    // With two CPUs or more the server and the generator get one each, as
    // `skq bench` places them.
    let (gen_cpu, server_cpu) = match allowed.as_slice() {
        [a, b, ..] => (Some(*b), Some(*a)),
        _ => (None, None),
    };
    let server = RefServer::start_with(RefMode::Echo, None, server_cpu).unwrap();
    let mut seen = Vec::new();
    for _ in 0..8 {
        let mut cfg = LoadConfig::new(server.addr(), 3000.0);
        cfg.connections = 16;
        cfg.duration = Duration::from_millis(1500);
        cfg.warmup = Duration::from_millis(300);
        cfg.drain = Duration::from_secs(3);
        cfg.service = ServiceSpec::new(Workload::Fixed, 0.0);
        cfg.schedule = ScheduleKind::Poisson;
        cfg.keeping.cpus = gen_cpu.into_iter().collect();
        let r = skq_load::run(&cfg).unwrap();
        assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
        assert_eq!(r.received, r.sent, "every measured request answered once");
        assert_eq!(r.latency.count, r.sent);
        // 3000 req/s for 1.5 s: 4500 expected; Poisson spread is ~1.5%.
        assert!((4000..5000).contains(&r.sent), "sent {}", r.sent);
        let busy = r.client_busy_s.expect("the generator reports its work");
        assert!(busy > 0.0 && r.client_sent_total.unwrap() >= r.sent);
        let machine = r
            .generator_preemption()
            .expect("the generator reports what the machine took from it");
        let line = format!(
            "lateness p99 {:.1} us (limit {:.0}); generator work {:.1} us per request; {machine}",
            r.checks.lateness_p99_us,
            cfg.keeping.max_lateness_us,
            busy * 1e6 / r.client_sent_total.unwrap() as f64,
        );
        eprintln!("{line}");
        if r.checks.lateness_ok {
            return;
        }
        let stalls = r.client_stalls.expect("the generator reports its stalls");
        if stalls.own_lateness_p99_us <= cfg.keeping.max_lateness_us {
            eprintln!("the lateness check failed on the machine's stalls alone");
            return;
        }
        let run_s = (cfg.warmup + cfg.duration).as_secs_f64();
        // Without schedstat (no wait figure) every try is judged.
        let waited = r.client_waited_s.unwrap_or(0.0);
        // The floor sees what schedstat does not (a hypervisor taking the
        // vCPU): an ideal generator on this CPU would have missed the bound.
        let floor_over = r
            .client_floor
            .is_some_and(|f| f.lateness_p99_us > cfg.keeping.max_lateness_us);
        if waited > MACHINE_BUSY * run_s || floor_over {
            eprintln!("the machine kept the generator from its CPU: not judged");
            continue;
        }
        seen.push(line);
    }
    // Every try returned, was pushed to `seen`, or was not judged.
    if seen.is_empty() {
        eprintln!(
            "the machine kept the generator from its CPU in every try: the counts \
             were checked, the schedule could not be"
        );
        return;
    }
    panic!(
        "the generator's own work missed its schedule in every try:\n{}",
        seen.join("\n")
    );
}
