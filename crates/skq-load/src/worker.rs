//! One generator thread: its connections, their schedules, and the checker.
//!
//! The thread owns a set of non-blocking connections registered in its own
//! epoll instance and a min-heap of their next send times. Its loop:
//!
//! 1. send every request whose scheduled time has come (open loop: replies are
//!    never waited for): encode them, then write each connection's share in
//!    one `write`, stamping the actual send time just before it;
//! 2. sleep in epoll until `spin` before the next send time, then poll
//!    without blocking until it is due;
//! 3. read replies and match each against the connection's FIFO of
//!    outstanding requests, leaving the rest of a poll's replies for later
//!    as soon as a send is due (sends come first).
//!
//! **Why spin.** On a virtual machine a thread that blocks lets its vCPU
//! halt, and the host wakes a halted vCPU late now and then: traced here
//! (`--trace-late`), sleeps of 12–430 µs returned 0.6–4 ms late several
//! times a second, and each such wake-up made every send due meanwhile late.
//! A thread that spins keeps its vCPU running (on the same machine, gaps
//! over 500 µs in a clock-reading loop: 0–1 in 4 s). So a thread with a CPU
//! of its own spins for the last [`crate::config::SPIN_DEDICATED_US`] before
//! each send; one that shares its CPU with the server spins only briefly.
//! The thread's own work (sends and reads, without sleeping and spinning)
//! is measured apart as `busy_ns`, its cost per request.
//!
//! **Checker invariant.** Per connection, `pending` holds the requests with
//! sequence numbers `base .. seq`, in order, each flagged when answered; the
//! front is always unanswered (answered fronts are popped at once). A reply
//! naming an id below `base`, or an already-flagged entry, is a *duplicate*;
//! an id at or beyond `seq` is a *bad reply*; an answer to a request older
//! than one already answered is *out of order* (it still counts as the
//! answer), so a swapped pair counts once and a dropped reply counts only as
//! missing. Protocols without
//! ids (memcached, HTTP) answer the front by position and a mismatching reply
//! is a bad reply that consumes the front. Whatever is still pending when the
//! drain period ends is *missing*.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use skq_proto::workload::{ConnClass, ServiceSpec};
use skq_report::result::Errors;

use crate::protocol::memcached::KvSpec;
use crate::protocol::{Answers, Codec, Parsed, Request};
use crate::schedule::ConnSchedule;
use crate::stats::Hist;
use skq_sys::epoll::{self, Poller};
use skq_sys::{cpu, net};

/// What a connection is for; results are kept apart per role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Regular load.
    Load = 0,
    /// Latency probe.
    Probe = 1,
    /// High-priority client (RPC class 1).
    High = 2,
    /// Best-effort clients (RPC class 2, fixed long service).
    Batch = 3,
}

/// One connection as handed to a worker.
pub struct ConnSetup {
    /// The connected, non-blocking stream.
    pub stream: TcpStream,
    /// Its role.
    pub role: Role,
    /// Its service class (gis keeps one per connection).
    pub class: ConnClass,
    /// Its send schedule.
    pub schedule: ConnSchedule,
}

/// Smallest threshold of the actual-gap test (ns): gaps shorter than a send
/// takes cannot be realised, so they are left out of the test.
pub const MIN_GAP_THRESHOLD_NS: u64 = 20_000;

/// Quantile of a thread's send lateness that sets the actual-gap test's
/// threshold (see [`gap_threshold_ns`]).
pub const GAP_THRESHOLD_QUANTILE: f64 = 0.999;

/// Threshold of the actual-gap test for a thread whose send lateness is
/// `lateness`: the larger of [`MIN_GAP_THRESHOLD_NS`] and the lateness
/// p99.9.
///
/// An actual gap is the scheduled gap `s` plus `d = l₂ − l₁`, the change in
/// lateness between the two sends, and `d ≤ l₂`. For `s` exponential, the
/// excess of `s + d` over `T` is exponential with the same mean whenever
/// `d ≤ T` (memorylessness), so a threshold above almost every lateness
/// leaves the test a test of the process, not of the generator's jitter.
/// At the lateness p99 (the threshold until 2026-11-27) that failed for
/// gaps scheduled shorter than one send and stretched to one send's length
/// (20–25 µs on the 2-CPU VM, above a p99 of about 20 µs; 22–52 of 1,700
/// sampled gaps): with 1,700 gaps the test saw that and failed a generator that kept its
/// schedule (against memcached at 8,000 req/s, A² over 1.341 in 6 of 8 runs,
/// up to 4.6; at most 1.11 at the p99.9; `scripts/bench/arrivals-gaps.sh`,
/// docs/MEASUREMENT.md).
pub fn gap_threshold_ns(lateness: &crate::stats::Hist) -> u64 {
    MIN_GAP_THRESHOLD_NS.max(lateness.quantile_ci(GAP_THRESHOLD_QUANTILE).1)
}

/// The gaps longer than `threshold`, less `threshold`, divided by their
/// mean. For a Poisson process these excesses are exponential again
/// (memorylessness), so an exponentiality test on them checks the actual
/// arrival process above the resolution a generator can deliver.
pub fn excess_gaps(gaps: &[f64], threshold: f64) -> Vec<f64> {
    let mut ex: Vec<f64> = gaps
        .iter()
        .filter(|&&g| g > threshold)
        .map(|&g| g - threshold)
        .collect();
    normalise(&mut ex);
    ex
}

/// Diagnostics (`SKQ_LOAD_GAPS_DIR=DIR`): writes this thread's sampled
/// actual and reference inter-send gaps, before the threshold, one pair per
/// line in ns, to `DIR/gaps-PID-TID.txt`, after a line with the lateness
/// quantiles. What `scripts/bench/arrivals-gaps.py` reads.
fn dump_gaps(dir: &std::path::Path, out: &WorkerOut) {
    use std::fmt::Write as _;
    let mut text = String::new();
    let q = |p| out.lateness.quantile_ci(p).1;
    let _ = writeln!(
        text,
        "# lateness_ns p50 {} p99 {} p99.9 {} max {}",
        q(0.5),
        q(0.99),
        q(0.999),
        q(1.0)
    );
    for (a, r) in out.gaps.iter().zip(&out.ref_gaps) {
        let _ = writeln!(text, "{a} {r}");
    }
    let name = format!(
        "gaps-{}-{}.txt",
        std::process::id(),
        skq_sys::signal::thread_id()
    );
    if let Err(e) = std::fs::write(dir.join(&name), text) {
        eprintln!("skq load: SKQ_LOAD_GAPS_DIR: {name}: {e}");
    }
}

