//! The schema of one measured load point.
//!
//! `skq load --json FILE` writes one [`PointResult`]; `skq bench` reads it back
//! (the load generator runs as a child process) and `skq sim` fills the same
//! type from virtual time. Latencies are microseconds. Fields that a producer
//! cannot measure are `None`, never zero.

use serde::{Deserialize, Serialize};

/// Tags of the whole-window intervals `skq load --hdr-log` writes after the
/// load connections' untagged 1 s intervals: the probe's, the high-priority
/// client's and the best-effort clients' latency, in that order (the
/// `probe_latency`, `high_priority_latency` and `batch_latency` of
/// [`PointResult`]).
pub const LOG_TAGS: [&str; 3] = ["probe", "high", "batch"];

/// One percentile estimate with its 95% confidence interval (order statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Point estimate (µs).
    pub value: f64,
    /// Lower end of the 95% confidence interval (µs).
    pub ci_low: f64,
    /// Upper end of the 95% confidence interval (µs).
    pub ci_high: f64,
}

/// Latency summary of one sample set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Number of samples (after warm-up).
    pub count: u64,
    /// Mean (µs).
    pub mean: f64,
    /// Median.
    pub p50: Estimate,
    /// 90th percentile.
    pub p90: Estimate,
    /// 99th percentile.
    pub p99: Estimate,
    /// 99.9th percentile.
    pub p999: Estimate,
    /// Largest sample (µs).
    pub max: f64,
}

/// Correctness counters: every one of them must be zero for a clean run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Errors {
    /// Requests never answered by the end of the drain period.
    pub missing: u64,
    /// Replies received twice for one request.
    pub duplicate: u64,
    /// Replies that arrived out of per-connection order.
    pub out_of_order: u64,
    /// Replies that could not be parsed or matched no request, and error
    /// replies (a refusal of the RPC or RocksDB server's `--max-service-us`,
    /// memcached's `SERVER_ERROR`, HTTP outside 2xx), each a failed request.
    pub bad_reply: u64,
    /// Connections that failed or were closed by the server.
    pub connection_failures: u64,
}

impl Errors {
    /// Sum of all counters.
    pub fn total(&self) -> u64 {
        self.missing
            + self.duplicate
            + self.out_of_order
            + self.bad_reply
            + self.connection_failures
    }
}

/// Self-checks (BRIEF §8). `pass` is false when any check failed; `notes`
/// says which, in words fit for every output format.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Checks {
    /// (achieved − sent) / sent × 100: replies in the measured window
    /// against the requests the seed's schedule placed there (the target
    /// when nothing was sent). Older results compared with the target.
    pub rate_error_pct: f64,
    /// |rate_error_pct| ≤ 5, and the requests sent within the larger of 5%
    /// and four standard deviations of a Poisson count of the target's.
    pub rate_ok: bool,
    /// Anderson–Darling A² of sampled *actual* inter-send gaps against the
    /// exponential (None for non-Poisson schedules or too few gaps). Only
    /// gaps longer than [`Checks::ad_threshold_us`] count, shortened by it:
    /// for a Poisson process these excesses are again exponential
    /// (memorylessness), while gaps shorter than the generator's own send
    /// time cannot be realised by any generator.
    pub ad_statistic: Option<f64>,
    /// The threshold (µs) of the gap test above.
    #[serde(default)]
    pub ad_threshold_us: Option<f64>,
    /// A² of the *scheduled* gaps (the schedule generator itself).
    #[serde(default)]
    pub ad_scheduled: Option<f64>,
    /// A² of the scheduled times of the same sends as `ad_statistic`,
    /// through the same threshold: what the seed alone gives. The gap test
    /// fails only when the actual sends exceed the critical value and these
    /// by more than `skq_load::checks::AD_PAIRED_MARGIN`.
    #[serde(default)]
    pub ad_reference: Option<f64>,
    /// The arrivals verdict: A² below the 5% critical value or within the
    /// paired margin of the reference (true when not applicable).
    pub ad_ok: bool,
    /// Lag-1 Spearman rank correlation of latency samples in send order.
    pub lag1_rank_corr: f64,
    /// Correlation small enough to treat samples as independent, possibly
    /// after thinning (see `decorrelation_stride`).
    pub independence_ok: bool,
    /// Requests between latency samples that are treated as independent
    /// (1 = consecutive requests already are); the confidence intervals use
    /// `effective_n` = count / stride samples.
    #[serde(default)]
    pub decorrelation_stride: u64,
    /// Sample count behind the confidence intervals.
    #[serde(default)]
    pub effective_n: u64,
    /// p99 of (actual − scheduled) send time, µs.
    pub lateness_p99_us: f64,
    /// Lateness p99 under the threshold.
    pub lateness_ok: bool,
    /// p99 of the generator's read lag, µs: from the kernel's receive stamp
    /// of the data a read took to the read (None: no stamped reads, or a
    /// result from before the check existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_lag_p99_us: Option<f64>,
    /// Read-lag p99 under its threshold (true when not measured).
    #[serde(default = "not_measured_passes")]
    pub read_lag_ok: bool,
    /// All checks passed and no correctness errors.
    pub pass: bool,
    /// One line per failed check.
    pub notes: Vec<String>,
}

