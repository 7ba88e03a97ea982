//! Loopback tests of the RPC server through its library API, one per
//! scheduling mode and one per baseline (tokio, epoll-1to1, epoll-shared): 64 connections with 8 requests
//! in flight each, under a steal storm (four connections ask for 2 ms per
//! request, the other 60 for 0–20 µs, emulated service), with a worker
//! retiring mid-run where the runtime supports it. Every reply must arrive
//! exactly once, in order, reporting at least the requested service.

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{storm, Pipelined};
use skq_servers::{Mode, RpcConfig, RpcServer, RuntimeKind, ServerSpec, ServerStats, ServiceMode};

/// Default settings on `workers` workers of `runtime` (skq: hybrid).
fn config(runtime: RuntimeKind, workers: usize) -> RpcConfig {
    RpcConfig::new(ServerSpec::new(Mode::of_driver(runtime), workers))
}

const CONNS: usize = 64;
const INFLIGHT: usize = 8;
const PER_CONN: u64 = 80;
const WORKERS: usize = 4;

fn storm_with_retirement(runtime: RuntimeKind, mode: &str) {
    storm_with_retirement_batch(runtime, mode, 1);
}

fn storm_with_retirement_batch(runtime: RuntimeKind, mode: &str, batch: usize) {
    let mut spec = ServerSpec::new(mode.parse().unwrap(), WORKERS);
    assert_eq!(spec.mode.driver(), runtime, "{mode}");
    spec.sched.batch = batch;
    spec.service = ServiceMode::Emulate;
    let cfg = RpcConfig::new(spec);
    let server = RpcServer::start(cfg).unwrap_or_else(|e| panic!("{mode}: start: {e}"));
    let addr = server.local_addr();
    let load = Pipelined::new(CONNS, INFLIGHT, PER_CONN, storm(4));
    let total = CONNS as u64 * PER_CONN;
    let progress = load.progress.clone();
    let clients = std::thread::spawn(move || load.run(addr));

    // Retire worker 1 once about a third of the replies are in.
    let start = Instant::now();
    while progress.load(Ordering::Relaxed) < total / 3 && !clients.is_finished() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{mode}: no progress"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let retired = server.retire_worker(1);
    match runtime {
        RuntimeKind::Skq => retired.unwrap_or_else(|e| panic!("{mode}: retire_worker: {e}")),
        _ => assert_eq!(retired.unwrap_err().kind(), std::io::ErrorKind::Unsupported),
    }

    let replies = clients
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{mode}: {e}"));
    assert_eq!(replies, total);
    if runtime == RuntimeKind::Skq {
        // Worker 1 leaves after its current batch; the others stay.
        let exited = |s: &ServerStats, w: usize| {
            s.scheduler.as_ref().unwrap().per_worker[w]["exited"] == true
        };
        let start = Instant::now();
        while !exited(&server.stats(), 1) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{mode}: worker 1 never exited"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let live = server.stats();
        assert!(
            (0..WORKERS).all(|w| exited(&live, w) == (w == 1)),
            "{mode}: {live:?}"
        );
    }
    let stats = server.shutdown();
    if std::env::var_os("SKQ_TEST_VERBOSE").is_some() {
        eprintln!("{mode}: {}", serde_json::to_string(&stats).unwrap());
    }
    assert_eq!(stats.requests, total, "{mode}: server-side request count");
    assert_eq!(stats.accepted, CONNS as u64);
    assert_eq!(
        (stats.protocol_errors, stats.aborted, stats.rejected),
        (0, 0, 0),
        "{mode}"
    );
    assert_eq!(stats.per_worker.len(), WORKERS);
    if runtime == RuntimeKind::Skq {
        let sched = stats.scheduler.expect("skq reports scheduler stats");
        assert_eq!(sched.per_worker.len(), WORKERS);
        assert_eq!(
            sched.ownership_violations, 0,
            "{mode}: a connection was handled by two workers at once"
        );
        let delivered: u64 = sched
            .per_worker
            .iter()
            .map(|w| w["delivered"].as_u64().unwrap())
            .sum();
        assert!(delivered > 0, "{mode}");
    }
}

macro_rules! skq_modes {
    ($($name:ident => $mode:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            storm_with_retirement(RuntimeKind::Skq, $mode);
        }
    )*};
}

skq_modes! {
    skq_vanilla_storm => "vanilla",
    skq_shared_storm => "shared",
    skq_queue_storm => "queue",
    skq_cpu_storm => "cpu",
    skq_best2_storm => "best2",
    skq_best2_steal_storm => "best2+steal",
    skq_hybrid_storm => "hybrid",
}

