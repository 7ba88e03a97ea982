//! Running one load point: connect, spread connections over threads, run the
//! workers against one shared start time, merge what they measured, and judge
//! it with the self-checks.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context};
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2Serializer;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use skq_report::result::{
    CpuTime, Errors, GeneratorStalls, IntervalPoint, MachineFloor, Meta, PointResult, LOG_TAGS,
};

use crate::checks::{self, CheckInput};
use crate::config::{LoadConfig, ProtocolConfig};
use crate::protocol::http::Http;
use crate::protocol::memcached::{KvSpec, Memcached};
use crate::protocol::rpc::Rpc;
use crate::protocol::{Codec, Protocol};
use crate::schedule::{ConnSchedule, ScheduleKind, Trace};
use crate::stats::Hist;
use crate::worker::{slot, ConnSetup, Role, ServiceTally, Worker, WorkerOut, WorkerParams};
use skq_sys::{cpu, limits, net};

/// Target number of samples for the AD and independence checks.
const CHECK_SAMPLES: f64 = 2000.0;
/// Most latency samples kept for the independence check and its thinning;
/// runs with fewer requests keep every one.
const SERIES_SAMPLES: f64 = 1_000_000.0;
/// Delay between connecting and the first scheduled send.
const START_DELAY: Duration = Duration::from_millis(50);

fn codec(cfg: &LoadConfig) -> Box<dyn Codec> {
    match &cfg.protocol {
        ProtocolConfig::Rpc => Box::new(Rpc),
        ProtocolConfig::Memcached { kv, .. } => Box::new(Memcached { spec: kv.clone() }),
        ProtocolConfig::Http { path } => Box::new(Http::new(&cfg.addr.to_string(), path)),
        ProtocolConfig::Rocksdb { .. } => Box::new(crate::protocol::rocksdb::Rocksdb),
    }
}

/// Sets every key of `kv`'s keyspace once, pipelined on one blocking
/// connection.
fn prefill(cfg: &LoadConfig, kv: &KvSpec) -> anyhow::Result<()> {
    let mc = Memcached { spec: kv.clone() };
    let mut s = TcpStream::connect(cfg.addr)
        .with_context(|| format!("prefill: connecting to {}", cfg.addr))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(s.try_clone()?);
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    let mut line = String::new();
    for chunk in (0..kv.keyspace).collect::<Vec<_>>().chunks(256) {
        let mut buf = Vec::new();
        for &k in chunk {
            let mut req = crate::protocol::Request::new(0);
            kv.draw(&mut rng, &mut req);
            req.key = k;
            req.op = crate::protocol::Op::Set;
            mc.encode(&req, &mut buf);
        }
        s.write_all(&buf)?;
        for _ in chunk {
            line.clear();
            r.read_line(&mut line).context("prefill: reading reply")?;
            if line.trim_end() != "STORED" {
                bail!("prefill: server answered `{}` to a set", line.trim_end());
            }
        }
    }
    Ok(())
}

/// Generator-side costs of a run, beside its [`PointResult`].
#[derive(Clone, Debug, Default)]
pub struct RunCost {
    /// Requests sent by all threads over the whole run.
    pub sent_total: u64,
    /// Every regular request, when [`LoadConfig::keep_requests`] is set.
    pub requests: Vec<RequestRecord>,
    /// The generator threads' CPU time in user space and in the kernel (ns),
    /// from `getrusage(RUSAGE_THREAD)`. It includes spinning, so it is the
    /// cost per request only when the threads are busy.
    pub cpu_ns: (u64, u64),
}

pub use crate::worker::RequestRecord;

/// The service class of a connection in `role`: the regular load draws one
/// (`gis` keeps a class per connection); the latency probe and the
/// high-priority client send lightweight requests (SKQ §6.8), so their p99
/// measures the wait rather than which class a few connections drew; the
/// best-effort clients' service is fixed elsewhere.
fn conn_class(
    role: Role,
    spec: &skq_proto::workload::ServiceSpec,
    rng: &mut SmallRng,
) -> skq_proto::workload::ConnClass {
    match role {
        Role::Probe | Role::High => spec.light_class(),
        Role::Load | Role::Batch => spec.conn_class(rng),
    }
}

