//! Loopback tests of the whole generator: behaviour, never timing.
//!
//! * a faulty RPC server that drops, duplicates, reorders and invents replies,
//!   and the checker counting each exactly;
//! * a clean run against the reference echo server: every request answered
//!   exactly once, probes and the high-priority client reported apart;
//! * a sender deliberately stalled by the test hook: the lateness check
//!   fails, and with short pauses the read-lag check too;
//! * memcached against a tiny in-test cache, including a wrong-key reply.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use skq_load::protocol::Protocol;
use skq_load::refserver::{RefMode, RefServer};
use skq_load::{Client, LoadConfig, ProtocolConfig, ScheduleKind, Stall};
use skq_proto::wire::{self, Header, HEADER_LEN};
use skq_proto::workload::{ServiceSpec, Workload};

fn short(addr: SocketAddr, rate: f64, conns: usize) -> LoadConfig {
    let mut c = LoadConfig::new(addr, rate);
    c.connections = conns;
    c.duration = Duration::from_millis(600);
    c.warmup = Duration::from_millis(200);
    // Generous: a run ends as soon as nothing is outstanding, so only the
    // tests with deliberately dropped replies wait this long.
    c.drain = Duration::from_secs(3);
    c.service = ServiceSpec::new(Workload::Fixed, 0.0);
    c.schedule = ScheduleKind::Fixed;
    c
}

/// Serves each connection on its own thread: `answer` writes into `out`
/// what a request gets back, with the connection's own state (`S::default()`
/// at accept).
fn rpc_server<S: Default + 'static>(answer: fn(Header, &mut S, &mut Vec<u8>)) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut state = S::default();
                let mut frame = [0u8; HEADER_LEN];
                while s.read_exact(&mut frame).is_ok() {
                    let h = wire::decode_request(&frame).unwrap().unwrap();
                    let mut out = Vec::new();
                    answer(h, &mut state, &mut out);
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Misbehaves on chosen ids: 3 → also a reply for an id never sent;
/// 5 → dropped; 7 → answered twice; 10 and 11 → answered as 11, 10.
fn faulty_rpc_server() -> SocketAddr {
    rpc_server(|h, held: &mut Option<Header>, out| match h.id {
        3 => {
            h.reply(0).encode(out);
            Header::request(1_000_000, 0, 0).reply(0).encode(out);
        }
        5 => {}
        7 => {
            h.reply(0).encode(out);
            h.reply(0).encode(out);
        }
        10 => *held = Some(h),
        11 => {
            h.reply(0).encode(out);
            held.take().unwrap().reply(0).encode(out);
        }
        _ => h.reply(0).encode(out),
    })
}

#[test]
fn checker_counts_each_fault_exactly() {
    let addr = faulty_rpc_server();
    let conns = 4;
    let cfg = short(addr, 400.0, conns); // 100 req/s per connection: ids up to ~80
    let r = skq_load::run(&cfg).unwrap();
    let e = r.errors;
    let n = conns as u64;
    assert_eq!(e.missing, n, "{e:?}");
    assert_eq!(e.duplicate, n, "{e:?}");
    assert_eq!(e.out_of_order, n, "{e:?}");
    assert_eq!(e.bad_reply, n, "{e:?}");
    assert_eq!(e.connection_failures, 0);
    assert!(!r.checks.pass);
    assert!(r.checks.notes.iter().any(|l| l.starts_with("correctness")));
}

#[test]
fn clean_run_answers_everything_once_and_reports_roles_apart() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 2000.0, 8);
    cfg.threads = 2;
    cfg.schedule = ScheduleKind::Poisson;
    cfg.probe = Client {
        connections: 2,
        rate: 200.0,
    };
    cfg.high_priority.rate = 100.0;
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!(r.sent > 0);
    assert_eq!(r.received, r.sent, "every measured request answered once");
    assert_eq!(r.latency.count, r.sent);
    assert!(
        r.latency.p50.ci_low <= r.latency.p50.value && r.latency.p50.value <= r.latency.p50.ci_high
    );
    assert!(r.latency.p99.value >= r.raw_latency.p99.value * 0.999);
    let probe = r.probe_latency.as_ref().expect("probes enabled");
    let high = r
        .high_priority_latency
        .as_ref()
        .expect("high-priority client enabled");
    assert!(probe.count > 0 && high.count > 0);
    assert_eq!(r.meta.threads, 2);
    assert_eq!(r.measured_service_us, Some(0.0));
    assert_eq!(r.requested_service_us, Some(0.0));
    // Every read is timed against the kernel's receive stamp.
    assert!(r.checks.read_lag_p99_us.is_some(), "{:?}", r.checks.notes);
    // The JSON schema round-trips.
    let json = serde_json::to_string(&r).unwrap();
    let back: skq_report::result::PointResult = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (back.sent, back.errors, back.checks.pass),
        (r.sent, r.errors, r.checks.pass)
    );
}