fn not_measured_passes() -> bool {
    true
}

/// CPU time consumed by a process over the measured run, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTime {
    /// User time.
    pub user_s: f64,
    /// System time.
    pub sys_s: f64,
}

/// How the point was produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `rpc`, `memcached` or `http`.
    pub protocol: String,
    /// Workload name (BRIEF §9) or a description.
    pub workload: String,
    /// Nominal mean service time S̄ (µs) after scaling, if the workload has one.
    pub nominal_service_us: Option<f64>,
    /// Emulation scale factor.
    pub scale: f64,
    /// `spin`, `emulate` or `simulated` (as reported by the server or simulator).
    pub service_mode: String,
    /// Load connections.
    pub connections: usize,
    /// Generator threads.
    pub threads: usize,
    /// CPUs the generator saw.
    pub cores_seen: usize,
    /// Measured seconds (after warm-up).
    pub duration_s: f64,
    /// Discarded warm-up seconds.
    pub warmup_s: f64,
    /// Seed of the arrival schedule and the request mix (`skq load
    /// --seed`); none for the simulator's points.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// One measured load point.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// How it was produced.
    pub meta: Meta,
    /// Offered load (requests/s).
    pub target_rps: f64,
    /// Replies per second actually received in the measured window.
    pub achieved_rps: f64,
    /// Requests sent in the measured window.
    pub sent: u64,
    /// Replies received in the measured window.
    pub received: u64,
    /// Latency from the *scheduled* send time (the figure to quote).
    pub latency: Latency,
    /// Latency from the actual send time, reported beside it.
    pub raw_latency: Latency,
    /// Latency seen by dedicated probe connections, when enabled.
    pub probe_latency: Option<Latency>,
    /// Latency of the high-priority client (priority workload).
    pub high_priority_latency: Option<Latency>,
    /// Latency of the best-effort (batch, RPC class 2) clients, when
    /// enabled; its `count` over `meta.duration_s` is their throughput.
    #[serde(default)]
    pub batch_latency: Option<Latency>,
    /// Mean service time actually delivered, from the replies (µs).
    pub measured_service_us: Option<f64>,
    /// Mean service time the same replies' requests asked for (µs): with
    /// `measured_service_us`, how far the server's service overshot what
    /// was asked ([`PointResult::service_overshoot_us`]). None in results
    /// from before the field existed and where no reply reported a service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_service_us: Option<f64>,
    /// Correctness counters.
    pub errors: Errors,
    /// Self-check verdicts.
    pub checks: Checks,
    /// Generator CPU time (spinning included: a generator thread with a CPU
    /// of its own spins before each send).
    pub client_cpu: CpuTime,
    /// Wall time the generator threads spent on their work, sending and
    /// reading, without sleeping and spinning (seconds, whole run): divided
    /// by the requests sent, the generator's cost per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_busy_s: Option<f64>,
    /// Requests the generator sent over the whole run, warm-up included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_sent_total: Option<u64>,
    /// Time the generator threads were runnable but waiting for a CPU
    /// (seconds, whole run, from schedstat): lateness the machine caused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_waited_s: Option<f64>,
    /// The generator threads' involuntary context switches over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_preempted: Option<u64>,
    /// The machine's timing floor on the generator's CPU, sampled while the
    /// generator spun with nothing to do (the worst thread's; absent when
    /// no thread spun long enough to judge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_floor: Option<MachineFloor>,
    /// The machine's stalls of the generator threads' loops over the run,
    /// and the send lateness left without them (absent where the generator
    /// did not report them: the simulator, older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_stalls: Option<GeneratorStalls>,
    /// Server CPU time, when the harness measured it.
    pub server_cpu: Option<CpuTime>,
    /// Offered rate, achieved rate and latency per interval of the measured
    /// window (with a rate profile or `--interval-ms`; else empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalPoint>,
    /// CLOCK_MONOTONIC time (ns) at which the send schedule (and a rate
    /// profile) started, warm-up included: lines the series up with a
    /// server's own timeline on the same machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_start_ns: Option<u64>,
    /// Steal time of the run's CPUs during the warm-up before the measured
    /// window (ms, as [`IntervalPoint::host_steal_ms`]): a hold of the
    /// host's there leaves a backlog that the window's first second drains.
    /// None where it was not sampled and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_host_steal_ms: Option<f64>,
}

/// What the machine alone does to a generator's schedule, from the gaps in a
/// thread's spinning (`skq_load::capacity::floor_from_gaps`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineFloor {
    /// Seconds of spinning sampled.
    pub spun_s: f64,
    /// Send-lateness p99 (µs) an ideal generator would have on that CPU.
    pub lateness_p99_us: f64,
    /// Share of the sampled time lost in gaps over 20 µs.
    pub lost_over_20us: f64,
    /// Longest gap (µs).
    pub max_gap_us: f64,
}