/// Connects the `n`-th connection. The first failure is final (nothing is
/// listening); later ones are retried for a while, because a server flooded
/// with connects refuses some while its accept backlog is full.
fn connect_retrying(cfg: &LoadConfig, n: usize) -> std::io::Result<TcpStream> {
    let mut tries = 0;
    loop {
        match net::connect(cfg.addr) {
            Err(e) if n > 0 && tries < 200 => {
                tries += 1;
                if tries == 200 {
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// Runs one load point and returns its result.
pub fn run(cfg: &LoadConfig) -> anyhow::Result<PointResult> {
    run_with_cost(cfg).map(|(r, _)| r)
}

/// Like [`run`], also returning the generator's own costs.
pub fn run_with_cost(cfg: &LoadConfig) -> anyhow::Result<(PointResult, RunCost)> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    let trace = match &cfg.schedule {
        ScheduleKind::Trace(p) => Some(Arc::new(
            Trace::load(p, cfg.rate).map_err(anyhow::Error::msg)?,
        )),
        _ => None,
    };
    let _ = limits::raise_nofile_limit();
    if let ProtocolConfig::Memcached { kv, prefill: true } = &cfg.protocol {
        if kv.get_ratio > 0.0 {
            prefill(cfg, kv)?;
        }
    }
    // (role, index within role, connections in role, role rate)
    let mut plan = Vec::new();
    plan.extend((0..cfg.connections).map(|i| (Role::Load, i, cfg.connections, cfg.rate)));
    let probe = cfg.probe;
    plan.extend((0..probe.connections).map(|i| (Role::Probe, i, probe.connections, probe.rate)));
    if cfg.high_priority.rate > 0.0 {
        let n = cfg.high_priority.connections.max(1);
        plan.extend((0..n).map(|i| (Role::High, i, n, cfg.high_priority.rate)));
    }
    let batch = cfg.batch.client;
    if batch.rate > 0.0 {
        plan.extend(
            (0..batch.connections).map(|i| (Role::Batch, i, batch.connections, batch.rate)),
        );
    }
    let mut per_thread: Vec<Vec<ConnSetup>> = (0..cfg.threads).map(|_| Vec::new()).collect();
    let mut class_rng = SmallRng::seed_from_u64(cfg.seed ^ 0xC1A5_5000);
    for (n, &(role, i, count, rate)) in plan.iter().enumerate() {
        let stream = connect_retrying(cfg, n).with_context(|| {
            format!(
                "--addr {}: connection {} of {}",
                cfg.addr,
                n + 1,
                plan.len()
            )
        })?;
        let kind = if role == Role::Load {
            cfg.schedule.clone()
        } else {
            ScheduleKind::Poisson
        };
        let seed = cfg.seed.wrapping_add((role as u64) << 40);
        let mut schedule = ConnSchedule::new(&kind, trace.as_ref(), rate, i, count, seed);
        if let (Role::Load, Some(p)) = (role, &cfg.rate_profile) {
            schedule = schedule.profiled(p.clone());
        }
        let class = conn_class(role, &cfg.service, &mut class_rng);
        per_thread[n % cfg.threads].push(ConnSetup {
            stream,
            role,
            class,
            schedule,
        });
    }

    let expected = (cfg.rate * cfg.duration.as_secs_f64()).max(1.0);
    let sample_p = (CHECK_SAMPLES / expected).min(1.0);
    let series_p = (SERIES_SAMPLES / expected).min(1.0);
    let kv = cfg.protocol.kv();
    let zippy = match cfg.protocol {
        ProtocolConfig::Rocksdb { keys, dilate } => Some(
            skq_proto::zippydb::ZippyDb::new(keys, cfg.seed)
                .map(|z| z.with_extra(skq_proto::zippydb::CostModel::MEASURED, dilate))
                .map_err(|e| anyhow::anyhow!("--db-keys: {e}"))?,
        ),
        _ => None,
    };
    let abort = std::sync::atomic::AtomicBool::new(false);
    let warm_stall_limit_ns = cfg
        .keeping
        .abort_if_warmup_stalled_ms_per_s
        .map(|l| (l * 1e6 * cfg.warmup.as_secs_f64()) as u64);
    let mut workers = Vec::with_capacity(cfg.threads);
    for (t, setups) in per_thread.into_iter().enumerate() {
        let params = WorkerParams {
            batch_service_ns: (cfg.batch.service_us * 1e3).min(u32::MAX as f64) as u32,
            start: 0,
            warm_end: 0,
            end: 0,
            drain_end: 0,
            spin_ns: cfg.keeping.spin_us.map(|us| us * 1000),
            service: cfg.service,
            kv,
            zippy: zippy.as_ref(),
            sample_p,
            series_p,
            interval_ns: interval_ns(cfg),
            stall: cfg.keeping.stall.map(|s| (s.every, s.pause)),
            host_stall: cfg.keeping.host_stall.map(|s| (s.every, s.pause)),
            read_stall: cfg.keeping.read_stall.map(|s| (s.every, s.pause)),
            seed: cfg.seed.wrapping_mul(31).wrapping_add(t as u64),
            rt_priority: cfg.keeping.rt_priority,
            keep_requests: cfg.output.keep_requests,
            cpu: (!cfg.keeping.cpus.is_empty())
                .then(|| cfg.keeping.cpus[t % cfg.keeping.cpus.len()]),
            exclusive_cpu: if cfg.keeping.cpus.is_empty() {
                cfg.threads == 1
            } else {
                cfg.threads <= cfg.keeping.cpus.len()
            },
            trace_late: cfg
                .output
                .trace_late
                .as_ref()
                .map(|p| crate::engine::per_thread_path(p, t, cfg.threads)),
            poll_events: cfg.keeping.poll_events,
            read_stamps: cfg.keeping.read_stamps,
            warm_stall_limit_ns,
            abort: warm_stall_limit_ns.map(|_| &abort),
        };
        workers.push(Worker::new(params, codec(cfg), setups)?);
    }
    let cpu0 = cpu::process_cpu_ns();
    let start = cpu::monotonic_ns() + START_DELAY.as_nanos() as u64;
    let warm_end = start + cfg.warmup.as_nanos() as u64;
    let end = warm_end + cfg.duration.as_nanos() as u64;
    let drain_end = end + cfg.drain.as_nanos() as u64;
    let window_start =
        SystemTime::now() + Duration::from_nanos(warm_end.saturating_sub(cpu::monotonic_ns()));
    for w in &mut workers {
        w.set_times(start, warm_end, end, drain_end);
    }
    let mut outs: Vec<WorkerOut> = std::thread::scope(|scope| -> anyhow::Result<Vec<WorkerOut>> {
        let mut handles = Vec::new();
        for (t, worker) in workers.into_iter().enumerate() {
            handles.push(
                std::thread::Builder::new()
                    .name(format!("skq-load-{t}"))
                    .spawn_scoped(scope, move || worker.run())?,
            );
        }
        let bar = progress_bar(cfg, end - start);
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(Duration::from_millis(100));
            if let Some(b) = &bar {
                b.set_position(
                    cpu::monotonic_ns().saturating_sub(start).min(end - start) / 1_000_000,
                );
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a generator thread panicked"))?
                    .map_err(Into::into)
            })
            .collect()
    })?;
    if abort.load(std::sync::atomic::Ordering::Relaxed) {
        let worst = outs.iter().map(|o| o.warm_stall_ns).max().unwrap_or(0);
        return Err(WarmupStalled {
            stalled_ms: worst as f64 / 1e6,
            warmup_s: cfg.warmup.as_secs_f64(),
            limit_ms_per_s: cfg.keeping.abort_if_warmup_stalled_ms_per_s.unwrap_or(0.0),
        }
        .into());
    }
    let cpu1 = cpu::process_cpu_ns();
    let busy_ns: u64 = outs.iter().map(|o| o.busy_ns).sum();
    let waited_ns: Option<u64> = outs.iter().map(|o| o.waited_ns).sum();
    let preempted: u64 = outs.iter().map(|o| o.preempted).sum();
    let cost = RunCost {
        cpu_ns: outs
            .iter()
            .fold((0, 0), |a, o| (a.0 + o.cpu_ns.0, a.1 + o.cpu_ns.1)),
        sent_total: outs.iter().map(|o| o.sent_total).sum(),
        requests: outs
            .iter_mut()
            .flat_map(|o| std::mem::take(&mut o.requests))
            .collect(),
    };
    let mut result = assemble(
        cfg,
        outs,
        (
            (cpu1.0 - cpu0.0) as f64 * 1e-9,
            (cpu1.1 - cpu0.1) as f64 * 1e-9,
        ),
        window_start,
        start,
    )?;
    result.client_busy_s = Some(busy_ns as f64 * 1e-9);
    result.client_sent_total = Some(cost.sent_total);
    result.client_waited_s = waited_ns.map(|w| w as f64 * 1e-9);
    result.client_preempted = Some(preempted);
    Ok((result, cost))
}

/// The error of a run ended at the end of its warm-up, measuring nothing,
/// because the machine's stalls took more of a generator thread's loop in
/// the warm-up than `--abort-if-warmup-stalled` allows: `skq load` exits
/// with [`EXIT_WARMUP_STALLED`].
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupStalled {
    /// The most a thread lost to the machine's stalls in the warm-up (ms).
    pub stalled_ms: f64,
    /// The warm-up's length (s).
    pub warmup_s: f64,
    /// The limit (ms per second of warm-up).
    pub limit_ms_per_s: f64,
}

impl std::fmt::Display for WarmupStalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not measured: the machine stalled the generator's loop for {:.1} ms of its {:.2}-s warm-up ({:.1} ms per second, over the {:.1} allowed)",
            self.stalled_ms,
            self.warmup_s,
            self.stalled_ms / self.warmup_s.max(1e-9),
            self.limit_ms_per_s
        )
    }
}