/// How much of `[from, to]` the stalls in `ring` (ordered by start,
/// disjoint) cover (ns).
fn stalled_within(ring: &VecDeque<(u64, u64)>, from: u64, to: u64) -> u64 {
    let mut covered = 0;
    for &(s, e) in ring.iter().rev() {
        if e <= from {
            break;
        }
        covered += e.min(to).saturating_sub(s.max(from));
    }
    covered
}

/// Divides `v` by its mean (left alone when the mean is not positive).
fn normalise(v: &mut [f64]) {
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    if mean > 0.0 {
        v.iter_mut().for_each(|g| *g /= mean);
    }
}

/// Most requests sent back to back before replies are read again.
const MAX_BURST: u32 = 64;

/// Parameters shared by all workers of a run (absolute times in ns; the four
/// times are set by [`Worker::set_times`]).
pub struct WorkerParams<'a> {
    /// Service time asked by best-effort (batch) requests, ns.
    pub batch_service_ns: u32,
    /// First scheduled send.
    pub start: u64,
    /// End of warm-up.
    pub warm_end: u64,
    /// End of sending.
    pub end: u64,
    /// Give up waiting for replies.
    pub drain_end: u64,
    /// Spin this long before a send instead of sleeping; `None`: chosen by
    /// the thread once pinned ([`crate::config::SPIN_DEDICATED_US`] with a
    /// CPU of its own, else [`crate::config::SPIN_SHARED_US`]).
    pub spin_ns: Option<u64>,
    /// Service-time distribution (RPC).
    pub service: ServiceSpec,
    /// Key-value mix (memcached).
    pub kv: Option<&'a KvSpec>,
    /// ZippyDB mix (RocksDB front end).
    pub zippy: Option<&'a skq_proto::zippydb::ZippyDb>,
    /// Probability of keeping an inter-arrival gap.
    pub sample_p: f64,
    /// Probability of keeping a latency sample for the independence check.
    pub series_p: f64,
    /// Interval length of the HdrHistogram log (None = no log).
    pub interval_ns: Option<u64>,
    /// Fault injection: sleep this long after every `n` sends.
    pub stall: Option<(u64, std::time::Duration)>,
    /// Test hook: (every, pause) sends, slept through as the host holds a
    /// CPU: the loop counts it as the machine's stall.
    pub host_stall: Option<(u64, std::time::Duration)>,
    /// Fault injection: sleep this long before every `n`-th read.
    pub read_stall: Option<(u64, std::time::Duration)>,
    /// RNG seed of this thread.
    pub seed: u64,
    /// `SCHED_FIFO` priority to run at, if any.
    pub rt_priority: Option<i32>,
    /// Record every regular request in [`WorkerOut::requests`].
    pub keep_requests: bool,
    /// CPU to pin this thread to, if any.
    pub cpu: Option<u32>,
    /// No other generator thread of the run shares this thread's CPUs.
    pub exclusive_cpu: bool,
    /// Write a trace of late sends to this file (diagnostics).
    pub trace_late: Option<std::path::PathBuf>,
    /// Events taken per `epoll_wait` ([`crate::config::DEFAULT_POLL_EVENTS`]).
    pub poll_events: usize,
    /// Read with `recvmsg` and kernel receive stamps (else plain `read`).
    pub read_stamps: bool,
    /// End the run at the end of the warm-up when the machine's stalls of
    /// this thread's loop in it took longer than this (ns; `None`: never).
    pub warm_stall_limit_ns: Option<u64>,
    /// Set by the thread that ends the run so (see `warm_stall_limit_ns`);
    /// every thread stops when it is set.
    pub abort: Option<&'a std::sync::atomic::AtomicBool>,
}

/// One regular request, as scheduled and as answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// Scheduled send time (absolute ns).
    pub sched: u64,
    /// Requested service time (ns).
    pub service_ns: u32,
    /// Latency from the scheduled time, if answered and in the measured window.
    pub latency: Option<u64>,
}

