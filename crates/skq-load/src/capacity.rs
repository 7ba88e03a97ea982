//! `skq load --capacity`: how fast one generator thread can keep its schedule.
//!
//! **The machine's floor.** No generator can send closer to schedule than the
//! CPU it runs on lets it: in a VM, interrupts, timer ticks and the host take
//! the CPU away for tens of µs at a time. [`spin_floor`] measures that first:
//! a thread pinned to the generator's CPU reads the clock in a tight loop and
//! records every gap. A send scheduled at a uniformly random instant is late
//! by the rest of the gap it falls in, so the floor's lateness p99 is the `x`
//! at which the gaps' total excess over `x` is 1% of the time. A generator
//! cannot do better than that, whatever its code. The floor is measured while
//! the echo server already polls on its CPU, as during the steps.
//!
//! **The search.** One generator thread (pinned to one CPU) sends
//! zero-service requests of the chosen protocol (RPC, memcached get/set
//! mixes, HTTP GETs) over `connections` connections to the built-in echo
//! server speaking it, which busy-polls on another CPU when there is one (so
//! no send pays for waking it). The offered rate
//! starts at 1k req/s and grows ×1.5 per step; a step passes a lateness bound
//! when its send lateness and read lag p99 are under the bound, its achieved
//! rate is within 5% of the offered one, and it has no correctness error (a
//! failed step is tried once more, so one hiccup does not end the search,
//! and up to five times while the machine's stalls took more than 10 ms
//! from the best try; see [`search`]).
//! The send lateness judged is the generator's own: the part of each send's
//! lateness that the machine's stalls of its loop cover (steps over 50 µs
//! that no poll, read or write takes; `skq bench` calls a point late for
//! them "the machine's") is taken out, so a host that stalls the thread for
//! a millisecond at a low rate does not record a capacity of a few thousand
//! requests a second, and what is recorded is what the generator's own work
//! sustains. Read lag is judged the same way (the stalls that fall between
//! a reply's arrival and its read are taken out). Both figures are printed
//! per step. The capacity at a
//! bound is the highest rate below the first rate that fails it after some
//! rate has met it: slower steps that fail it before any has met it (on a
//! virtual machine, the thread's wake-ups from sleep between sends can hold
//! the read lag of the slowest rates over the bound) do not end the search,
//! and the rate from which the bound was met is reported and recorded
//! beside the capacity, so `skq bench` can warn about a sweep's slowest
//! points too. It is reported at the fixed bound (`--max-lateness-us`, the threshold of the
//! lateness self-check, 50 µs by default) and, because on a
//! noisy machine the floor alone can exceed that, also at the floor plus the
//! same margin. Finally one step offers far more than the thread can send:
//! its achieved rate is the thread's ceiling, and its per-thread CPU time
//! (`RUSAGE_THREAD`), split into user space and kernel, is the cost of one
//! request — the generator's own code versus the kernel's TCP loopback path.
//!
//! **What it is for.** `skq load --capacity` runs the search for each count
//! of `--capacity-conns` and records the results per protocol and count in
//! the capacity file (`skq_report::capacity`); `skq bench` warns before a
//! sweep that would offer more per generator thread than was measured.

use std::time::Duration;

use skq_proto::workload::{ServiceSpec, Workload};

use crate::config::LoadConfig;
use crate::protocol::Protocol;
use crate::refserver::{EchoProtocol, RefServer};
use skq_sys::cpu;

/// Margin over the machine's floor of the relative bound (µs).
pub const CAPACITY_LATENESS_US: f64 = 20.0;
/// First offered rate of the search (req/s).
const FIRST_RATE: f64 = 1_000.0;
/// Growth factor between steps.
const GROWTH: f64 = 1.5;
/// Highest rate offered in the search (req/s); also the ceiling step's rate.
const MAX_RATE: f64 = 3_000_000.0;
/// Machine stalls (ms) over a step beyond which it is tried again while it
/// fails (see [`search`]).
pub const DISTURBED_MS: f64 = 10.0;
/// Most tries of one rate.
const MAX_TRIES: usize = 5;

