//! A deliberately simple second open-loop client, to cross-check `skq load`
//! (issue 27, item 4). It shares no scheduling code with the generator
//! ([`crate::worker`], [`crate::engine`], [`crate::schedule`]) and is built
//! the other way round: blocking sockets and many threads instead of one
//! non-blocking epoll loop. Only the pure encoders/parsers of
//! [`crate::protocol`] (no I/O, no clock) are reused.
//!
//! **Design.**
//! * `connections` blocking TCP connections, each with one *pending* FIFO
//!   (`Mutex<VecDeque<Sent>>`) shared by exactly two threads: the sender
//!   thread that owns the connection and the connection's receiver thread.
//! * `threads` sender threads. Sender `t` owns connections `t, t+T, …` and
//!   draws ONE Poisson stream of rate `rate / T` (exponential gaps from
//!   `rand_distr::Exp`); each request goes to a connection of its subset
//!   chosen uniformly at random. Splitting a Poisson stream at random gives
//!   independent Poisson streams, so every connection sees the same law as
//!   with `skq load`'s per-connection schedules.
//! * Before each send the sender sleeps on an absolute deadline
//!   (`clock_nanosleep(TIMER_ABSTIME)`, timer slack 1 ns) until `spin` (default
//!   2 ms) before the scheduled time, then spins on the clock. **Why:** on
//!   these VMs a thread that sleeps lets its virtual CPU halt and the host
//!   wakes it up to milliseconds late now and then; a spinning thread keeps
//!   its CPU. The cost: at rates above ~500 req/s per sender a sender spins
//!   nearly all the time, so its CPU time is not a cost per request.
//! * The send: stamp the actual send time, push `Sent` on the FIFO, then one
//!   blocking `write_all` (a full socket buffer makes the sender late, which
//!   the lateness histogram shows: nothing is hidden).
//! * One receiver thread per connection does blocking reads (10 ms read
//!   timeout, only to notice the end) and stamps each read's return time as
//!   the reply time of every reply in it.
//!
//! **Matching (exactly once).** A reply naming an id (RPC) answers the FIFO
//! entry with that id, wherever it is (if an id above it was answered
//! before: *out of order*, still an answer); an id not in the FIFO (never
//! sent, or answered already) is a *bad reply*. A reply without id (memcached, HTTP) answers the front;
//! one whose content does not match it is a bad reply that consumes the
//! front. Whatever is left in the FIFOs at the end is *missing*. Because the
//! entry is pushed before the request is written, a reply can never arrive
//! before its entry.
//!
//! **Time.** Latency is recorded from the *scheduled* send time (no
//! coordinated omission) and, beside it, from the actual send time; send
//! lateness = actual − scheduled. Requests scheduled during the warm-up are
//! matched and error-checked but not recorded. The run is bounded: sends stop
//! at `warmup + duration`; receivers leave when their FIFO is empty after
//! the last sender is done, or `drain` after it at the latest; writes time
//! out after `drain`. (So an extra reply that arrives after a connection's
//! last outstanding request was answered at the end goes unseen.)

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use serde::Serialize;
use skq_sys::cpu;

use crate::protocol::http::Http;
use crate::protocol::memcached::{KvSpec, Memcached};
use crate::protocol::rpc::Rpc;
use crate::protocol::{Answers, Codec, Parsed, Request};

/// Service time each RPC request asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RpcService {
    /// Always this many ns.
    Fixed(u32),
    /// Exponential with this mean (ns).
    Exponential(u32),
}

