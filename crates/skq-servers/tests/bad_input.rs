//! Hostile clients against the server running as a separate process: each
//! offending connection is closed and counted, well-behaved clients keep
//! getting correct replies throughout, the server does not crash, and its
//! file-descriptor count returns to where it started.

mod common;

use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;

use common::{Client, Pipelined, ServerProcess};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use skq_proto::wire::{self, Header};

/// Random-garbage connections per run.
const GARBAGE: u64 = 10;

fn request_bytes(ids: std::ops::Range<u64>, service_ns: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for id in ids {
        Header::request(id, service_ns, 0).encode(&mut b);
    }
    b
}

/// Replies in `bytes` (all whole), by id.
fn reply_ids(bytes: &[u8]) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut rest = bytes;
    while let Ok(Some(h)) = wire::decode_reply(rest) {
        ids.push(h.id);
        rest = &rest[h.frame_len()..];
    }
    ids
}

fn hostile_clients(server_args: &[&str]) {
    let server = ServerProcess::spawn(server_args);
    let addr = server.addr;

    // Warm up so lazily created fds exist before the baseline is taken.
    let warm = Pipelined::new(4, 2, 10, Arc::new(|_, _| 1_000));
    assert_eq!(warm.run(addr).unwrap(), 40);
    let baseline = server.wait_fds(Duration::from_secs(10), "after warm-up", |_| true);

    // Well-behaved clients run during the whole attack.
    let good = Pipelined::new(
        8,
        4,
        300,
        Arc::new(|c, s| ((c as u64 * 31 + s) % 50) as u32 * 1_000),
    );
    let good = std::thread::spawn(move || good.run(addr));

    let (mut protocol, mut aborted) = (0u64, 0u64);

    // Absurd length field: closed at once, before any payload arrives.
    let mut c = Client::connect(addr).unwrap();
    c.send_raw(&u32::MAX.to_le_bytes()).unwrap();
    assert!(c.read_until_closed().unwrap().is_empty());
    protocol += 1;

    // Length below the header size.
    let mut c = Client::connect(addr).unwrap();
    c.send_raw(&[5, 0, 0, 0, 1, 0, 0, 0]).unwrap();
    assert!(c.read_until_closed().unwrap().is_empty());
    protocol += 1;

    // A reply frame sent to the server, after two good requests: those are answered first.
    let mut c = Client::connect(addr).unwrap();
    let mut bytes = request_bytes(0..2, 1_000);
    Header::request(2, 0, 0).reply(0).encode(&mut bytes);
    c.send_raw(&bytes).unwrap();
    assert_eq!(reply_ids(&c.read_until_closed().unwrap()), vec![0, 1]);
    protocol += 1;

    // Truncated frame, then the client half-closes: answered up to the cut, then closed.
    let mut c = Client::connect(addr).unwrap();
    let mut bytes = request_bytes(0..3, 0);
    bytes.truncate(50);
    c.send_raw(&bytes).unwrap();
    c.stream.shutdown(Shutdown::Write).unwrap();
    assert_eq!(reply_ids(&c.read_until_closed().unwrap()), vec![0, 1]);
    aborted += 1;

    // A large frame whose payload never completes.
    let mut c = Client::connect(addr).unwrap();
    let mut h = Header::request(0, 0, 0);
    h.payload_len = 100_000;
    let mut bytes = Vec::new();
    h.encode(&mut bytes);
    bytes.resize(bytes.len() + 60_000, 0xAB);
    c.send_raw(&bytes).unwrap();
    c.stream.shutdown(Shutdown::Write).unwrap();
    assert!(c.read_until_closed().unwrap().is_empty());
    aborted += 1;

    // Clients vanishing (reset) mid-request, with slow requests still being served.
    for _ in 0..5 {
        let mut c = Client::connect(addr).unwrap();
        let mut bytes = request_bytes(0..4, 2_000_000);
        bytes.extend_from_slice(&request_bytes(4..5, 0)[..9]);
        c.send_raw(&bytes).unwrap();
        std::thread::sleep(Duration::from_millis(1));
        c.vanish();
        aborted += 1;
    }

    // Random bytes: the header is invalid (protocol error) or, rarely, plausible
    // and never completed (aborted at EOF). Either way the connection closes.
    let mut rng = SmallRng::seed_from_u64(0x5eed);
    for _ in 0..GARBAGE {
        let mut c = Client::connect(addr).unwrap();
        let len = rng.gen_range(1..8192);
        let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        // The server may close before reading everything: a failed write is fine.
        let _ = c.send_raw(&bytes);
        let _ = c.stream.shutdown(Shutdown::Write);
        c.read_until_closed().unwrap();
    }

    assert_eq!(
        good.join().unwrap().expect("good clients unaffected"),
        8 * 300
    );
    server.wait_fds(Duration::from_secs(20), "after every client left", |n| {
        n == baseline
    });

    let stats = server.stop();
    let get = |k: &str| {
        stats[k]
            .as_u64()
            .unwrap_or_else(|| panic!("stats field {k}"))
    };
    assert_eq!(get("open"), 0, "{stats}");
    assert_eq!(
        get("protocol_errors") + get("aborted"),
        protocol + aborted + GARBAGE,
        "{stats}"
    );
    assert!(get("protocol_errors") >= protocol, "{stats}");
    assert!(get("aborted") >= aborted, "{stats}");
    assert!(get("requests") >= 8 * 300 + 40 + 2 + 2, "{stats}");
}

#[test]
fn hostile_clients_tokio() {
    hostile_clients(&["--runtime", "tokio", "--workers", "4"]);
}

#[test]
fn hostile_clients_skq_hybrid() {
    hostile_clients(&["--runtime", "skq", "--mode", "hybrid", "--workers", "4"]);
}

#[test]
fn hostile_clients_skq_vanilla() {
    hostile_clients(&["--runtime", "skq", "--mode", "vanilla", "--workers", "4"]);
}

#[test]
fn hostile_clients_epoll_1to1() {
    hostile_clients(&["--mode", "epoll-1to1", "--workers", "4"]);
}

#[test]
fn hostile_clients_epoll_shared() {
    hostile_clients(&["--mode", "epoll-shared", "--workers", "4"]);
}