/// The timing floor of one CPU, from [`spin_floor`].
#[derive(Clone, Copy, Debug)]
pub struct Floor {
    /// CPU measured (None: not pinned).
    pub cpu: Option<u32>,
    /// Seconds measured.
    pub secs: f64,
    /// Send-lateness p99 (µs) of an ideal generator on this CPU.
    pub lateness_p99_us: f64,
    /// Fraction of the time lost in gaps longer than 20 µs.
    pub lost_over_20us: f64,
    /// Longest gap seen (µs).
    pub max_gap_us: f64,
}

/// Spins on the clock for `dur` on `cpu` (if given) and returns its floor.
pub fn spin_floor(cpu: Option<u32>, dur: Duration) -> std::io::Result<Floor> {
    std::thread::scope(|s| {
        s.spawn(|| -> std::io::Result<Floor> {
            if let Some(c) = cpu {
                cpu::pin_current_thread(c)?;
            }
            let mut gaps = Vec::new();
            let start = cpu::monotonic_ns();
            let end = start + dur.as_nanos() as u64;
            let mut prev = start;
            while prev < end {
                let t = cpu::monotonic_ns();
                // Gaps under 1 µs are the loop itself; they cannot move a p99
                // that is measured in µs.
                if t - prev > 1_000 {
                    gaps.push(t - prev);
                }
                prev = t;
            }
            let total = (prev - start) as f64;
            Ok(floor_from_gaps(cpu, &gaps, total))
        })
        .join()
        .expect("spin thread does not panic")
    })
}

/// The floor statistics of a list of gaps (ns) over `total` ns of spinning.
pub fn floor_from_gaps(cpu: Option<u32>, gaps: &[u64], total: f64) -> Floor {
    // Share of uniformly random instants whose residual gap exceeds x.
    let late_share =
        |x: f64| -> f64 { gaps.iter().map(|&g| (g as f64 - x).max(0.0)).sum::<f64>() / total };
    let max_gap = gaps.iter().copied().max().unwrap_or(0) as f64;
    // late_share falls monotonically from (share of time in gaps) at x = 0 to
    // 0 at the longest gap: bisect for the 1% point.
    let p99 = if late_share(0.0) <= 0.01 {
        0.0
    } else {
        let (mut lo, mut hi) = (0.0, max_gap);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            if late_share(mid) > 0.01 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    };
    let lost = gaps.iter().filter(|&&g| g > 20_000).sum::<u64>() as f64 / total;
    Floor {
        cpu,
        secs: total / 1e9,
        lateness_p99_us: p99 / 1e3,
        lost_over_20us: lost,
        max_gap_us: max_gap / 1e3,
    }
}

/// One step of the capacity search.
#[derive(Clone, Debug)]
pub struct CapacityStep {
    /// Offered rate.
    pub rate: f64,
    /// Send-lateness p99 (µs).
    pub lateness_p99_us: f64,
    /// Send-lateness p99 without the machine's stalls (µs): the
    /// generator's own (None: not reported).
    pub own_lateness_p99_us: Option<f64>,
    /// Read-lag p99 (µs; None: no stamped reads).
    pub read_lag_p99_us: Option<f64>,
    /// Read-lag p99 without the machine's stalls (µs; None: not reported).
    pub own_read_lag_p99_us: Option<f64>,
    /// Achieved rate.
    pub achieved: f64,
    /// Whether the achieved rate was within 5% of the offered one.
    pub rate_ok: bool,
    /// Correctness errors.
    pub errors: u64,
    /// Generator thread CPU per request sent, user space and kernel (µs).
    pub cpu_us_per_request: (f64, f64),
    /// Time the machine's stalls took from the generator's loop over the
    /// run, ms (0: not reported).
    pub stalled_ms: f64,
}