impl std::error::Error for WarmupStalled {}

/// `skq load`'s exit status for [`WarmupStalled`].
pub const EXIT_WARMUP_STALLED: i32 = 4;

/// The trace file of thread `t`: `path` itself with one thread, else
/// `path.T`.
pub(crate) fn per_thread_path(
    path: &std::path::Path,
    t: usize,
    threads: usize,
) -> std::path::PathBuf {
    if threads == 1 {
        path.to_path_buf()
    } else {
        let mut s = path.as_os_str().to_owned();
        s.push(format!(".{t}"));
        s.into()
    }
}

/// Length of the per-interval series: `--interval-ms`, else 1 s with a
/// rate profile or an HdrHistogram log.
fn interval_ns(cfg: &LoadConfig) -> Option<u64> {
    cfg.interval
        .map(|d| d.as_nanos().max(1) as u64)
        .or_else(|| {
            (cfg.rate_profile.is_some() || cfg.output.hdr_log.is_some()).then_some(1_000_000_000)
        })
}

fn progress_bar(cfg: &LoadConfig, total_ns: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !cfg.output.progress || !std::io::stderr().is_terminal() {
        return None;
    }
    let b = indicatif::ProgressBar::new(total_ns / 1_000_000);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:40}] {percent}% of warm-up + run",
        )
        .expect("valid template"),
    );
    Some(b)
}

