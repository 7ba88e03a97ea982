//! The built-in reference server for `--validate` and `--capacity`: an
//! in-process skq RPC server on loopback with ONE worker serving FCFS.
//!
//! **Emulated service without drift.** A receiver thread takes each request's
//! arrival time from the kernel's receive timestamp (`SO_TIMESTAMPNS`, so its
//! own wake-up delay does not count) and keeps a virtual busy-until clock:
//! `start = max(arrival, busy_until)`, `finish = start + S`,
//! `busy_until = finish`. A sender thread sleeps until each `finish` with an
//! absolute `clock_nanosleep` (timer slack 1 ns) and writes the reply. Because
//! the next job's start comes from the virtual clock and not from when the
//! sender woke up, sleep overshoot (~40–80 µs on the dev VMs, BRIEF §8) delays
//! individual replies but never accumulates into the queue: the server is an
//! exact FCFS single server with service times `S`, plus a small independent
//! reply delay, which the sender shrinks by sleeping until 150 µs before
//! `finish` and spinning the rest. Replies report the delivered service `S`.
//!
//! In [`RefMode::Echo`] the receiver answers at once (zero service) and
//! busy-polls epoll while requests keep coming (blocking after 200 µs of
//! silence). [`RefMode::EchoBusy`] never blocks: it costs a whole CPU, and it
//! is what `--capacity` measures against on a CPU of its own, so that no
//! generator write ever pays for waking it.
//!
//! The echo modes also speak the memcached text protocol and HTTP/1.1
//! ([`RefServer::start_echo`]), for `--capacity --protocol memcached|http`:
//! every `get` misses (`END`), every `set` is `STORED`, every HTTP request
//! gets a fixed two-byte `200 OK`. Anything else closes the connection.

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use skq_proto::wire::{self, Header, HEADER_LEN};

use skq_sys::epoll::{self, Poller};
use skq_sys::{cpu, net};

/// The protocol an echo server speaks (the emulating server speaks RPC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EchoProtocol {
    /// skq RPC (`skq_proto::wire`).
    Rpc,
    /// memcached text protocol: `get` (a miss) and `set`.
    Memcached,
    /// HTTP/1.1 requests without a body.
    Http,
}

/// The reply an [`EchoProtocol::Http`] server sends to every request.
const HTTP_REPLY: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// A request the echo server does not understand (it closes the connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed request")
    }
}

impl std::error::Error for Malformed {}

/// Answers the request at the front of `buf` into `out`: `Ok(Some(n))`
/// consumed `n` bytes, `Ok(None)` needs more input, `Err` is a malformed
/// request (the connection is closed).
pub fn echo_one(
    proto: EchoProtocol,
    buf: &[u8],
    out: &mut Vec<u8>,
) -> Result<Option<usize>, Malformed> {
    let line_end = |b: &[u8]| b.windows(2).position(|w| w == b"\r\n");
    match proto {
        EchoProtocol::Rpc => match wire::decode_request(buf) {
            Ok(Some(h)) => {
                h.reply(0).encode(out);
                Ok(Some(h.frame_len()))
            }
            Ok(None) => Ok(None),
            Err(_) => Err(Malformed),
        },
        EchoProtocol::Memcached => {
            let Some(eol) = line_end(buf) else {
                return if buf.len() > 2048 {
                    Err(Malformed)
                } else {
                    Ok(None)
                };
            };
            let line = &buf[..eol];
            if line.starts_with(b"get ") {
                out.extend_from_slice(b"END\r\n");
                return Ok(Some(eol + 2));
            }
            if let Some(rest) = line.strip_prefix(b"set ") {
                let bytes = std::str::from_utf8(rest)
                    .ok()
                    .and_then(|r| r.split_ascii_whitespace().nth(3))
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|&n| n <= 1 << 20)
                    .ok_or(Malformed)?;
                let total = eol + 2 + bytes + 2;
                if buf.len() < total {
                    return Ok(None);
                }
                if &buf[total - 2..total] != b"\r\n" {
                    return Err(Malformed);
                }
                out.extend_from_slice(b"STORED\r\n");
                return Ok(Some(total));
            }
            Err(Malformed)
        }
        EchoProtocol::Http => match buf.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(p) if buf.starts_with(b"GET ") || buf.starts_with(b"HEAD ") => {
                out.extend_from_slice(HTTP_REPLY);
                Ok(Some(p + 4))
            }
            Some(_) => Err(Malformed),
            None if buf.len() > 16 * 1024 => Err(Malformed),
            None => Ok(None),
        },
    }
}

