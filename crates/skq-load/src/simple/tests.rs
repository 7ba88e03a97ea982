//! Loopback tests of the cooperative receiver and the non-blocking sender
//! (counts and exactly-once, never timing; the rest of the client is tested
//! in `tests/simple.rs`):
//!
//! * with cooperation on, sender and receiver pinned to one CPU, every
//!   request is answered once and every measured reply is kernel-stamped;
//! * with it off, the same, and no read is ever held back;
//! * a server that never reads fills the socket: the sender skips or fails
//!   instead of blocking, and every request is accounted for;
//! * a guard of a second or more is refused, naming the flag.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use super::*;
use crate::refserver::{RefMode, RefServer};

fn short(addr: SocketAddr, rate: f64, conns: usize) -> SimpleConfig {
    let mut c = SimpleConfig::new(addr, rate);
    c.connections = conns;
    c.duration = Duration::from_millis(400);
    c.warmup = Duration::from_millis(100);
    c.drain = Duration::from_millis(500);
    // Tests share the machine: spin little (correctness does not depend on it).
    c.spin = Duration::from_micros(100);
    c
}

/// Exactly once, counts, and the kernel-stamp path, for a clean run against
/// a server that answered `served` requests.
fn assert_clean_and_kernel_stamped(r: &SimpleResult, served: u64) {
    assert_eq!(r.errors, SimpleErrors::default(), "{:?}", r.errors);
    assert!(
        r.sent > 0 && r.sent < r.sent_total,
        "warm-up sends are apart"
    );
    assert_eq!(r.received, r.sent);
    assert_eq!(r.received_total, r.sent_total);
    assert_eq!(served, r.sent_total, "the server saw each request once");
    assert_eq!(r.latency.count, r.sent);
    assert_eq!(r.lateness.count, r.sent);
    assert_eq!(r.stamps.kernel, r.received, "{:?}", r.stamps);
    assert_eq!(r.stamps.user, 0, "{:?}", r.stamps);
    assert_eq!(r.stamps.before_send, 0, "{:?}", r.stamps);
    assert_eq!(r.recv_delay.count, r.received);
}

/// The last CPU this process may use (the cross-check puts both client
/// threads on one CPU; this is the case cooperation is for).
fn one_cpu() -> u32 {
    *cpu::allowed_cpus()
        .expect("this process's CPUs")
        .last()
        .expect("at least one CPU")
}

#[test]
fn with_cooperation_every_reply_is_received_once_and_kernel_stamped() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 3000.0, 8);
    cfg.protocol = SimpleProtocol::Rpc(RpcService::Exponential(1000));
    cfg.cpus = vec![one_cpu()];
    assert_eq!(
        cfg.sharing,
        RecvSharing::Lend {
            guard: RecvSharing::DEFAULT_GUARD
        },
        "cooperation is the default"
    );
    let r = run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
    assert_eq!(r.lend_guard_us, Some(30.0));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["lend_guard_us"], 30.0);
    assert_eq!(json["errors"]["send_full"], 0);
    // The late-send counters are reported, and a cause is counted only for
    // a late send.
    assert!(r.late_sends.behind_previous_send <= r.late_sends.late);
    assert!(r.late_sends.late <= r.sent);
    assert!(json["late_sends"]["behind_previous_send"].is_u64());
}

#[test]
fn with_cooperation_two_senders_and_two_receivers_answer_everything() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 3000.0, 6);
    cfg.threads = 2;
    cfg.receivers = 2;
    // Unpinned: each receiver waits for both senders' windows.
    cfg.sharing = RecvSharing::Lend {
        guard: Duration::from_micros(50),
    };
    let r = run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
    assert_eq!(r.lend_guard_us, Some(50.0));
}

#[test]
fn without_cooperation_no_read_is_held_back() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 3000.0, 8);
    cfg.cpus = vec![one_cpu()];
    cfg.sharing = RecvSharing::Free;
    let r = run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
    assert_eq!(r.lend_guard_us, None);
    assert_eq!(r.recv_yields, 0);
}

/// A server that accepts and never reads, holding its sockets open (the
/// thread waits in `accept` for the rest of the test process).
fn deaf_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(s) = s else { return };
            held.push(s);
        }
    });
    addr
}

#[test]
fn a_full_socket_skips_or_fails_a_send_instead_of_blocking() {
    // 64 KiB requests at 1,000/s: 32 MiB offered, far more than loopback
    // buffers hold for a peer that does not read.
    let addr = deaf_server();
    let mut cfg = short(addr, 1000.0, 1);
    cfg.protocol = SimpleProtocol::Http(format!("/{}", "x".repeat(64 * 1024)));
    let r = run(&cfg).unwrap();
    let e = r.errors;
    assert!(e.send_full >= 1, "{e:?}");
    assert!(e.connection_failures <= 1, "{e:?}");
    assert_eq!(r.received_total, 0);
    assert_eq!(e.bad_reply, 0);
    // Every request drawn before the connection failed was either sent or
    // skipped, and none was answered: all are missing.
    assert_eq!(e.missing, r.sent_total + e.send_full, "{e:?}");
}

#[test]
fn a_guard_of_a_second_is_refused_naming_the_flag() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 1000.0, 1);
    cfg.sharing = RecvSharing::Lend {
        guard: Duration::from_secs(1),
    };
    let e = run(&cfg).unwrap_err().to_string();
    assert!(e.contains("--guard-us 1000000"), "{e}");
}