/// Merges the workers' measurements into a [`PointResult`].
fn assemble(
    cfg: &LoadConfig,
    outs: Vec<WorkerOut>,
    cpu: (f64, f64),
    window_start: SystemTime,
    schedule_start: u64,
) -> anyhow::Result<PointResult> {
    let mut lat: [Hist; 4] = Default::default();
    let mut raw: [Hist; 4] = Default::default();
    let mut lateness = Hist::new();
    let mut own_lateness = Hist::new();
    let (mut stalls, mut stall_ns) = (0, 0);
    let mut read_lag = Hist::new();
    let mut own_read_lag = Hist::new();
    let mut unstamped_reads = 0;
    let mut intervals: Vec<Hist> = Vec::new();
    let mut intervals_sent: Vec<u64> = Vec::new();
    let mut intervals_service: Vec<ServiceTally> = Vec::new();
    let mut intervals_stall_ns: Vec<u64> = Vec::new();
    let mut errors = Errors::default();
    let (mut sent, mut recv_window, mut received, mut misses) = (0, 0, 0, 0);
    let (mut service_sum, mut requested_sum, mut service_n) = (0.0, 0.0, 0);
    let mut gaps = Vec::new();
    let mut sched_gaps = Vec::new();
    let mut ref_gaps = Vec::new();
    let mut gap_threshold_ns = 0;
    let mut series = Vec::new();
    let mut rt_refused = None;
    let mut pin_refused = None;
    let floor = machine_floor(&outs);
    for o in outs {
        rt_refused = rt_refused.or(o.rt_refused);
        pin_refused = pin_refused.or(o.pin_refused);
        for r in 0..4 {
            lat[r].merge(&o.lat[r]);
            raw[r].merge(&o.raw[r]);
        }
        lateness.merge(&o.lateness);
        own_lateness.merge(&o.own_lateness);
        stalls += o.stalls;
        stall_ns += o.stall_ns;
        read_lag.merge(&o.read_lag);
        own_read_lag.merge(&o.own_read_lag);
        unstamped_reads += o.unstamped_reads;
        for (k, h) in o.intervals.iter().enumerate() {
            slot(&mut intervals, k, Hist::new).merge(h);
        }
        for (k, &n) in o.intervals_sent.iter().enumerate() {
            *slot(&mut intervals_sent, k, || 0) += n;
        }
        for (k, &t) in o.intervals_service.iter().enumerate() {
            slot(&mut intervals_service, k, ServiceTally::default).add(t);
        }
        for (k, &ns) in o.intervals_stall_ns.iter().enumerate() {
            *slot(&mut intervals_stall_ns, k, || 0) += ns;
        }
        errors.missing += o.errors.missing;
        errors.duplicate += o.errors.duplicate;
        errors.out_of_order += o.errors.out_of_order;
        errors.bad_reply += o.errors.bad_reply;
        errors.connection_failures += o.errors.connection_failures;
        sent += o.sent_window;
        recv_window += o.recv_window;
        received += o.received_measured;
        misses += o.misses;
        service_sum += o.service_sum;
        requested_sum += o.requested_sum;
        service_n += o.service_n;
        gaps.extend(o.gaps);
        sched_gaps.extend(o.sched_gaps);
        ref_gaps.extend(o.ref_gaps);
        gap_threshold_ns = gap_threshold_ns.max(o.gap_threshold_ns);
        series.extend(o.series);
    }
    let secs = cfg.duration.as_secs_f64();
    series.sort_unstable();
    let latency_series: Vec<f64> = series.iter().map(|&(_, l)| l as f64).collect();
    let lateness_p99_us = lateness.quantile_ci(0.99).1 as f64 / 1e3;
    let achieved_rps = recv_window as f64 / secs;
    // With a rate profile the target is its mean over the measured window,
    // and the gaps are not those of a homogeneous Poisson process.
    let target_rps = match &cfg.rate_profile {
        Some(p) => {
            let w = cfg.warmup.as_nanos() as u64;
            cfg.rate * p.mean(w, w + cfg.duration.as_nanos() as u64)
        }
        None => cfg.rate,
    };
    let expected = (target_rps * secs).max(1.0);
    let poisson = cfg.schedule == ScheduleKind::Poisson && cfg.rate_profile.is_none();
    let mut checks = checks::evaluate(&CheckInput {
        target_rps,
        achieved_rps,
        sent_rps: sent as f64 / secs,
        window_s: secs,
        poisson_gaps: poisson.then_some(gaps),
        scheduled_gaps: poisson.then_some(sched_gaps),
        reference_gaps: poisson.then_some(ref_gaps),
        gap_threshold_us: gap_threshold_ns as f64 / 1e3,
        latency_series,
        series_spacing: (expected / SERIES_SAMPLES).max(1.0),
        latency_count: lat[0].count(),
        lateness_p99_us,
        max_lateness_us: cfg.keeping.max_lateness_us,
        read_lag_p99_us: (read_lag.count() > 0).then(|| read_lag.quantile_ci(0.99).1 as f64 / 1e3),
        max_read_lag_us: cfg.keeping.max_read_lag_us,
        latency_p99_us: lat[0].quantile_ci(0.99).1 as f64 / 1e3,
        errors: errors.total(),
    });
    if cfg.protocol.kind() == Protocol::Memcached && received > 0 && misses > 0 {
        checks.notes.push(format!(
            "info: {misses} of {received} gets missed in the cache (not an error)"
        ));
    }
    if unstamped_reads > 0 {
        checks.notes.push(format!(
            "info: {unstamped_reads} of {} reads in the window carried no kernel receive stamp; the read-lag check covers the others",
            unstamped_reads + read_lag.count()
        ));
    }
    if let Some(e) = rt_refused {
        checks.notes.push(format!(
            "info: --rt-priority refused ({e}); ran at normal priority"
        ));
    }
    if let Some(e) = pin_refused {
        checks
            .notes
            .push(format!("info: --cpus refused ({e}); ran unpinned"));
    }
    let client_stalls = GeneratorStalls {
        count: stalls,
        lost_s: stall_ns as f64 * 1e-9,
        own_lateness_p99_us: own_lateness.quantile_ci(0.99).1 as f64 / 1e3,
        own_read_lag_p99_us: (own_read_lag.count() > 0)
            .then(|| own_read_lag.quantile_ci(0.99).1 as f64 / 1e3),
    };
    if !checks.lateness_ok && stalls > 0 {
        checks.notes.push(format!(
            "info: the machine stalled the generator's loop {} times for over {} us ({:.2} ms in all; a poll, read or write takes it 0.1-30 us); without those stalls its send lateness p99 is {:.1} us",
            stalls,
            crate::worker::STALL_NS / 1000,
            client_stalls.lost_s * 1e3,
            client_stalls.own_lateness_p99_us
        ));
    }
    if let (false, Some(own)) = (checks.read_lag_ok, client_stalls.own_read_lag_p99_us) {
        if stalls > 0 {
            checks.notes.push(format!(
                "info: without the machine's stalls of the generator's loop its read lag p99 is {own:.1} us"
            ));
        }
    }
    if let Some(f) = floor.filter(|_| !checks.lateness_ok) {
        checks.notes.push(format!(
            "info: the generator's CPU alone, sampled in {:.1} s of its idle spinning, gives an ideal generator a lateness p99 of {:.1} us ({:.2}% of the time lost in gaps over 20 us, longest {:.0} us): that much of the lateness is the machine's",
            f.spun_s,
            f.lateness_p99_us,
            f.lost_over_20us * 100.0,
            f.max_gap_us
        ));
    }
    let series_points = interval_points(
        cfg,
        IntervalTallies {
            lat: &intervals,
            sent: &intervals_sent,
            service: &intervals_service,
            stall_ns: &intervals_stall_ns,
        },
        &mut checks.notes,
    );
    if let Some(path) = &cfg.output.hdr_log {
        let whole: Vec<_> = LOG_TAGS.into_iter().zip(&lat[1..]).collect();
        write_hdr_log(path, &intervals, &whole, secs, window_start)
            .with_context(|| format!("--hdr-log {}", path.display()))?;
    }
    let [lat_load, lat_probe, lat_high, lat_batch] = lat;
    let checks = checks;
    let nominal = cfg.service.workload.takes_mean() || cfg.service.mean() > 0.0;
    Ok(PointResult {
        meta: Meta {
            protocol: cfg.protocol.kind().name().into(),
            workload: match &cfg.protocol {
                ProtocolConfig::Rpc => cfg.workload_label.clone(),
                ProtocolConfig::Memcached { kv, .. } => format!("kv:{}", kv.name),
                ProtocolConfig::Http { path } => format!("http GET {path}"),
                ProtocolConfig::Rocksdb { keys, .. } => format!("zippydb ({keys} keys)"),
            },
            nominal_service_us: (cfg.protocol == ProtocolConfig::Rpc && nominal)
                .then(|| cfg.service.mean() / 1e3),
            scale: cfg.service.scale,
            service_mode: cfg.service_mode_label.clone(),
            connections: cfg.connections,
            threads: cfg.threads,
            cores_seen: std::thread::available_parallelism().map_or(1, |n| n.get()),
            seed: Some(cfg.seed),
            duration_s: secs,
            warmup_s: cfg.warmup.as_secs_f64(),
        },
        target_rps,
        achieved_rps,
        sent,
        received,
        latency: lat_load.summary_with(checks.effective_n),
        raw_latency: raw[0].summary_with(checks.effective_n),
        probe_latency: (cfg.probe.connections > 0).then(|| lat_probe.summary()),
        high_priority_latency: (cfg.high_priority.rate > 0.0).then(|| lat_high.summary()),
        batch_latency: (cfg.batch.client.rate > 0.0).then(|| lat_batch.summary()),
        measured_service_us: (service_n > 0).then(|| service_sum / service_n as f64 / 1e3),
        requested_service_us: (service_n > 0).then(|| requested_sum / service_n as f64 / 1e3),
        errors,
        checks,
        client_cpu: CpuTime {
            user_s: cpu.0,
            sys_s: cpu.1,
        },
        client_busy_s: None,
        client_sent_total: None,
        client_waited_s: None,
        client_preempted: None,
        client_floor: floor,
        client_stalls: Some(client_stalls),
        server_cpu: None,
        intervals: series_points,
        schedule_start_ns: Some(schedule_start),
        warmup_host_steal_ms: None,
    })
}

