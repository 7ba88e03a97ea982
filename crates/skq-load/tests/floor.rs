//! The generator tells its own lateness from the machine's: while it spins
//! with nothing to do it samples the gaps the machine takes from its CPU
//! (`PointResult::client_floor`). A CPU shared with another busy thread
//! shows in that floor; a generator that stalls itself does not. The margins
//! are orders of magnitude (a shared CPU's time slices are milliseconds, an
//! idle poll a fraction of a µs), so these are behaviour, not timing. The two
//! tests take turns: a hog beside the other would be its machine too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use skq_load::refserver::{RefMode, RefServer};
use skq_load::{LoadConfig, ScheduleKind, Stall};
use skq_proto::workload::{ServiceSpec, Workload};

static TURNS: Mutex<()> = Mutex::new(());

fn config(server: &RefServer) -> LoadConfig {
    let mut cfg = LoadConfig::new(server.addr(), 2000.0);
    cfg.connections = 8;
    cfg.duration = Duration::from_millis(1500);
    cfg.warmup = Duration::from_millis(200);
    cfg.drain = Duration::from_secs(3);
    cfg.service = ServiceSpec::new(Workload::Fixed, 0.0);
    cfg.schedule = ScheduleKind::Poisson;
    cfg
}

#[test]
fn a_cpu_shared_with_a_busy_thread_shows_in_the_floor() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let allowed = skq_sys::cpu::allowed_cpus().unwrap();
    let cpu = *allowed.last().unwrap();
    let server_cpu = (allowed.len() > 1).then(|| allowed[0]);
    let server = RefServer::start_with(RefMode::Echo, None, server_cpu).unwrap();
    let mut cfg = config(&server);
    cfg.keeping.cpus = vec![cpu];
    let stop = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            skq_sys::cpu::pin_current_thread(cpu).unwrap();
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let r = skq_load::run(&cfg);
        stop.store(true, Ordering::Relaxed);
        r
    })
    .unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    let floor = r
        .client_floor
        .expect("the generator spun long enough to sample its CPU");
    // The scheduler gives the two threads turns of milliseconds: far more
    // than 1% of the time goes in gaps over 20 µs, and an ideal generator on
    // that CPU would miss the lateness bound.
    assert!(floor.lost_over_20us > 0.05, "{floor:?}");
    assert!(
        floor.lateness_p99_us > cfg.keeping.max_lateness_us,
        "{floor:?}"
    );
    assert!(!r.checks.lateness_ok);
    assert!(
        r.checks
            .notes
            .iter()
            .any(|n| n.contains("that much of the lateness is the machine's")),
        "{:?}",
        r.checks.notes
    );
    assert!(r.client_preempted.unwrap() > 0, "the hog preempted it");
}

/// A run in which the generator waited for a CPU longer than this share of
/// it (schedstat: a host busy with other jobs) samples the host in its
/// floor, not the generator: its floor is not judged.
const MACHINE_BUSY: f64 = 0.05;

#[test]
fn a_generator_that_stalls_itself_is_not_the_machine() {
    let _turn = TURNS.lock().unwrap_or_else(|e| e.into_inner());
    let server = RefServer::start(RefMode::Echo).unwrap();
    for _ in 0..3 {
        if stalls_itself(&server) {
            return;
        }
    }
    eprintln!(
        "the host kept the generator from its CPU in every try: the verdict was \
         checked, the floor could not be"
    );
}

/// One run with deliberate stalls; false when the host was too busy for
/// its floor to be judged.
fn stalls_itself(server: &RefServer) -> bool {
    let mut cfg = config(server);
    // It spins before every send, as with a CPU of its own, so it samples
    // its CPU between stalls.
    cfg.keeping.spin_us = Some(2000);
    // 20 ms of sleep inside the send path after every 200 sends (100 ms of
    // schedule): the sends due meanwhile are milliseconds late, and the
    // thread idles between stalls.
    cfg.keeping.stall = Some(Stall {
        every: 200,
        pause: Duration::from_millis(20),
    });
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!(!r.checks.lateness_ok);
    assert!(
        r.checks.lateness_p99_us > 5_000.0,
        "{}",
        r.checks.lateness_p99_us
    );
    // The stalls happen while it works, never while it idles, so they are
    // not in the floor: what the floor explains is a small part.
    let floor = r.client_floor.expect("the generator idled between stalls");
    let run_s = (cfg.warmup + cfg.duration).as_secs_f64();
    // Without schedstat (no wait figure) every run is judged.
    let waited = r.client_waited_s.unwrap_or(0.0);
    if waited > MACHINE_BUSY * run_s {
        eprintln!(
            "waited {:.1} ms for a CPU, floor {floor:?}: not judged",
            waited * 1e3
        );
        return false;
    }
    assert!(
        floor.lateness_p99_us < r.checks.lateness_p99_us / 4.0,
        "floor {floor:?}, lateness p99 {}",
        r.checks.lateness_p99_us
    );
    true
}