/// What a worker measured.
#[derive(Default)]
pub struct WorkerOut {
    /// Latency from scheduled send, per role.
    pub lat: [Hist; 4],
    /// Latency from actual send, per role.
    pub raw: [Hist; 4],
    /// Send lateness of measured requests (all roles).
    pub lateness: Hist,
    /// Load-role latency per log interval.
    pub intervals: Vec<Hist>,
    /// Load requests scheduled per log interval (measured window).
    pub intervals_sent: Vec<u64>,
    /// Per log interval, the replies to load requests scheduled in it that
    /// reported a service time.
    pub intervals_service: Vec<ServiceTally>,
    /// Per log interval of the measured window, the time (ns) this thread's
    /// loop lost to the machine's stalls ([`STALL_NS`]) that ended in it.
    pub intervals_stall_ns: Vec<u64>,
    /// Load requests sent in the measured window.
    pub sent_window: u64,
    /// Load replies received in the measured window.
    pub recv_window: u64,
    /// Load replies to measured requests (whenever received).
    pub received_measured: u64,
    /// Correctness counters.
    pub errors: Errors,
    /// Requests sent (all roles, whole run).
    pub sent_total: u64,
    /// Every regular request, if asked for (warm-up included).
    pub requests: Vec<RequestRecord>,
    /// Set when `rt_priority` was asked for but refused by the kernel.
    pub rt_refused: Option<String>,
    /// Sum and count of reported service times (ns).
    pub service_sum: f64,
    /// Sum of the service times the same replies' requests asked for (ns).
    pub requested_sum: f64,
    /// Number of replies that reported a service time.
    pub service_n: u64,
    /// memcached GET misses.
    pub misses: u64,
    /// Sampled actual inter-send gaps longer than `gap_threshold_ns`, less
    /// that threshold, divided by their mean (see [`excess_gaps`]).
    pub gaps: Vec<f64>,
    /// Sampled scheduled gaps of load requests (in schedule order), divided
    /// by their mean.
    pub sched_gaps: Vec<f64>,
    /// The reference for `gaps`: at the same sampled sends, the gaps between
    /// their *scheduled* times (in sending order), put through the same
    /// threshold and normalisation. A faithful generator sends what it
    /// scheduled, so its `gaps` test like these; what the two disagree on is
    /// the generator's doing, what they share is the seed's.
    pub ref_gaps: Vec<f64>,
    /// Threshold applied to `gaps` ([`gap_threshold_ns`]): the larger of
    /// [`MIN_GAP_THRESHOLD_NS`] and this thread's send-lateness p99.9.
    pub gap_threshold_ns: u64,
    /// Sampled (scheduled time, latency ns) of load requests.
    pub series: Vec<(u64, u64)>,
    /// This thread's CPU time in user space and in the kernel over the run (ns).
    pub cpu_ns: (u64, u64),
    /// Set when pinning to [`WorkerParams::cpu`] failed.
    pub pin_refused: Option<String>,
    /// Wall time spent sending and reading (ns): the thread's work, without
    /// its sleeping and spinning.
    pub busy_ns: u64,
    /// Spin window used (ns).
    pub spin_ns: u64,
    /// Time this thread was runnable but waiting for its CPU over the run
    /// (ns; `None` without schedstat): other threads holding its CPU, and
    /// the wake-up delay after each of its own sleeps.
    pub waited_ns: Option<u64>,
    /// This thread's involuntary context switches over the run.
    pub preempted: u64,
    /// The machine's floor, sampled while this thread spun with nothing to
    /// do: the gaps between two consecutive idle polls longer than
    /// [`IDLE_GAP_NS`] (ns; at most [`MAX_IDLE_GAPS`] kept), and the time
    /// such back-to-back idle polls covered (ns). An idle poll takes well
    /// under a µs, so a longer gap is time the CPU was taken from the thread
    /// (preempted, an interrupt, the host); see [`crate::capacity::floor_from_gaps`].
    pub idle_gaps: Vec<u64>,
    /// See `idle_gaps`.
    pub idle_spin_ns: u64,
    /// Steps of this thread's loop (one poll, read, write or send, or an
    /// epoll sleep past its timeout) that took longer than [`STALL_NS`],
    /// over the whole run: the machine's stalls (see [`STALL_NS`]).
    pub stalls: u64,
    /// Their total length (ns).
    pub stall_ns: u64,
    /// Send lateness of measured requests less the part of it that such
    /// stalls cover: what the generator's own work made them late by.
    pub own_lateness: Hist,
    /// Read lag of the reads in the measured window: the time from the
    /// kernel's receive stamp of the data a read took to the read itself.
    /// A TCP read is stamped with its newest segment, so this is a lower
    /// bound of how long the read's oldest reply waited in the socket; each
    /// reply's latency includes its wait.
    pub read_lag: Hist,
    /// Read lag less the part of it that the machine's stalls of this
    /// thread's loop cover (as [`WorkerOut::own_lateness`] for sends).
    pub own_read_lag: Hist,
    /// Reads whose data carried no kernel stamp (the kernel turns stamping
    /// on from a work queue, so the first reads of a machine may have none).
    pub unstamped_reads: u64,
    /// The machine's stalls of this thread's loop during the warm-up (ns).
    pub warm_stall_ns: u64,
}

/// A step of the generator loop longer than this (ns) is counted as a stall
/// of the machine, not as the generator's work: one poll, one read or write
/// of a few hundred bytes, or encoding one request takes 0.1–30 µs on the
/// dev VMs (`--trace-late`), while the same steps stalled for 100–650 µs
/// several times a second when the host was busy, for writes of 32 bytes
/// (traced 2026-11-29, `docs/MEASUREMENT.md`). A step this long exceeds
/// the whole lateness budget by itself. The generator's own deliberate
/// stalls (the test hook [`crate::config::Stall`]) are not counted. A
/// generator far past its capacity can take steps this long by itself
/// (reads of many kB); the count of stalls is reported beside it.
pub const STALL_NS: u64 = 50_000;

/// The `k`th entry of a per-interval tally, growing it with `fill` first
/// when it is shorter.
pub(crate) fn slot<T>(v: &mut Vec<T>, k: usize, fill: impl FnMut() -> T) -> &mut T {
    if v.len() <= k {
        v.resize_with(k + 1, fill);
    }
    &mut v[k]
}

/// Service the replies reported against what their requests asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServiceTally {
    /// Sum of the service the replies reported (ns).
    pub delivered_ns: f64,
    /// Sum of the service their requests asked for (ns).
    pub asked_ns: f64,
    /// Replies counted.
    pub replies: u64,
}

impl ServiceTally {
    /// Adds `o`'s replies.
    pub fn add(&mut self, o: ServiceTally) {
        self.delivered_ns += o.delivered_ns;
        self.asked_ns += o.asked_ns;
        self.replies += o.replies;
    }

    /// Mean service beyond what was asked (µs); None without replies.
    pub fn overshoot_us(&self) -> Option<f64> {
        (self.replies > 0).then(|| (self.delivered_ns - self.asked_ns) / self.replies as f64 / 1e3)
    }
}

/// Stalls a thread remembers to subtract from the lateness of the sends they
/// delayed (only recent ones can overlap a send's lateness).
const STALL_RING: usize = 64;

/// Shortest gap between two idle polls that [`WorkerOut::idle_gaps`] keeps
/// (ns): shorter ones are the loop itself and cannot move a µs-scale p99.
pub const IDLE_GAP_NS: u64 = 2_000;
/// Most idle gaps one thread keeps (8 MB); a run that fills it has its
/// floor judged on the gaps kept, which only understates it.
pub const MAX_IDLE_GAPS: usize = 1 << 20;

struct Pend {
    req: Request,
    sched: u64,
    sent: u64,
    answered: bool,
    /// Index into `WorkerOut::requests`, when recording.
    record: u32,
}

