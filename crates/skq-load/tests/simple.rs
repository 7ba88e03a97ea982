//! Loopback tests of the simple cross-check client (`skq_load::simple`):
//! counts and exactly-once matching, never timing.
//!
//! * against the reference echo server (rpc and memcached, one and several
//!   receivers): every request answered once and in order, the server's
//!   count equal to the client's, every histogram fed once per measured
//!   request, and every measured reply timed by the kernel's receive stamp
//!   (never before its send stamp);
//! * a planted dropped reply is counted missing, a reply naming an unknown
//!   id is a bad reply (and its request missing);
//! * a swapped pair of replies counts once as out of order, both answered;
//! * memcached against a tiny in-test server, with one wrong-key reply;
//! * HTTP GETs against a tiny in-test server, each answered once;
//! * a bad setting is refused with a line naming the flag;
//! * the cooperative receiver: with it on (sender and receiver pinned to one
//!   CPU, or two of each unpinned) and off, every request answered once and
//!   kernel-stamped, and no read held back when off; a lend guard of a
//!   second refused, naming the flag;
//! * a server that never reads fills the socket: the sender skips or fails
//!   instead of blocking, and every request is accounted for.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use skq_load::protocol::memcached::KvSpec;
use skq_load::refserver::{EchoProtocol, RefMode, RefServer};
use skq_load::schedule::{ConnSchedule, ScheduleKind};
use skq_load::simple::{self, RecvSharing, RpcService, SimpleConfig, SimpleProtocol, SimpleResult};
use skq_proto::wire::{self, Header, HEADER_LEN};

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

/// What the planted RPC server does with one request.
enum Act {
    /// Answer it.
    Echo,
    /// Never answer it (counted in the server's `dropped`).
    Drop,
    /// Answer with this id instead.
    As(u64),
    /// Keep it until the next `ThenHeld`.
    Hold,
    /// Answer it, then the held one (a swapped pair).
    ThenHeld,
}

/// An RPC server, one thread per connection, that treats request `id` as
/// `plan(id)` says, counting drops.
fn planted_rpc_server(plan: fn(u64) -> Act) -> (SocketAddr, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let dropped = Arc::new(AtomicU64::new(0));
    let d = dropped.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let d = d.clone();
            std::thread::spawn(move || {
                let mut frame = [0u8; HEADER_LEN];
                let mut held = None;
                while s.read_exact(&mut frame).is_ok() {
                    let h = wire::decode_request(&frame).unwrap().unwrap();
                    let mut out = Vec::new();
                    let mut reply = |id| Header::request(id, 0, 0).reply(0).encode(&mut out);
                    match plan(h.id) {
                        Act::Echo => reply(h.id),
                        Act::Drop => {
                            d.fetch_add(1, Ordering::Relaxed);
                        }
                        Act::As(id) => reply(id),
                        Act::Hold => held = Some(h.id),
                        Act::ThenHeld => {
                            reply(h.id);
                            reply(held.take().expect("a request was held"));
                        }
                    }
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, dropped)
}

/// Exactly once, counts, and the kernel-stamp path, for any clean run
/// against a server that answered `served` requests.
fn assert_clean_and_kernel_stamped(r: &SimpleResult, served: u64) {
    assert_eq!(r.errors, Default::default(), "{:?}", r.errors);
    assert!(
        r.sent > 0 && r.sent < r.sent_total,
        "warm-up sends are apart"
    );
    assert_eq!(r.received, r.sent);
    assert_eq!(r.received_total, r.sent_total);
    assert_eq!(served, r.sent_total, "the server saw each request once");
    assert_eq!(r.latency.count, r.sent);
    assert_eq!(r.raw_latency.count, r.sent);
    assert_eq!(r.lateness.count, r.sent);
    assert_eq!(r.send_call.count, r.sent);
    // Every measured reply was timed by the kernel's receive stamp.
    assert_eq!(r.stamps.kernel, r.received, "{:?}", r.stamps);
    assert_eq!(r.stamps.user, 0, "{:?}", r.stamps);
    assert_eq!(r.recv_delay.count, r.received);
    assert!(r.stamps.shared <= r.received);
    // One clock: no reply stamped before its request was sent.
    assert_eq!(r.stamps.before_send, 0, "{:?}", r.stamps);
    assert!(r.latency.p99_us >= r.latency.p50_us);
    assert!(r.latency.p50_us >= r.raw_latency.p50_us);
}

#[test]
fn every_request_is_answered_exactly_once_by_the_echo_server() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 2000.0, 8);
    cfg.threads = 2;
    cfg.protocol = SimpleProtocol::Rpc(RpcService::Exponential(1000));
    let r = simple::run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
    assert_eq!(
        r.thread_cpu.len(),
        2 + 1,
        "two senders and one receiver for eight connections"
    );
    // The sends are exactly `skq load --seed 1`'s load schedules: every
    // offset below warm-up + duration, the measured ones from the warm-up on.
    let (warm, end) = (
        cfg.warmup.as_nanos() as u64,
        (cfg.warmup + cfg.duration).as_nanos() as u64,
    );
    let (mut all, mut measured) = (0, 0);
    for i in 0..cfg.connections {
        let mut s = ConnSchedule::new(&ScheduleKind::Poisson, None, cfg.rate, i, 8, cfg.seed);
        let mut t = s.next(None);
        while t < end {
            all += 1;
            measured += (t >= warm) as u64;
            t = s.next(Some(t));
        }
    }
    assert_eq!((r.sent_total, r.sent), (all, measured));
    // The result serialises for `--json`.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["sent"], r.sent);
    assert_eq!(json["stamps"]["kernel"], r.stamps.kernel);
}

