//! `skq load`: flags, the terminal summary, `--json` and the `--validate` /
//! `--capacity` modes.

use std::fmt::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use skq_proto::workload::{ServiceSpec, Workload};
use skq_report::result::{Latency, PointResult};

use crate::config::{Batch, Client, LoadConfig, ProtocolConfig};
use crate::protocol::memcached::KvSpec;
use crate::protocol::Protocol;
use crate::schedule::ScheduleKind;

/// Share of the regular rate given to the high-priority client by
/// `--workload priority` when `--high-priority-rate` is not set.
pub const PRIORITY_DEFAULT_SHARE: f64 = 0.05;

/// Flags of `skq load`.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Server address (HOST:PORT).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub addr: String,
    /// Wire protocol: rpc, memcached, http or rocksdb (ZippyDB GET/PUT/SEEK
    /// against `skq serve rocksdb`; `--workload`/`--mean-us` then ask for extra
    /// emulated service per request, e.g. `--workload fixed --mean-us 0` for none).
    #[arg(long, default_value = "rpc")]
    pub protocol: Protocol,
    /// Offered load of the regular connections, requests/s.
    #[arg(long, required_unless_present_any = ["validate", "capacity"])]
    pub rate: Option<f64>,
    /// Measured seconds [default: 5; 35 per batch with --validate].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Warm-up seconds, discarded.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Seconds to wait for outstanding replies after the last send.
    #[arg(long, default_value_t = 2.0)]
    pub drain: f64,
    /// Regular connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Generator threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Service time the rpc protocol asks of the server.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// How the offered rate is shaped over the run.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Extra clients beside the regular connections.
    #[command(flatten)]
    pub clients: ClientArgs,
    /// The memcached protocol's key and value mix.
    #[command(flatten)]
    pub kv: KvArgs,
    /// Settings of the rocksdb and http protocols.
    #[command(flatten)]
    pub other: OtherProtocolArgs,
    /// How the generator keeps its schedule and checks it.
    #[command(flatten)]
    pub timing: TimingArgs,
    /// What the generator writes.
    #[command(flatten)]
    pub output: OutputArgs,
    /// The generator's own validation and capacity measurements.
    #[command(flatten)]
    pub selftest: SelfTestArgs,
}

/// Service time the rpc protocol asks of the server.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Service time (rpc)")]
pub struct ServiceArgs {
    /// Service-time workload (BRIEF §9): fixed, exponential, bimodal-1,
    /// bimodal-2, gis, skewed-mix, uniform-10, uniform-20, priority.
    #[arg(long, default_value = "exponential")]
    pub workload: String,
    /// Mean service time S̄ in µs for fixed/exponential/bimodal workloads.
    #[arg(long, default_value_t = 500.0)]
    pub mean_us: f64,
    /// Emulation scale factor applied to every service-time class.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
}

/// How the offered rate is shaped over the run.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Schedule")]
pub struct ShapeArgs {
    /// Arrival process: poisson, fixed or trace=PATH (µs offsets, one per line).
    #[arg(long, default_value = "poisson")]
    pub schedule: ScheduleKind,
    /// Offered rate changing over the run, as multiples of --rate, starting
    /// with the warm-up: steps=F1,F2,..@SECS (each step SECS long, the last
    /// holds), diurnal=SECS (a day of SECS seconds, mean 1, peak 3, repeated)
    /// or bursts=ON,OFF (all of it in ON seconds, none in OFF, repeated).
    /// Works with every --schedule and protocol.
    #[arg(long)]
    pub rate_profile: Option<crate::profile::RateProfile>,
    /// Report offered rate, achieved rate and latency per interval of this
    /// many ms, with the replies' mean service overshoot (service reported
    /// beyond what was asked) and the time the generator lost to the
    /// machine's stalls in each (default with --rate-profile: 1000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub interval_ms: Option<u64>,
}