impl CapacityStep {
    /// Whether the step meets a lateness bound (µs), sending and reading,
    /// with the right rate and no errors. The echo server answers at once,
    /// so a reply's whole latency is the generator's and the loopback's:
    /// read lag is held to the same bound as send lateness.
    pub fn passes(&self, bound_us: f64) -> bool {
        self.own_lateness() < bound_us
            && self.own_read_lag().is_none_or(|l| l < bound_us)
            && self.rate_ok
            && self.errors == 0
    }

    /// The send lateness the step is judged on: the generator's own, or the
    /// whole when that is not known.
    pub fn own_lateness(&self) -> f64 {
        self.own_lateness_p99_us
            .map_or(self.lateness_p99_us, |o| o.min(self.lateness_p99_us))
    }

    /// Whether the machine took more than [`DISTURBED_MS`] from the
    /// generator's loop during the step.
    pub fn disturbed(&self) -> bool {
        self.stalled_ms > DISTURBED_MS
    }

    /// The read lag the step is judged on: the generator's own, or the
    /// whole when that is not known (None: no stamped reads).
    pub fn own_read_lag(&self) -> Option<f64> {
        let whole = self.read_lag_p99_us?;
        Some(self.own_read_lag_p99_us.map_or(whole, |o| o.min(whole)))
    }
}

/// Everything `--capacity` found.
#[derive(Clone, Debug)]
pub struct Capacity {
    /// The generator CPU's floor.
    pub floor: Floor,
    /// CPU of the echo server (None: unpinned).
    pub server_cpu: Option<u32>,
    /// Steps of the search, in the order run.
    pub steps: Vec<CapacityStep>,
    /// The fixed bound (µs): the lateness self-check's threshold.
    pub bound_us: f64,
    /// Capacity at `bound_us`: the highest rate met before the first
    /// failure above the lowest rate met (0: no rate met it).
    pub at_bound: f64,
    /// The rate from which `bound_us` was met, when slower steps failed it
    /// (None: the first step met it, or none did).
    pub met_from: Option<f64>,
    /// The relative bound: floor p99 + [`CAPACITY_LATENESS_US`] (µs).
    pub relative_bound_us: f64,
    /// Capacity at the relative bound.
    pub at_relative_bound: f64,
    /// As `met_from`, at the relative bound.
    pub relative_met_from: Option<f64>,
    /// The saturated step: achieved rate and CPU per request.
    pub ceiling: CapacityStep,
}

/// The echo server's protocol for a `--protocol` (rocksdb has no echo).
pub fn echo_protocol(p: Protocol) -> anyhow::Result<EchoProtocol> {
    match p {
        Protocol::Rpc => Ok(EchoProtocol::Rpc),
        Protocol::Memcached => Ok(EchoProtocol::Memcached),
        Protocol::Http => Ok(EchoProtocol::Http),
        Protocol::Rocksdb => anyhow::bail!(
            "--protocol rocksdb: --capacity has no built-in RocksDB server; measure rpc, memcached or http"
        ),
    }
}

/// Settings of the search.
#[derive(Clone, Debug)]
pub struct CapacityOpts {
    /// Protocol the generator and the echo server speak.
    pub protocol: EchoProtocol,
    /// The fixed lateness bound (µs): `--max-lateness-us`, the threshold
    /// of the lateness self-check, so the capacity is the highest rate at
    /// which a run passes it.
    pub bound_us: f64,
    /// Connections of the generator thread.
    pub connections: usize,
    /// Seed.
    pub seed: u64,
    /// Spin before sends (µs).
    pub spin_us: Option<u64>,
    /// CPU for the generator (None: the first allowed CPU).
    pub cpu: Option<u32>,
    /// `SCHED_FIFO` priority of the generator, if any.
    pub rt: Option<i32>,
}