#[test]
fn several_receivers_split_the_connections_and_answer_each_request_once() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 3000.0, 7);
    cfg.receivers = 3;
    cfg.recv_rt_priority = None;
    let r = simple::run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
    assert!(!r.receivers_realtime, "no priority was asked for");
    let recv = r.thread_cpu.iter().filter(|t| t.name.starts_with("recv-"));
    assert_eq!(recv.count(), 3);
}

#[test]
fn memcached_against_the_reference_echo_server_is_answered_exactly_once() {
    let server = RefServer::start_echo(EchoProtocol::Memcached, false, None).unwrap();
    let mut cfg = short(server.addr(), 2000.0, 4);
    // gets (misses) and sets, both matched by position.
    cfg.protocol = SimpleProtocol::Memcached(KvSpec::named("etc", 30, 200, 0.9, 1000).unwrap());
    let r = simple::run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
}

#[test]
fn a_dropped_reply_is_counted_missing() {
    // One connection: its request 5 goes unanswered.
    let (addr, dropped) = planted_rpc_server(|id| if id == 5 { Act::Drop } else { Act::Echo });
    let r = simple::run(&short(addr, 1000.0, 1)).unwrap();
    assert!(r.sent_total > 5, "sent {}", r.sent_total);
    assert_eq!(dropped.load(Ordering::Relaxed), 1);
    assert_eq!(r.errors.missing, 1, "{:?}", r.errors);
    assert_eq!(r.errors.bad_reply, 0);
    assert_eq!(r.received_total, r.sent_total - 1);
}

#[test]
fn a_reply_to_an_unknown_id_is_bad_and_its_request_missing() {
    let (addr, _) = planted_rpc_server(|id| match id {
        7 => Act::As(1_000_000),
        _ => Act::Echo,
    });
    let r = simple::run(&short(addr, 1000.0, 1)).unwrap();
    assert!(r.sent_total > 7);
    assert_eq!(r.errors.bad_reply, 1, "{:?}", r.errors);
    assert_eq!(r.errors.missing, 1);
    assert_eq!(r.errors.out_of_order, 0);
    assert_eq!(r.received_total, r.sent_total - 1);
}

#[test]
fn a_swapped_pair_counts_once_as_out_of_order_and_is_answered() {
    let (addr, _) = planted_rpc_server(|id| match id {
        10 => Act::Hold,
        11 => Act::ThenHeld,
        _ => Act::Echo,
    });
    let r = simple::run(&short(addr, 1000.0, 1)).unwrap();
    assert!(r.sent_total > 11);
    assert_eq!(r.errors.out_of_order, 1, "{:?}", r.errors);
    assert_eq!((r.errors.missing, r.errors.bad_reply), (0, 0));
    assert_eq!(r.received_total, r.sent_total);
}

/// memcached stand-in: every `get` is a miss (`END`), except the 4th get of
/// each connection, answered with a value under the wrong key.
fn tiny_memcached() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let mut lines = BufReader::new(s);
                let mut line = String::new();
                let mut n = 0;
                while lines.read_line(&mut line).unwrap_or(0) > 0 {
                    assert!(line.starts_with("get "), "only gets: {line}");
                    n += 1;
                    let reply: &[u8] = if n == 4 {
                        b"VALUE nosuchkey 0 1\r\nx\r\nEND\r\n"
                    } else {
                        b"END\r\n"
                    };
                    if w.write_all(reply).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    addr
}