/// Extra clients beside the regular connections.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Probe, priority and best-effort clients")]
pub struct ClientArgs {
    /// Dedicated latency-probe connections.
    #[arg(long, default_value_t = 0)]
    pub probe_connections: usize,
    /// Total rate of the probe connections, requests/s.
    #[arg(long)]
    pub probe_rate: Option<f64>,
    /// Rate of a separate high-priority client (RPC class 1); 0 = off.
    #[arg(long, default_value_t = 0.0)]
    pub high_priority_rate: f64,
    /// Connections of the high-priority client (its rate is split over them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub high_priority_connections: u16,
    /// Total rate of best-effort clients (RPC class 2, each request asking
    /// --batch-service-us of service), requests/s; 0 = off. Reported apart
    /// (`batch_latency`), like the high-priority client.
    #[arg(long, default_value_t = 0.0)]
    pub batch_rate: f64,
    /// Best-effort connections (with --batch-rate).
    #[arg(long, default_value_t = 4)]
    pub batch_connections: usize,
    /// Service time each best-effort request asks for, µs.
    #[arg(long, default_value_t = 10_000.0)]
    pub batch_service_us: f64,
}

/// The memcached protocol's key and value mix.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "memcached protocol")]
pub struct KvArgs {
    /// memcached mix: etc, sphinx-ro, sphinx-wo or custom.
    #[arg(long, default_value = "etc")]
    pub kv_workload: String,
    /// memcached key size in bytes (custom mix).
    #[arg(long, default_value_t = 30)]
    pub key_size: u32,
    /// memcached value size in bytes (custom mix).
    #[arg(long, default_value_t = 200)]
    pub value_size: u32,
    /// Fraction of gets (custom mix).
    #[arg(long, default_value_t = 0.9)]
    pub get_ratio: f64,
    /// Number of distinct keys.
    #[arg(long, default_value_t = 10_000)]
    pub keyspace: u32,
    /// Do not set every key before a memcached run.
    #[arg(long)]
    pub no_prefill: bool,
}

/// Settings of the rocksdb and http protocols.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "rocksdb and http protocols")]
pub struct OtherProtocolArgs {
    /// Records preloaded in the RocksDB front end's database (`skq db preload --keys`).
    #[arg(long, default_value_t = crate::config::DB_KEYS_DEFAULT)]
    pub db_keys: u64,
    /// rocksdb: each request asks for DILATE × its operation's modelled cost
    /// (measured from real RocksDB calls; skq_proto::zippydb::CostModel) of extra
    /// emulated service on top of the real work (replaces --workload's draw).
    #[arg(long, default_value_t = 0.0)]
    pub db_dilate: f64,
    /// Path requested by the http protocol.
    #[arg(long, default_value = "/")]
    pub http_path: String,
}

/// How the generator keeps its schedule and checks it.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Keeping the schedule")]
pub struct TimingArgs {
    /// Send-lateness p99 (µs) above which the lateness check fails.
    #[arg(long, default_value_t = 50.0)]
    pub max_lateness_us: f64,
    /// Read-lag p99 (µs) above which the read-lag check fails, unless it is
    /// within 10% of the latency p99: the time from the kernel's receive
    /// stamp of a reply to the generator reading it.
    #[arg(long, default_value_t = 50.0)]
    pub max_read_lag_us: f64,
    /// Diagnostics: events each generator thread takes per epoll_wait.
    #[arg(long, default_value_t = crate::config::DEFAULT_POLL_EVENTS as u16,
          value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub poll_events: u16,
    /// Read with plain read(2), without the kernel's receive stamps: no
    /// read-lag check (to measure what the check costs the generator).
    #[arg(long)]
    pub no_read_stamps: bool,
    /// End the run when its warm-up ends, measuring nothing, if the
    /// machine's stalls of a generator thread's loop (steps over 50 µs it
    /// did not spend working) took more than this many ms per second of
    /// warm-up; exits with status 4 (`skq bench --host-gate` waits and
    /// starts the point again). Needs a warm-up of at least 0.1 s.
    #[arg(long, value_name = "MS_PER_S")]
    pub abort_if_warmup_stalled: Option<f64>,
    /// Spin instead of sleeping for the last µs before each send. Default:
    /// 2000 when a generator thread has a CPU to itself (`--cpus`, or an
    /// affinity of one CPU per thread) and runs at normal priority, else 100.
    /// A sleeping thread lets its virtual CPU halt, and the host wakes it up
    /// to milliseconds late. With --rt-priority, a thread that spins through
    /// most of a second is stopped by the kernel's real-time throttling
    /// (`/proc/sys/kernel/sched_rt_runtime_us`, 50 ms a second by default).
    #[arg(long)]
    pub spin_us: Option<u64>,
    /// Diagnostics: write every send later than 50 µs, with what the
    /// generator thread did before it (sleeps, polls, reads, writes), to this
    /// file (`PATH.T` per thread with several threads). Without it, the
    /// environment variable `SKQ_LOAD_TRACE_DIR` names a folder that gets one
    /// `late-PID.txt` per run (for runs started by `skq bench`).
    #[arg(long, value_name = "PATH")]
    pub trace_late: Option<std::path::PathBuf>,
    /// Run generator threads at this SCHED_FIFO priority (1..=99; needs root
    /// or CAP_SYS_NICE). --validate uses 20 (its servers 19) when allowed.
    #[arg(long)]
    pub rt_priority: Option<i32>,
    /// Pin generator threads to these CPUs, round-robin (comma-separated,
    /// e.g. `0` or `2,3`); `--capacity` picks one itself when not given.
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<u32>,
    /// Run in this network namespace (`/run/netns/NAME`, e.g. the emulated-RSS
    /// namespace `skq bench` creates): the generator's threads and sockets
    /// live there. Needs root.
    #[arg(long, value_name = "NAME")]
    pub netns: Option<String>,
}

