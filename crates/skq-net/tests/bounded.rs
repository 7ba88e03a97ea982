//! Bounded output and timeouts, on every driver over loopback:
//! * a reply produced in pieces ([`Cx::resume_later`]) is produced only as
//!   fast as the peer reads: with a 48 MiB reply unread, the server has
//!   produced at most the socket buffers plus its ceiling; once read, every
//!   byte is right and the next request's reply follows in order, while
//!   another client is served throughout;
//! * idle, slow-request and non-reading connections are closed by their
//!   timeouts and counted, while a client that keeps talking is served.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use skq_net::{Cx, Driver, Protocol, Resume, Served, Server, ServerConfig, Timeouts};

/// Lines: `big N\n` replies N pattern bytes (in 16 KiB pieces), anything
/// else is echoed.
#[derive(Default)]
struct Big {
    produced: AtomicU64,
}

const PIECE: u64 = 16 * 1024;

fn pattern(at: u64) -> u8 {
    (at % 251) as u8
}

/// Bytes `at..at+n` of the pattern.
fn piece(out: &mut Vec<u8>, at: u64, n: u64) {
    out.extend((at..at + n).map(pattern));
}

struct Session {
    /// (next offset, end) of the big reply being produced.
    big: Option<(u64, u64)>,
}

impl Protocol for Big {
    type Session = Session;

    fn open(&self, _worker: usize) -> Session {
        Session { big: None }
    }

    fn serve(&self, s: &mut Session, input: &[u8], out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Served {
        let Some(end) = input.iter().position(|&b| b == b'\n') else {
            return Served::NeedInput { consumed: 0 };
        };
        let line = &input[..end];
        if let Some(n) = line.strip_prefix(b"big ") {
            let n: u64 = std::str::from_utf8(n).unwrap().parse().unwrap();
            let first = n.min(PIECE);
            piece(out, 0, first);
            self.produced.fetch_add(first, Ordering::Relaxed);
            if first < n {
                s.big = Some((first, n));
                cx.resume_later();
            }
        } else {
            out.extend_from_slice(&input[..=end]);
        }
        Served::Request { consumed: end + 1 }
    }

    fn resume(&self, s: &mut Session, out: &mut Vec<u8>, _cx: &mut Cx<'_>) -> Resume {
        let Some((at, end)) = s.big else {
            return Resume::Done;
        };
        let n = (end - at).min(PIECE);
        piece(out, at, n);
        self.produced.fetch_add(n, Ordering::Relaxed);
        if at + n == end {
            s.big = None;
            Resume::Done
        } else {
            s.big = Some((at + n, end));
            Resume::More
        }
    }

    fn flush_each(&self) -> bool {
        false
    }
}

fn config(driver: Driver) -> ServerConfig {
    ServerConfig::new(driver, 2)
}

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn echo(r: &mut BufReader<TcpStream>, line: &str) {
    r.get_mut().write_all(line.as_bytes()).unwrap();
    let mut got = String::new();
    r.read_line(&mut got).unwrap();
    assert_eq!(got, line);
}

#[test]
fn a_long_reply_is_produced_as_the_peer_reads_on_every_driver() {
    const LEN: u64 = 48 << 20;
    for driver in Driver::ALL {
        let proto = std::sync::Arc::new(Big::default());
        let server = Server::start(&config(driver), proto.clone()).unwrap();
        let mut slow = connect(server.local_addr());
        slow.write_all(format!("big {LEN}\nafter\n").as_bytes())
            .unwrap();
        // Another client is served while the reply waits unread.
        let mut good = BufReader::new(connect(server.local_addr()));
        for i in 0..20 {
            echo(&mut good, &format!("ping {i}\n"));
            std::thread::sleep(Duration::from_millis(10));
        }
        // Production stops at the socket buffers (a few MiB on loopback)
        // plus the ceiling.
        let produced = proto.produced.load(Ordering::Relaxed);
        assert!(
            produced < 16 << 20,
            "{driver}: {produced} bytes produced for a peer that reads nothing"
        );
        // Now read it all: every byte right, then the next reply in order.
        let mut r = BufReader::with_capacity(1 << 20, slow);
        let mut at = 0u64;
        let mut buf = vec![0u8; 1 << 20];
        while at < LEN {
            let want = ((LEN - at) as usize).min(buf.len());
            let n = r.read(&mut buf[..want]).unwrap();
            assert!(n > 0, "{driver}: EOF at {at}");
            for (i, &b) in buf[..n].iter().enumerate() {
                assert_eq!(
                    b,
                    pattern(at + i as u64),
                    "{driver}: byte {}",
                    at + i as u64
                );
            }
            at += n as u64;
        }
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert_eq!(line, "after\n", "{driver}");
        assert_eq!(proto.produced.load(Ordering::Relaxed), LEN, "{driver}");
        echo(&mut good, "last\n");
        let stats = server.shutdown();
        assert_eq!(stats.requests, 2 + 21, "{driver}");
        assert_eq!(stats.timeouts, 0, "{driver}");
    }
}

/// Reads until EOF or reset (what a closed connection gives), within the
/// read timeout; returns the bytes read before it.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("connection not closed: {e}"),
        }
    }
}

#[test]
fn timeouts_close_idle_slow_and_unread_connections_and_count_them_on_every_driver() {
    for driver in Driver::ALL {
        let mut cfg = config(driver);
        let limit = Duration::from_millis(400);
        cfg.timeouts = Timeouts {
            idle: Some(limit),
            request: Some(limit),
            send: Some(limit),
        };
        let proto = std::sync::Arc::new(Big::default());
        let server = Server::start(&cfg, proto.clone()).unwrap();
        let started = Instant::now();
        // Fresh and silent.
        let mut silent = connect(server.local_addr());
        // Served once, then idle.
        let mut idle = BufReader::new(connect(server.local_addr()));
        echo(&mut idle, "once\n");
        // A request trickling in a byte at a time, never finished.
        let mut slow = connect(server.local_addr());
        // Asks for a long reply and never reads it.
        let mut unread = connect(server.local_addr());
        unread
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        unread.write_all(b"big 100000000\n").unwrap();
        // A client that keeps talking is served throughout.
        let mut good = BufReader::new(connect(server.local_addr()));
        let mut i = 0;
        let mut slow_open = true;
        while started.elapsed() < 4 * limit {
            echo(&mut good, &format!("ping {i}\n"));
            if slow_open && slow.write_all(b"x").is_err() {
                slow_open = false;
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(read_to_close(&mut silent).is_empty(), "{driver}: silent");
        assert!(read_to_close(idle.get_mut()).is_empty(), "{driver}: idle");
        assert!(read_to_close(&mut slow).is_empty(), "{driver}: slow");
        let got = read_to_close(&mut unread);
        assert!(
            (got.len() as u64) < 100_000_000,
            "{driver}: the unread reply was cut"
        );
        echo(&mut good, "still here\n");
        let stats = server.shutdown();
        assert_eq!(stats.timeouts, 4, "{driver}: {stats:?}");
        if let Some(sched) = &stats.scheduler {
            assert_eq!(
                sched.ownership_violations, 0,
                "{driver}: the sweep is no owner"
            );
        }
        assert_eq!(stats.requests, 1 + 1 + i + 1, "{driver}");
        assert_eq!(stats.protocol_errors, 0, "{driver}");
    }
}