#[test]
fn the_service_asked_for_is_reported_beside_the_service_delivered() {
    // The reference server's emulating worker reports exactly the service
    // each request asked for, so the two means agree to the bit.
    let server = RefServer::start(RefMode::Emulate).unwrap();
    let mut cfg = short(server.addr(), 400.0, 4);
    cfg.service = ServiceSpec::new(Workload::Exponential, 100_000.0); // 100 µs
    cfg.seed = 7;
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    let asked = r
        .requested_service_us
        .expect("replies report their service");
    assert_eq!(r.measured_service_us, Some(asked));
    assert_eq!(r.service_overshoot_us(), Some(0.0));
    // The mean of what this seed drew: an exponential sample's, not 0 and
    // not the server's.
    assert!(asked > 30.0 && asked < 300.0, "{asked}");
    let text = skq_load::cli::render_summary(&cfg, &r);
    assert!(text.contains("(requested "), "{text}");
}

/// How much more service than asked [`overrunning_rpc_server`] reports (ns).
const OVERRUN_NS: u32 = 250_000;

/// Answers every request at once, reporting [`OVERRUN_NS`] more service
/// than the request asked for: a server whose every sleep overran.
fn overrunning_rpc_server() -> SocketAddr {
    rpc_server(|h, _: &mut (), out| h.reply(h.service_ns + OVERRUN_NS).encode(out))
}

#[test]
fn each_interval_reports_its_service_overshoot_and_the_generators_stalls() {
    let addr = overrunning_rpc_server();
    let mut cfg = short(addr, 1000.0, 4);
    cfg.duration = Duration::from_millis(800);
    cfg.interval = Some(Duration::from_millis(200));
    cfg.service = ServiceSpec::new(Workload::Exponential, 100_000.0);
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(r.intervals.len(), 4, "{:?}", r.intervals);
    let mut stall_ms = 0.0;
    for i in &r.intervals {
        // Every reply overran by exactly 250 µs, in every interval.
        let o = i.service_overshoot_us.expect("replies report service");
        assert!((o - f64::from(OVERRUN_NS) / 1e3).abs() < 1e-6, "{i:?}");
        stall_ms += i
            .generator_stall_ms
            .expect("stalls are counted per interval");
    }
    // The intervals share out at most the stalls of the whole run.
    let lost_ms = r.client_stalls.as_ref().expect("stalls reported").lost_s * 1e3;
    assert!(stall_ms <= lost_ms + 1e-6, "{stall_ms} ms of {lost_ms} ms");
    // Without emulated service there is no overshoot to give.
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 1000.0, 4);
    cfg.interval = Some(Duration::from_millis(200));
    let r = skq_load::run(&cfg).unwrap();
    assert!(!r.intervals.is_empty());
    assert!(
        r.intervals
            .iter()
            .all(|i| i.service_overshoot_us == Some(0.0)),
        "{:?}",
        r.intervals
    );
}

