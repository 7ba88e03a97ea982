//! Hostile clients against `skq-rpc` (a separate process; loopback only,
//! bounded in count and time), on every driver. Each attack asserts the
//! server stays up, a good client keeps getting correct replies, and the
//! server's peak RSS (`VmHWM`) grows less than [`RSS_BOUND`]:
//! * frames asking for `service_ns = 0xFFFFFFFF`, pipelined on two
//!   connections (issue 26, defect 5): each gets a refusal, in order, and
//!   no worker is held; a request at the limit is served;
//! * 100,000 pipelined requests whose replies are never read: the server
//!   stops serving that connection at its output ceiling; once the client
//!   reads, every reply arrives, in order;
//! * `--idle-timeout`: a silent connection is closed and counted.

mod common;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;

use common::{Client, Pipelined, ServerProcess};
use skq_proto::wire::{self, Header};

/// Peak RSS growth allowed under each attack (bytes).
const RSS_BOUND: u64 = 32 << 20;

const MODES: [&str; 4] = ["hybrid", "epoll-1to1", "epoll-shared", "tokio"];

/// A `/proc/PID/status` field in bytes.
fn mem(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{field} in /proc status"))
        * 1024
}

fn good_clients() -> Pipelined {
    Pipelined::new(2, 2, 200, Arc::new(|_, s| (s % 20) as u32 * 1_000))
}

#[test]
fn service_above_the_limit_is_refused_and_holds_no_worker_on_every_driver() {
    for mode in MODES {
        let server =
            ServerProcess::spawn(&["--mode", mode, "--workers", "2", "--max-service-us", "2000"]);
        let addr = server.addr;
        let good = std::thread::spawn(move || good_clients().run(addr));
        let mut hostile: Vec<Client> = (0..2).map(|_| Client::connect(addr).unwrap()).collect();
        for c in &mut hostile {
            for id in 0..5 {
                c.send(id, u32::MAX, 0).unwrap();
            }
            // At the limit: served; one nanosecond above: refused.
            c.send(5, 2_000_000, 0).unwrap();
            c.send(6, 2_000_001, 0).unwrap();
        }
        for c in &mut hostile {
            let got: Vec<(u64, bool)> = (0..7)
                .map(|_| {
                    let h = c.recv().unwrap();
                    (h.id, h.refused)
                })
                .collect();
            let want: Vec<(u64, bool)> = (0..7).map(|id| (id, id != 5)).collect();
            assert_eq!(got, want, "{mode}");
        }
        assert_eq!(good.join().unwrap(), Ok(400), "{mode}: the good clients");
        let stats = server.stop();
        assert_eq!(stats["protocol_errors"], 0, "{mode}");
    }
}

#[test]
fn unread_pipelined_replies_hold_bounded_memory_on_every_driver() {
    const N: u64 = 100_000;
    let mut bytes = Vec::with_capacity(N as usize * wire::HEADER_LEN);
    for id in 0..N {
        Header::request(id, 0, 0).encode(&mut bytes);
    }
    for mode in MODES {
        let server = ServerProcess::spawn(&["--mode", mode, "--workers", "2"]);
        let addr = server.addr;
        let mut warm = Client::connect(addr).unwrap();
        warm.send(0, 0, 0).unwrap();
        warm.recv().unwrap();
        let before = mem(server.pid(), "VmRSS");
        let flood = Client::connect(addr).unwrap();
        let mut writer = flood.stream.try_clone().unwrap();
        let payload = bytes.clone();
        // The server stops reading once its output is at the ceiling, so
        // the write finishes only when the replies are read below.
        let sender = std::thread::spawn(move || writer.write_all(&payload));
        let good = std::thread::spawn(move || good_clients().run(addr));
        assert_eq!(good.join().unwrap(), Ok(400), "{mode}: the good clients");
        let growth = mem(server.pid(), "VmHWM").saturating_sub(before);
        eprintln!(
            "{mode}: peak RSS growth {:.1} MiB under an unread pipelined flood",
            growth as f64 / 1048576.0
        );
        assert!(
            growth < RSS_BOUND,
            "{mode}: peak RSS grew {} MiB",
            growth >> 20
        );
        // Now read every reply: all there, in order.
        let mut r = flood.stream;
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 1 << 20];
        let mut next = 0u64;
        while next < N {
            let n = r.read(&mut chunk).unwrap();
            assert!(n > 0, "{mode}: closed after {next} replies");
            buf.extend_from_slice(&chunk[..n]);
            let mut at = 0;
            while let Some(h) = wire::decode_reply(&buf[at..]).unwrap() {
                assert_eq!((h.id, h.refused), (next, false), "{mode}");
                next += 1;
                at += h.frame_len();
            }
            buf.drain(..at);
        }
        sender.join().unwrap().unwrap();
        r.shutdown(Shutdown::Write).unwrap();
        let stats = server.stop();
        assert_eq!(stats["protocol_errors"], 0, "{mode}");
        assert_eq!(stats["aborted"], 0, "{mode}");
    }
}

#[test]
fn the_idle_timeout_closes_silent_connections_and_counts_them() {
    for mode in ["hybrid", "epoll-1to1", "tokio"] {
        let server =
            ServerProcess::spawn(&["--mode", mode, "--workers", "2", "--idle-timeout", "0.3"]);
        let addr = server.addr;
        let mut silent = Client::connect(addr).unwrap();
        let mut once = Client::connect(addr).unwrap();
        once.send(1, 0, 0).unwrap();
        assert_eq!(once.recv().unwrap().id, 1);
        // A client that keeps talking, with gaps well under the limit.
        let mut good = Client::connect(addr).unwrap();
        for id in 0..60 {
            good.send(id, 1_000, 0).unwrap();
            assert_eq!(good.recv().unwrap().id, id);
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(silent.read_until_closed().unwrap().is_empty(), "{mode}");
        assert!(once.read_until_closed().unwrap().is_empty(), "{mode}");
        good.send(60, 0, 0).unwrap();
        assert_eq!(good.recv().unwrap().id, 60);
        let stats = server.stop();
        assert_eq!(stats["timeouts"], 2, "{mode}: {stats}");
    }
}
