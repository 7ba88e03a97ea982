//! A deliberately simple second open-loop client, to cross-check `skq load`
//! (issue 27, item 4). It shares no I/O, timing or matching code with the
//! generator ([`crate::worker`], [`crate::engine`]) and is built the other
//! way round: timed sends from a sender thread, `poll(2)` and kernel
//! receive timestamps in a separate receiver thread that reads only while
//! the sender lends it the CPU, one clock
//! (`CLOCK_REALTIME`) throughout. It reuses only pure code without I/O or
//! clock: the encoders/parsers of [`crate::protocol`] and the per-connection
//! arrival law of [`crate::schedule`] (so that, for one seed, both clients
//! offer the same send instants and the comparison is of the measurement,
//! not of two random samples).
//!
//! **Design.**
//! * `connections` TCP connections, non-blocking, with `SO_TIMESTAMPNS` on.
//!   Each has one *pending* FIFO (`Mutex<VecDeque<Sent>>`) shared by exactly
//!   two threads: the sender that owns the connection and its receiver.
//! * **Arrivals**: connection `i` follows `ConnSchedule::new(Poisson, rate,
//!   i, connections, seed)`, exactly as `skq load --seed` draws its load
//!   connections: exponential gaps of mean `connections / rate`, offsets
//!   from a common start.
//! * **Senders** (`threads`, default 1): sender `t` owns connections
//!   `t, t+T, …` and sends their merged schedule in time order. Before each
//!   send it sleeps on an absolute deadline (`clock_nanosleep(TIMER_ABSTIME)`,
//!   timer slack 1 ns) until `spin` (default 2 ms) before the scheduled time,
//!   then spins on the clock. **Why:** on these VMs a thread that blocks
//!   lets its virtual CPU halt and the host wakes it up to milliseconds late
//!   now and then; a spinning thread keeps its CPU. The cost: above ~500
//!   req/s per sender it spins nearly all the time, so its CPU time is no
//!   cost per request. The send: read the clock (the *actual send time*),
//!   push `Sent` on the FIFO, write the request without blocking, read the
//!   clock again (the *send call* time, reported). A write never waits for
//!   a full socket (that would hold up every later send): if no byte fits,
//!   the request is skipped (its entry taken back) and counted `send_full`
//!   and `missing`; if only part of it fits, the connection is failed
//!   (counted `send_full` and `connection_failures`, the request missing),
//!   since finishing it would block. On loopback a full socket means the
//!   server has stopped reading; expected 0.
//! * **Receivers** (`receivers`, default 1): receiver `r` watches
//!   connections `r, r+R, …` with `poll(2)` and reads every ready one with
//!   `recvmsg(MSG_DONTWAIT)` until it would block. The reply time is the
//!   **kernel's receive timestamp** of the read (`SCM_TIMESTAMPNS`, taken
//!   when the segment reached the socket), not the time the thread got to
//!   read it, so the receiver's own scheduling delay does not enter the
//!   figure. For TCP the stamp is that of the last segment the read took
//!   data from, and segments that queue up unread are merged under the
//!   newest stamp; so every reply completed by one read gets that read's
//!   stamp, which is an upper bound of its arrival (never earlier than it,
//!   never later than the user-space read time). Such replies are counted
//!   (`shared_stamp`).
//! * **Cooperation** ([`RecvSharing::Lend`], the default, guard 60 µs): a
//!   receiver reads only while the senders that may share its CPU *lend*
//!   it, i.e. while each waits for a send more than the guard away; it
//!   leaves unread data in the socket and parks (a futex, through
//!   `std::thread::park`) when the window closes, and the sender that next
//!   lends wakes it. The protocol, its handshake and its guarantee are in
//!   `lend.rs`. Delaying a read does not move a reply's time, which the
//!   kernel stamped on arrival; what it can do is let a second reply on the
//!   same connection arrive before the first is read, so both share the
//!   later stamp (counted in `shared_stamp`; the first is over-stated by at
//!   most the time the read was held back). `recv_yields` counts the
//!   reads held back. A sender that is behind its schedule lends nothing,
//!   so its receivers wait until it catches up. [`RecvSharing::Free`] reads
//!   whenever `poll` reports data (the design measured on 2026-11-25, whose
//!   receiver preempted the sender for every reply).
//! * **Priority.** Receivers run `SCHED_FIFO` (`recv_rt_priority`, default
//!   1, when the process may): a receiver blocks between replies and runs a
//!   few µs per wake, and without the priority it can wait for the spinning
//!   sender's time slice (EEVDF's base slice, 1.5 ms on 2 CPUs) before it
//!   reads, so replies queue up and share stamps. With cooperation the
//!   priority is safe for the schedule: the real-time receiver takes the
//!   sender's CPU only while it is lent, stops within one `recvmsg` of the
//!   window closing, and with a closed window parks instead of returning to
//!   `poll` (which would report the unread data at once and spin), so it
//!   cannot starve the sender; the guard pays for that last read and the
//!   switch back. A wake inside the guard (a reply arriving while the
//!   receiver blocks in `poll`) still costs the sender one switch there and
//!   back. Without cooperation the priority lets every reply preempt the
//!   sender, as measured.
//!
//! **Time.** One clock for everything: the kernel stamps receives on
//! `CLOCK_REALTIME`, so the schedule, the sleeps, the spins and the send
//! stamps use `CLOCK_REALTIME` too and no conversion is made. NTP slews both
//! clocks alike; only a *step* of the realtime clock would corrupt the
//! figures, so `CLOCK_MONOTONIC − CLOCK_REALTIME` is read at the start and
//! at the end and its change reported (`realtime_step_us`: tens of ns of
//! reading noise, more only if the clock was stepped). Latency is `stamp − scheduled` (no coordinated
//! omission) and, beside it, `stamp − actual send`; send lateness is
//! `actual − scheduled`. A kernel stamp earlier than the send stamp cannot
//! happen in one clock and is counted (`stamp_before_send`). A read without
//! a stamp (none is expected once `SO_TIMESTAMPNS` is on) falls back to the
//! user-space time of the read and is counted (`user_stamped`).
//!
//! **Matching (exactly once).** A reply naming an id (RPC) answers the FIFO
//! entry with that id, wherever it is (if an id above it was answered
//! before: *out of order*, still an answer); an id not in the FIFO (never
//! sent, or answered already) is a *bad reply*. A reply without id
//! (memcached, HTTP) answers the front; one whose content does not match it
//! is a bad reply that consumes the front. Whatever is left in the FIFOs at
//! the end is *missing*. Because the entry is pushed before the request is
//! written, a reply can never arrive before its entry.
//!
//! **Bounds.** Requests scheduled during the warm-up are matched and
//! error-checked but not recorded. Sends stop at `warmup + duration`;
//! receivers leave when their FIFOs are empty after the last sender is done,
//! or `drain` after it at the latest. (So an
//! extra reply that arrives after a connection's last outstanding request
//! was answered at the end goes unseen.)