#[test]
fn a_stalled_sender_fails_the_lateness_check() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 2000.0, 4);
    cfg.keeping.stall = Some(Stall {
        every: 20,
        pause: Duration::from_millis(30),
    });
    let r = skq_load::run(&cfg).unwrap();
    assert!(
        !r.checks.lateness_ok,
        "lateness p99 {}",
        r.checks.lateness_p99_us
    );
    assert!(r.checks.lateness_p99_us > 1000.0);
    assert!(!r.checks.pass);
    // The generator's own stalls are its own: taking the machine's stalls
    // out of the lateness leaves them in.
    let own = r.client_stalls.expect("the generator reports its stalls");
    assert!(
        own.own_lateness_p99_us > 1000.0,
        "lateness without the machine's stalls {} us",
        own.own_lateness_p99_us
    );
    assert!(
        r.checks.notes.iter().any(|n| n.starts_with("lateness")),
        "{:?}",
        r.checks.notes
    );
    // The thread reads nothing while it pauses either: the reply to the
    // send before each pause (one in 20 sends) arrives during the pause and
    // waits in the socket until it ends, as its kernel stamp shows. Here
    // the sender falls ever further behind, so the latencies are far longer
    // than that wait and the read-lag check excuses it.
    let lag = r.checks.read_lag_p99_us.expect("reads carry kernel stamps");
    assert!(lag > 1000.0, "read lag p99 {lag} us");
    // Latency counted from the schedule exposes the stall; from the send it hides it.
    assert!(
        r.latency.p50.value > r.raw_latency.p50.value + 1000.0,
        "sched p50 {} raw p50 {}",
        r.latency.p50.value,
        r.raw_latency.p50.value
    );
    assert_eq!(r.errors.total(), 0);
}

#[test]
fn a_generator_that_reads_late_fails_the_read_lag_check() {
    // A 5 ms pause before every 20th read at 2,000 req/s: that read's data
    // has waited in the socket at least 5 ms (5% of reads), and the sends
    // the pauses hold up are late by at most as much, so the latency p99 is
    // not ten times the read lag.
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 2000.0, 4);
    cfg.keeping.read_stall = Some(Stall {
        every: 20,
        pause: Duration::from_millis(5),
    });
    let r = skq_load::run(&cfg).unwrap();
    let lag = r.checks.read_lag_p99_us.expect("reads carry kernel stamps");
    assert!(
        !r.checks.read_lag_ok && lag > 1000.0,
        "read lag p99 {lag} us, latency p99 {} us",
        r.latency.p99.value
    );
    // The pauses are the generator's own: taking the machine's stalls out
    // of the read lag leaves them in.
    let own = r
        .client_stalls
        .and_then(|s| s.own_read_lag_p99_us)
        .expect("the read lag without the machine's stalls is reported");
    assert!(
        own > 1000.0 && own <= lag,
        "read lag p99 without stalls {own} us, with {lag} us"
    );
    assert!(!r.checks.pass);
    assert!(
        r.checks.notes.iter().any(|n| n.starts_with("read lag")),
        "{:?}",
        r.checks.notes
    );
    assert_eq!(r.errors.total(), 0);
}

#[test]
fn many_ready_connections_at_a_high_rate_are_all_answered_once() {
    // 256 connections at 60,000 req/s: polls return many ready sockets and
    // sends fall due while the loop works through them, so it keeps events
    // in hand across rounds. Whatever the timing, every request is answered
    // exactly once and in order.
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 60_000.0, 256);
    cfg.schedule = ScheduleKind::Poisson;
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!(r.sent > 10_000, "sent {}", r.sent);
    assert_eq!(r.received, r.sent, "every measured request answered once");
    assert_eq!(r.latency.count, r.sent);
}

#[test]
fn without_read_stamps_reads_are_not_judged() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 2000.0, 4);
    cfg.keeping.read_stamps = false;
    // Reads held up as in the test above would fail the check if it ran.
    cfg.keeping.read_stall = Some(Stall {
        every: 20,
        pause: Duration::from_millis(5),
    });
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(r.received, r.sent);
    assert_eq!(r.checks.read_lag_p99_us, None);
    assert!(r.checks.read_lag_ok);
}

