//! The RPC handler written once as async code (`--mode async-*`), on
//! skq-async (two skq modes) and on tokio, over loopback: pipelined
//! requests get exactly one reply each, in order per connection; a
//! malformed frame closes only its connection; a request above
//! `--max-service-us` is refused in order; the stats have the drivers'
//! shape and counts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{storm, Client, Pipelined};
use skq_proto::wire::Header;
use skq_servers::{Mode, RpcConfig, RpcServer, ServerSpec, ServiceMode};

const MODES: [&str; 3] = ["async-hybrid", "async-cpu", "async-tokio"];

fn config(mode: &str, workers: usize) -> RpcConfig {
    let mode: Mode = mode.parse().unwrap();
    let mut spec = ServerSpec::new(mode, workers);
    spec.service = ServiceMode::Emulate;
    RpcConfig::new(spec)
}

#[test]
fn pipelined_requests_get_one_reply_each_in_order() {
    const CONNS: usize = 24;
    const PER_CONN: u64 = 60;
    for mode in MODES {
        let server = RpcServer::start(config(mode, 3)).unwrap_or_else(|e| panic!("{mode}: {e}"));
        // Two connections ask for 2 ms per request, the rest for 0–20 µs.
        let load = Pipelined::new(CONNS, 6, PER_CONN, storm(2));
        let replies = load
            .run(server.local_addr())
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        let total = CONNS as u64 * PER_CONN;
        assert_eq!(replies, total, "{mode}");
        let stats = server.shutdown();
        assert_eq!(stats.requests, total, "{mode}");
        assert_eq!(stats.accepted, CONNS as u64, "{mode}");
        assert_eq!(
            (stats.protocol_errors, stats.aborted, stats.rejected),
            (0, 0, 0),
            "{mode}"
        );
        assert_eq!(
            (stats.driver.as_str(), stats.mode.as_str()),
            ("async", mode)
        );
        assert_eq!(stats.per_worker.len(), 3, "{mode}");
        assert_eq!(
            stats.per_worker.iter().map(|w| w.requests).sum::<u64>(),
            total
        );
        assert!(stats.per_worker.iter().map(|w| w.busy_ns).sum::<u64>() > 0);
        // skq-async reports the scheduler's own statistics, tokio none.
        assert_eq!(stats.scheduler.is_some(), mode != "async-tokio", "{mode}");
    }
}

#[test]
fn a_malformed_frame_closes_only_its_connection() {
    for mode in MODES {
        let server = RpcServer::start(config(mode, 2)).unwrap();
        let addr = server.local_addr();
        let mut good = Client::connect(addr).unwrap();
        good.send(0, 1_000, 0).unwrap();
        assert_eq!(good.recv().unwrap().id, 0, "{mode}");

        // A valid request, then an absurd length: the first is answered,
        // then the connection is closed.
        let mut bad = Client::connect(addr).unwrap();
        let mut bytes = Vec::new();
        Header::request(7, 0, 0).encode(&mut bytes);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bad.send_raw(&bytes).unwrap();
        let got = bad.read_until_closed().unwrap();
        let first = skq_proto::wire::decode_reply(&got).unwrap().unwrap();
        assert_eq!(first.id, 7, "{mode}");
        assert_eq!(
            got.len(),
            first.frame_len(),
            "{mode}: one reply, then closed"
        );

        // A reply frame sent to the server is a protocol error too.
        let mut wrong = Client::connect(addr).unwrap();
        let mut bytes = Vec::new();
        Header::request(9, 0, 0).reply(0).encode(&mut bytes);
        wrong.send_raw(&bytes).unwrap();
        assert!(wrong.read_until_closed().unwrap().is_empty(), "{mode}");

        // The good connection is still served, in order.
        for id in 1..=20 {
            good.send(id, 0, 0).unwrap();
        }
        for id in 1..=20 {
            assert_eq!(good.recv().unwrap().id, id, "{mode}");
        }
        drop(good);
        let stats = wait_closed(&server, 3);
        assert_eq!(stats.protocol_errors, 2, "{mode}");
        assert_eq!(stats.requests, 22, "{mode}");
        drop(server);
    }
}

