//! Hostile clients against the `skq-http` binary (a separate process, so
//! its memory is measured alone; loopback only, bounded in count and time).
//! Each attack asserts the server stays up, a good client keeps getting
//! correct replies, and the server's peak RSS (`VmHWM`) grows less than the
//! stated bound:
//! * 200 connections each asking for a 4 MiB file and reading nothing
//!   (issue 26, defect 3): growth under 64 MiB on every driver; then every
//!   connection reads its reply and every byte is right;
//! * 600 such connections with the server under `prlimit --as=2G` (which
//!   aborted it before): it stays up and a sample of the readers gets
//!   every byte;
//! * idle and slow-header connections (defect 4): closed by the header and
//!   idle timeouts and counted in the stats, while a good client is served.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Peak RSS growth allowed under the slow-reader attack (bytes).
const SLOW_READER_BOUND: u64 = 64 << 20;
const FILE_LEN: usize = 4 << 20;
const SLOW_READERS: usize = 200;

fn file_bytes() -> Vec<u8> {
    (0..FILE_LEN).map(|i| (i % 251) as u8).collect()
}

struct Server {
    child: Child,
    addr: String,
    stats: std::path::PathBuf,
}

impl Server {
    fn start(root: &Path, tag: &str, args: &[&str]) -> Server {
        Server::start_in(
            Command::new(env!("CARGO_BIN_EXE_skq-http")),
            root,
            tag,
            args,
        )
    }