/// Large batches (events processing together, not stealable) keep the same
/// exactly-once, in-order guarantees.
#[test]
fn skq_batched_storms() {
    for mode in ["vanilla", "shared", "hybrid"] {
        storm_with_retirement_batch(RuntimeKind::Skq, mode, 32);
    }
}

#[test]
fn tokio_storm() {
    storm_with_retirement(RuntimeKind::Tokio, "tokio");
}

/// The plain-Linux baselines keep the guarantees the skq modes keep.
#[test]
fn epoll_1to1_storm() {
    storm_with_retirement(RuntimeKind::Epoll1to1, "epoll-1to1");
}

#[test]
fn epoll_shared_storm() {
    storm_with_retirement(RuntimeKind::EpollShared, "epoll-shared");
}

/// Spin service on pinned workers: every reply, and the server's busy time
/// covers at least what was asked.
fn spin_service_and_pinning(runtime: RuntimeKind) {
    let mut cfg = config(runtime, 2);
    cfg.spec.service = ServiceMode::Spin;
    cfg.spec.pin = true;
    let server = RpcServer::start(cfg).unwrap();
    let load = Pipelined::new(
        8,
        4,
        50,
        std::sync::Arc::new(|_, seq| (seq % 5) as u32 * 2_000),
    );
    assert_eq!(load.run(server.local_addr()).unwrap(), 400);
    let stats = server.shutdown();
    assert_eq!(stats.requests, 400);
    let asked = 8 * 10 * (2_000 + 4_000 + 6_000 + 8_000);
    assert!(stats.per_worker.iter().map(|w| w.busy_ns).sum::<u64>() >= asked);
}

#[test]
fn tokio_spin_pinned() {
    spin_service_and_pinning(RuntimeKind::Tokio);
}

#[test]
fn invalid_configuration_names_the_option() {
    let cfg = config(RuntimeKind::Tokio, 0);
    let e = RpcServer::start(cfg).err().expect("0 workers refused");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("--workers"), "{e}");
    let mut cfg = config(RuntimeKind::Tokio, 2);
    cfg.max_conns = 0;
    let e = RpcServer::start(cfg).err().expect("0 connections refused");
    assert!(e.to_string().contains("--max-conns"), "{e}");
}

#[test]
fn skq_options_are_validated_by_the_core() {
    // Unknown modes and refused steal settings never get this far: the
    // mode is parsed at the edge.
    assert!("fastest".parse::<Mode>().is_err());
    assert!("vanilla+steal".parse::<Mode>().is_err());
    let mut cfg = RpcConfig::new(ServerSpec::new("best2+steal".parse().unwrap(), 2));
    cfg.spec.sched.steal_k = Some(9);
    let e = RpcServer::start(cfg.clone())
        .err()
        .expect("steal-k 9 refused");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("--steal-k"), "{e}");
    cfg.spec.sched.steal_k = None;
    cfg.spec.sched.poll_groups = Some(3);
    assert!(
        RpcServer::start(cfg).is_err(),
        "3 poll groups for 2 workers"
    );
}

#[test]
fn skq_spin_pinned() {
    spin_service_and_pinning(RuntimeKind::Skq);
}

/// Connections that send class-1 requests are re-flagged `HIGH_PRIORITY`
/// and served from the high-priority queues, still exactly once and in order.
#[test]
fn skq_high_priority_clients() {
    let cfg = RpcConfig::new(ServerSpec::new("best2+steal".parse().unwrap(), 3));
    let server = RpcServer::start(cfg).unwrap();
    let mut load = Pipelined::new(16, 4, 60, storm(2));
    load.high_conns = 4;
    assert_eq!(load.run(server.local_addr()).unwrap(), 16 * 60);
    let stats = server.shutdown();
    let sched = stats.scheduler.unwrap();
    let high: u64 = sched
        .per_worker
        .iter()
        .map(|w| w["high_served"].as_u64().unwrap())
        .sum();
    assert!(high > 0, "no high-priority deliveries: {sched:?}");
    assert_eq!(sched.ownership_violations, 0);
}

