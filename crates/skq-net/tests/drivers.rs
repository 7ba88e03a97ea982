//! The guarantees of the server layer, checked on every driver over real
//! loopback sockets: exactly-once in-order replies, one worker per
//! connection at a time, bad input closing only its own connection, and the
//! connection limit refusing and then recovering.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skq_net::{Close, Cx, Driver, Protocol, Served, Server, ServerConfig};

/// Lines `<conn> <seq>\n`; the reply echoes the line. `bad\n` is a protocol
/// error. Each request holds its connection's "in service" marker for a
/// moment, so two workers serving one connection at once would be seen.
#[derive(Default)]
struct Echo {
    next: AtomicU64,
    active: Mutex<Vec<Arc<AtomicU32>>>,
    overlaps: AtomicU64,
    closed: AtomicU64,
}

struct Session {
    marker: Arc<AtomicU32>,
}

impl Protocol for Echo {
    type Session = Session;

    fn open(&self, _worker: usize) -> Session {
        let marker = Arc::new(AtomicU32::new(0));
        self.active.lock().unwrap().push(marker.clone());
        self.next.fetch_add(1, Ordering::Relaxed);
        Session { marker }
    }

    fn serve(&self, s: &mut Session, input: &[u8], out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Served {
        let Some(end) = input.iter().position(|&b| b == b'\n') else {
            return Served::NeedInput { consumed: 0 };
        };
        let line = &input[..=end];
        if line == b"bad\n" {
            out.extend_from_slice(b"ERR\n");
            return Served::Close {
                consumed: end + 1,
                why: Close::Protocol,
            };
        }
        if s.marker.fetch_add(1, Ordering::SeqCst) != 0 {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_micros(20));
        s.marker.fetch_sub(1, Ordering::SeqCst);
        cx.record_service(20_000);
        out.extend_from_slice(line);
        Served::Request { consumed: end + 1 }
    }

    fn close(&self, _s: Session, _worker: usize) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    fn busy_message(&self) -> &'static [u8] {
        b"BUSY\n"
    }
}

fn config(driver: Driver, workers: usize) -> ServerConfig {
    ServerConfig::new(driver, workers)
}

fn read_lines(s: &TcpStream, n: usize) -> Vec<String> {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut r = BufReader::new(s);
    (0..n)
        .map(|_| {
            let mut l = String::new();
            r.read_line(&mut l).expect("reply before the timeout");
            l
        })
        .collect()
}

#[test]
fn every_driver_replies_exactly_once_in_order() {
    const CONNS: usize = 24;
    const REQS: usize = 60;
    for driver in Driver::ALL {
        let echo = Arc::new(Echo::default());
        let server = Server::start(&config(driver, 3), echo.clone()).unwrap();
        let addr = server.local_addr();
        let clients: Vec<_> = (0..CONNS)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let mut want = Vec::new();
                    // Pipelined in bursts, split at odd places.
                    let mut bytes = Vec::new();
                    for i in 0..REQS {
                        let l = format!("{c} {i}\n");
                        bytes.extend_from_slice(l.as_bytes());
                        want.push(l);
                    }
                    for chunk in bytes.chunks(37) {
                        s.write_all(chunk).unwrap();
                    }
                    assert_eq!(read_lines(&s, REQS), want, "connection {c} on {driver}");
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        let stats = server.shutdown();
        assert_eq!(stats.requests, (CONNS * REQS) as u64, "{driver}");
        assert_eq!(stats.accepted, CONNS as u64, "{driver}");
        assert_eq!(
            echo.overlaps.load(Ordering::Relaxed),
            0,
            "{driver}: one worker at a time"
        );
        if let Some(s) = stats.scheduler {
            assert_eq!(s.ownership_violations, 0);
        }
    }
}

#[test]
fn bad_input_closes_only_its_connection() {
    for driver in Driver::ALL {
        let echo = Arc::new(Echo::default());
        let server = Server::start(&config(driver, 2), echo.clone()).unwrap();
        let mut good = TcpStream::connect(server.local_addr()).unwrap();
        let mut bad = TcpStream::connect(server.local_addr()).unwrap();
        bad.write_all(b"1 0\nbad\n1 1\n").unwrap();
        bad.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        bad.read_to_end(&mut got).unwrap();
        assert_eq!(
            got, b"1 0\nERR\n",
            "{driver}: served before the error, then closed"
        );
        good.write_all(b"2 0\n").unwrap();
        assert_eq!(read_lines(&good, 1), vec!["2 0\n"], "{driver}");
        drop(good);
        let stats = server.shutdown();
        assert_eq!(stats.protocol_errors, 1, "{driver}");
    }
}