/// Least idle spinning (ns) of a thread whose floor is reported: below it
/// a rare gap swings the 1% point.
const MIN_FLOOR_SPIN_NS: u64 = 200_000_000;

/// The worst generator thread's timing floor, from the gaps in its idle
/// spinning ([`WorkerOut::idle_gaps`]); `None` when no thread spun for
/// [`MIN_FLOOR_SPIN_NS`].
fn machine_floor(outs: &[WorkerOut]) -> Option<MachineFloor> {
    outs.iter()
        .filter(|o| o.idle_spin_ns >= MIN_FLOOR_SPIN_NS)
        .map(|o| {
            let f = crate::capacity::floor_from_gaps(None, &o.idle_gaps, o.idle_spin_ns as f64);
            MachineFloor {
                spun_s: f.secs,
                lateness_p99_us: f.lateness_p99_us,
                lost_over_20us: f.lost_over_20us,
                max_gap_us: f.max_gap_us,
            }
        })
        .max_by(|a, b| a.lateness_p99_us.total_cmp(&b.lateness_p99_us))
}

/// What the generator threads counted per log interval, merged.
struct IntervalTallies<'a> {
    /// Latency of the load requests scheduled in each interval.
    lat: &'a [Hist],
    /// Load requests scheduled in each interval.
    sent: &'a [u64],
    /// The replies that reported a service time, by their request's
    /// interval.
    service: &'a [ServiceTally],
    /// Time the generator's loops lost to the machine's stalls ending in
    /// each interval (ns, summed over threads).
    stall_ns: &'a [u64],
}