mod lend;
mod recv;
mod send;

use std::collections::VecDeque;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde::Serialize;
use skq_sys::{cpu, net};

use crate::protocol::http::Http;
use crate::protocol::memcached::{KvSpec, Memcached};
use crate::protocol::rpc::Rpc;
use crate::protocol::{Codec, Request};

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

/// How a receiver shares its CPU with the senders (module docs,
/// *Cooperation*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvSharing {
    /// Read whenever `poll` reports data, preempting a sender that is due.
    Free,
    /// Read only while every sender that may run on the receiver's CPU
    /// waits for a send more than `guard` away; park otherwise.
    Lend {
        /// Time left to the next send below which the receiver stops reading.
        guard: Duration,
    },
}

impl RecvSharing {
    /// The default guard: one `recvmsg` with its parsing, a switch back to
    /// the sender and a late timer wake of the receiver's bounded `poll`.
    /// Measured at 3,200 req/s (`scripts/bench/simple-client-sched.sh 3200
    /// --guard-us G`, `docs/MEASUREMENT.md`): sender lateness p99 57.7 µs
    /// with 30, 24.5 with 60, 27.1 with 100, 24.9 with 200.
    pub const DEFAULT_GUARD: Duration = Duration::from_micros(60);
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
    /// Connections.
    pub connections: usize,
    /// Sender threads (1..=connections).
    pub threads: usize,
    /// Receiver threads (1..=connections), each polling its connections.
    pub receivers: usize,
    /// Measured time.
    pub duration: Duration,
    /// Warm-up before it, not recorded.
    pub warmup: Duration,
    /// Longest wait for replies after the last send.
    pub drain: Duration,
    /// Sleep until this long before each send, then spin.
    pub spin: Duration,
    /// Random seed (the same arrivals as `skq load --seed`).
    pub seed: u64,
    /// Pin sender threads round-robin to these CPUs, and receiver threads
    /// round-robin to them too; empty = no pinning.
    pub cpus: Vec<u32>,
    /// `SCHED_FIFO` priority of the receivers (`None`: the normal class);
    /// refused by the kernel, they run in the normal class and the result
    /// says so.
    pub recv_rt_priority: Option<i32>,
    /// Whether receivers read only while the senders lend them the CPU.
    pub sharing: RecvSharing,
}