/// Protocol, with its own settings.
#[derive(Clone, Debug, PartialEq)]
pub enum SimpleProtocol {
    /// skq RPC.
    Rpc(RpcService),
    /// memcached get/set with this key-value mix (keys are not prefilled:
    /// run it after `skq load`, which sets them, or accept misses).
    Memcached(KvSpec),
    /// HTTP/1.1 GET of this path.
    Http(String),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct SimpleConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Protocol.
    pub protocol: SimpleProtocol,
    /// Total offered rate, requests/s.
    pub rate: f64,
    /// Connections (each gets one receiver thread).
    pub connections: usize,
    /// Sender threads (1..=connections).
    pub threads: usize,
    /// Measured time.
    pub duration: Duration,
    /// Warm-up before it, not recorded.
    pub warmup: Duration,
    /// Longest wait for replies after the last send.
    pub drain: Duration,
    /// Sleep until this long before each send, then spin.
    pub spin: Duration,
    /// Random seed.
    pub seed: u64,
    /// Pin sender threads round-robin to these CPUs, and receiver threads
    /// round-robin to them too; empty = no pinning.
    pub cpus: Vec<u32>,
}

impl SimpleConfig {
    /// Defaults: 8 connections, 1 sender, 5 s + 1 s warm-up, 2 s drain,
    /// 2 ms spin, RPC with zero service.
    pub fn new(addr: SocketAddr, rate: f64) -> SimpleConfig {
        SimpleConfig {
            addr,
            protocol: SimpleProtocol::Rpc(RpcService::Fixed(0)),
            rate,
            connections: 8,
            threads: 1,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            drain: Duration::from_secs(2),
            spin: Duration::from_millis(2),
            seed: 1,
            cpus: Vec::new(),
        }
    }
}

/// Three percentiles of one histogram, µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
}

/// Correctness counters over the whole run (warm-up included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SimpleErrors {
    /// Requests never answered.
    pub missing: u64,
    /// Replies matching no outstanding request, or not matching the front, and
    /// error replies (a server's refusal, memcached's `SERVER_ERROR`, an HTTP
    /// status outside 2xx): each answers its request, which counts as failed.
    pub bad_reply: u64,
    /// RPC replies answering a request older than one answered before on
    /// the same connection (still answers).
    pub out_of_order: u64,
    /// Connections that failed (write error or timeout, read error, EOF,
    /// unparsable reply); a request whose write failed also counts missing,
    /// and later sends drawn for a failed connection are skipped.
    pub connection_failures: u64,
}

/// CPU time of one thread.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadCpu {
    /// `send-N` or `recv-N`.
    pub name: String,
    /// User CPU, s.
    pub user_s: f64,
    /// System CPU, s.
    pub sys_s: f64,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimpleResult {
    /// Offered rate.
    pub target_rps: f64,
    /// Measured-window sends per second of measured time.
    pub achieved_rps: f64,
    /// Requests scheduled in the measured window and sent.
    pub sent: u64,
    /// Their replies.
    pub received: u64,
    /// All requests sent, warm-up included.
    pub sent_total: u64,
    /// All replies matched to a request, warm-up included.
    pub received_total: u64,
    /// Correctness counters.
    pub errors: SimpleErrors,
    /// Latency from the scheduled send time.
    pub latency: Percentiles,
    /// Latency from the actual send time.
    pub raw_latency: Percentiles,
    /// Actual − scheduled send time.
    pub lateness: Percentiles,
    /// CPU time of every thread (senders spin, see the module docs).
    pub thread_cpu: Vec<ThreadCpu>,
}

/// One outstanding request.
struct Sent {
    req: Request,
    scheduled: u64,
    sent: u64,
}

/// One connection, as its sender and its receiver share it.
struct Conn {
    stream: TcpStream,
    pending: Mutex<VecDeque<Sent>>,
    dead: AtomicBool,
}

/// State every thread sees.
struct Shared {
    conns: Vec<Conn>,
    /// Sender threads still running.
    senders_left: AtomicUsize,
    /// 0 until the last sender is done; then when receivers must stop.
    drain_deadline: AtomicU64,
    /// Scheduled times at or after this are recorded.
    measure_from: u64,
}

/// What a thread hands back when it is joined.
struct Part {
    name: String,
    cpu: (u64, u64),
    sent: u64,
    sent_total: u64,
    received: u64,
    received_total: u64,
    errors: SimpleErrors,
    latency: Histogram<u64>,
    raw: Histogram<u64>,
    lateness: Histogram<u64>,
}