/// A minimal in-order memcached: `get` and `set`; answers the get of key
/// `wrong` with a VALUE for a different key.
fn tiny_memcached(wrong: &'static str) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let store = std::sync::Arc::new(std::sync::Mutex::new(HashMap::<String, Vec<u8>>::new()));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let store = store.clone();
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                let mut line = String::new();
                loop {
                    line.clear();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let parts: Vec<&str> = line.split_whitespace().collect();
                    let out = match parts.as_slice() {
                        ["get", key] => match store.lock().unwrap().get(*key) {
                            Some(v) => {
                                let name = if *key == wrong { "zzz" } else { key };
                                let mut o = format!("VALUE {name} 0 {}\r\n", v.len()).into_bytes();
                                o.extend_from_slice(v);
                                o.extend_from_slice(b"\r\nEND\r\n");
                                o
                            }
                            None => b"END\r\n".to_vec(),
                        },
                        ["set", key, _, _, len] => {
                            let mut v = vec![0; len.parse::<usize>().unwrap() + 2];
                            r.read_exact(&mut v).unwrap();
                            v.truncate(v.len() - 2);
                            store.lock().unwrap().insert(key.to_string(), v);
                            b"STORED\r\n".to_vec()
                        }
                        _ => b"ERROR\r\n".to_vec(),
                    };
                    if w.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn memcached_replies_are_checked_against_the_head_request() {
    // Keyspace of one: every get asks for key 0, which the server answers wrongly.
    let kv = skq_load::protocol::memcached::KvSpec::named("custom", 30, 100, 0.5, 1).unwrap();
    let mut key0 = Vec::new();
    kv.write_key(0, &mut key0);
    let addr = tiny_memcached(String::from_utf8(key0).unwrap().leak());
    let mut cfg = short(addr, 500.0, 2);
    cfg.protocol = ProtocolConfig::Memcached { kv, prefill: true };
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(
        r.errors.missing
            + r.errors.duplicate
            + r.errors.out_of_order
            + r.errors.connection_failures,
        0
    );
    assert!(
        r.errors.bad_reply > 0,
        "wrong-key VALUE lines must be flagged"
    );
    assert!(r.received > 0, "sets are answered STORED and counted");

    // The same against an honest server: clean.
    let addr = tiny_memcached("never");
    let mut cfg = short(addr, 500.0, 2);
    cfg.protocol = ProtocolConfig::Memcached {
        kv: skq_load::protocol::memcached::KvSpec::named("sphinx-ro", 30, 200, 1.0, 100).unwrap(),
        prefill: true,
    };
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(r.received, r.sent);
    assert!(
        r.checks.notes.iter().all(|n| !n.contains("missed")),
        "prefill makes every get hit: {:?}",
        r.checks.notes
    );
}

#[test]
fn a_closed_connection_is_a_failure_and_its_requests_are_missing() {
    // Accepts, reads one request, then closes.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut f = [0u8; HEADER_LEN];
            let _ = s.read_exact(&mut f);
            drop(s);
        }
    });
    let cfg = short(addr, 200.0, 2);
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.connection_failures, 2);
    assert!(r.errors.missing >= 2);
    assert!(!r.checks.pass);
}

#[test]
fn bad_configuration_names_the_flag() {
    let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut cfg = LoadConfig::new(addr, -1.0);
    assert!(skq_load::run(&cfg)
        .unwrap_err()
        .to_string()
        .contains("--rate"));
    cfg.rate = 10.0;
    cfg.connections = 0;
    assert!(skq_load::run(&cfg)
        .unwrap_err()
        .to_string()
        .contains("--connections"));
}