/// What the generator writes.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Write the result as JSON (skq_report PointResult) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write an HdrHistogram interval log to this file: the load connections' latency in 1 s intervals (untagged), then one whole-window interval each for the probe, high-priority and best-effort connections (tagged `probe`, `high`, `batch`; `skq pool` merges them across runs).
    #[arg(long)]
    pub hdr_log: Option<PathBuf>,
    /// No progress bar and no summary on stdout (errors still go to stderr).
    #[arg(long)]
    pub quiet: bool,
    /// Service mode of the server under test, copied into the report.
    #[arg(long, default_value = "unknown")]
    pub service_mode_label: String,
}

/// The generator's own validation and capacity measurements.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Self-tests")]
pub struct SelfTestArgs {
    /// Check the generator against M/M/1 and M/D/1 using a built-in server.
    #[arg(long, conflicts_with = "capacity")]
    pub validate: bool,
    /// Find the highest rate one generator thread sustains on loopback,
    /// for `--protocol` (rpc, memcached or http) at each of
    /// `--capacity-conns`, and record it in the capacity file that `skq
    /// bench` checks its sweeps against.
    #[arg(long)]
    pub capacity: bool,
    /// `--capacity`: connection counts to measure, comma-separated
    /// [default: the value of --connections].
    #[arg(long, value_delimiter = ',', requires = "capacity")]
    pub capacity_conns: Vec<usize>,
    /// `--capacity`: the file to record results in [default:
    /// $SKQ_CAPACITY_FILE, else $XDG_CACHE_HOME/skq/capacity.json, else
    /// ~/.cache/skq/capacity.json].
    #[arg(long, requires = "capacity")]
    pub capacity_file: Option<std::path::PathBuf>,
}

fn resolve(addr: &str) -> anyhow::Result<SocketAddr> {
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| anyhow::anyhow!("--addr `{addr}` is not a HOST:PORT that resolves"))
}