impl Part {
    fn new(name: String) -> Part {
        // Fixed bounds, 1 ns to 100 s: `saturating_record` clamps to the
        // current range instead of growing it, so an auto-resizing
        // histogram would clamp every value to its initial range.
        let h = || Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds");
        Part {
            name,
            cpu: (0, 0),
            sent: 0,
            sent_total: 0,
            received: 0,
            received_total: 0,
            errors: SimpleErrors::default(),
            latency: h(),
            raw: h(),
            lateness: h(),
        }
    }
}

fn codec(p: &SimpleProtocol, addr: SocketAddr) -> Box<dyn Codec> {
    match p {
        SimpleProtocol::Rpc(_) => Box::new(Rpc),
        SimpleProtocol::Memcached(spec) => Box::new(Memcached { spec: spec.clone() }),
        SimpleProtocol::Http(path) => Box::new(Http::new(&addr.to_string(), path)),
    }
}

fn check(cfg: &SimpleConfig) -> anyhow::Result<()> {
    if !(cfg.rate.is_finite() && cfg.rate > 0.0) {
        bail!(
            "--rate {} must be a positive number of requests/s",
            cfg.rate
        );
    }
    if cfg.connections == 0 {
        bail!("--connections must be at least 1");
    }
    if cfg.threads == 0 || cfg.threads > cfg.connections {
        bail!(
            "--threads {} must be between 1 and --connections ({})",
            cfg.threads,
            cfg.connections
        );
    }
    if cfg.duration.is_zero() {
        bail!("--duration must be positive");
    }
    let allowed = cpu::allowed_cpus().context("reading this process's CPUs")?;
    if let Some(c) = cfg.cpus.iter().find(|c| !allowed.contains(c)) {
        bail!("--cpus: CPU {c} is not among this process's CPUs {allowed:?}");
    }
    Ok(())
}

/// Runs one load point: connects, sends for `warmup + duration`, drains,
/// and reports.
pub fn run(cfg: &SimpleConfig) -> anyhow::Result<SimpleResult> {
    check(cfg)?;
    let mut conns = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections {
        let s = TcpStream::connect(cfg.addr)
            .with_context(|| format!("--addr {}: cannot connect", cfg.addr))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_millis(10)))?;
        s.set_write_timeout(Some(cfg.drain.max(Duration::from_millis(100))))?;
        conns.push(Conn {
            stream: s,
            pending: Mutex::new(VecDeque::new()),
            dead: AtomicBool::new(false),
        });
    }
    // A common start a little ahead, so every thread is up when it comes.
    let start = cpu::monotonic_ns() + 50_000_000;
    let measure_from = start + cfg.warmup.as_nanos() as u64;
    let end = measure_from + cfg.duration.as_nanos() as u64;
    let shared = Arc::new(Shared {
        conns,
        senders_left: AtomicUsize::new(cfg.threads),
        drain_deadline: AtomicU64::new(0),
        measure_from,
    });
    let pin = |k: usize| (!cfg.cpus.is_empty()).then(|| cfg.cpus[k % cfg.cpus.len()]);
    let mut handles = Vec::new();
    for t in 0..cfg.threads {
        let (sh, cfg2) = (shared.clone(), cfg.clone());
        let (cpu_, seed) = (pin(t), cfg.seed.wrapping_add(t as u64));
        handles.push(
            std::thread::Builder::new()
                .name(format!("skq-simple-send-{t}"))
                .spawn(move || send(&sh, &cfg2, t, start, end, seed, cpu_))?,
        );
    }
    for c in 0..cfg.connections {
        let (sh, cpu_) = (shared.clone(), pin(c));
        let codec = codec(&cfg.protocol, cfg.addr);
        handles.push(
            std::thread::Builder::new()
                .name(format!("skq-simple-recv-{c}"))
                .stack_size(256 * 1024)
                .spawn(move || receive(&sh, c, codec, cpu_))?,
        );
    }
    let mut total = Part::new(String::new());
    let mut thread_cpu = Vec::new();
    for h in handles {
        let p = h
            .join()
            .map_err(|_| anyhow::anyhow!("a simple-client thread panicked"))?;
        total.sent += p.sent;
        total.sent_total += p.sent_total;
        total.received += p.received;
        total.received_total += p.received_total;
        let (e, f) = (&mut total.errors, p.errors);
        e.bad_reply += f.bad_reply;
        e.out_of_order += f.out_of_order;
        e.connection_failures += f.connection_failures;
        total.latency.add(&p.latency).expect("auto-resizing");
        total.raw.add(&p.raw).expect("auto-resizing");
        total.lateness.add(&p.lateness).expect("auto-resizing");
        thread_cpu.push(ThreadCpu {
            name: p.name,
            user_s: p.cpu.0 as f64 / 1e9,
            sys_s: p.cpu.1 as f64 / 1e9,
        });
    }
    total.errors.missing = shared
        .conns
        .iter()
        .map(|c| c.pending.lock().expect("no thread panicked").len() as u64)
        .sum();
    Ok(SimpleResult {
        target_rps: cfg.rate,
        achieved_rps: total.sent as f64 / cfg.duration.as_secs_f64(),
        sent: total.sent,
        received: total.received,
        sent_total: total.sent_total,
        received_total: total.received_total,
        errors: total.errors,
        latency: percentiles(&total.latency),
        raw_latency: percentiles(&total.raw),
        lateness: percentiles(&total.lateness),
        thread_cpu,
    })
}