/// How the reference server serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefMode {
    /// Answer immediately (zero service).
    Echo,
    /// Like `Echo`, but poll without ever blocking.
    EchoBusy,
    /// One FCFS worker emulating each request's `service_ns` exactly.
    Emulate,
}

/// A running reference server; stopped on drop.
pub struct RefServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

struct Job {
    finish: u64,
    stream: Arc<TcpStream>,
    header: Header,
}

const LISTENER: u64 = u64::MAX;
/// How long the echo server keeps polling after the last request.
const ECHO_POLL_NS: u64 = 200_000;
/// The reply thread spins (instead of sleeping) this long before each reply,
/// so the reply leaves at its virtual finish time and not ~50 µs later.
const REPLY_SPIN_NS: u64 = 150_000;

impl RefServer {
    /// Binds 127.0.0.1 on an ephemeral port and starts serving.
    pub fn start(mode: RefMode) -> io::Result<RefServer> {
        RefServer::start_with(mode, None, None)
    }

    /// Like [`RefServer::start`]; with `rt = Some(p)` its threads try to run
    /// at `SCHED_FIFO` priority `p` (silently staying normal if not allowed),
    /// and with `cpu = Some(c)` they are pinned to CPU `c` (an error if the
    /// kernel refuses).
    pub fn start_with(mode: RefMode, rt: Option<i32>, cpu: Option<u32>) -> io::Result<RefServer> {
        RefServer::start_full(mode, EchoProtocol::Rpc, rt, cpu)
    }

    /// An echo server (`busy`: [`RefMode::EchoBusy`], else [`RefMode::Echo`])
    /// speaking `proto`, its thread pinned to `cpu` if given.
    pub fn start_echo(proto: EchoProtocol, busy: bool, cpu: Option<u32>) -> io::Result<RefServer> {
        let mode = if busy {
            RefMode::EchoBusy
        } else {
            RefMode::Echo
        };
        RefServer::start_full(mode, proto, None, cpu)
    }