/// Picks the generator's and the echo server's CPUs: the generator's as
/// asked (or the first allowed), the server's the next allowed one that
/// differs (None on a single-CPU machine).
pub fn pick_cpus(asked: Option<u32>, allowed: &[u32]) -> (Option<u32>, Option<u32>) {
    let gen = asked.or_else(|| allowed.first().copied());
    let server = allowed.iter().copied().find(|&c| Some(c) != gen);
    (gen, server)
}

/// Runs the floor measurement and the search (see the module docs).
/// `on_step` sees every step as it finishes.
pub fn capacity(
    opts: &CapacityOpts,
    mut on_step: impl FnMut(&CapacityStep),
) -> anyhow::Result<Capacity> {
    let allowed = cpu::allowed_cpus()?;
    if let Some(c) = opts.cpu {
        if !allowed.contains(&c) {
            anyhow::bail!("--cpus: CPU {c} is not among this process's CPUs {allowed:?}");
        }
    }
    let (gen_cpu, server_cpu) = pick_cpus(opts.cpu, &allowed);
    // The server polls on its own CPU from the start, so the floor is measured
    // under the same conditions as the steps.
    let server = RefServer::start_echo(opts.protocol, true, server_cpu)?;
    let floor = spin_floor(gen_cpu, Duration::from_secs(2))?;
    let mut steps = Vec::new();
    let mut trial = |rate: f64, secs: f64| -> anyhow::Result<CapacityStep> {
        let mut cfg = LoadConfig::new(server.addr(), rate);
        cfg.service = ServiceSpec::new(Workload::Fixed, 0.0);
        cfg.workload_label = "fixed (0 us)".into();
        cfg.connections = opts.connections;
        cfg.protocol = match opts.protocol {
            EchoProtocol::Rpc => Protocol::Rpc,
            EchoProtocol::Memcached => Protocol::Memcached,
            EchoProtocol::Http => Protocol::Http,
        }
        .into();
        cfg.duration = Duration::from_secs_f64(secs);
        cfg.warmup = Duration::from_millis(300);
        cfg.drain = Duration::from_millis(500);
        cfg.seed = opts.seed;
        cfg.keeping.rt_priority = opts.rt;
        cfg.keeping.spin_us = opts.spin_us;
        cfg.keeping.cpus = gen_cpu.into_iter().collect();
        let (r, cost) = crate::engine::run_with_cost(&cfg)?;
        let per = |ns: u64| ns as f64 / 1e3 / cost.sent_total.max(1) as f64;
        let step = CapacityStep {
            rate,
            lateness_p99_us: r.checks.lateness_p99_us,
            own_lateness_p99_us: r.client_stalls.map(|s| s.own_lateness_p99_us),
            read_lag_p99_us: r.checks.read_lag_p99_us,
            own_read_lag_p99_us: r.client_stalls.and_then(|s| s.own_read_lag_p99_us),
            achieved: r.achieved_rps,
            rate_ok: r.checks.rate_ok,
            errors: r.errors.total(),
            cpu_us_per_request: (per(cost.cpu_ns.0), per(cost.cpu_ns.1)),
            stalled_ms: r.client_stalls.map_or(0.0, |s| s.lost_s * 1e3),
        };
        on_step(&step);
        steps.push(step.clone());
        Ok(step)
    };
    let relative_bound_us = floor.lateness_p99_us + CAPACITY_LATENESS_US;
    let found = search(opts.bound_us, relative_bound_us, |rate| trial(rate, 1.5))?;
    let ceiling = trial(MAX_RATE, 1.0)?;
    Ok(Capacity {
        bound_us: opts.bound_us,
        floor,
        server_cpu,
        steps,
        at_bound: found.strict.highest,
        met_from: found.strict.met_from(),
        relative_bound_us,
        at_relative_bound: found.relative.highest,
        relative_met_from: found.relative.met_from(),
        ceiling,
    })
}