/// The per-interval series, judged per interval: an interval whose replies
/// (to requests scheduled in it) fall below 90% of its sends is noted.
fn interval_points(
    cfg: &LoadConfig,
    t: IntervalTallies<'_>,
    notes: &mut Vec<String>,
) -> Vec<IntervalPoint> {
    let (lat, sent) = (t.lat, t.sent);
    let Some(iv) = interval_ns(cfg) else {
        return Vec::new();
    };
    let secs = iv as f64 / 1e9;
    let n = (cfg.duration.as_nanos() as u64).div_ceil(iv) as usize;
    let mut short = Vec::new();
    let points: Vec<IntervalPoint> = (0..n)
        .map(|k| {
            let h = lat.get(k);
            let done = h.map_or(0, |h| h.count());
            let offered = sent.get(k).copied().unwrap_or(0);
            if offered > 0 && (done as f64) < 0.9 * offered as f64 {
                short.push(k);
            }
            let q = |p: f64| {
                h.filter(|h| h.count() > 0)
                    .map(|h| h.quantile_ci(p).1 as f64 / 1e3)
            };
            IntervalPoint {
                start_s: k as f64 * secs,
                offered_rps: offered as f64 / secs,
                achieved_rps: done as f64 / secs,
                p50_us: q(0.5),
                p99_us: q(0.99),
                service_overshoot_us: t.service.get(k).and_then(ServiceTally::overshoot_us),
                generator_stall_ms: Some(t.stall_ns.get(k).copied().unwrap_or(0) as f64 / 1e6),
                // The harness (`skq bench`) fills it in from /proc/stat.
                host_steal_ms: None,
            }
        })
        .collect();
    if !short.is_empty() {
        notes.push(format!(
            "info: {} of {} intervals got fewer than 90% of their replies (first at {:.1} s)",
            short.len(),
            n,
            short[0] as f64 * secs
        ));
    }
    points
}