#[test]
fn trace_schedule_and_hdr_log() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let dir = std::env::temp_dir().join(format!("skq-load-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.txt");
    // A bursty trace: 10 sends 10 us apart, then a 900 us pause.
    let text: String = (0..10).map(|i| format!("{}\n", i * 10)).collect();
    std::fs::write(&trace, text).unwrap();
    let log = dir.join("lat.hlog");
    let mut cfg = short(server.addr(), 1000.0, 4);
    cfg.schedule = ScheduleKind::Trace(trace);
    cfg.output.hdr_log = Some(log.clone());
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert_eq!(
        r.checks.ad_statistic, None,
        "AD applies to Poisson schedules only"
    );
    // The trace is scaled to 1000 req/s: 600 ms measured -> 600 sends (+- edges).
    assert!((550..=650).contains(&r.sent), "sent {}", r.sent);
    let bytes = std::fs::read(&log).unwrap();
    let hists: Vec<_> = hdrhistogram::serialization::interval_log::IntervalLogIterator::new(&bytes)
        .filter_map(|e| match e {
            Ok(hdrhistogram::serialization::interval_log::LogEntry::Interval(h)) => Some(h),
            _ => None,
        })
        .collect();
    assert_eq!(hists.len(), 1, "one 1 s interval for a 0.6 s run");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_hdr_log_carries_each_class_of_connection_under_its_tag() {
    use base64::Engine as _;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    use hdrhistogram::serialization::Deserializer;
    let server = RefServer::start(RefMode::Echo).unwrap();
    let dir = std::env::temp_dir().join(format!("skq-load-tags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("lat.hlog");
    let mut cfg = short(server.addr(), 2000.0, 4);
    cfg.probe = Client {
        connections: 2,
        rate: 200.0,
    };
    cfg.high_priority.rate = 100.0;
    cfg.output.hdr_log = Some(log.clone());
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    let bytes = std::fs::read(&log).unwrap();
    let mut de = Deserializer::new();
    let mut counts: std::collections::BTreeMap<String, u64> = Default::default();
    for e in IntervalLogIterator::new(&bytes) {
        let LogEntry::Interval(ilh) = e.unwrap() else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(ilh.encoded_histogram())
            .unwrap();
        let h: hdrhistogram::Histogram<u64> = de.deserialize(&mut &raw[..]).unwrap();
        let tag = ilh.tag().map_or("", |t| t.as_str()).to_string();
        *counts.entry(tag).or_default() += h.len();
    }
    let probe = r.probe_latency.as_ref().unwrap().count;
    let high = r.high_priority_latency.as_ref().unwrap().count;
    assert!(probe > 0 && high > 0);
    // Untagged: the load connections; no best-effort client ran, so no batch tag.
    let want: std::collections::BTreeMap<String, u64> = [
        (String::new(), r.latency.count),
        ("probe".into(), probe),
        ("high".into(), high),
    ]
    .into();
    assert_eq!(counts, want);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn http_keep_alive_gets() {
    // Answers each GET on a connection in order; the 5th request gets a 404.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            std::thread::spawn(move || {
                let mut w = s.try_clone().unwrap();
                let mut r = BufReader::new(s);
                let mut n = 0;
                let mut line = String::new();
                loop {
                    // Read one request head.
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    n += 1;
                    let reply: &[u8] = if n == 5 {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
                    };
                    if w.write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let mut cfg = short(addr, 400.0, 2);
    cfg.protocol = Protocol::Http.into();
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(
        r.errors.bad_reply, 2,
        "one 404 per connection: {:?}",
        r.errors
    );
    assert_eq!(
        r.errors.missing
            + r.errors.duplicate
            + r.errors.out_of_order
            + r.errors.connection_failures,
        0
    );
    assert!(r.received > 0);
}

#[test]
fn a_seed_fixes_the_requests_whatever_the_timing() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 1000.0, 4);
    cfg.schedule = ScheduleKind::Poisson;
    cfg.service = ServiceSpec::new(Workload::Exponential, 1000.0);
    cfg.output.keep_requests = true;
    cfg.seed = 77;
    let key = |c: &skq_load::engine::RunCost| {
        let mut v: Vec<(u64, u32)> = c.requests.iter().map(|r| (r.sched, r.service_ns)).collect();
        v.sort_unstable();
        // Relative to the first send: runs start at different clock times.
        let t0 = v[0].0;
        v.iter().map(|&(t, s)| (t - t0, s)).collect::<Vec<_>>()
    };
    let (_, a) = skq_load::engine::run_with_cost(&cfg).unwrap();
    let (_, b) = skq_load::engine::run_with_cost(&cfg).unwrap();
    assert!(!a.requests.is_empty());
    assert_eq!(key(&a), key(&b));
    cfg.seed = 78;
    let (_, c) = skq_load::engine::run_with_cost(&cfg).unwrap();
    assert_ne!(key(&a), key(&c));
}

#[test]
fn pinned_generator_threads_run_or_say_why_not() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let allowed = skq_sys::cpu::allowed_cpus().unwrap();
    let mut cfg = short(server.addr(), 1000.0, 4);
    cfg.threads = 2;
    cfg.keeping.cpus = vec![allowed[0]];
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!(!r.checks.notes.iter().any(|n| n.contains("--cpus")));
    // A CPU this process may not use: the run still completes, unpinned, and
    // says so instead of failing silently or aborting.
    let outside = (0..1000).find(|c| !allowed.contains(c)).unwrap();
    cfg.keeping.cpus = vec![outside];
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
    assert!(
        r.checks.notes.iter().any(|n| n.contains("--cpus refused")),
        "{:?}",
        r.checks.notes
    );
}

#[test]
fn a_generator_behind_schedule_still_draws_a_poisson_schedule() {
    // Stalls make the generator fall behind, so it sends in bursts that it
    // groups into one write per connection. The scheduled gaps it samples must
    // still be those of the schedule (taken in schedule order), which is
    // Poisson: with a fixed seed the sampled gaps are fixed, and they pass.
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 20_000.0, 16);
    cfg.schedule = ScheduleKind::Poisson;
    cfg.duration = Duration::from_millis(800);
    cfg.seed = 7;
    cfg.keeping.stall = Some(Stall {
        every: 200,
        pause: Duration::from_millis(3),
    });
    let r = skq_load::run(&cfg).unwrap();
    assert!(!r.checks.lateness_ok, "the stalls made it late");
    let a2 = r.checks.ad_scheduled.expect("Poisson schedule");
    assert!(
        a2 <= skq_load::checks::AD_CRITICAL_5PCT,
        "scheduled gaps A2 {a2}"
    );
    assert_eq!(r.errors.total(), 0, "{:?}", r.errors);
}

#[test]
fn a_warm_up_the_host_stalls_ends_the_run_unmeasured_when_asked() {
    let server = RefServer::start(RefMode::Echo).unwrap();
    let mut cfg = short(server.addr(), 2000.0, 4);
    // About 400 sends in the 0.2-s warm-up, one in 20 followed by a 3-ms
    // hold the loop only sees afterwards: some 60 ms lost, 300 ms a second.
    cfg.keeping.host_stall = Some(Stall {
        every: 20,
        pause: Duration::from_millis(3),
    });
    cfg.keeping.abort_if_warmup_stalled_ms_per_s = Some(100.0);
    let e = skq_load::run(&cfg).expect_err("the warm-up lost more than 100 ms a second");
    let w = e
        .downcast_ref::<skq_load::engine::WarmupStalled>()
        .unwrap_or_else(|| panic!("not a WarmupStalled: {e:#}"));
    assert!(w.stalled_ms / w.warmup_s > 100.0, "{w}");
    assert!(w.to_string().starts_with("not measured"), "{w}");
    // Without the limit the same run measures, and the machine's stalls it
    // saw are reported as such.
    cfg.keeping.abort_if_warmup_stalled_ms_per_s = None;
    let r = skq_load::run(&cfg).unwrap();
    assert!(r.received > 0 && r.errors.total() == 0);
    let st = r.client_stalls.expect("stalls reported");
    assert!(st.count > 0 && st.lost_s > 0.03, "{st:?}");
    // A limit the warm-up stays under: measured as usual.
    cfg.keeping.host_stall = None;
    cfg.keeping.abort_if_warmup_stalled_ms_per_s = Some(1000.0);
    let r = skq_load::run(&cfg).unwrap();
    assert_eq!(r.received, r.sent);
    // A warm-up too short to judge is refused.
    cfg.warmup = Duration::from_millis(50);
    let e = format!("{:#}", skq_load::run(&cfg).unwrap_err());
    assert!(e.contains("warm-up of at least 0.1 s"), "{e}");
}