impl SimpleConfig {
    /// Defaults: 8 connections, 1 sender, 1 receiver at `SCHED_FIFO` 1
    /// reading while the sender lends (guard 60 µs), 5 s + 1 s warm-up,
    /// 2 s drain, 2 ms spin, RPC with zero service.
    pub fn new(addr: SocketAddr, rate: f64) -> SimpleConfig {
        SimpleConfig {
            addr,
            protocol: SimpleProtocol::Rpc(RpcService::Fixed(0)),
            rate,
            connections: 8,
            threads: 1,
            receivers: 1,
            duration: Duration::from_secs(5),
            warmup: Duration::from_secs(1),
            drain: Duration::from_secs(2),
            spin: Duration::from_millis(2),
            seed: 1,
            cpus: Vec::new(),
            recv_rt_priority: Some(1),
            sharing: RecvSharing::Lend {
                guard: RecvSharing::DEFAULT_GUARD,
            },
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
    /// Connections that failed (write error, a request only partly
    /// written, read error, EOF, unparsable reply); a request whose write
    /// failed also counts missing, and later sends drawn for a failed
    /// connection are skipped.
    pub connection_failures: u64,
    /// Sends that found their socket full (the server not reading): skipped
    /// when no byte fitted (also counted missing), failing the connection
    /// when part of the request did (module docs, *Senders*). Expected 0.
    pub send_full: u64,
}

/// Where the reply times of the measured window came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stamps {
    /// Replies timed by the kernel's receive timestamp.
    pub kernel: u64,
    /// Replies whose read carried no kernel stamp, timed by the user-space
    /// read instead (expected 0).
    pub user: u64,
    /// Replies completed by a read that completed another reply too: they
    /// share its stamp, an upper bound of their arrival.
    pub shared: u64,
    /// Replies whose kernel stamp precedes their send stamp (impossible in
    /// one clock; expected 0).
    pub before_send: u64,
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

/// Measured sends later than [`LATE_NS`], and how many of them were due
/// while the same sender's previous send call was still running (a cause
/// the client cannot avoid with one sender).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LateSends {
    /// Measured sends more than [`LATE_NS`] after their scheduled time.
    pub late: u64,
    /// Of those, the ones whose scheduled time fell before the previous
    /// send call of their sender returned.
    pub behind_previous_send: u64,
}

/// The lateness above which [`LateSends`] counts a send (50 µs, the
/// cross-check's bound on the lateness p99).
pub const LATE_NS: u64 = 50_000;

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
    /// Reply-time sources of the measured replies.
    pub stamps: Stamps,
    /// Latency from the scheduled send time to the kernel's receive stamp.
    pub latency: Percentiles,
    /// Latency from the actual send time to the kernel's receive stamp.
    pub raw_latency: Percentiles,
    /// Actual − scheduled send time.
    pub lateness: Percentiles,
    /// Duration of the blocking send call.
    pub send_call: Percentiles,
    /// Sends later than 50 µs, and whether the previous send was the cause.
    pub late_sends: LateSends,
    /// User-space read time − kernel receive stamp: the receiver's delay,
    /// which the latency figures do not contain.
    pub recv_delay: Percentiles,
    /// Change of `CLOCK_MONOTONIC − CLOCK_REALTIME` over the run, µs
    /// (tens of ns of reading noise; more means the realtime clock was
    /// stepped and the figures are void).
    pub realtime_step_us: f64,
    /// Whether every receiver got its `SCHED_FIFO` priority.
    pub receivers_realtime: bool,
    /// The lend guard, µs, when receivers cooperate ([`RecvSharing::Lend`]);
    /// `None` when they read freely.
    pub lend_guard_us: Option<f64>,
    /// Times a receiver left ready data unread because its senders' window
    /// closed (0 without cooperation).
    pub recv_yields: u64,
    /// CPU time of every thread (senders spin, see the module docs).
    pub thread_cpu: Vec<ThreadCpu>,
}