/// Writes the load connections' latency as untagged 1 s intervals, then one
/// tagged interval over the whole window for each other class of
/// connection that recorded anything (`whole`, tagged with
/// [`LOG_TAGS`]), so runs can be pooled per class later (`skq pool`).
fn write_hdr_log(
    path: &std::path::Path,
    intervals: &[Hist],
    whole: &[(&str, &Hist)],
    window_s: f64,
    window_start: SystemTime,
) -> anyhow::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut ser = V2Serializer::new();
    let mut w = IntervalLogWriterBuilder::new()
        .add_comment(
            "skq load: latency from scheduled send time, nanoseconds; untagged: the load \
             connections, 1 s intervals; tagged probe/high/batch: those connections, whole window",
        )
        .with_start_time(window_start)
        .begin_log_with(&mut file, &mut ser)?;
    for (k, h) in intervals.iter().enumerate() {
        w.write_histogram(
            &h.0,
            Duration::from_secs(k as u64),
            Duration::from_secs(1),
            None,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    for (tag, h) in whole.iter().filter(|(_, h)| h.count() > 0) {
        w.write_histogram(
            &h.0,
            Duration::ZERO,
            Duration::from_secs_f64(window_s.max(0.0)),
            Tag::new(tag),
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    drop(w);
    file.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use skq_proto::workload::{ServiceSpec, Workload};

    #[test]
    fn probes_and_the_high_priority_client_send_the_gis_mix_lightest_requests() {
        let gis = ServiceSpec::new(Workload::Gis, 0.0);
        let mut rng = SmallRng::seed_from_u64(3);
        let light = gis.light_class();
        for _ in 0..500 {
            assert_eq!(conn_class(Role::Probe, &gis, &mut rng), light);
            assert_eq!(conn_class(Role::High, &gis, &mut rng), light);
        }
        // The regular load still draws every class of the mix.
        let drawn: std::collections::HashSet<_> = (0..2000)
            .map(|_| conn_class(Role::Load, &gis, &mut rng))
            .collect();
        assert_eq!(drawn.len(), 3, "{drawn:?}");
    }
}