struct Conn {
    stream: TcpStream,
    role: Role,
    class: ConnClass,
    schedule: ConnSchedule,
    seq: u64,
    base: u64,
    /// Highest sequence number answered so far (+1; 0 = none).
    max_answered: u64,
    pending: VecDeque<Pend>,
    wbuf: Vec<u8>,
    wpos: usize,
    rbuf: Vec<u8>,
    rlen: usize,
    alive: bool,
    want_out: bool,
    /// Requests at the back of `pending` not yet stamped and written.
    unstamped: usize,
    /// Listed in `Worker::dirty`.
    dirty: bool,
}

/// How long the loop may block in epoll at `now` (0: poll without
/// blocking): until `spin` before the `next` send, except that while
/// `outstanding` requests wait for replies it stays awake for `reply_wait`
/// after its latest send at `last_send`. Replies are due soon after a
/// send, and a thread that sleeps before they come reads them only when
/// its halted vCPU is woken: 100+ µs late on these VMs, which the read-lag
/// check caught at 1,000 req/s, where an exponential gap exceeds the 2-ms
/// pre-send spin one time in seven (read lag p99 147–185 µs before, 9–11
/// µs after; docs/MEASUREMENT.md, "Read lag at low rates").
fn sleep_ns(
    now: u64,
    next: u64,
    spin: u64,
    outstanding: u64,
    last_send: u64,
    reply_wait: u64,
) -> u64 {
    let timeout = next.saturating_sub(now).saturating_sub(spin);
    if timeout > 0 && outstanding > 0 && now < last_send.saturating_add(reply_wait) {
        0
    } else {
        timeout
    }
}

/// The generator thread's state.
pub struct Worker<'a> {
    p: WorkerParams<'a>,
    codec: Box<dyn Codec>,
    conns: Vec<Conn>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    epoll: Poller,
    events: Vec<(u64, u32)>,
    /// The next of `events` to handle (the rest wait for the loop's next
    /// round when a send fell due).
    ev_next: usize,
    /// Draws requests (service times, keys); kept apart from `sample_rng` so a
    /// seed always yields the same requests, whatever the timing.
    rng: SmallRng,
    /// Decides which gaps and latencies are sampled for the checks.
    sample_rng: SmallRng,
    /// Decides which scheduled gaps are sampled: drawn in schedule order
    /// only, so a seed fixes the sample whatever the timing.
    sched_rng: SmallRng,
    out: WorkerOut,
    outstanding: u64,
    /// Reads since the last injected read stall.
    reads: u64,
    /// Sends since the last injected stall.
    sends: u64,
    /// Actual and scheduled time of the last load send.
    last_send: Option<(u64, u64)>,
    /// Actual time of the last send of any request (0: none yet).
    last_stamp: u64,
    /// Scheduled time of the last load request encoded.
    last_sched: Option<u64>,
    /// Connections with requests encoded but not yet written.
    dirty: Vec<u32>,
    /// Diagnostic trace of late sends (`SKQ_LOAD_TRACE`).
    trace: Option<Tracer>,
    /// The last clock reading of the loop ([`Worker::tick`]), or when an
    /// epoll sleep was due to end.
    last_tick: u64,
    /// Recent stalls (start, end), oldest first.
    stall_ring: VecDeque<(u64, u64)>,
    /// CLOCK_MONOTONIC − CLOCK_REALTIME (ns), to put the kernel's receive
    /// stamps on the generator's clock.
    clock_offset: i64,
}

/// Diagnostic trace (`skq load --trace-late PATH`): what the thread did
/// (polls, sleeps, reads, writes) in a ring of recent activities; for every
/// send later than [`TRACE_LATE_NS`], the activities since shortly before its
/// scheduled time are written out, so a late send can be explained.
struct Tracer {
    ring: VecDeque<(u8, u64, u64, u64, usize)>,
    out: std::io::BufWriter<std::fs::File>,
}

/// Sends at least this late are traced.
pub const TRACE_LATE_NS: u64 = 50_000;

impl Tracer {
    fn create(path: &std::path::Path) -> io::Result<Tracer> {
        Ok(Tracer {
            ring: VecDeque::with_capacity(256),
            out: std::io::BufWriter::new(std::fs::File::create(path)?),
        })
    }

    /// Records activity `kind` (0 sleep, 1 poll, 2 read, 3 write) from
    /// `start` to `end`; `detail` is the timeout asked (sleep, poll) or the
    /// connection (read, write), `n` the events returned.
    fn note(&mut self, kind: u8, start: u64, end: u64, detail: u64, n: usize) {
        if self.ring.len() == self.ring.capacity() {
            self.ring.pop_front();
        }
        self.ring.push_back((kind, start, end, detail, n));
    }

    fn late(&mut self, sched: u64, stamp: u64) {
        use std::io::Write;
        if stamp.saturating_sub(sched) < TRACE_LATE_NS {
            return;
        }
        let us = |a: u64, b: u64| (a as f64 - b as f64) / 1e3;
        let _ = writeln!(
            self.out,
            "late {:.1} us (scheduled at {sched} ns)",
            us(stamp, sched)
        );
        for &(k, s, e, d, n) in self.ring.iter().filter(|r| r.2 + 200_000 >= sched) {
            let what = match k {
                0 => format!("sleep (asked {:.1} us, {n} events)", d as f64 / 1e3),
                1 => format!("poll ({n} events)"),
                2 => format!("read conn {d}"),
                _ => format!("write conn {d}"),
            };
            let _ = writeln!(
                self.out,
                "  {:+9.1} us  {:8.1} us  {what}",
                us(s, sched),
                us(e, s)
            );
        }
    }
}