#[test]
fn memcached_replies_match_by_position_and_a_wrong_key_is_bad() {
    let addr = tiny_memcached();
    let mut cfg = short(addr, 1000.0, 2);
    let spec = KvSpec::named("sphinx-ro", 30, 200, 1.0, 1000).unwrap();
    cfg.protocol = SimpleProtocol::Memcached(spec);
    let r = simple::run(&cfg).unwrap();
    // Both connections get far more than 4 requests at 500 req/s each over 0.5 s.
    assert!(r.sent_total > 100, "sent {}", r.sent_total);
    assert_eq!(r.errors.bad_reply, 2, "{:?}", r.errors);
    assert_eq!(r.errors.missing, 0);
    assert_eq!(r.received_total, r.sent_total - 2);
}

/// HTTP stand-in: `200 OK` with a 2-byte body to every request, counted.
fn tiny_http() -> (SocketAddr, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let served = Arc::new(AtomicU64::new(0));
    let sv = served.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let sv = sv.clone();
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let mut lines = BufReader::new(s);
                let mut line = String::new();
                while lines.read_line(&mut line).unwrap_or(0) > 0 {
                    if line == "\r\n" {
                        sv.fetch_add(1, Ordering::Relaxed);
                        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if w.write_all(reply).is_err() {
                            return;
                        }
                    }
                    line.clear();
                }
            });
        }
    });
    (addr, served)
}

#[test]
fn http_gets_are_answered_exactly_once() {
    let (addr, served) = tiny_http();
    let mut cfg = short(addr, 1000.0, 4);
    cfg.threads = 2;
    cfg.protocol = SimpleProtocol::Http("/index.html".into());
    let r = simple::run(&cfg).unwrap();
    assert_eq!(r.errors, Default::default(), "{:?}", r.errors);
    assert!(r.sent > 0);
    assert_eq!(r.received, r.sent);
    assert_eq!(r.received_total, r.sent_total);
    assert_eq!(served.load(Ordering::Relaxed), r.sent_total);
}

#[test]
fn bad_settings_are_refused_naming_the_flag() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 1000.0, 2);
    cfg.threads = 3;
    let e = simple::run(&cfg).unwrap_err().to_string();
    assert!(e.contains("--threads 3"), "{e}");
    cfg.threads = 1;
    cfg.receivers = 0;
    let e = simple::run(&cfg).unwrap_err().to_string();
    assert!(e.contains("--receivers 0"), "{e}");
    cfg.receivers = 1;
    cfg.recv_rt_priority = Some(100);
    let e = simple::run(&cfg).unwrap_err().to_string();
    assert!(e.contains("--recv-rt-priority 100"), "{e}");
    cfg.recv_rt_priority = None;
    cfg.rate = 0.0;
    let e = simple::run(&cfg).unwrap_err().to_string();
    assert!(e.contains("--rate"), "{e}");
}

/// Each reply takes at least the service time the request asked of the
/// emulating reference server, so no latency can be below it: a check of the
/// recorded values, not of timing (a histogram that clamped or dropped values
/// reads near zero here).
#[test]
fn latencies_are_at_least_the_service_time_asked() {
    let server = RefServer::start(RefMode::Emulate).unwrap();
    let mut cfg = short(server.addr(), 200.0, 4);
    cfg.protocol = SimpleProtocol::Rpc(RpcService::Fixed(1_000_000));
    let r = simple::run(&cfg).unwrap();
    // The emulating server counts a reply after writing it, so its count may
    // lag the client's last read: exactly-once is checked on the client side.
    assert_clean_and_kernel_stamped(&r, r.received_total);
    assert!(r.latency.p50_us >= 1000.0, "p50 {} µs", r.latency.p50_us);
    assert!(r.raw_latency.p50_us >= 1000.0, "{}", r.raw_latency.p50_us);
}

/// The last CPU this process may use (the cross-check puts both client
/// threads on one CPU; this is the case cooperation is for).
fn one_cpu() -> u32 {
    *skq_sys::cpu::allowed_cpus()
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
    let r = simple::run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
    assert_eq!(r.lend_guard_us, Some(60.0));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["lend_guard_us"], 60.0);
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
    let r = simple::run(&cfg).unwrap();
    assert_clean_and_kernel_stamped(&r, server.served());
    assert_eq!(r.lend_guard_us, Some(50.0));
}

#[test]
fn without_cooperation_no_read_is_held_back() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 3000.0, 8);
    cfg.cpus = vec![one_cpu()];
    cfg.sharing = RecvSharing::Free;
    let r = simple::run(&cfg).unwrap();
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
    let r = simple::run(&cfg).unwrap();
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
    let e = simple::run(&cfg).unwrap_err().to_string();
    assert!(e.contains("--guard-us 1000000"), "{e}");
}