/// Where the search stands at one bound.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BoundSearch {
    /// The first rate that met the bound (None: none yet).
    pub lowest: Option<f64>,
    /// The highest rate met before the first failure above `lowest`
    /// (0: none).
    pub highest: f64,
    /// Whether a rate below `lowest` failed the bound.
    pub failed_below: bool,
    /// Whether a failure above `lowest` has ended the search at this bound.
    pub closed: bool,
}

impl BoundSearch {
    /// Takes one step's verdict at `rate`.
    fn take(&mut self, rate: f64, passed: bool) {
        if self.closed {
            return;
        }
        match (passed, self.lowest) {
            (true, None) => {
                self.lowest = Some(rate);
                self.highest = rate;
            }
            (true, Some(_)) => self.highest = rate,
            (false, None) => self.failed_below = true,
            (false, Some(_)) => self.closed = true,
        }
    }

    /// The rate from which the bound was met, when slower steps failed it
    /// (None: the first step met it, or no step did).
    pub fn met_from(&self) -> Option<f64> {
        self.lowest.filter(|_| self.failed_below)
    }
}

/// What [`search`] found at both bounds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Found {
    /// At the fixed bound.
    pub strict: BoundSearch,
    /// At the relative bound.
    pub relative: BoundSearch,
}

/// The search over offered rates (see the module docs), with `trial`
/// running one step at a rate. Steps that fail a bound before any step has
/// met it do not end the search at that bound: on a virtual machine the
/// slowest rates can fail for the generator's wake-ups from sleep between
/// sends (read lag of 40–55 µs at 1,000 req/s, where 3,375 req/s read in
/// 6 µs, measured before a thread with its own CPU waited awake for its
/// replies, `worker.rs`), a cause that vanishes as the rate grows, and the
/// capacity is about how fast the thread keeps its schedule. The first
/// failure after a pass ends the search at that bound; a rate the thread
/// could not even send ends it at both.
///
/// A failing rate is tried twice, and then again (up to [`MAX_TRIES`] in
/// all) while its best try lost more than [`DISTURBED_MS`] to the
/// machine's stalls: a host that holds a vCPU off for 100 ms leaves the
/// generator a backlog whose catch-up counts as its own lateness (on the
/// VM of 2026-12-06, evening, about half the steps of a search whose echo
/// server busy-polls the other CPU had such a hold; docs/MEASUREMENT.md).
/// The step is judged on its best try.
pub fn search(
    bound_us: f64,
    relative_bound_us: f64,
    mut trial: impl FnMut(f64) -> anyhow::Result<CapacityStep>,
) -> anyhow::Result<Found> {
    let mut f = Found::default();
    let mut rate = FIRST_RATE;
    while rate <= MAX_RATE && !(f.strict.closed && f.relative.closed) {
        let mut s = trial(rate)?;
        let mut tries = 1;
        // A step that fails a bound still open is tried again, so a single
        // hiccup of a shared machine does not end the search; and again,
        // up to MAX_TRIES, while the best try so far was disturbed.
        let wanted = |s: &CapacityStep, f: &Found| {
            (!f.strict.closed && !s.passes(bound_us))
                || (!f.relative.closed && !s.passes(relative_bound_us))
        };
        while wanted(&s, &f) && tries < MAX_TRIES && (tries == 1 || s.disturbed()) {
            let again = trial(rate)?;
            tries += 1;
            let late = |s: &CapacityStep| s.own_lateness() + s.own_read_lag().unwrap_or(0.0);
            if late(&again) < late(&s) || !s.rate_ok {
                s = again;
            }
        }
        f.strict.take(rate, s.passes(bound_us));
        f.relative.take(rate, s.passes(relative_bound_us));
        // A rate the thread could not even send ends the search.
        if !s.rate_ok {
            break;
        }
        rate *= GROWTH;
    }
    Ok(f)
}