/// Steps of the generator threads' loops that took longer than
/// `skq_load::worker::STALL_NS` (one poll, read or write; an epoll sleep
/// past its timeout): time the machine took from the generator while it
/// worked, which the idle-spin floor ([`MachineFloor`]) does not see.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GeneratorStalls {
    /// Stalls over the whole run (all threads).
    pub count: u64,
    /// Their total length (seconds).
    pub lost_s: f64,
    /// Send-lateness p99 (µs) with the part the stalls cover taken out of
    /// each send's lateness: what the generator's own work made it.
    pub own_lateness_p99_us: f64,
    /// Read-lag p99 (µs) with the part the stalls cover taken out of each
    /// read's lag (None: no stamped reads, or an older result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_read_lag_p99_us: Option<f64>,
}

impl PointResult {
    /// Replies in the measured window (`achieved_rps` × measured seconds):
    /// the denominator of every per-reply figure of the point (server CPU,
    /// context switches).
    pub fn window_replies(&self) -> f64 {
        self.achieved_rps * self.meta.duration_s
    }

    /// How far the delivered service overshot the requested one, µs:
    /// `measured_service_us − requested_service_us`, when both are known.
    /// An emulated service (a sleep) overshoots by the timer's slack and
    /// the wake-up on a quiet machine; a host that delays the server's
    /// threads adds to it.
    pub fn service_overshoot_us(&self) -> Option<f64> {
        let d = self.measured_service_us? - self.requested_service_us?;
        d.is_finite().then_some(d)
    }

    /// What the machine took from the generator threads over the run, as
    /// `"preempted N times, X ms waiting for a CPU; machine floor F us"`
    /// (the floor: an ideal generator's lateness p99 on that CPU, when
    /// measured); `None` where the generator did not report it (the
    /// simulator, older results).
    pub fn generator_preemption(&self) -> Option<String> {
        let n = self.client_preempted?;
        let mut s = match self.client_waited_s {
            Some(w) => format!("preempted {n} times, {:.2} ms waiting for a CPU", w * 1e3),
            None => format!("preempted {n} times"),
        };
        if let Some(f) = self.client_floor {
            s += &format!("; machine floor {:.1} us", f.lateness_p99_us);
        }
        if let Some(st) = self.client_stalls {
            s += &format!(
                "; {} stalls ({:.2} ms), lateness p99 without them {:.1} us",
                st.count,
                st.lost_s * 1e3,
                st.own_lateness_p99_us
            );
            if let Some(r) = st.own_read_lag_p99_us {
                s += &format!(", read lag p99 without them {r:.1} us");
            }
        }
        Some(s)
    }
}

/// One interval of a point's time series. Requests belong to the interval
/// in which they were scheduled.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalPoint {
    /// Start of the interval, seconds from the start of the measured window.
    pub start_s: f64,
    /// Requests scheduled in the interval, per second.
    pub offered_rps: f64,
    /// Of those, replies received (whenever), per second.
    pub achieved_rps: f64,
    /// Median latency from the scheduled send time (µs); None without replies.
    pub p50_us: Option<f64>,
    /// p99 latency (µs); None without replies.
    pub p99_us: Option<f64>,
    /// Mean service the replies to this interval's requests reported beyond
    /// what the requests asked for (µs; emulated or spun service only, None
    /// without such replies and in results from before it was recorded).
    /// Against the rest of the point it shows whether the server's threads
    /// were held off their CPU in this interval (see skq-bench's
    /// `overshoot` module for the point-level judgement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_overshoot_us: Option<f64>,
    /// Time the generator's loops lost to the machine's stalls (steps over
    /// 50 µs) that ended in this interval, summed over its threads (ms; None
    /// in results from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_stall_ms: Option<f64>,
    /// Steal time of the run's CPUs in this interval (ms, summed over
    /// them; `/proc/stat`, read every 100 ms by `skq bench`, good to a
    /// reading and a 10-ms tick): time the hypervisor kept a vCPU that had
    /// work from running, as in the host's 100-ms holds of the 2-CPU VMs.
    /// None where the generator ran alone and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_steal_ms: Option<f64>,
}

/// Context switches of a server's threads over a measured run, summed over
/// its threads (and, for a multi-process server, its child processes):
/// `voluntary` when a thread blocked (an idle wait, a lock, a wake-up
/// handed to another thread), `involuntary` when the scheduler took the CPU
/// from it. Read from `/proc/PID/task/*/status` before and after the run:
/// threads that exit in between take their switches with them, so the
/// figure is a lower bound for a server whose threads come and go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtxSwitches {
    /// Voluntary context switches.
    pub voluntary: u64,
    /// Involuntary context switches.
    pub involuntary: u64,
}

impl CtxSwitches {
    /// Voluntary + involuntary.
    pub fn total(&self) -> u64 {
        self.voluntary + self.involuntary
    }

    /// (voluntary, involuntary) per reply; `None` without replies.
    pub fn per_reply(&self, replies: f64) -> Option<(f64, f64)> {
        (replies > 0.0).then(|| {
            (
                self.voluntary as f64 / replies,
                self.involuntary as f64 / replies,
            )
        })
    }
}
