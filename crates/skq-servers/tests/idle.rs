//! Idle skq workers: no polling timeout wakes them. Its own test binary, so
//! the only threads named `skq-N` in the process are this server's.

mod common;

use std::time::{Duration, Instant};

use skq_servers::{Mode, RpcConfig, RpcServer, RuntimeKind, ServerSpec};

/// Voluntary context switches of this process's threads whose name starts
/// with `prefix` (the server runs in the test's process).
fn switches_of_threads(prefix: &str) -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !name.starts_with(prefix) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else {
            continue; // the thread exited meanwhile
        };
        total += skq_sys::process::parse_status_ctxt_switches(&status)
            .expect("a task's status has its context switch counts")
            .voluntary;
    }
    total
}

/// Idle skq workers sleep until there is work: no polling timeout wakes
/// them (one used to wake each worker 50 times a second), and retiring an
/// idle worker still takes effect, through its retire bell: with every idle
/// worker polling the set (the default), with one poller and parked
/// followers, and with two poll groups (the bell lives in its worker's
/// group's set).
#[test]
fn skq_idle_workers_sleep_until_work_and_an_idle_worker_still_retires() {
    let mut configs = Vec::new();
    configs.push((
        "default",
        RpcConfig::new(ServerSpec::new(Mode::of_driver(RuntimeKind::Skq), 4)),
    ));
    let mut one_poller = configs[0].1.clone();
    one_poller.spec.sched.pollers = Some(1);
    configs.push(("one poller", one_poller));
    let mut groups = configs[0].1.clone();
    groups.spec.sched.poll_groups = Some(2);
    configs.push(("two poll groups", groups));
    for (label, cfg) in configs {
        idle_then_retire(label, cfg);
    }
}

fn idle_then_retire(label: &str, cfg: RpcConfig) {
    let server = RpcServer::start(cfg).unwrap_or_else(|e| panic!("{label}: start: {e}"));
    // Let the workers reach their first sleep, then count.
    std::thread::sleep(Duration::from_millis(100));
    let before = switches_of_threads("skq-");
    std::thread::sleep(Duration::from_millis(500));
    let woke = switches_of_threads("skq-") - before;
    // Polling every 20 ms would be 4 × 25 = 100 wake-ups here; a worker
    // still on its way to its first sleep adds one.
    assert!(
        woke <= 8,
        "{label}: idle workers woke {woke} times in 500 ms"
    );

    server.retire_worker(2).unwrap();
    let start = Instant::now();
    while server.stats().scheduler.as_ref().unwrap().per_worker[2]["exited"] != true {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{label}: idle worker 2 never retired"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The others still serve.
    let mut c = common::Client::connect(server.local_addr()).unwrap();
    for id in 0..20 {
        c.send(id, 0, 0).unwrap();
        assert_eq!(c.recv().unwrap().id, id, "{label}");
    }
    let stats = server.shutdown();
    assert_eq!(stats.requests, 20, "{label}");
}