fn percentiles(h: &Histogram<u64>) -> Percentiles {
    let q = |q: f64| {
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(q) as f64 / 1e3
        }
    };
    Percentiles {
        count: h.len(),
        p50_us: q(0.5),
        p99_us: q(0.99),
        p999_us: q(0.999),
    }
}

/// Sender thread `t`: one Poisson stream over its connections `t, t+T, …`.
fn send(
    sh: &Shared,
    cfg: &SimpleConfig,
    t: usize,
    start: u64,
    end: u64,
    seed: u64,
    pin: Option<u32>,
) -> Part {
    let mut part = Part::new(format!("send-{t}"));
    if let Some(c) = pin {
        let _ = cpu::pin_current_thread(c);
    }
    let _ = cpu::set_timer_slack(1);
    let mine: Vec<usize> = (t..cfg.connections).step_by(cfg.threads).collect();
    let mut next_seq = vec![0u64; mine.len()];
    let mut rng = SmallRng::seed_from_u64(seed);
    let gap = Exp::new(cfg.rate / cfg.threads as f64 / 1e9).expect("rate checked positive");
    let codec = codec(&cfg.protocol, cfg.addr);
    let spin = cfg.spin.as_nanos() as u64;
    let service = match cfg.protocol {
        SimpleProtocol::Rpc(RpcService::Exponential(mean)) => {
            Some(Exp::new(1.0 / mean.max(1) as f64).expect("positive rate"))
        }
        _ => None,
    };
    let mut out = Vec::new();
    let mut offset = 0.0; // ns after `start`
    loop {
        offset += gap.sample(&mut rng);
        let scheduled = start + offset as u64;
        if scheduled >= end {
            break;
        }
        let k = rng.gen_range(0..mine.len());
        let mut req = Request::new(next_seq[k]);
        match &cfg.protocol {
            SimpleProtocol::Rpc(RpcService::Fixed(ns)) => req.service_ns = *ns,
            SimpleProtocol::Rpc(RpcService::Exponential(_)) => {
                let e = service.as_ref().expect("built above");
                req.service_ns = e.sample(&mut rng).min(u32::MAX as f64) as u32;
            }
            SimpleProtocol::Memcached(spec) => spec.draw(&mut rng, &mut req),
            SimpleProtocol::Http(_) => {}
        }
        out.clear();
        codec.encode(&req, &mut out);
        let conn = &sh.conns[mine[k]];
        cpu::sleep_then_spin_until(scheduled, spin);
        if conn.dead.load(Ordering::Relaxed) {
            continue;
        }
        next_seq[k] += 1;
        let sent = cpu::monotonic_ns();
        conn.pending
            .lock()
            .expect("no thread panicked")
            .push_back(Sent {
                req,
                scheduled,
                sent,
            });
        if (&conn.stream).write_all(&out).is_err() {
            conn.dead.store(true, Ordering::Relaxed);
            part.errors.connection_failures += 1;
            continue;
        }
        part.sent_total += 1;
        if scheduled >= sh.measure_from {
            part.sent += 1;
            part.lateness.saturating_record((sent - scheduled).max(1));
        }
    }
    if sh.senders_left.fetch_sub(1, Ordering::AcqRel) == 1 {
        let deadline = cpu::monotonic_ns() + cfg.drain.as_nanos() as u64;
        sh.drain_deadline.store(deadline, Ordering::Release);
    }
    part.cpu = cpu::thread_cpu_ns();
    part
}

