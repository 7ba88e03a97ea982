//! Helpers for loopback tests: start a server on a free port, talk to it line by line.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use skq_kv::protocol::Limits;
use skq_kv::server::{Arch, KvMode, Running, ServerConfig};

/// A server config on 127.0.0.1:0.
pub fn config(arch: Arch, workers: usize) -> ServerConfig {
    ServerConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers,
        mode: if arch == Arch::Tpc {
            KvMode::Tpc
        } else {
            KvMode::Shared("shared".parse().unwrap())
        },
        limit_bytes: 64 << 20,
        limits: Limits::default(),
        max_conns: 256,
        pin: false,
        priority: Default::default(),
        batch_workers: Vec::new(),
        sched: Default::default(),
        idle_timeout: None,
        idle_tick: None,
    }
}

/// Starts a server.
pub fn start(arch: Arch, workers: usize) -> Running {
    skq_kv::server::start(config(arch, workers)).expect("server starts")
}

/// A blocking client with a generous timeout (a hang fails the test instead of blocking it).
pub struct Client {
    pub s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Client { s, buf: Vec::new() }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).expect("send");
    }

    /// Reads until the accumulated input ends with `suffix`; returns it all.
    pub fn read_until(&mut self, suffix: &[u8]) -> Vec<u8> {
        let mut chunk = [0u8; 65536];
        while !self.buf.ends_with(suffix) {
            // A blocking read on a socket with a read timeout can end in EINTR
            // (seen when a child process this test spawned exited: the test
            // thread's `recv` returned EINTR in about 1 run in 10 of
            // tests/clients.rs): read again, as `read_exact` does.
            let n = match self.s.read(&mut chunk) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => r.expect("read (timed out?)"),
            };
            assert!(
                n > 0,
                "server closed; got so far: {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
        std::mem::take(&mut self.buf)
    }

    /// Reads exactly `n` bytes.
    pub fn read_exact(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.s.read_exact(&mut v).expect("read_exact");
        v
    }

    /// Sends `req` and checks the reply is exactly `want`.
    pub fn expect(&mut self, req: &[u8], want: &[u8]) {
        self.send(req);
        let got = self.read_exact(want.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "reply to {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Whether the server closed the connection (reads to EOF, discarding data).
    pub fn closed_by_server(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        loop {
            match self.s.read(&mut chunk) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
        }
    }

    /// `stats` as (name, value) pairs.
    pub fn stats(&mut self) -> Vec<(String, String)> {
        self.send(b"stats\r\n");
        let raw = String::from_utf8(self.read_until(b"END\r\n")).unwrap();
        raw.lines()
            .filter_map(|l| l.strip_prefix("STAT "))
            .map(|l| {
                let (k, v) = l.split_once(' ').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    pub fn stat(&mut self, name: &str) -> u64 {
        let stats = self.stats();
        stats
            .iter()
            .find(|(k, _)| k == name)
            .unwrap_or_else(|| panic!("no stat {name}"))
            .1
            .parse()
            .unwrap()
    }
}

/// A server binary started by a test; killed when dropped.
pub struct Process {
    /// The child process.
    pub child: std::process::Child,
    /// The address its first stdout line announced (`listening on ADDR`).
    pub addr: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` (stdout piped) and waits for its `listening on ADDR` line.
pub fn spawn_listening(cmd: &mut std::process::Command, what: &str) -> Process {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: spawn: {e}"));
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{what}: unexpected first line {line:?}"))
        .to_string();
    Process { child, addr }
}

/// A field of `/proc/<pid>/status` (a `kB` figure), in bytes.
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("server alive");
    let line = s
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field}"));
    let kb: u64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kb << 10
}