/// Beyond `max_conns`, connections are accepted and closed at once, counted
/// as rejected; the admitted ones are served normally.
fn connection_limit(runtime: RuntimeKind) {
    let mut cfg = config(runtime, 2);
    cfg.max_conns = 4;
    let server = RpcServer::start(cfg).unwrap();
    let mut clients: Vec<_> = (0..6)
        .map(|_| common::Client::connect(server.local_addr()).unwrap())
        .collect();
    let mut served = 0;
    for c in clients.iter_mut() {
        // A rejected connection may already be reset when we write.
        if c.send(9, 1_000, 0).is_ok() {
            match c.recv() {
                Ok(r) => {
                    assert_eq!(r.id, 9);
                    served += 1;
                }
                Err(e) => assert!(
                    matches!(
                        e.kind(),
                        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                    ),
                    "{e}"
                ),
            }
        }
    }
    assert_eq!(served, 4);
    drop(clients);
    let stats = server.shutdown();
    assert_eq!((stats.accepted, stats.rejected), (4, 2));
}

#[test]
fn tokio_connection_limit() {
    connection_limit(RuntimeKind::Tokio);
}

#[test]
fn skq_connection_limit() {
    connection_limit(RuntimeKind::Skq);
}

#[test]
fn epoll_connection_limit() {
    connection_limit(RuntimeKind::Epoll1to1);
    connection_limit(RuntimeKind::EpollShared);
}

/// A client that sends far more than the socket buffers hold before it reads
/// a single reply: the server stops serving it while its replies cannot be
/// written (no unbounded output buffering), resumes on the writable edge,
/// and every reply arrives in order.
fn slow_reader(runtime: RuntimeKind) {
    const N: u64 = 300_000; // 6 MB each way: more than the socket buffers hold
    let server = RpcServer::start(config(runtime, 2)).unwrap();
    let mut reader = common::Client::connect(server.local_addr()).unwrap();
    let mut writer = reader.stream.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        use std::io::Write;
        let mut bytes = Vec::new();
        for id in 0..N {
            skq_proto::wire::Header::request(id, 0, 0).encode(&mut bytes);
        }
        writer.write_all(&bytes)
    });
    // Wait until the server stops making progress on this connection.
    let start = Instant::now();
    let mut last = (0, Instant::now());
    loop {
        let stats = server.stats();
        let blocked: u64 = stats.per_worker.iter().map(|w| w.write_blocked).sum();
        if stats.requests != last.0 {
            last = (stats.requests, Instant::now());
        } else if last.1.elapsed() > Duration::from_millis(300)
            && (runtime == RuntimeKind::Tokio || blocked > 0)
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "server never stalled: {stats:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        last.0 < N,
        "served all {N} requests without the client reading: replies buffered without bound"
    );
    for id in 0..N {
        assert_eq!(reader.recv().unwrap().id, id);
    }
    sender.join().unwrap().unwrap();
    drop(reader);
    assert_eq!(server.shutdown().requests, N);
}

#[test]
fn tokio_slow_reader() {
    slow_reader(RuntimeKind::Tokio);
}

#[test]
fn epoll_slow_reader() {
    slow_reader(RuntimeKind::Epoll1to1);
    slow_reader(RuntimeKind::EpollShared);
}

#[test]
fn skq_slow_reader() {
    slow_reader(RuntimeKind::Skq);
}

/// Elastic workers (a resource manager with 1 ms periods parking and waking
/// workers under the storm) and checkpoints every 100 µs inside the long
/// requests: still every reply exactly once, in order, and no source ever
/// on two workers.
#[test]
fn elastic_workers_and_checkpoints_lose_nothing() {
    let mut cfg = config(RuntimeKind::Skq, WORKERS);
    cfg.spec.sched.min_workers = Some(1);
    cfg.spec.sched.elastic_period_us = Some(1_000);
    cfg.checkpoint_us = Some(100);
    cfg.spec.service = ServiceMode::Emulate;
    let server = RpcServer::start(cfg).expect("start");
    let addr = server.local_addr();
    let load = Pipelined::new(CONNS, INFLIGHT, PER_CONN, storm(4));
    let total = CONNS as u64 * PER_CONN;
    let replies = std::thread::spawn(move || load.run(addr))
        .join()
        .unwrap()
        .expect("clients");
    assert_eq!(replies, total);
    let stats = server.shutdown();
    assert_eq!(stats.requests, total);
    let sched = stats.scheduler.expect("skq stats");
    assert_eq!(sched.ownership_violations, 0);
    assert!(!sched.elastic.is_empty(), "the resource manager decided");
    assert!(sched
        .elastic
        .iter()
        .all(|&(_, _, a)| (1..=WORKERS).contains(&a)));
}