/// Receiver of connection `c`: blocking reads, FIFO matching.
fn receive(sh: &Shared, c: usize, codec: Box<dyn Codec>, pin: Option<u32>) -> Part {
    let mut part = Part::new(format!("recv-{c}"));
    if let Some(cpu_) = pin {
        let _ = cpu::pin_current_thread(cpu_);
    }
    let conn = &sh.conns[c];
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut newest = None;
    loop {
        match (&conn.stream).read(&mut chunk) {
            Ok(0) => {
                part.errors.connection_failures += 1;
                break;
            }
            Ok(n) => {
                let now = cpu::monotonic_ns();
                buf.extend_from_slice(&chunk[..n]);
                if !take_replies(
                    sh,
                    conn,
                    codec.as_ref(),
                    &mut buf,
                    now,
                    &mut newest,
                    &mut part,
                ) {
                    part.errors.connection_failures += 1;
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => {
                part.errors.connection_failures += 1;
                break;
            }
        }
        let deadline = sh.drain_deadline.load(Ordering::Acquire);
        if deadline != 0
            && (conn.pending.lock().expect("no thread panicked").is_empty()
                || cpu::monotonic_ns() >= deadline)
        {
            break;
        }
    }
    conn.dead.store(true, Ordering::Relaxed);
    part.cpu = cpu::thread_cpu_ns();
    part
}

/// Matches every whole reply at the front of `buf`; `false` when the stream
/// cannot be parsed any further. `newest` is the highest RPC id answered so
/// far on this connection.
fn take_replies(
    sh: &Shared,
    conn: &Conn,
    codec: &dyn Codec,
    buf: &mut Vec<u8>,
    now: u64,
    newest: &mut Option<u64>,
    part: &mut Part,
) -> bool {
    let mut pos = 0;
    let ok = loop {
        // Only this thread removes entries, so the front stays the front
        // while the lock is released for parsing.
        let head = conn
            .pending
            .lock()
            .expect("no thread panicked")
            .front()
            .map(|s| s.req);
        let (len, answers) = match codec.parse(&buf[pos..], head.as_ref()) {
            Parsed::Incomplete => break true,
            Parsed::Fatal(_) => {
                part.errors.bad_reply += 1;
                break false;
            }
            Parsed::Reply { len, answers, .. } => (len, answers),
        };
        pos += len;
        let mut pending = conn.pending.lock().expect("no thread panicked");
        let found = match answers {
            Answers::Id(id) => match pending.iter().position(|s| s.req.seq == id) {
                Some(i) => {
                    part.errors.out_of_order += newest.is_some_and(|n| id < n) as u64;
                    *newest = Some(newest.map_or(id, |n| n.max(id)));
                    pending.remove(i)
                }
                None => None,
            },
            Answers::Head(true) => pending.pop_front(),
            Answers::Head(false) => {
                pending.pop_front();
                None
            }
        };
        drop(pending);
        let Some(s) = found else {
            part.errors.bad_reply += 1;
            continue;
        };
        part.received_total += 1;
        if s.scheduled >= sh.measure_from {
            part.received += 1;
            part.latency
                .saturating_record(now.saturating_sub(s.scheduled).max(1));
            part.raw
                .saturating_record(now.saturating_sub(s.sent).max(1));
        }
    };
    buf.drain(..pos);
    ok
}