/// One outstanding request (times on `CLOCK_REALTIME`, ns).
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
    /// 0 until the last sender is done; then when receivers must stop
    /// (realtime ns).
    drain_deadline: AtomicU64,
    /// Scheduled times at or after this are recorded (realtime ns).
    measure_from: u64,
    /// The senders' lend windows (`None`: receivers read freely).
    lending: Option<lend::Lending>,
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
    stamps: Stamps,
    realtime: bool,
    recv_yields: u64,
    late_sends: LateSends,
    latency: Histogram<u64>,
    raw: Histogram<u64>,
    lateness: Histogram<u64>,
    send_call: Histogram<u64>,
    recv_delay: Histogram<u64>,
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
            stamps: Stamps::default(),
            realtime: true,
            recv_yields: 0,
            late_sends: LateSends::default(),
            latency: h(),
            raw: h(),
            lateness: h(),
            send_call: h(),
            recv_delay: h(),
        }
    }

    /// Adds `p` into `self` (histograms have equal bounds, so `add` cannot fail).
    fn merge(&mut self, p: &Part) {
        self.sent += p.sent;
        self.sent_total += p.sent_total;
        self.received += p.received;
        self.received_total += p.received_total;
        let (e, f) = (&mut self.errors, p.errors);
        e.missing += f.missing;
        e.bad_reply += f.bad_reply;
        e.out_of_order += f.out_of_order;
        e.connection_failures += f.connection_failures;
        e.send_full += f.send_full;
        let (s, t) = (&mut self.stamps, p.stamps);
        s.kernel += t.kernel;
        s.user += t.user;
        s.shared += t.shared;
        s.before_send += t.before_send;
        self.realtime &= p.realtime;
        self.recv_yields += p.recv_yields;
        self.late_sends.late += p.late_sends.late;
        self.late_sends.behind_previous_send += p.late_sends.behind_previous_send;
        for (a, b) in [
            (&mut self.latency, &p.latency),
            (&mut self.raw, &p.raw),
            (&mut self.lateness, &p.lateness),
            (&mut self.send_call, &p.send_call),
            (&mut self.recv_delay, &p.recv_delay),
        ] {
            a.add(b).expect("equal bounds");
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
    if cfg.receivers == 0 || cfg.receivers > cfg.connections {
        bail!(
            "--receivers {} must be between 1 and --connections ({})",
            cfg.receivers,
            cfg.connections
        );
    }
    if let Some(p) = cfg.recv_rt_priority {
        if !(1..=99).contains(&p) {
            bail!("--recv-rt-priority {p} must be between 1 and 99 (0: off)");
        }
    }
    if let RecvSharing::Lend { guard } = cfg.sharing {
        if guard >= Duration::from_secs(1) {
            bail!(
                "--guard-us {} must be below 1000000 (a guard of a second or more lends nothing)",
                guard.as_micros()
            );
        }
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
        // The sender's writes never wait; the receiver reads with
        // MSG_DONTWAIT and `poll`, which ignore the flag.
        s.set_nonblocking(true)?;
        net::enable_rx_timestamps(s.as_raw_fd())
            .context("SO_TIMESTAMPNS: the kernel refused receive timestamps")?;
        conns.push(Conn {
            stream: s,
            pending: Mutex::new(VecDeque::new()),
            dead: AtomicBool::new(false),
        });
    }
    // A common start a little ahead, so every thread is up when it comes
    // (and the kernel has switched receive timestamps on: it does so from a
    // work queue after the first socket asks).
    let offset_before = cpu::monotonic_minus_realtime_ns();
    let start = cpu::realtime_ns() + 50_000_000;
    let measure_from = start + cfg.warmup.as_nanos() as u64;
    let end = measure_from + cfg.duration.as_nanos() as u64;
    let shared = Arc::new(Shared {
        conns,
        senders_left: AtomicUsize::new(cfg.threads),
        drain_deadline: AtomicU64::new(0),
        measure_from,
        lending: match cfg.sharing {
            RecvSharing::Free => None,
            RecvSharing::Lend { guard } => Some(lend::Lending::new(
                guard,
                cfg.threads,
                lend::partners(cfg.threads, cfg.receivers, &cfg.cpus),
            )),
        },
    });
    let pin = |k: usize| (!cfg.cpus.is_empty()).then(|| cfg.cpus[k % cfg.cpus.len()]);
    let mut handles = Vec::new();
    for t in 0..cfg.threads {
        let (sh, cfg2, cpu_) = (shared.clone(), cfg.clone(), pin(t));
        handles.push(
            std::thread::Builder::new()
                .name(format!("skq-simple-send-{t}"))
                .spawn(move || send::send(&sh, &cfg2, t, start, end, cpu_))?,
        );
    }
    for r in 0..cfg.receivers {
        let (sh, cpu_, rt) = (shared.clone(), pin(r), cfg.recv_rt_priority);
        let mine: Vec<usize> = (r..cfg.connections).step_by(cfg.receivers).collect();
        let codec = codec(&cfg.protocol, cfg.addr);
        handles.push(
            std::thread::Builder::new()
                .name(format!("skq-simple-recv-{r}"))
                .spawn(move || recv::receive(&sh, r, mine, codec, cpu_, rt))?,
        );
    }
    let mut total = Part::new(String::new());
    let mut thread_cpu = Vec::new();
    for h in handles {
        let p = h
            .join()
            .map_err(|_| anyhow::anyhow!("a simple-client thread panicked"))?;
        total.merge(&p);
        thread_cpu.push(ThreadCpu {
            name: p.name,
            user_s: p.cpu.0 as f64 / 1e9,
            sys_s: p.cpu.1 as f64 / 1e9,
        });
    }
    let step = cpu::monotonic_minus_realtime_ns() - offset_before;
    // Left in the FIFOs, beside the skipped sends the senders counted.
    total.errors.missing += shared
        .conns
        .iter()
        .map(|c| c.pending.lock().expect("no thread panicked").len() as u64)
        .sum::<u64>();
    Ok(SimpleResult {
        target_rps: cfg.rate,
        achieved_rps: total.sent as f64 / cfg.duration.as_secs_f64(),
        sent: total.sent,
        received: total.received,
        sent_total: total.sent_total,
        received_total: total.received_total,
        errors: total.errors,
        stamps: total.stamps,
        latency: percentiles(&total.latency),
        raw_latency: percentiles(&total.raw),
        lateness: percentiles(&total.lateness),
        send_call: percentiles(&total.send_call),
        late_sends: total.late_sends,
        recv_delay: percentiles(&total.recv_delay),
        realtime_step_us: step.unsigned_abs() as f64 / 1e3,
        receivers_realtime: cfg.recv_rt_priority.is_some() && total.realtime,
        lend_guard_us: match cfg.sharing {
            RecvSharing::Free => None,
            RecvSharing::Lend { guard } => Some(guard.as_nanos() as f64 / 1e3),
        },
        recv_yields: total.recv_yields,
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