    /// Starts the server as `cmd` (the binary, or a wrapper that execs it).
    fn start_in(mut cmd: Command, root: &Path, tag: &str, args: &[&str]) -> Server {
        let stats = root.join(format!("stats-{tag}.json"));
        let mut child = cmd
            .arg("--root")
            .arg(root.join("www"))
            .args([
                "--addr",
                "127.0.0.1:0",
                "--workers",
                "2",
                "--duration",
                "120",
            ])
            .arg("--stats-json")
            .arg(&stats)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .strip_prefix("listening on ")
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("readiness line {line:?}"))
            .to_string();
        Server { child, addr, stats }
    }

    /// A `/proc/PID/status` field in bytes (`VmRSS`, `VmHWM`).
    fn mem(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc status"));
        kb * 1024
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM; the final statistics.
    fn stop(mut self) -> serde_json::Value {
        skq_sys::process::send_signal(self.child.id(), skq_sys::process::Signal::Term).unwrap();
        assert!(self.child.wait().unwrap().success());
        serde_json::from_str(&std::fs::read_to_string(&self.stats).unwrap()).unwrap()
    }
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// One keep-alive GET of `/a.css` on `s`; asserts the reply is complete and right.
fn good_get(r: &mut BufReader<TcpStream>) {
    r.get_mut()
        .write_all(b"GET /a.css HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8];
        r.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200 OK\r\n"));
    let mut body = vec![0u8; 13];
    r.read_exact(&mut body).unwrap();
    assert_eq!(body, b"p{color:red}\n");
}

fn root(tag: &str) -> std::path::PathBuf {
    let base = std::env::temp_dir().join(format!("skq-http-hostile-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(base.join("www")).unwrap();
    std::fs::write(base.join("www/big.bin"), file_bytes()).unwrap();
    std::fs::write(base.join("www/a.css"), b"p{color:red}\n").unwrap();
    base
}

#[test]
fn slow_readers_of_a_large_file_hold_bounded_memory_on_every_driver() {
    let base = root("slow");
    let want = file_bytes();
    for mode in ["hybrid", "epoll-1to1", "epoll-shared", "tokio"] {
        let mut server = Server::start(&base, mode, &["--mode", mode]);
        let mut good = BufReader::new(connect(&server.addr));
        good_get(&mut good);
        let before = server.mem("VmRSS");
        let mut slow: Vec<TcpStream> = (0..SLOW_READERS)
            .map(|_| {
                let mut s = connect(&server.addr);
                s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
                    .unwrap();
                s
            })
            .collect();
        // Let the server fill every socket it can, serving the good client.
        for _ in 0..50 {
            good_get(&mut good);
            std::thread::sleep(Duration::from_millis(20));
        }
        let growth = server.mem("VmHWM").saturating_sub(before);
        eprintln!(
            "{mode}: peak RSS growth {:.1} MiB with {SLOW_READERS} slow readers",
            growth as f64 / 1048576.0
        );
        assert!(
            growth < SLOW_READER_BOUND,
            "{mode}: peak RSS grew {} MiB with {SLOW_READERS} slow readers",
            growth >> 20
        );
        assert!(server.alive(), "{mode}");
        // Now every reader reads: each gets the whole file, byte for byte.
        for s in &mut slow {
            let mut r = BufReader::with_capacity(256 * 1024, &*s);
            let mut head = String::new();
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{mode}: {head}");
            assert!(head.contains(&format!("Content-Length: {FILE_LEN}\r\n")));
            let mut body = vec![0u8; FILE_LEN];
            r.read_exact(&mut body).unwrap();
            assert!(body == want, "{mode}: a reply's bytes differ");
        }
        good_get(&mut good);
        let stats = server.stop();
        assert_eq!(
            stats["requests"],
            1 + 50 + SLOW_READERS as u64 + 1,
            "{mode}"
        );
        assert_eq!(stats["aborted"], 0, "{mode}");
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn under_an_address_space_cap_600_slow_readers_do_not_abort_the_server() {
    // Issue 26: 600 such connections under a 2 GB cap aborted the server.
    let base = root("cap");
    let want = file_bytes();
    for mode in ["hybrid", "tokio"] {
        let mut cmd = Command::new("prlimit");
        cmd.args(["--as=2147483648", "--"])
            .arg(env!("CARGO_BIN_EXE_skq-http"));
        let mut server = Server::start_in(cmd, &base, &format!("cap-{mode}"), &["--mode", mode]);
        let mut good = BufReader::new(connect(&server.addr));
        let mut slow: Vec<TcpStream> = (0..600)
            .map(|_| {
                let mut s = connect(&server.addr);
                s.write_all(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n")
                    .unwrap();
                s
            })
            .collect();
        for _ in 0..25 {
            good_get(&mut good);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(server.alive(), "{mode}: the server aborted under the cap");
        // A sample of the readers read their whole reply; the rest close.
        for s in slow.iter_mut().step_by(60) {
            let mut r = BufReader::with_capacity(256 * 1024, &*s);
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut b = [0u8];
                r.read_exact(&mut b).unwrap();
                head.push(b[0]);
            }
            let mut body = vec![0u8; FILE_LEN];
            r.read_exact(&mut body).unwrap();
            assert!(body == want, "{mode}: a reply's bytes differ");
        }
        drop(slow);
        good_get(&mut good);
        let stats = server.stop();
        assert_eq!(stats["protocol_errors"], 0, "{mode}");
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Reads until the server closes (EOF or reset); panics if it does not
/// within the read timeout.
fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1024];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(e) => panic!("not closed: {e}"),
        }
    }
}

#[test]
fn idle_and_slow_header_connections_are_closed_and_counted() {
    let base = root("timeouts");
    for mode in ["hybrid", "epoll-1to1", "tokio"] {
        let mut server = Server::start(
            &base,
            mode,
            &[
                "--mode",
                mode,
                "--header-timeout",
                "0.5",
                "--idle-timeout",
                "0.5",
            ],
        );
        let started = Instant::now();
        let mut silent = connect(&server.addr);
        let mut idle = BufReader::new(connect(&server.addr));
        good_get(&mut idle);
        let mut slowloris = connect(&server.addr);
        let mut good = BufReader::new(connect(&server.addr));
        let mut sent = 0;
        let request = b"GET /a.css HTTP/1.1\r\nHost: t\r\nX-Slow: ";
        let mut served = 0;
        while started.elapsed() < Duration::from_secs(2) {
            good_get(&mut good);
            served += 1;
            // One byte of a header every 20 ms, never finished.
            if sent < request.len() && slowloris.write_all(&request[sent..=sent]).is_ok() {
                sent += 1;
            } else if sent < request.len() {
                sent = request.len();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(closed(&mut silent), "{mode}: silent");
        assert!(closed(idle.get_mut()), "{mode}: idle");
        assert!(closed(&mut slowloris), "{mode}: slowloris");
        good_get(&mut good);
        assert!(server.alive());
        let stats = server.stop();
        assert_eq!(stats["timeouts"], 3, "{mode}: {stats}");
        assert_eq!(stats["requests"], 1 + served + 1, "{mode}");
    }
    let _ = std::fs::remove_dir_all(&base);
}