impl LoadArgs {
    /// The load point these flags describe.
    pub fn to_config(&self) -> anyhow::Result<LoadConfig> {
        let rate = self
            .rate
            .ok_or_else(|| anyhow::anyhow!("--rate is required"))?;
        let mut cfg = LoadConfig::new(resolve(&self.addr)?, rate);
        let secs = |v: f64, flag: &str| -> anyhow::Result<Duration> {
            Duration::try_from_secs_f64(v)
                .map_err(|_| anyhow::anyhow!("{flag} {v} is not a number of seconds"))
        };
        cfg.duration = secs(self.duration.unwrap_or(5.0), "--duration")?;
        cfg.warmup = secs(self.warmup, "--warmup")?;
        cfg.drain = secs(self.drain, "--drain")?;
        cfg.connections = self.connections;
        cfg.threads = self.threads;
        let (workload, priority) = match self.service.workload.as_str() {
            "priority" => (Workload::Exponential, true),
            w => (
                w.parse::<Workload>()
                    .map_err(|e| anyhow::anyhow!("--workload: {e}, priority"))?,
                false,
            ),
        };
        cfg.service = ServiceSpec {
            workload,
            mean_ns: self.service.mean_us * 1e3,
            scale: self.service.scale,
        };
        cfg.workload_label = self.service.workload.clone();
        cfg.schedule = self.shape.schedule.clone();
        cfg.probe = Client {
            connections: self.clients.probe_connections,
            rate: self.clients.probe_rate.unwrap_or(0.0),
        };
        cfg.high_priority = Client {
            connections: self.clients.high_priority_connections as usize,
            rate: if priority && self.clients.high_priority_rate == 0.0 {
                rate * PRIORITY_DEFAULT_SHARE
            } else {
                self.clients.high_priority_rate
            },
        };
        cfg.batch = Batch {
            client: Client {
                connections: self.clients.batch_connections,
                rate: self.clients.batch_rate,
            },
            service_us: self.clients.batch_service_us,
        };
        // The mix is checked whatever the protocol, as the flags always were.
        let kv = KvSpec::named(
            &self.kv.kv_workload,
            self.kv.key_size,
            self.kv.value_size,
            self.kv.get_ratio,
            self.kv.keyspace,
        )
        .map_err(anyhow::Error::msg)?;
        cfg.protocol = match self.protocol {
            Protocol::Rpc => ProtocolConfig::Rpc,
            Protocol::Memcached => ProtocolConfig::Memcached {
                kv,
                prefill: !self.kv.no_prefill,
            },
            Protocol::Http => ProtocolConfig::Http {
                path: self.other.http_path.clone(),
            },
            Protocol::Rocksdb => ProtocolConfig::Rocksdb {
                keys: self.other.db_keys,
                dilate: self.other.db_dilate,
            },
        };
        cfg.service_mode_label = self.output.service_mode_label.clone();
        cfg.seed = self.seed;
        cfg.keeping.max_lateness_us = self.timing.max_lateness_us;
        cfg.keeping.max_read_lag_us = self.timing.max_read_lag_us;
        cfg.keeping.poll_events = usize::from(self.timing.poll_events);
        cfg.keeping.read_stamps = !self.timing.no_read_stamps;
        cfg.keeping.abort_if_warmup_stalled_ms_per_s = self.timing.abort_if_warmup_stalled;
        cfg.keeping.spin_us = self.timing.spin_us;
        cfg.output.hdr_log = self.output.hdr_log.clone();
        cfg.output.trace_late = self.timing.trace_late.clone().or_else(|| {
            std::env::var_os("SKQ_LOAD_TRACE_DIR").map(|d| {
                std::path::PathBuf::from(d).join(format!("late-{}.txt", std::process::id()))
            })
        });
        cfg.keeping.rt_priority = self.timing.rt_priority;
        cfg.keeping.cpus = self.timing.cpus.clone();
        cfg.rate_profile = self.shape.rate_profile.clone().map(std::sync::Arc::new);
        cfg.interval = self.shape.interval_ms.map(Duration::from_millis);
        cfg.output.progress = !self.output.quiet;
        cfg.validate().map_err(anyhow::Error::msg)?;
        // Refused with every protocol, as before the settings were grouped.
        crate::config::check_db_dilate(self.other.db_dilate).map_err(anyhow::Error::msg)?;
        Ok(cfg)
    }
}

/// Entry point of `skq load`.
pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    // Before any thread exists: every thread spawned afterwards inherits it.
    if let Some(ns) = &args.timing.netns {
        skq_sys::netns::enter(ns).with_context(|| format!("--netns {ns}"))?;
    }
    if args.selftest.validate {
        let secs = args.duration.unwrap_or(35.0);
        let d = Duration::try_from_secs_f64(secs)
            .map_err(|_| anyhow::anyhow!("--duration {secs} is not a number of seconds"))?;
        if !args.output.quiet {
            eprintln!("skq load --validate: M/M/1 then M/D/1, rho 0.2/0.5/0.8 side by side, {secs:.0} s each + warm-up/drain ...");
        }
        let rows =
            crate::validate::validate(d, args.seed, Some(args.timing.rt_priority.unwrap_or(20)))?;
        print!("{}", crate::validate::render_validate(&rows));
        let verdict = validate_verdict(&rows);
        match &verdict {
            Err(e) => println!("FAILED CHECK: {e}"),
            Ok(()) => {
                let by_ci = rows
                    .iter()
                    .filter(|r| {
                        r.verdicts() != (crate::validate::Verdict::Ok, crate::validate::Verdict::Ok)
                    })
                    .count();
                println!(
                    "validation passed: all {} points within {}% of theory{}",
                    rows.len(),
                    crate::validate::VALIDATE_TOLERANCE_PCT,
                    if by_ci > 0 {
                        format!(" or, for {by_ci}, with theory inside the 95% CI")
                    } else {
                        String::new()
                    }
                );
            }
        }
        return verdict.map_err(Into::into);
    }
    if args.selftest.capacity {
        return run_capacity(&args);
    }
    let cfg = args.to_config()?;
    let result = crate::engine::run(&cfg)?;
    if let Some(path) = &args.output.json {
        let f =
            std::fs::File::create(path).with_context(|| format!("--json {}", path.display()))?;
        serde_json::to_writer_pretty(std::io::BufWriter::new(f), &result)
            .with_context(|| format!("--json {}", path.display()))?;
    }
    if !args.output.quiet {
        print!("{}", render_summary(&cfg, &result));
    } else {
        for n in result
            .checks
            .notes
            .iter()
            .filter(|n| !n.starts_with("info"))
        {
            eprintln!("FAILED CHECK: {n}");
        }
    }
    point_verdict(&result).map_err(Into::into)
}

