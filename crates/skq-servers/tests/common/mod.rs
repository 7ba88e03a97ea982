//! A small blocking client for the skq RPC protocol, and helpers to run the
//! server as a separate process. Shared by the integration tests.
#![allow(dead_code)] // each test file uses a different subset

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use skq_proto::wire::{self, Header};

/// How long any single blocking read may take before the test fails instead of hanging.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// One blocking connection.
pub struct Client {
    pub stream: TcpStream,
    rbuf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> io::Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        Ok(Client {
            stream,
            rbuf: Vec::new(),
        })
    }

    pub fn send(&mut self, id: u64, service_ns: u32, class: u8) -> io::Result<()> {
        let mut b = Vec::with_capacity(wire::HEADER_LEN);
        Header::request(id, service_ns, class).encode(&mut b);
        self.stream.write_all(&b)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next reply; an error on EOF, timeout or an invalid reply frame.
    pub fn recv(&mut self) -> io::Result<Header> {
        loop {
            match wire::decode_reply(&self.rbuf) {
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
                Ok(Some(h)) => {
                    self.rbuf.drain(..h.frame_len());
                    return Ok(h);
                }
                Ok(None) => {
                    let mut chunk = [0u8; 4096];
                    let n = self.stream.read(&mut chunk)?;
                    if n == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    self.rbuf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }

    /// Reads until the server closes; returns the bytes that arrived first.
    /// A reset counts as closed. Fails on timeout (the server did not close).
    pub fn read_until_closed(&mut self) -> io::Result<Vec<u8>> {
        let mut all = std::mem::take(&mut self.rbuf);
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(all),
                Ok(n) => all.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(all),
                Err(e) => return Err(e),
            }
        }
    }

    /// Closes with a reset (SO_LINGER 0): the peer "vanishes".
    pub fn vanish(self) {
        use std::os::fd::AsRawFd;
        skq_sys::socket::set_linger_zero(self.stream.as_raw_fd()).expect("SO_LINGER");
    }
}

/// Requested service time for request `seq` of connection `conn`.
pub type ServiceFn = dyn Fn(usize, u64) -> u32 + Send + Sync;

/// A closed-loop pipelined run over many connections.
pub struct Pipelined {
    pub conns: usize,
    pub inflight: usize,
    pub per_conn: u64,
    pub service: Arc<ServiceFn>,
    /// Replies received so far, over all connections.
    pub progress: Arc<AtomicU64>,
    /// Connections `0..high_conns` send class-1 (high-priority) requests.
    pub high_conns: usize,
}

/// The "steal storm": the first `heavy` connections ask for 2 ms, the rest
/// for a pseudo-random 0–20 µs.
pub fn storm(heavy: usize) -> Arc<ServiceFn> {
    Arc::new(move |conn, seq| {
        if conn < heavy {
            2_000_000
        } else {
            let x = (conn as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ seq.wrapping_mul(0xBF58_476D_1CE4_E5B9);
            (x % 20_001) as u32
        }
    })
}

impl Pipelined {
    pub fn new(conns: usize, inflight: usize, per_conn: u64, service: Arc<ServiceFn>) -> Self {
        Pipelined {
            conns,
            inflight,
            per_conn,
            service,
            progress: Arc::new(AtomicU64::new(0)),
            high_conns: 0,
        }
    }

    /// Runs every connection on its own thread. Each checks that replies come
    /// back exactly once and in order (id = sequence number), that each reports
    /// at least the requested service, and that nothing follows the last reply.
    /// Returns the number of replies, or the first violation.
    pub fn run(&self, addr: SocketAddr) -> Result<u64, String> {
        let threads: Vec<_> = (0..self.conns)
            .map(|c| {
                let (service, progress) = (self.service.clone(), self.progress.clone());
                let (inflight, per_conn) = (self.inflight as u64, self.per_conn);
                let class = u8::from(c < self.high_conns);
                std::thread::spawn(move || {
                    one_connection(addr, c, class, inflight, per_conn, &*service, &progress)
                })
            })
            .collect();
        let mut total = 0;
        let mut first_err = None;
        for t in threads {
            match t.join().expect("client thread panicked") {
                Ok(n) => total += n,
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        first_err.map_or(Ok(total), Err)
    }
}

fn one_connection(
    addr: SocketAddr,
    c: usize,
    class: u8,
    inflight: u64,
    per_conn: u64,
    service: &ServiceFn,
    progress: &AtomicU64,
) -> Result<u64, String> {
    let ctx = |what: &str, e: io::Error| format!("conn {c}: {what}: {e}");
    let mut cl = Client::connect(addr).map_err(|e| ctx("connect", e))?;
    let mut asked = VecDeque::new();
    let mut next_send = 0u64;
    while next_send < inflight.min(per_conn) {
        let s = service(c, next_send);
        cl.send(next_send, s, class).map_err(|e| ctx("send", e))?;
        asked.push_back(s);
        next_send += 1;
    }
    for expect in 0..per_conn {
        let r = cl.recv().map_err(|e| ctx(&format!("reply {expect}"), e))?;
        if r.id != expect {
            return Err(format!(
                "conn {c}: expected reply id {expect}, got {}",
                r.id
            ));
        }
        let s = asked.pop_front().expect("a request is outstanding");
        if r.service_ns < s {
            return Err(format!(
                "conn {c}: id {expect} asked {s} ns, server reports {} ns",
                r.service_ns
            ));
        }
        progress.fetch_add(1, Ordering::Relaxed);
        if next_send < per_conn {
            let s = service(c, next_send);
            cl.send(next_send, s, class).map_err(|e| ctx("send", e))?;
            asked.push_back(s);
            next_send += 1;
        }
    }
    cl.stream
        .shutdown(Shutdown::Write)
        .map_err(|e| ctx("shutdown", e))?;
    let extra = cl
        .read_until_closed()
        .map_err(|e| ctx("waiting for close", e))?;
    if !extra.is_empty() {
        return Err(format!(
            "conn {c}: {} unexpected bytes after the last reply",
            extra.len()
        ));
    }
    Ok(per_conn)
}

/// Raises this process's soft fd limit to the hard limit.
pub fn raise_fd_limit() {
    skq_sys::limits::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
}

/// The server running as a child process (`skq-rpc`).
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    stats_path: PathBuf,
}

impl ServerProcess {
    /// Starts `skq-rpc` on a free loopback port with `args` and waits for its
    /// `listening on` line.
    pub fn spawn(args: &[&str]) -> ServerProcess {
        let stats_path = std::env::temp_dir().join(format!(
            "skq-rpc-test-{}-{}.json",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&stats_path);
        let mut child = Command::new(env!("CARGO_BIN_EXE_skq-rpc"))
            .args(["--addr", "127.0.0.1:0", "--stats-json"])
            .arg(&stats_path)
            .args(["--duration", "120"]) // never outlive a failed test for long
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn skq-rpc");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .expect("read readiness line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .expect("address");
        ServerProcess {
            child,
            addr,
            stats_path,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Open file descriptors of the server process.
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("read /proc/PID/fd")
            .count()
    }

    /// Polls until the fd count satisfies `ok` (or panics after `limit`).
    pub fn wait_fds(&self, limit: Duration, what: &str, ok: impl Fn(usize) -> bool) -> usize {
        let start = Instant::now();
        loop {
            let n = self.fd_count();
            if ok(n) {
                return n;
            }
            assert!(
                start.elapsed() < limit,
                "{what}: server still has {n} fds after {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, expect exit status 0, return the stats document.
    pub fn stop(mut self) -> serde_json::Value {
        // SAFETY: kill with a valid signal number on our own child's pid.
        let _ = skq_sys::process::send_signal(self.child.id(), skq_sys::process::Signal::Term);
        let status = self.child.wait().expect("wait for server");
        assert!(status.success(), "server exited with {status}");
        let text =
            std::fs::read_to_string(&self.stats_path).expect("stats file written at shutdown");
        let _ = std::fs::remove_file(&self.stats_path);
        serde_json::from_str(&text).expect("stats file is JSON")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static NEXT: AtomicU64 = AtomicU64::new(0);