/// The report `--capacity` prints.
pub fn render(c: &Capacity, protocol: &str, connections: usize) -> String {
    let cpu = |c: Option<u32>| c.map_or("unpinned".to_string(), |c| format!("CPU {c}"));
    let f = &c.floor;
    let mut s = String::new();
    s.push_str(&format!(
        "machine floor ({}, {:.0} s spin): an ideal generator's lateness p99 {:.1} us; {:.2}% of the time lost in gaps > 20 us; longest gap {:.0} us\n",
        cpu(f.cpu),
        f.secs,
        f.lateness_p99_us,
        f.lost_over_20us * 100.0,
        f.max_gap_us
    ));
    s.push_str(&format!(
        "capacity at lateness and read lag p99 (the generator's own, the machine's stalls taken out) < {:.0} us (the self-checks' bound): {:.0} req/s from one generator thread ({protocol}, {} connections, {}; echo server on {})\n",
        c.bound_us,
        c.at_bound,
        connections,
        cpu(f.cpu),
        cpu(c.server_cpu)
    ));
    if let Some(from) = c.met_from {
        s.push_str(&format!(
            "  (met from {from:.0} req/s up; the slower steps failed it, see their lines: a sweep's points below that rate per generator thread may fail the lateness or read-lag self-check)\n"
        ));
    }
    if c.at_bound == 0.0 && f.lateness_p99_us >= c.bound_us {
        s.push_str(&format!(
            "  (this machine's floor alone is {:.1} us, above the bound: no generator can pass it here)\n",
            f.lateness_p99_us
        ));
    }
    s.push_str(&format!(
        "capacity at the generator's own lateness and read lag p99 < floor + {CAPACITY_LATENESS_US:.0} us = {:.1} us: {:.0} req/s\n",
        c.relative_bound_us, c.at_relative_bound
    ));
    if let Some(from) = c.relative_met_from {
        s.push_str(&format!(
            "  (met from {from:.0} req/s up; the slower steps failed it)\n"
        ));
    }
    let (u, k) = c.ceiling.cpu_us_per_request;
    s.push_str(&format!(
        "ceiling (offered {:.0} req/s): {:.0} req/s achieved; generator thread CPU {:.2} us/request = {:.2} user + {:.2} kernel\n",
        c.ceiling.rate,
        c.ceiling.achieved,
        u + k,
        u,
        k
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_of_a_quiet_cpu_is_zero() {
        // 10 gaps of 5 µs in 1 s: 0.005% of the time, far below 1%.
        let f = floor_from_gaps(None, &[5_000; 10], 1e9);
        assert_eq!(f.lateness_p99_us, 0.0);
        assert_eq!(f.lost_over_20us, 0.0);
    }

    #[test]
    fn floor_is_the_one_percent_residual() {
        // 1000 gaps of 50 µs in 1 s: 5% of the time in gaps. A random instant
        // is late by more than x with probability 1000·(50 µs − x)/1 s; that
        // is 1% at x = 40 µs.
        let f = floor_from_gaps(Some(3), &[50_000; 1000], 1e9);
        assert!((f.lateness_p99_us - 40.0).abs() < 0.01, "{f:?}");
        assert!((f.lost_over_20us - 0.05).abs() < 1e-9);
        assert_eq!(f.max_gap_us, 50.0);
        assert_eq!(f.cpu, Some(3));
    }

    /// A step at `rate` with the generator's own lateness and read lag.
    fn step(rate: f64, late: f64, lag: f64, rate_ok: bool) -> CapacityStep {
        CapacityStep {
            rate,
            lateness_p99_us: late,
            own_lateness_p99_us: Some(late),
            read_lag_p99_us: Some(lag),
            own_read_lag_p99_us: Some(lag),
            achieved: if rate_ok { rate } else { rate / 2.0 },
            rate_ok,
            errors: 0,
            cpu_us_per_request: (1.0, 1.0),
            stalled_ms: 0.0,
        }
    }

    /// The rates the search offers, in order (computed as it does, so
    /// they compare equal).
    fn rates(n: usize) -> Vec<f64> {
        let mut v = Vec::new();
        let mut x = FIRST_RATE;
        for _ in 0..n {
            v.push(x);
            x *= GROWTH;
        }
        v
    }

    #[test]
    fn slow_steps_that_fail_before_any_passes_do_not_end_the_search() {
        // As measured over 384 connections: the slowest rates read late
        // (the thread wakes from sleep for each reply), faster ones pass,
        // and the ninth rate up is late on its own.
        let r = rates(12);
        let mut offered = Vec::new();
        let found = search(50.0, 53.0, |rate| {
            offered.push(rate);
            let i = r.iter().position(|&x| x == rate).unwrap();
            Ok(match i {
                0 | 1 => step(rate, 25.0, 51.0, true),
                2..=9 => step(rate, 20.0, 10.0, true),
                _ => step(rate, 60.0, 12.0, true),
            })
        })
        .unwrap();
        assert_eq!(found.strict.highest, r[9]);
        assert_eq!(found.strict.met_from(), Some(r[2]));
        // The relative bound (53 µs) was met from the first step.
        assert_eq!(found.relative.highest, r[9]);
        assert_eq!(found.relative.met_from(), None);
        // Failing steps are tried twice; the search stops after the first
        // failure above a pass at both bounds.
        let once = |i: usize| offered.iter().filter(|&&x| x == r[i]).count();
        assert_eq!((once(0), once(1), once(2), once(10)), (2, 2, 1, 2));
        assert!(!offered.contains(&r[11]), "{offered:?}");
    }

    #[test]
    fn the_first_failure_after_a_pass_closes_a_bound_for_good() {
        let r = rates(12);
        let found = search(50.0, 80.0, |rate| {
            let i = r.iter().position(|&x| x == rate).unwrap();
            Ok(match i {
                0..=3 => step(rate, 20.0, 10.0, true),
                // Fails the fixed bound only; later rates would pass it again.
                4 => step(rate, 70.0, 10.0, true),
                5 | 6 => step(rate, 20.0, 10.0, true),
                _ => step(rate, 90.0, 10.0, true),
            })
        })
        .unwrap();
        assert_eq!(found.strict.highest, r[3]);
        assert_eq!(found.strict.met_from(), None);
        assert!(found.strict.closed);
        assert_eq!(found.relative.highest, r[6]);
    }

    #[test]
    fn a_rate_the_thread_cannot_send_ends_a_search_that_never_passed() {
        let r = rates(20);
        let mut offered = Vec::new();
        let found = search(50.0, 60.0, |rate| {
            offered.push(rate);
            let i = r.iter().position(|&x| x == rate).unwrap();
            // Always late; from the sixth rate the thread cannot send it.
            Ok(step(rate, 500.0, 10.0, i < 5))
        })
        .unwrap();
        assert_eq!(
            found.strict,
            BoundSearch {
                lowest: None,
                highest: 0.0,
                failed_below: true,
                closed: false,
            }
        );
        assert_eq!(found.strict.met_from(), None);
        assert_eq!(*offered.last().unwrap(), r[5]);
    }

    #[test]
    fn a_second_try_that_passes_counts() {
        let mut tries = 0;
        let found = search(50.0, 60.0, |rate| {
            tries += 1;
            Ok(match tries {
                // The first rate: late once, on time again.
                1 => step(rate, 400.0, 10.0, true),
                2 => step(rate, 20.0, 10.0, true),
                _ => step(rate, 20.0, 10.0, false),
            })
        })
        .unwrap();
        assert_eq!(found.strict.highest, FIRST_RATE);
        assert_eq!(found.strict.met_from(), None);
    }

    #[test]
    fn a_disturbed_failing_rate_is_tried_again_and_an_undisturbed_one_is_not() {
        // The first rate fails three times with 100 ms lost to the machine,
        // then passes; the second fails twice undisturbed.
        let r = rates(3);
        let mut offered = Vec::new();
        let found = search(50.0, 60.0, |rate| {
            offered.push(rate);
            let n = offered.iter().filter(|&&x| x == rate).count();
            Ok(if rate == r[0] {
                if n <= 3 {
                    CapacityStep {
                        stalled_ms: 100.0,
                        ..step(rate, 2_000.0, 10.0, true)
                    }
                } else {
                    step(rate, 20.0, 10.0, true)
                }
            } else {
                step(rate, 70.0, 10.0, true)
            })
        })
        .unwrap();
        assert_eq!(offered, vec![r[0], r[0], r[0], r[0], r[1], r[1]]);
        assert_eq!(found.strict.highest, r[0]);
        assert!(found.strict.closed && found.relative.closed);
        // Disturbed at every try: MAX_TRIES, then judged on the best (the
        // next rate cannot be sent, which ends the search).
        let mut offered = Vec::new();
        let found = search(50.0, 60.0, |rate| {
            offered.push(rate);
            Ok(CapacityStep {
                stalled_ms: 100.0,
                ..step(rate, 2_000.0, 10.0, rate == r[0])
            })
        })
        .unwrap();
        assert_eq!(offered.iter().filter(|&&x| x == r[0]).count(), MAX_TRIES);
        assert_eq!(found.strict.lowest, None);
        assert!(!offered.contains(&r[2]));
    }

    #[test]
    fn cpus_are_split_when_there_are_two() {
        assert_eq!(pick_cpus(None, &[0, 1]), (Some(0), Some(1)));
        assert_eq!(pick_cpus(Some(1), &[0, 1]), (Some(1), Some(0)));
        assert_eq!(pick_cpus(None, &[4]), (Some(4), None));
    }

    #[test]
    fn a_step_passes_only_on_time_at_rate_and_without_errors() {
        let s = CapacityStep {
            rate: 1e5,
            lateness_p99_us: 15.0,
            own_lateness_p99_us: Some(15.0),
            read_lag_p99_us: Some(12.0),
            own_read_lag_p99_us: Some(12.0),
            achieved: 1e5,
            rate_ok: true,
            errors: 0,
            cpu_us_per_request: (0.5, 3.0),
            stalled_ms: 0.0,
        };
        assert!(s.passes(20.0));
        assert!(!s.passes(10.0));
        // Reading late fails the step as sending late does.
        let reading_late = CapacityStep {
            read_lag_p99_us: Some(30.0),
            own_read_lag_p99_us: Some(30.0),
            ..s.clone()
        };
        assert!(!reading_late.passes(20.0) && reading_late.passes(40.0));
        assert!(CapacityStep {
            read_lag_p99_us: None,
            own_read_lag_p99_us: None,
            ..s.clone()
        }
        .passes(20.0));
        // Reading late for the machine's stalls only: it passes.
        assert!(CapacityStep {
            read_lag_p99_us: Some(80.0),
            own_read_lag_p99_us: Some(18.0),
            ..s.clone()
        }
        .passes(20.0));
        assert!(!CapacityStep {
            errors: 1,
            ..s.clone()
        }
        .passes(20.0));
        assert!(!CapacityStep {
            rate_ok: false,
            ..s.clone()
        }
        .passes(20.0));
        // Late for the machine's stalls, on time without them: it passes,
        // since the generator's own work kept the schedule.
        let stalled = CapacityStep {
            lateness_p99_us: 140.0,
            own_lateness_p99_us: Some(18.0),
            ..s.clone()
        };
        assert!(stalled.passes(20.0) && !stalled.passes(15.0));
        // Late on its own: it fails.
        assert!(!CapacityStep {
            lateness_p99_us: 140.0,
            own_lateness_p99_us: Some(90.0),
            ..s.clone()
        }
        .passes(50.0));
        // Without the split, the whole lateness is judged.
        assert!(!CapacityStep {
            lateness_p99_us: 140.0,
            own_lateness_p99_us: None,
            ..s
        }
        .passes(50.0));
    }
}