    fn start_full(
        mode: RefMode,
        proto: EchoProtocol,
        rt: Option<i32>,
        cpu: Option<u32>,
    ) -> io::Result<RefServer> {
        if mode == RefMode::Emulate && proto != EchoProtocol::Rpc {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the emulating reference server speaks RPC only",
            ));
        }
        if let Some(c) = cpu {
            // Fail here, in the caller's thread, rather than silently later.
            let allowed = cpu::allowed_cpus()?;
            if !allowed.contains(&c) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("CPU {c} is not among this process's CPUs {allowed:?}"),
                ));
            }
        }
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::channel::<Job>();
        let mut threads = Vec::new();
        let (st, sv) = (stop.clone(), served.clone());
        threads.push(
            std::thread::Builder::new()
                .name("skq-ref-recv".into())
                .spawn(move || {
                    if let Some(c) = cpu {
                        let _ = cpu::pin_current_thread(c);
                    }
                    receive(listener, mode, proto, tx, st, sv, rt)
                })?,
        );
        if mode == RefMode::Emulate {
            let sv = served.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("skq-ref-send".into())
                    .spawn(move || {
                        if let Some(c) = cpu {
                            let _ = cpu::pin_current_thread(c);
                        }
                        reply(rx, sv, rt)
                    })?,
            );
        }
        Ok(RefServer {
            addr,
            stop,
            served,
            threads,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replies sent so far.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

impl Drop for RefServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Writes all of `buf` to a non-blocking stream, yielding while it is full.
fn write_all(mut s: &TcpStream, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match s.write(buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

struct RConn {
    stream: Arc<TcpStream>,
    buf: Vec<u8>,
}

#[allow(clippy::too_many_arguments)] // one thread's whole world, spelled out
fn receive(
    listener: TcpListener,
    mode: RefMode,
    proto: EchoProtocol,
    tx: mpsc::Sender<Job>,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicU64>,
    rt: Option<i32>,
) {
    if let Some(p) = rt {
        let _ = cpu::set_realtime(p);
    }
    let Ok(mut ep) = Poller::new(256) else { return };
    if ep
        .add(listener.as_raw_fd(), epoll::IN | epoll::RDHUP, LISTENER)
        .is_err()
    {
        return;
    }
    let mut conns: HashMap<u64, RConn> = HashMap::new();
    let mut next_token = 0u64;
    let mut busy_until = 0u64;
    let mut last_activity = 0u64;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(64 * 1024);
    while !stop.load(Ordering::Relaxed) {
        // Echo busy-polls while requests keep coming: a sleeping receiver must
        // be woken by an IPI for every request, which in these VMs costs the
        // *sender* tens of µs per write. After ECHO_POLL_NS of silence it blocks.
        let busy = mode == RefMode::EchoBusy
            || (mode == RefMode::Echo && cpu::monotonic_ns() < last_activity + ECHO_POLL_NS);
        let Ok(events) = ep.wait(Some(if busy { 0 } else { 20_000_000 })) else {
            return;
        };
        let events: Vec<(u64, u32)> = events.collect();
        let now = cpu::monotonic_ns();
        if !events.is_empty() {
            last_activity = now;
        }
        // Offset between the clocks, for converting receive timestamps.
        let mono_minus_real = now.wrapping_sub(cpu::realtime_ns());
        for (token, _) in events {
            if token == LISTENER {
                while let Ok((s, _)) = listener.accept() {
                    if s.set_nonblocking(true).is_err() || s.set_nodelay(true).is_err() {
                        continue;
                    }
                    let _ = net::enable_rx_timestamps(s.as_raw_fd());
                    if ep
                        .add(s.as_raw_fd(), epoll::IN | epoll::RDHUP, next_token)
                        .is_ok()
                    {
                        conns.insert(
                            next_token,
                            RConn {
                                stream: Arc::new(s),
                                buf: Vec::new(),
                            },
                        );
                    }
                    next_token += 1;
                }
                continue;
            }
            let Some(c) = conns.get_mut(&token) else {
                continue;
            };
            let mut closed = false;
            // Arrival = the kernel's receive timestamp of the data, so a late
            // wake-up of this thread does not delay the emulated service start.
            let mut arrival = now;
            loop {
                match net::recv_timestamped(c.stream.as_raw_fd(), &mut chunk) {
                    Ok((0, _)) => {
                        closed = true;
                        break;
                    }
                    Ok((n, stamp)) => {
                        c.buf.extend_from_slice(&chunk[..n]);
                        if let Some(rt) = stamp {
                            // Realtime → monotonic, never later than now.
                            let mono = rt.wrapping_add(mono_minus_real).min(now);
                            arrival = arrival.min(mono);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            let mut pos = 0;
            out.clear();
            if mode != RefMode::Emulate {
                loop {
                    match echo_one(proto, &c.buf[pos..], &mut out) {
                        Ok(Some(n)) => {
                            pos += n;
                            served.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(None) => break,
                        Err(Malformed) => {
                            closed = true;
                            break;
                        }
                    }
                }
            }
            if mode == RefMode::Emulate {
                loop {
                    match wire::decode_request(&c.buf[pos..]) {
                        Ok(Some(h)) => {
                            pos += h.frame_len();
                            let start = arrival.max(busy_until);
                            busy_until = start + h.service_ns as u64;
                            let job = Job {
                                finish: busy_until,
                                stream: c.stream.clone(),
                                header: h,
                            };
                            if tx.send(job).is_err() {
                                return;
                            }
                        }
                        Ok(None) => break,
                        Err(_) => {
                            closed = true;
                            break;
                        }
                    }
                }
            }
            c.buf.drain(..pos);
            if !out.is_empty() && write_all(&c.stream, &out).is_err() {
                closed = true;
            }
            if closed {
                let _ = ep.delete(c.stream.as_raw_fd());
                conns.remove(&token);
            }
        }
    }
}

fn reply(rx: mpsc::Receiver<Job>, served: Arc<AtomicU64>, rt: Option<i32>) {
    let _ = cpu::set_timer_slack(1);
    if let Some(p) = rt {
        let _ = cpu::set_realtime(p);
    }
    let mut b = [0u8; HEADER_LEN];
    while let Ok(job) = rx.recv() {
        cpu::sleep_then_spin_until(job.finish, REPLY_SPIN_NS);
        job.header.reply(job.header.service_ns).write_to(&mut b);
        // A client that went away just loses its reply.
        let _ = write_all(&job.stream, &b);
        served.fetch_add(1, Ordering::Relaxed);
    }
}