impl<'a> Worker<'a> {
    /// Registers the connections and computes their first send times.
    pub fn new(
        p: WorkerParams<'a>,
        codec: Box<dyn Codec>,
        setups: Vec<ConnSetup>,
    ) -> io::Result<Worker<'a>> {
        let poll_events = p.poll_events.max(1);
        let epoll = Poller::new(poll_events)?;
        let heap = BinaryHeap::with_capacity(setups.len());
        let mut conns = Vec::with_capacity(setups.len());
        for (i, s) in setups.into_iter().enumerate() {
            epoll.add(s.stream.as_raw_fd(), epoll::IN | epoll::RDHUP, i as u64)?;
            if p.read_stamps {
                net::enable_rx_timestamps(s.stream.as_raw_fd())?;
            }
            conns.push(Conn {
                stream: s.stream,
                role: s.role,
                class: s.class,
                schedule: s.schedule,
                seq: 0,
                base: 0,
                max_answered: 0,
                pending: VecDeque::new(),
                wbuf: Vec::with_capacity(256),
                wpos: 0,
                rbuf: vec![0; 4096],
                rlen: 0,
                alive: true,
                want_out: false,
                unstamped: 0,
                dirty: false,
            });
        }
        let rng = SmallRng::seed_from_u64(p.seed);
        let sample_rng = SmallRng::seed_from_u64(p.seed ^ 0x5A3D_1E5E);
        let sched_rng = SmallRng::seed_from_u64(p.seed ^ 0x0D15_EA5E);
        let trace = p.trace_late.as_deref().map(Tracer::create).transpose()?;
        Ok(Worker {
            p,
            codec,
            conns,
            heap,
            epoll,
            events: Vec::with_capacity(poll_events),
            ev_next: 0,
            rng,
            sample_rng,
            sched_rng,
            out: WorkerOut::default(),
            outstanding: 0,
            sends: 0,
            reads: 0,
            last_send: None,
            last_stamp: 0,
            last_sched: None,
            dirty: Vec::new(),
            trace,
            last_tick: 0,
            stall_ring: VecDeque::with_capacity(STALL_RING),
            clock_offset: cpu::monotonic_minus_realtime_ns(),
        })
    }

    /// Sets the run's clock (absolute ns) once every worker is built, and
    /// computes each connection's first send time.
    pub fn set_times(&mut self, start: u64, warm_end: u64, end: u64, drain_end: u64) {
        (self.p.start, self.p.warm_end, self.p.end, self.p.drain_end) =
            (start, warm_end, end, drain_end);
        self.heap.clear();
        for (i, c) in self.conns.iter_mut().enumerate() {
            self.heap
                .push(Reverse((start + c.schedule.next(None), i as u32)));
        }
    }

    /// Runs the schedule to its end, drains, and returns the measurements.
    /// [`Worker::set_times`] must have been called.
    pub fn run(mut self) -> io::Result<WorkerOut> {
        let _ = cpu::set_timer_slack(1);
        if let Some(cpu) = self.p.cpu {
            if let Err(e) = cpu::pin_current_thread(cpu) {
                self.out.pin_refused = Some(format!("CPU {cpu}: {e}"));
            }
        }
        // A SCHED_FIFO thread that spins 2 ms before every send spins
        // through nearly all of each second at a few thousand requests a
        // second, and the kernel's real-time throttling then stops it for
        // the rest (sched_rt_runtime_us: 50 ms a second): sends 38 ms late
        // at 3,000 req/s, measured. It spins briefly instead.
        let own = self.p.exclusive_cpu
            && self.p.rt_priority.is_none()
            && cpu::allowed_cpus().is_ok_and(|c| c.len() == 1);
        let spin = self.p.spin_ns.unwrap_or(
            1000 * if own {
                crate::config::SPIN_DEDICATED_US
            } else {
                crate::config::SPIN_SHARED_US
            },
        );
        self.out.spin_ns = spin;
        // How long after a send a thread with a CPU of its own keeps
        // polling for the replies instead of sleeping (see the sleep
        // below); none on a shared CPU, where the spin would
        // take the CPU the server needs to answer.
        let reply_wait = if own { spin } else { 0 };
        let cpu_start = cpu::thread_cpu_ns();
        let waited_start = cpu::thread_waited();
        if let Some(p) = self.p.rt_priority {
            if let Err(e) = cpu::set_realtime(p) {
                self.out.rt_refused = Some(e.to_string());
            }
        }
        let mut sending = true;
        let mut drain_end = self.p.drain_end;
        // When the previous poll returned, if it was idle (no events, a zero
        // timeout) and nothing was sent since: the start of a floor sample.
        let mut idle_since: Option<u64> = None;
        self.last_tick = cpu::monotonic_ns();
        let mut warm_checked = self.p.warm_stall_limit_ns.is_none();
        loop {
            let mut now = self.tick();
            if !warm_checked && now >= self.p.warm_end {
                warm_checked = true;
                if self
                    .p
                    .warm_stall_limit_ns
                    .is_some_and(|l| self.out.warm_stall_ns > l)
                {
                    if let Some(flag) = self.p.abort {
                        flag.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    break;
                }
            }
            // Another thread ended the run at the warm-up's end.
            if self
                .p
                .abort
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
            {
                break;
            }
            if sending {
                let began = now;
                let mut burst = 0;
                while let Some(&Reverse((t, ci))) = self.heap.peek() {
                    if t >= self.p.end {
                        sending = false;
                        break;
                    }
                    // Stop to read replies now and then even when behind schedule.
                    if t > now || burst == MAX_BURST {
                        break;
                    }
                    burst += 1;
                    self.heap.pop();
                    self.send(ci as usize, t);
                    self.out.sent_total += 1;
                    let c = &mut self.conns[ci as usize];
                    if c.alive {
                        let next = self.p.start + c.schedule.next(Some(t - self.p.start));
                        self.heap.push(Reverse((next, ci)));
                    }
                    now = self.tick();
                }
                if !self.dirty.is_empty() {
                    self.flush_dirty();
                    now = self.tick();
                    idle_since = None;
                }
                if burst > 0 {
                    self.out.busy_ns += now - began;
                    idle_since = None;
                }
                if self.heap.is_empty() {
                    sending = false;
                }
                if !sending {
                    // A generator that fell behind still gets the full drain.
                    drain_end = drain_end.max(now + (self.p.drain_end - self.p.end));
                }
            }
            if !sending && (self.outstanding == 0 || now >= drain_end) {
                break;
            }
            let next = match (sending, self.heap.peek()) {
                (true, Some(&Reverse((t, _)))) => t.min(self.p.end),
                _ => drain_end,
            };
            // Events the last poll returned and the loop has not handled
            // yet are handled before polling again: polling at once would
            // make the kernel poll their sockets again (the registrations
            // are level-triggered) for events already in hand.
            let woke = if self.ev_next < self.events.len() {
                idle_since = None;
                now
            } else {
                // Sleep until `spin` before the next send, then poll without
                // blocking until it is due: a thread that blocks lets its
                // (virtual) CPU halt, and waking it again can take
                // milliseconds.
                let timeout = sleep_ns(
                    now,
                    next,
                    spin,
                    self.outstanding,
                    self.last_stamp,
                    reply_wait,
                );
                self.events.clear();
                self.ev_next = 0;
                // A sleep is no stall; only its overshoot can be.
                self.last_tick = self.last_tick.max(now + timeout);
                self.events.extend(self.epoll.wait(Some(timeout))?);
                let woke = self.tick();
                if timeout == 0 && self.events.is_empty() {
                    if let Some(prev) = idle_since {
                        self.note_idle_gap(woke - prev);
                    }
                    idle_since = Some(woke);
                } else {
                    idle_since = None;
                }
                if let Some(t) = &mut self.trace {
                    t.note(
                        u8::from(timeout == 0),
                        now,
                        woke,
                        timeout,
                        self.events.len(),
                    );
                }
                woke
            };
            let mut at = woke;
            let first = self.ev_next;
            while self.ev_next < self.events.len() {
                // Sends come first: once one is due, the remaining events
                // wait for the next round of the loop.
                if sending && self.ev_next > first && self.heap.peek().is_some_and(|r| r.0 .0 <= at)
                {
                    break;
                }
                let (token, ev) = self.events[self.ev_next];
                self.ev_next += 1;
                self.on_event(token as usize, ev);
                let done = self.tick();
                if let Some(t) = &mut self.trace {
                    t.note(2, at, done, token, 0);
                }
                at = done;
            }
            self.out.busy_ns += at - woke;
        }
        let missing: u64 = self
            .conns
            .iter()
            .map(|c| c.pending.iter().filter(|p| !p.answered).count() as u64)
            .sum();
        self.out.errors.missing += missing;
        let cpu_end = cpu::thread_cpu_ns();
        self.out.cpu_ns = (cpu_end.0 - cpu_start.0, cpu_end.1 - cpu_start.1);
        let waited_end = cpu::thread_waited();
        self.out.waited_ns = waited_start.0.zip(waited_end.0).map(|(a, b)| b - a);
        self.out.preempted = waited_end.1 - waited_start.1;
        let threshold = gap_threshold_ns(&self.out.lateness);
        self.out.gap_threshold_ns = threshold;
        if let Some(dir) = std::env::var_os("SKQ_LOAD_GAPS_DIR") {
            dump_gaps(dir.as_ref(), &self.out);
        }
        self.out.gaps = excess_gaps(&self.out.gaps, threshold as f64);
        self.out.ref_gaps = excess_gaps(&self.out.ref_gaps, threshold as f64);
        normalise(&mut self.out.sched_gaps);
        Ok(self.out)
    }

    /// Reads the clock, counting the time since the previous reading as a
    /// stall of the machine when it is longer than [`STALL_NS`].
    fn tick(&mut self) -> u64 {
        let now = cpu::monotonic_ns();
        let since = self.last_tick;
        if now > since + STALL_NS {
            self.out.stalls += 1;
            self.out.stall_ns += now - since;
            if now < self.p.warm_end && now > self.p.start {
                self.out.warm_stall_ns += now - since.max(self.p.start);
            }
            if let (true, Some(iv)) = (self.measured(now), self.p.interval_ns) {
                let k = ((now - self.p.warm_end) / iv) as usize;
                *slot(&mut self.out.intervals_stall_ns, k, || 0) += now - since;
            }
            if self.stall_ring.len() == STALL_RING {
                self.stall_ring.pop_front();
            }
            self.stall_ring.push_back((since, now));
        }
        // An epoll sleep that an event ended early resumes the count here,
        // not at the sleep's planned end.
        self.last_tick = now;
        now
    }

    /// Records the gap between two back-to-back idle polls.
    fn note_idle_gap(&mut self, gap: u64) {
        self.out.idle_spin_ns += gap;
        if gap > IDLE_GAP_NS && self.out.idle_gaps.len() < MAX_IDLE_GAPS {
            self.out.idle_gaps.push(gap);
        }
    }

    /// A stall the test hooks inject: the generator's own, not the
    /// machine's, so the stall count resumes after it.
    fn pause(&mut self, d: std::time::Duration) {
        std::thread::sleep(d);
        self.last_tick = cpu::monotonic_ns();
    }

    /// Whether time `t` (a scheduled send or a read) lies in the measured
    /// window.
    fn measured(&self, t: u64) -> bool {
        t >= self.p.warm_end && t < self.p.end
    }

    /// Encodes the next request of connection `ci` into its write buffer.
    /// It is stamped and written by [`Worker::flush_dirty`] at the end of the
    /// burst, so requests due together on one connection share a write.
    fn send(&mut self, ci: usize, sched: u64) {
        if !self.conns[ci].alive {
            return;
        }
        let c = &mut self.conns[ci];
        let mut req = Request::new(c.seq);
        c.seq += 1;
        req.service_ns = if c.role == Role::Batch {
            self.p.batch_service_ns
        } else {
            self.p
                .service
                .sample(c.class, &mut self.rng)
                .min(u32::MAX as u64) as u32
        };
        req.class = match c.role {
            Role::High => 1,
            Role::Batch => 2,
            Role::Load | Role::Probe => 0,
        };
        if let Some(kv) = self.p.kv {
            kv.draw(&mut self.rng, &mut req);
        }
        if let Some(z) = self.p.zippy {
            z.draw(&mut self.rng, &mut req);
        }
        self.codec.encode(&req, &mut c.wbuf);
        let mut record = u32::MAX;
        if self.p.keep_requests && c.role == Role::Load {
            record = self.out.requests.len() as u32;
            let r = RequestRecord {
                sched,
                service_ns: req.service_ns,
                latency: None,
            };
            self.out.requests.push(r);
        }
        c.pending.push_back(Pend {
            req,
            sched,
            sent: 0,
            answered: false,
            record,
        });
        c.unstamped += 1;
        let load = c.role == Role::Load;
        if !c.dirty {
            c.dirty = true;
            self.dirty.push(ci as u32);
        }
        if let (true, Some(iv)) = (load && self.measured(sched), self.p.interval_ns) {
            let k = ((sched - self.p.warm_end) / iv) as usize;
            *slot(&mut self.out.intervals_sent, k, || 0) += 1;
        }
        // Scheduled gaps in schedule order (writes are grouped per
        // connection, so stamping order is not schedule order).
        if load {
            if let Some(prev) = self.last_sched.replace(sched) {
                if self.measured(sched) && self.sched_rng.gen::<f64>() < self.p.sample_p {
                    self.out.sched_gaps.push(sched.saturating_sub(prev) as f64);
                }
            }
        }
        self.outstanding += 1;
        self.sends += 1;
        if let Some((every, pause)) = self.p.stall {
            if self.sends >= every {
                self.sends = 0;
                self.pause(pause);
            }
        }
        if let Some((every, pause)) = self.p.host_stall {
            if self.sends.is_multiple_of(every) {
                std::thread::sleep(pause);
            }
        }
    }

    /// Stamps and writes the requests encoded since the last call, one
    /// write per connection.
    fn flush_dirty(&mut self) {
        for i in 0..self.dirty.len() {
            let ci = self.dirty[i] as usize;
            let now = self.tick();
            self.stamp(ci, now);
            let c = &mut self.conns[ci];
            c.dirty = false;
            if c.alive && !c.want_out {
                self.flush(ci);
            }
            if let Some(t) = &mut self.trace {
                t.note(3, now, cpu::monotonic_ns(), ci as u64, 0);
            }
        }
        self.dirty.clear();
    }

    /// Gives the unstamped requests of `ci` the send time `now` and records
    /// their lateness and (sampled) inter-send gaps.
    fn stamp(&mut self, ci: usize, now: u64) {
        self.last_stamp = now;
        let c = &mut self.conns[ci];
        let n = std::mem::take(&mut c.unstamped);
        let role = c.role;
        let first = c.pending.len() - n;
        for k in first..first + n {
            let c = &mut self.conns[ci];
            c.pending[k].sent = now;
            let sched = c.pending[k].sched;
            if let Some(t) = &mut self.trace {
                t.late(sched, now);
            }
            if self.measured(sched) {
                let late = now.saturating_sub(sched);
                self.out.lateness.record(late);
                let stalled = stalled_within(&self.stall_ring, sched, now);
                self.out.own_lateness.record(late - stalled.min(late));
                if role == Role::Load {
                    self.out.sent_window += 1;
                    if let Some((prev, prev_sched)) = self.last_send {
                        if self.sample_rng.gen::<f64>() < self.p.sample_p {
                            self.out.gaps.push(now.saturating_sub(prev) as f64);
                            // Requests stamped together may be out of
                            // schedule order: their reference gap is 0.
                            self.out
                                .ref_gaps
                                .push(sched.saturating_sub(prev_sched) as f64);
                        }
                    }
                }
            }
            if role == Role::Load {
                self.last_send = Some((now, sched));
            }
        }
    }

    /// Writes what is buffered; arms EPOLLOUT while the socket is full.
    fn flush(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        while c.wpos < c.wbuf.len() {
            match net::write(c.stream.as_raw_fd(), &c.wbuf[c.wpos..]) {
                Ok(n) => c.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !c.want_out {
                        c.want_out = true;
                        let _ = self.epoll.modify(
                            c.stream.as_raw_fd(),
                            epoll::IN | epoll::OUT | epoll::RDHUP,
                            ci as u64,
                        );
                    }
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.fail(ci),
            }
        }
        c.wbuf.clear();
        c.wpos = 0;
        if c.want_out {
            c.want_out = false;
            let _ = self
                .epoll
                .modify(c.stream.as_raw_fd(), epoll::IN | epoll::RDHUP, ci as u64);
        }
    }

    fn fail(&mut self, ci: usize) {
        let c = &mut self.conns[ci];
        if !c.alive {
            return;
        }
        c.alive = false;
        let _ = self.epoll.delete(c.stream.as_raw_fd());
        self.outstanding -= c.pending.iter().filter(|p| !p.answered).count() as u64;
        self.out.errors.connection_failures += 1;
    }

    fn on_event(&mut self, ci: usize, ev: u32) {
        if !self.conns[ci].alive {
            return;
        }
        if ev & epoll::OUT != 0 {
            self.flush(ci);
        }
        if ev & (epoll::IN | epoll::HUP | epoll::RDHUP) != 0 {
            self.read(ci);
        }
    }

    fn read(&mut self, ci: usize) {
        if let Some((every, pause)) = self.p.read_stall {
            self.reads += 1;
            if self.reads >= every {
                self.reads = 0;
                self.pause(pause);
            }
        }
        loop {
            let c = &mut self.conns[ci];
            if c.rlen == c.rbuf.len() {
                let grow = c.rbuf.len();
                c.rbuf.resize(grow * 2, 0);
            }
            let (fd, start) = (c.stream.as_raw_fd(), c.rlen);
            let got = if self.p.read_stamps {
                net::recv_timestamped(fd, &mut c.rbuf[start..])
            } else {
                net::read(fd, &mut c.rbuf[start..]).map(|n| (n, None))
            };
            match got {
                Ok((0, _)) => return self.fail(ci),
                Ok((n, stamp)) => {
                    c.rlen += n;
                    let full = c.rlen == c.rbuf.len();
                    let now = cpu::monotonic_ns();
                    if self.p.read_stamps {
                        self.note_read_lag(stamp, now);
                    }
                    if !self.parse(ci, now) || !full {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.fail(ci),
            }
        }
    }

    /// Records the lag of a read at `now` whose data the kernel stamped
    /// `stamp` (CLOCK_REALTIME), when the read falls in the measured window.
    fn note_read_lag(&mut self, stamp: Option<u64>, now: u64) {
        if !self.measured(now) {
            return;
        }
        match stamp {
            Some(s) => {
                let arrived = (s as i64).saturating_add(self.clock_offset).max(0) as u64;
                let lag = now.saturating_sub(arrived);
                self.out.read_lag.record(lag);
                // Stalls the loop has noted so far (one still running into
                // this read is not among them: a lower bound of the cover).
                let stalled = stalled_within(&self.stall_ring, arrived, now);
                self.out.own_read_lag.record(lag - stalled.min(lag));
            }
            None => self.out.unstamped_reads += 1,
        }
    }

    /// Consumes every whole reply in the buffer, read at `now`; false if the
    /// connection died.
    fn parse(&mut self, ci: usize, now: u64) -> bool {
        let mut pos = 0;
        loop {
            let c = &self.conns[ci];
            let head = c.pending.front().map(|p| &p.req);
            match self.codec.parse(&c.rbuf[pos..c.rlen], head) {
                Parsed::Incomplete => break,
                Parsed::Reply {
                    len,
                    answers,
                    service_ns,
                    miss,
                } => {
                    pos += len;
                    self.on_reply(ci, answers, service_ns, miss, now);
                }
                Parsed::Fatal(_) => {
                    self.out.errors.bad_reply += 1;
                    self.fail(ci);
                    return false;
                }
            }
        }
        let c = &mut self.conns[ci];
        c.rbuf.copy_within(pos..c.rlen, 0);
        c.rlen -= pos;
        true
    }

    fn on_reply(
        &mut self,
        ci: usize,
        answers: Answers,
        service_ns: Option<u32>,
        miss: bool,
        now: u64,
    ) {
        let (warm_end, end) = (self.p.warm_end, self.p.end);
        let c = &mut self.conns[ci];
        let idx = match answers {
            Answers::Id(id) if id < c.base => {
                self.out.errors.duplicate += 1;
                return;
            }
            Answers::Id(id) if id >= c.seq => {
                self.out.errors.bad_reply += 1;
                return;
            }
            Answers::Id(id) => (id - c.base) as usize,
            Answers::Head(_) if c.pending.is_empty() => {
                self.out.errors.bad_reply += 1;
                return;
            }
            Answers::Head(false) => {
                self.out.errors.bad_reply += 1;
                c.pending.pop_front();
                c.base += 1;
                self.outstanding -= 1;
                return;
            }
            Answers::Head(true) => 0,
        };
        let p = &mut c.pending[idx];
        if p.answered {
            self.out.errors.duplicate += 1;
            return;
        }
        p.answered = true;
        self.outstanding -= 1;
        let seq = c.base + idx as u64;
        if seq + 1 < c.max_answered {
            self.out.errors.out_of_order += 1;
        }
        c.max_answered = c.max_answered.max(seq + 1);
        let (sched, sent, role, record) = (p.sched, p.sent, c.role, p.record);
        let asked_ns = p.req.service_ns;
        while c.pending.front().is_some_and(|p| p.answered) {
            c.pending.pop_front();
            c.base += 1;
        }
        if role == Role::Load && now >= warm_end && now < end {
            self.out.recv_window += 1;
        }
        if !(sched >= warm_end && sched < end) {
            return;
        }
        let lat = now.saturating_sub(sched);
        if let Some(r) = self.out.requests.get_mut(record as usize) {
            r.latency = Some(lat);
        }
        self.out.lat[role as usize].record(lat);
        self.out.raw[role as usize].record(now.saturating_sub(sent));
        if role != Role::Load {
            return;
        }
        self.out.received_measured += 1;
        self.out.misses += u64::from(miss);
        if let Some(s) = service_ns {
            self.out.service_sum += s as f64;
            self.out.requested_sum += f64::from(asked_ns);
            self.out.service_n += 1;
        }
        if self.p.series_p >= 1.0 || self.sample_rng.gen::<f64>() < self.p.series_p {
            self.out.series.push((sched, lat));
        }
        if let Some(iv) = self.p.interval_ns {
            let k = ((sched - warm_end) / iv) as usize;
            slot(&mut self.out.intervals, k, Hist::new).record(lat);
            if let Some(s) = service_ns {
                slot(&mut self.out.intervals_service, k, ServiceTally::default).add(ServiceTally {
                    delivered_ns: s as f64,
                    asked_ns: f64::from(asked_ns),
                    replies: 1,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_cover_only_their_overlap_with_a_sends_lateness() {
        let ring: VecDeque<(u64, u64)> = [(100, 200), (300, 400), (1_000, 1_500)].into();
        // A send scheduled at 150 and stamped at 350: half of each of the
        // first two stalls lies inside.
        assert_eq!(stalled_within(&ring, 150, 350), 100);
        // Entirely inside the last stall.
        assert_eq!(stalled_within(&ring, 1_100, 1_200), 100);
        // Between stalls: nothing.
        assert_eq!(stalled_within(&ring, 200, 300), 0);
        // After every stall.
        assert_eq!(stalled_within(&ring, 1_500, 2_000), 0);
        // Spanning all of them.
        assert_eq!(stalled_within(&ring, 0, 5_000), 700);
        assert_eq!(stalled_within(&VecDeque::new(), 0, 5_000), 0);
    }

    #[test]
    fn the_loop_stays_awake_for_replies_only_after_a_recent_send() {
        const MS: u64 = 1_000_000;
        let spin = 2 * MS;
        // Next send 10 ms away, last send 0.5 ms ago, a reply outstanding,
        // a CPU of its own: poll without blocking.
        assert_eq!(
            sleep_ns(100 * MS, 110 * MS, spin, 1, 99 * MS + MS / 2, spin),
            0
        );
        // Nothing outstanding: sleep until the spin before the next send.
        assert_eq!(
            sleep_ns(100 * MS, 110 * MS, spin, 0, 99 * MS + MS / 2, spin),
            8 * MS
        );
        // The wait after the last send is over: sleep again.
        assert_eq!(sleep_ns(100 * MS, 110 * MS, spin, 1, 97 * MS, spin), 8 * MS);
        // A CPU shared with the server (no reply wait): sleep.
        assert_eq!(
            sleep_ns(100 * MS, 110 * MS, spin, 1, 99 * MS + MS / 2, 0),
            8 * MS
        );
        // Inside the pre-send spin anyway: poll.
        assert_eq!(sleep_ns(100 * MS, 101 * MS, spin, 0, 0, spin), 0);
    }
}