#[test]
fn a_request_above_the_limit_is_refused_in_order() {
    for mode in MODES {
        let mut cfg = config(mode, 2);
        cfg.max_service_us = 1_000;
        let server = RpcServer::start(cfg).unwrap();
        let mut c = Client::connect(server.local_addr()).unwrap();
        c.send(0, 1_000_000, 0).unwrap(); // exactly the limit: served
        c.send(1, 1_000_001, 0).unwrap(); // above: refused
        c.send(2, u32::MAX, 0).unwrap();
        c.send(3, 0, 0).unwrap();
        let got: Vec<(u64, bool)> = (0..4)
            .map(|_| {
                let h = c.recv().unwrap();
                (h.id, h.refused)
            })
            .collect();
        assert_eq!(
            got,
            [(0, false), (1, true), (2, true), (3, false)],
            "{mode}"
        );
        drop(c);
        let stats = wait_closed(&server, 1);
        assert_eq!((stats.requests, stats.protocol_errors), (4, 0), "{mode}");
    }
}

#[test]
fn idle_connections_time_out_and_max_conns_refuses() {
    for mode in MODES {
        let mut cfg = config(mode, 2);
        cfg.idle_timeout = Some(Duration::from_millis(200));
        cfg.max_conns = 1;
        let server = RpcServer::start(cfg).unwrap();
        let mut first = Client::connect(server.local_addr()).unwrap();
        first.send(0, 0, 0).unwrap();
        assert_eq!(first.recv().unwrap().id, 0);
        // A second connection while the first is open: accepted and closed.
        let mut second = Client::connect(server.local_addr()).unwrap();
        assert!(second.read_until_closed().unwrap().is_empty(), "{mode}");
        // The first is closed once idle long enough.
        assert!(first.read_until_closed().unwrap().is_empty(), "{mode}");
        let stats = wait_closed(&server, 1);
        assert_eq!((stats.timeouts, stats.rejected), (1, 1), "{mode}");
    }
}

#[test]
fn async_modes_are_refused_where_they_do_not_apply() {
    let mut cfg = config("async-tokio", 2);
    cfg.spec.sched.batch_workers = vec![1];
    let e = RpcServer::start(cfg).err().expect("refused").to_string();
    assert!(e.contains("--batch-workers"), "{e}");
    let mut cfg = config("async-tokio", 2);
    cfg.spec.sched.min_workers = Some(1);
    let e = RpcServer::start(cfg).err().expect("refused").to_string();
    assert!(e.contains("--min-workers needs an skq mode"), "{e}");
    // Another server of the layer has no async handler.
    let cfg = skq_net::ServerConfig::with_mode("async-hybrid".parse().unwrap(), 2);
    let e = skq_net::Server::start(
        &cfg,
        Arc::new(skq_servers::RpcProtocol::new(
            ServiceMode::Spin,
            skq_servers::rpc::Classify::None,
        )),
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("--mode async-hybrid"), "{e}");
}

/// Elastic workers on skq-async (`--min-workers 1`, 1 ms statistics
/// periods, so the resource manager parks and wakes workers under the
/// storm): every reply exactly once, in order, and the decisions reported.
#[test]
fn elastic_async_workers_lose_nothing() {
    const CONNS: usize = 16;
    const PER_CONN: u64 = 80;
    let mut cfg = config("async-hybrid", 4);
    cfg.spec.sched.min_workers = Some(1);
    cfg.spec.sched.elastic_period_us = Some(1_000);
    let server = RpcServer::start(cfg).expect("start");
    // Idle, the manager shrinks to the minimum.
    let start = std::time::Instant::now();
    while server.stats().scheduler.expect("skq stats").live_workers > 1 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "an idle elastic server never parked its workers"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let load = Pipelined::new(CONNS, 6, PER_CONN, storm(2));
    let replies = load.run(server.local_addr()).expect("clients");
    let total = CONNS as u64 * PER_CONN;
    assert_eq!(replies, total);
    let stats = server.shutdown();
    assert_eq!(stats.requests, total);
    assert_eq!((stats.protocol_errors, stats.aborted), (0, 0));
    let sched = stats.scheduler.expect("skq stats");
    assert!(!sched.elastic.is_empty(), "the resource manager decided");
    assert!(sched.elastic.iter().all(|&(_, _, a)| (1..=4).contains(&a)));
    assert!(
        sched.elastic.iter().any(|&(_, _, a)| a == 1),
        "{:?}",
        sched.elastic
    );
}

/// Waits (bounded) until `n` connections have closed; the final stats.
fn wait_closed(server: &skq_net::ServerHandle, n: u64) -> skq_servers::ServerStats {
    let start = std::time::Instant::now();
    loop {
        let s = server.stats();
        if s.closed >= n {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "connections never closed: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