#[test]
fn the_connection_limit_refuses_then_recovers() {
    for driver in Driver::ALL {
        let echo = Arc::new(Echo::default());
        let mut cfg = config(driver, 2);
        cfg.max_conns = 2;
        let server = Server::start(&cfg, echo.clone()).unwrap();
        let addr = server.local_addr();
        let mut a = TcpStream::connect(addr).unwrap();
        let b = TcpStream::connect(addr).unwrap();
        a.write_all(b"a 0\n").unwrap();
        assert_eq!(read_lines(&a, 1), vec!["a 0\n"]);
        (&b).write_all(b"b 0\n").unwrap();
        assert_eq!(read_lines(&b, 1), vec!["b 0\n"]);
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        assert_eq!(got, b"BUSY\n", "{driver}: the third is refused");
        drop(a);
        // Once the server has seen the close, a new connection is served.
        let mut served = false;
        for _ in 0..200 {
            if server.stats().open < 2 {
                let mut d = TcpStream::connect(addr).unwrap();
                d.write_all(b"d 0\n").unwrap();
                assert_eq!(read_lines(&d, 1), vec!["d 0\n"], "{driver}");
                served = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(served, "{driver}: the closed connection was never noticed");
        let stats = server.shutdown();
        assert_eq!(stats.rejected, 1, "{driver}");
    }
}

/// Lines echoed back, recording the threads that opened connections (the
/// runtime's worker threads: sessions open in the connection's task) and
/// the threads that served requests.
#[derive(Default)]
struct Where {
    opened: Mutex<std::collections::HashSet<std::thread::ThreadId>>,
    served: Mutex<std::collections::HashSet<std::thread::ThreadId>>,
}

impl Protocol for Where {
    type Session = ();

    fn open(&self, _worker: usize) {
        let me = std::thread::current().id();
        self.opened.lock().unwrap().insert(me);
    }

    fn serve(&self, _: &mut (), input: &[u8], out: &mut Vec<u8>, _cx: &mut Cx<'_>) -> Served {
        let Some(end) = input.iter().position(|&b| b == b'\n') else {
            return Served::NeedInput { consumed: 0 };
        };
        self.served
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        // A blocking call.
        std::thread::sleep(Duration::from_micros(300));
        out.extend_from_slice(&input[..=end]);
        Served::Request { consumed: end + 1 }
    }
}

#[test]
fn tokio_spawn_blocking_serves_off_the_worker_threads_on_at_most_workers_threads() {
    for (driver, workers) in [
        (Driver::Tokio, 1),
        (Driver::TokioSpawnBlocking, 1),
        (Driver::TokioSpawnBlocking, 2),
    ] {
        let proto = Arc::new(Where::default());
        let server = Server::start(&config(driver, workers), proto.clone()).unwrap();
        let addr = server.local_addr();
        let clients: Vec<_> = (0..6)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let want: Vec<String> = (0..20).map(|i| format!("{c} {i}\n")).collect();
                    s.write_all(want.concat().as_bytes()).unwrap();
                    assert_eq!(read_lines(&s, want.len()), want, "{driver}: in order");
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        let stats = server.shutdown();
        assert_eq!(stats.requests, 120, "{driver}");
        let opened = proto.opened.lock().unwrap().clone();
        let served = proto.served.lock().unwrap().clone();
        assert!(!opened.is_empty() && !served.is_empty());
        if driver == Driver::Tokio {
            // One worker thread: it opens and serves everything itself.
            assert_eq!(opened, served, "{driver}: served inline");
        } else {
            assert!(
                opened.is_disjoint(&served),
                "{driver}: no request served on a runtime worker thread"
            );
            assert!(
                served.len() <= workers,
                "{driver}: {} pool threads served, cap {workers}",
                served.len()
            );
        }
    }
}