/// `--capacity` (see `capacity.rs`): one search per connection count, each
/// recorded in the capacity file.
fn run_capacity(args: &LoadArgs) -> anyhow::Result<()> {
    use skq_report::capacity::{default_path, CapacityEntry, CapacityFile, Machine};
    if args.timing.cpus.len() > 1 {
        anyhow::bail!(
            "--cpus: --capacity measures one generator thread; give one CPU, got {:?}",
            args.timing.cpus
        );
    }
    let echo = crate::capacity::echo_protocol(args.protocol)?;
    let conns = if args.selftest.capacity_conns.is_empty() {
        vec![args.connections]
    } else {
        args.selftest.capacity_conns.clone()
    };
    if let Some(&c) = conns.iter().find(|&&c| c == 0) {
        anyhow::bail!("--capacity-conns: {c} connections; give counts of at least 1");
    }
    let path = match &args.selftest.capacity_file {
        Some(p) => Some(p.clone()),
        None => default_path(),
    };
    let quiet = args.output.quiet;
    let machine = Machine::current(skq_sys::cpu::allowed_cpus()?.len());
    for &connections in &conns {
        let opts = crate::capacity::CapacityOpts {
            protocol: echo,
            bound_us: args.timing.max_lateness_us,
            connections,
            seed: args.seed,
            spin_us: args.timing.spin_us,
            cpu: args.timing.cpus.first().copied(),
            rt: args.timing.rt_priority,
        };
        if !quiet {
            eprintln!(
                "skq load --capacity: {} over {connections} connections: 2 s floor measurement, then steps of 1.5 s from 1k req/s up (about a minute) ...",
                args.protocol.name()
            );
        }
        let c = crate::capacity::capacity(&opts, |s| {
            if !quiet {
                let (u, k) = s.cpu_us_per_request;
                eprintln!(
                    "  {:>9.0} req/s: lateness p99 {:>9.1} us ({:.1} us without stalls), read lag p99 {:>9}, achieved {:>9.0}, errors {}, thread CPU {:.2} us/req ({:.2} user + {:.2} kernel), machine stalls {:.1} ms",
                    s.rate,
                    s.lateness_p99_us,
                    s.own_lateness(),
                    s.read_lag_p99_us.map_or("n/a".into(), |l| format!(
                        "{l:.1} us ({:.1} us without stalls)",
                        s.own_read_lag().unwrap_or(l)
                    )),
                    s.achieved,
                    s.errors,
                    u + k,
                    u,
                    k,
                    s.stalled_ms
                );
            }
        })?;
        print!(
            "{}",
            crate::capacity::render(&c, args.protocol.name(), connections)
        );
        let Some(path) = &path else {
            println!("(not recorded: no HOME, XDG_CACHE_HOME or SKQ_CAPACITY_FILE to put the capacity file in; give --capacity-file)");
            continue;
        };
        let (u, k) = c.ceiling.cpu_us_per_request;
        let entry = CapacityEntry {
            protocol: args.protocol.name().to_string(),
            connections,
            bound_us: c.bound_us,
            at_bound_rps: c.at_bound,
            relative_bound_us: c.relative_bound_us,
            at_relative_bound_rps: c.at_relative_bound,
            met_from_rps: c.met_from,
            ceiling_rps: c.ceiling.achieved,
            cpu_us_per_request: u + k,
            measured_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        let old = CapacityFile::read(path).map_err(|e| anyhow::anyhow!("--capacity-file {e}"))?;
        CapacityFile::record(old, &machine, entry)
            .write(path)
            .map_err(|e| anyhow::anyhow!("--capacity-file {e}"))?;
        println!(
            "recorded in {} (skq bench checks its sweeps against it)",
            path.display()
        );
    }
    Ok(())
}

/// `--validate`'s verdict: every point within the tolerance and clean.
pub fn validate_verdict(rows: &[crate::validate::ValidateRow]) -> Result<(), CheckFailed> {
    let bad = rows.iter().filter(|r| !r.pass()).count();
    if bad == 0 {
        return Ok(());
    }
    Err(CheckFailed(format!(
        "{bad} of {} validation points deviate more than {}% from theory",
        rows.len(),
        crate::validate::VALIDATE_TOLERANCE_PCT
    )))
}

/// A load point's verdict: its self-checks passed.
pub fn point_verdict(r: &PointResult) -> Result<(), CheckFailed> {
    if r.checks.pass {
        return Ok(());
    }
    let failed = r
        .checks
        .notes
        .iter()
        .filter(|n| !n.starts_with("info"))
        .count();
    Err(CheckFailed(format!(
        "{} self-check(s) failed; the result was written all the same",
        failed.max(1)
    )))
}

/// Exit status of a command whose measurement ran to its end but whose
/// self-check verdict failed (its results are written all the same); other
/// errors exit with 2.
pub const EXIT_CHECK_FAILED: i32 = 3;

/// The error of a run that completed with a failed self-check verdict:
/// callers exit with [`EXIT_CHECK_FAILED`] so scripts can tell it from a
/// run that could not measure at all.
#[derive(Debug)]
pub struct CheckFailed(pub String);

impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CheckFailed {}

fn latency_line(name: &str, l: &Latency) -> String {
    let e = |x: &skq_report::result::Estimate| {
        format!("{:.1} [{:.1}, {:.1}]", x.value, x.ci_low, x.ci_high)
    };
    format!(
        "{name:<28} n={:<8} mean {:.1}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {:.1}\n",
        l.count,
        l.mean,
        e(&l.p50),
        e(&l.p90),
        e(&l.p99),
        e(&l.p999),
        l.max
    )
}

/// The terminal summary of one point, with a FAILED CHECK line per failed check.
pub fn render_summary(cfg: &LoadConfig, r: &PointResult) -> String {
    let mut s = String::new();
    let m = &r.meta;
    let _ = writeln!(
        s,
        "skq load: {} {} (S = {}, scale {}) -> {}, {} conns, {} thread(s), {:?}, service mode {}",
        m.protocol,
        m.workload,
        m.nominal_service_us
            .map_or("-".into(), |v| format!("{v:.1} us")),
        m.scale,
        cfg.addr,
        m.connections,
        m.threads,
        cfg.schedule,
        m.service_mode
    );
    let _ = writeln!(
        s,
        "target {:.0} req/s, sent {} ({:.0} req/s), achieved {:.0} req/s ({:+.2}% of sent), received {} in {:.1} s after {:.1} s warm-up",
        r.target_rps,
        r.sent,
        r.sent as f64 / m.duration_s.max(1e-9),
        r.achieved_rps,
        r.checks.rate_error_pct,
        r.received,
        m.duration_s,
        m.warmup_s
    );
    s += &latency_line("latency from schedule (us)", &r.latency);
    s += &latency_line("latency from send (us)", &r.raw_latency);
    if let Some(p) = &r.probe_latency {
        s += &latency_line("probe latency (us)", p);
    }
    if let Some(p) = &r.high_priority_latency {
        s += &latency_line("high-priority latency (us)", p);
    }
    if let Some(sv) = r.measured_service_us {
        let asked = r
            .requested_service_us
            .map_or(String::new(), |a| format!(" (requested {a:.1} us)"));
        let _ = writeln!(
            s,
            "service delivered (server-reported mean): {sv:.1} us{asked}"
        );
    }
    if !r.intervals.is_empty() {
        if let Some(p) = &cfg.rate_profile {
            let _ = writeln!(s, "rate profile {p}; per interval:");
        }
        let _ = writeln!(
            s,
            "  start_s  offered/s  achieved/s    p50_us    p99_us  overshoot_us  gen_stalls_ms"
        );
        let us = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
        for i in &r.intervals {
            let _ = writeln!(
                s,
                "  {:>7.2}  {:>9.0}  {:>10.0}  {:>8}  {:>8}  {:>12}  {:>13}",
                i.start_s,
                i.offered_rps,
                i.achieved_rps,
                us(i.p50_us),
                us(i.p99_us),
                us(i.service_overshoot_us),
                ms(i.generator_stall_ms)
            );
        }
    }
    let e = &r.errors;
    let _ = writeln!(
        s,
        "errors: missing {}, duplicate {}, out-of-order {}, bad reply {}, connection failures {}",
        e.missing, e.duplicate, e.out_of_order, e.bad_reply, e.connection_failures
    );
    let c = &r.checks;
    let ok = |b: bool| if b { "ok" } else { "FAIL" };
    let _ = writeln!(
        s,
        "checks: rate {:+.2}% of sent {}; AD A2 {}{} {}; lag-1 rank corr {:.3} {}; lateness p99 {:.1} us {}; read lag p99 {} {}",
        c.rate_error_pct,
        ok(c.rate_ok),
        c.ad_statistic.map_or("n/a".into(), |a| format!("{a:.2}")),
        c.ad_reference
            .map_or(String::new(), |r| format!(" (schedule of the same sends {r:.2})")),
        ok(c.ad_ok),
        c.lag1_rank_corr,
        ok(c.independence_ok),
        c.lateness_p99_us,
        ok(c.lateness_ok),
        c.read_lag_p99_us
            .map_or("n/a".into(), |l| format!("{l:.1} us")),
        ok(c.read_lag_ok)
    );
    let _ = writeln!(
        s,
        "client cpu: user {:.2} s, sys {:.2} s (spinning included){}{}; cores seen {}",
        r.client_cpu.user_s,
        r.client_cpu.sys_s,
        match (r.client_busy_s, r.client_sent_total) {
            (Some(b), Some(n)) if n > 0 =>
                format!("; generator work {:.1} us per request", b * 1e6 / n as f64),
            _ => String::new(),
        },
        r.generator_preemption()
            .map_or(String::new(), |s| format!("; {s}")),
        m.cores_seen
    );
    for n in &c.notes {
        if n.starts_with("info") {
            let _ = writeln!(s, "{n}");
        } else {
            let _ = writeln!(s, "FAILED CHECK: {n}");
        }
    }
    if c.pass {
        s += "all checks passed\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: LoadArgs,
    }

    fn parse(line: &str) -> Result<LoadArgs, String> {
        Cli::try_parse_from(std::iter::once("skq-load").chain(line.split_whitespace()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    /// Every flag the bench harness passes, spelled as it spells them.
    #[test]
    fn harness_flags_parse_into_a_config() {
        let a = parse(
            "--addr 127.0.0.1:9000 --protocol memcached --rate 12000 --duration 3 --warmup 0.5 --connections 128 \
             --threads 2 --workload gis --mean-us 20 --scale 10 --schedule fixed --probe-connections 2 \
             --probe-rate 100 --high-priority-rate 50 --json /tmp/x.json --hdr-log /tmp/x.hlog --seed 9 \
             --drain 1 --quiet --kv-workload sphinx-wo --key-size 30 --value-size 200 --get-ratio 0.5 \
             --keyspace 500 --http-path /a --service-mode-label emulate",
        )
        .unwrap();
        let c = a.to_config().unwrap();
        assert_eq!(c.rate, 12000.0);
        assert_eq!((c.connections, c.threads), (128, 2));
        assert_eq!(
            c.probe,
            Client {
                connections: 2,
                rate: 100.0
            }
        );
        assert_eq!(c.high_priority.rate, 50.0);
        assert_eq!(c.duration, Duration::from_secs(3));
        assert_eq!(c.service.workload, Workload::Gis);
        assert_eq!(c.service.scale, 10.0);
        assert_eq!(c.schedule, ScheduleKind::Fixed);
        assert_eq!(c.service_mode_label, "emulate");
        let Some(kv) = c.protocol.kv() else {
            panic!("memcached carries its mix")
        };
        assert_eq!(kv.get_ratio, 0.0, "sphinx-wo is update-only");
        assert_eq!(kv.keyspace, 500);
        assert!(!c.output.progress);
    }

    #[test]
    fn cpus_pin_generator_threads_and_capacity_takes_one() {
        let c = parse("--rate 1000 --cpus 0,1")
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(c.keeping.cpus, vec![0, 1]);
        let e = parse("--rate 1000 --cpus 99999")
            .unwrap()
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(e.contains("--cpus") && e.contains("99999"), "{e}");
        let e = run(parse("--capacity --cpus 0,1").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("one CPU"), "{e}");
    }

    #[test]
    fn capacity_refuses_what_it_cannot_measure_before_measuring() {
        let e = run(parse("--capacity --protocol rocksdb").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--protocol rocksdb"), "{e}");
        let e = run(parse("--capacity --capacity-conns 8,0").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("--capacity-conns") && e.contains('0'), "{e}");
        // The capacity flags belong to --capacity.
        assert!(parse("--rate 1000 --capacity-conns 8").is_err());
        let a = parse("--capacity --capacity-conns 8,64,96").unwrap();
        assert_eq!(a.selftest.capacity_conns, vec![8, 64, 96]);
    }

    #[test]
    fn netns_names_a_namespace_to_enter_first() {
        assert_eq!(
            parse("--rate 1 --netns skq-1-0")
                .unwrap()
                .timing
                .netns
                .as_deref(),
            Some("skq-1-0")
        );
        let e = format!(
            "{:#}",
            run(parse("--rate 1 --netns skq-no-such-ns").unwrap()).unwrap_err()
        );
        assert!(e.contains("--netns skq-no-such-ns"), "{e}");
    }

    #[test]
    fn priority_workload_adds_a_high_priority_client() {
        let c = parse("--rate 1000 --workload priority")
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(c.high_priority.rate, 1000.0 * PRIORITY_DEFAULT_SHARE);
        assert_eq!(c.service.workload, Workload::Exponential);
        assert_eq!(c.protocol, ProtocolConfig::Rpc);
    }

    fn row(p50: (f64, f64), p99: (f64, f64)) -> crate::validate::ValidateRow {
        crate::validate::ValidateRow {
            model: "M/M/1",
            rho_target: 0.5,
            rho: 0.5,
            p50,
            p99,
            replay: p50,
            result: PointResult::default(),
        }
    }

    #[test]
    fn a_failing_validation_point_is_an_error_that_exits_3() {
        let good = row((100.0, 100.0), (460.0, 460.5));
        assert!(validate_verdict(&[good.clone(), good.clone()]).is_ok());
        // Planted: one p99 20% above theory.
        let bad = row((100.0, 100.0), (552.0, 460.0));
        let e = validate_verdict(&[good.clone(), bad, good]).unwrap_err();
        assert!(e.to_string().starts_with("1 of 3 validation points"), "{e}");
        // Planted: a clean-looking point with a correctness error.
        let mut lost = row((100.0, 100.0), (460.0, 460.0));
        lost.result.errors.missing = 1;
        assert!(validate_verdict(&[lost]).is_err());
        let any: anyhow::Error = validate_verdict(&[row((1.0, 2.0), (1.0, 2.0))])
            .unwrap_err()
            .into();
        assert!(any.downcast_ref::<CheckFailed>().is_some());
        assert_eq!(EXIT_CHECK_FAILED, 3);
    }

    #[test]
    fn a_failed_self_check_fails_the_point() {
        let mut r = PointResult::default();
        r.checks.pass = true;
        assert!(point_verdict(&r).is_ok());
        r.checks.pass = false;
        r.checks.notes = vec![
            "info: not a failure".into(),
            "lateness: p99 send lateness 900.0 us exceeds 50.0 us".into(),
        ];
        let e = point_verdict(&r).unwrap_err();
        assert!(e.to_string().starts_with("1 self-check(s) failed"), "{e}");
    }

    #[test]
    fn bad_values_name_their_flag() {
        assert!(parse("--duration 1").unwrap_err().contains("--rate"));
        assert!(parse("--validate").is_ok() && parse("--capacity").is_ok());
        assert!(parse("--rate 10 --protocol smtp")
            .unwrap_err()
            .contains("smtp"));
        assert!(parse("--rate 10 --schedule bursty")
            .unwrap_err()
            .contains("bursty"));
        let err = |l: &str| parse(l).unwrap().to_config().unwrap_err().to_string();
        assert!(err("--rate 10 --workload nope").contains("--workload"));
        assert!(err("--rate 0").contains("--rate"));
        assert!(err("--rate 10 --addr nowhere").contains("--addr"));
        assert!(err("--rate 10 --probe-connections 2").contains("--probe-rate"));
        assert!(err("--rate 10 --kv-workload zipf").contains("--kv-workload"));
        assert!(err("--rate 10 --duration=-1").contains("--duration"));
    }
}
