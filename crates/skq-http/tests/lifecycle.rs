//! Resources come back: after 10,000 short-lived connections (each one
//! request with `Connection: close`, some cut off mid-request), the
//! server's open file descriptors are back to their count before, every
//! connection is accounted closed, and resident memory has not grown past
//! a small allowance (allocator caches), on each driver kind.
//! Its own test binary, so no other test's sockets are counted.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{start, Root};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One short-lived connection: a full request, or (every 10th) half a
/// request and a hang-up.
fn short_lived(addr: SocketAddr, i: usize) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    if i % 10 == 9 {
        s.write_all(b"GET /index.html HTTP/1.1\r\nHo").unwrap();
        return;
    }
    s.write_all(b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    assert!(reply.starts_with(b"HTTP/1.1 200 OK"), "connection {i}");
}

fn run(addr: SocketAddr, n: usize) {
    let threads = 4;
    std::thread::scope(|sc| {
        for t in 0..threads {
            sc.spawn(move || {
                for i in (t..n).step_by(threads) {
                    short_lived(addr, i);
                }
            });
        }
    });
}

#[test]
fn fds_and_memory_return_to_baseline_after_10000_short_connections() {
    let root = Root::new("lifecycle");
    for mode in ["hybrid", "epoll-1to1", "epoll-shared", "tokio"] {
        let (server, _) = start(&root.www, mode);
        let addr = server.local_addr();
        // Warm up: thread stacks, connection table, allocator arenas.
        run(addr, 500);
        let wait_closed = |want: u64| {
            let deadline = Instant::now() + Duration::from_secs(30);
            while server.stats().closed < want && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            server.stats()
        };
        let warm = wait_closed(500);
        assert_eq!(warm.open, 0, "{mode}");
        let fds = open_fds();
        let rss = rss_kib();
        run(addr, 10_000);
        let after = wait_closed(10_500);
        assert_eq!(after.accepted, 10_500, "{mode}");
        assert_eq!(after.closed, 10_500, "{mode}");
        assert_eq!(after.open, 0, "{mode}");
        assert_eq!(after.aborted - warm.aborted, 1000, "{mode}: the hang-ups");
        assert_eq!(open_fds(), fds, "{mode}: descriptors leaked");
        let grown = rss_kib().saturating_sub(rss);
        assert!(
            grown < 16 * 1024,
            "{mode}: resident memory grew by {grown} KiB"
        );
        server.shutdown();
    }
}
