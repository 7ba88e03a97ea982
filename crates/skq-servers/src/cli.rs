//! `skq serve rpc`: command-line flags and the process around the server
//! (file-descriptor limit, readiness line, signals, stats file).

use std::net::SocketAddr;
use std::path::PathBuf;

use skq_net::{Lifecycle, Mode, SchedSpec, ServeError, ServerSpec, Started};

use crate::server::{RpcConfig, RpcServer, RuntimeKind};
use crate::service::ServiceMode;

/// The flags a `--spec` replaces (it conflicts with each).
const SPEC_FLAGS: [&str; 19] = [
    "mode",
    "runtime",
    "workers",
    "service",
    "pin",
    "steal_k",
    "steal_retry_us",
    "promote_min_us",
    "poll_groups",
    "pollers",
    "batch_polls_above",
    "rtshare",
    "rtfreq",
    "penalty_ns",
    "batch",
    "min_workers",
    "elastic_period_us",
    "elastic_backlog_us",
    "batch_workers",
];

/// Flags of `skq serve rpc` (the bench harness relies on these names).
#[derive(clap::Args, Debug, Clone)]
pub struct RpcArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub addr: SocketAddr,
    /// Worker threads (1..=64).
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// What serves the connections: an skq scheduling mode
    /// (vanilla|shared|queue|cpu|best2|hybrid, optionally with +steal), or a
    /// baseline without skq: epoll-1to1 (one epoll per thread, connections
    /// round-robin at accept: memcached/nginx), epoll-shared (one epoll set,
    /// ONESHOT + re-arm), tokio (each request served inline on the runtime's
    /// worker thread) tokio-spawn-blocking (each request's work in
    /// tokio::task::spawn_blocking, a blocking pool of --workers threads). With
    /// the prefix `async-`, the handler written as async code: async-MODE on
    /// skq-async with skq mode MODE (async-hybrid, async-cpu, async-best2+steal,
    /// ...; the tunables apply, --min-workers included), async-tokio on tokio's
    /// multi-thread runtime.
    #[arg(long, default_value = "hybrid")]
    pub mode: String,
    /// Driver: skq, epoll-1to1, epoll-shared or tokio (`--mode` names it too;
    /// kept for older scripts).
    #[arg(long, default_value = "skq")]
    pub runtime: RuntimeKind,
    /// Service: spin (busy CPU) or emulate (absolute-deadline sleep).
    #[arg(long, default_value = "emulate")]
    pub service: ServiceMode,
    /// Pin worker threads to CPUs (skq: the CPU the runtime assigns worker i,
    /// spread over the topology; tokio: thread i on CPU i % ncpus).
    #[arg(long)]
    pub pin: bool,
    /// skq's scheduler tunables (`--steal-k`, `--steal-retry-us`,
    /// `--promote-min-us`, `--poll-groups`, `--pollers`, `--penalty-ns`).
    #[command(flatten)]
    pub core: skq_net::CoreTunables,
    /// Percent of a batch high-priority events may fill (1..=100).
    #[arg(long)]
    pub rtshare: Option<u32>,
    /// Target waits per second per worker (0 = off).
    #[arg(long)]
    pub rtfreq: Option<u32>,
    /// Most events one wait() returns (skq runtime; 1..=1024). Batched events
    /// are processing and cannot be stolen: 1 keeps every queued event
    /// stealable (best tail latency), larger values save waits.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub batch: u16,
    /// Elastic worker count (skq and async-skq modes): fewest active workers. A resource
    /// manager parks and wakes workers between this and --workers once per
    /// statistics period, following the measured load. Unset: all workers
    /// stay active.
    #[arg(long)]
    pub min_workers: Option<usize>,
    /// The resource manager's statistics period in µs (default 20000).
    #[arg(long)]
    pub elastic_period_us: Option<u64>,
    /// How often (µs) the resource manager looks for a backlog between
    /// periods, growing to --workers at once when it finds one (default
    /// 2000; keep it within about ten service times).
    #[arg(long)]
    pub elastic_backlog_us: Option<u64>,
    /// Cooperative checkpoints (skq modes): a request's service loop calls
    /// the runtime's checkpoint every this many µs, handing the worker's
    /// queued events to others while it works. Unset: no checkpoints.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_us: Option<u64>,
    /// Priority diffusion (skq driver): workers that take batch-class
    /// requests, e.g. `6,7` or `4-7`; the others never run them.
    #[arg(long)]
    pub batch_workers: Option<skq_net::config::WorkerList>,
    /// How requests are classified: `header` (the RPC header's class byte:
    /// 0 regular, 1 high, 2 batch) or `none` (all regular).
    #[arg(long, default_value = "header")]
    pub classify: crate::rpc::Classify,
    /// Most connections served at once.
    #[arg(long, default_value_t = 65_536)]
    pub max_conns: usize,
    /// Longest service one request may ask for, in µs (1..=4294967); a
    /// request above it gets a refusal reply (the wire format's
    /// FLAG_REFUSED) instead of holding a worker. Default: 100000 (100 ms;
    /// `skq serve rocksdb`: 1000000, its scans stretched by --db-dilate ask
    /// up to about 150 ms).
    #[arg(long)]
    pub max_service_us: Option<u64>,
    /// Close a connection idle (between requests) this many seconds; 0 (the
    /// default, as memcached's idle_timeout): never.
    #[arg(long, default_value_t = 0.0)]
    pub idle_timeout: f64,
    /// Write final statistics (JSON) here at shutdown.
    #[arg(long)]
    pub stats_json: Option<PathBuf>,
    /// Stop by itself after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// The whole server spec (mode, workers, service, pinning and the
    /// scheduling tunables above) as JSON, or `@FILE` holding it, instead
    /// of their flags: `{"mode":"best2+steal","workers":8,
    /// "service":"emulate","pin":false,"sched":{"steal_k":2}}` (`skq bench`
    /// passes it).
    #[arg(long, value_name = "JSON|@FILE", conflicts_with_all = SPEC_FLAGS)]
    pub spec: Option<String>,
}

impl RpcArgs {
    /// The server spec: `--spec`, or the one its flags describe (a
    /// `--runtime` other than skq overrides `--mode`). Errors are one line
    /// naming the flag (and for `--spec`, the field).
    pub fn spec(&self) -> anyhow::Result<ServerSpec> {
        if let Some(spec) = &self.spec {
            return Ok(ServerSpec::parse_arg(spec)?);
        }
        let mode = match self.runtime {
            RuntimeKind::Skq => parse_mode(&self.mode)?,
            other => Mode::of_driver(other),
        };
        let mut sched = SchedSpec {
            rtshare: self.rtshare,
            rtfreq: self.rtfreq,
            batch: self.batch as usize,
            min_workers: self.min_workers,
            elastic_period_us: self.elastic_period_us,
            elastic_backlog_us: self.elastic_backlog_us,
            batch_workers: self.batch_workers.clone().unwrap_or_default().0,
            ..SchedSpec::default()
        };
        self.core.apply(&mut sched);
        Ok(ServerSpec {
            mode,
            workers: self.workers,
            service: self.service,
            pin: self.pin,
            sched,
        })
    }

    /// The server configuration these flags describe; errors name the flag.
    pub fn to_config(&self) -> anyhow::Result<RpcConfig> {
        let idle_timeout = skq_net::Timeouts::parse_secs("idle-timeout", self.idle_timeout)?;
        Ok(RpcConfig {
            addr: self.addr,
            spec: self.spec()?,
            checkpoint_us: self.checkpoint_us,
            classify: self.classify,
            max_conns: self.max_conns,
            max_service_us: self
                .max_service_us
                .unwrap_or(crate::rpc::DEFAULT_MAX_SERVICE_US),
            idle_timeout,
        })
    }
}

/// A `--mode` value; the error names the flag.
pub fn parse_mode(mode: &str) -> anyhow::Result<Mode> {
    mode.parse().map_err(|e| anyhow::anyhow!("--mode: {e}"))
}

/// Runs the server until SIGINT/SIGTERM (or `--duration`), then writes the
/// stats file and returns (the steps: [`skq_net::serve`]).
pub fn run_rpc(args: RpcArgs) -> anyhow::Result<()> {
    let life = Lifecycle::new(args.duration, args.stats_json.clone())?;
    let done = life.serve(&mut std::io::stdout(), &mut std::io::stderr(), || {
        let server =
            RpcServer::start(args.to_config()?).map_err(|e| ServeError::start(args.addr, e))?;
        anyhow::Ok(Started::new(server, ()))
    })?;
    eprintln!("skq serve rpc: {}", skq_net::serve::counts(&done.stats));
    life.write_stats(&done.stats)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        rpc: RpcArgs,
    }

    fn args(flags: &[&str]) -> Result<RpcArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("rpc").chain(flags.iter().copied())).map(|c| c.rpc)
    }

    #[test]
    fn flags_and_spec_build_the_same_spec() {
        let flags = args(&[
            "--mode",
            "best2+steal",
            "--workers",
            "6",
            "--service",
            "spin",
            "--pin",
            "--steal-k",
            "2",
            "--pollers",
            "1",
            "--poll-groups",
            "2",
            "--batch",
            "4",
            "--batch-workers",
            "4-5",
            "--min-workers",
            "2",
            "--elastic-period-us",
            "5000",
        ])
        .unwrap();
        let spec = flags.spec().unwrap();
        assert_eq!(spec.mode.to_string(), "best2+steal");
        assert_eq!(
            (spec.workers, spec.service, spec.pin),
            (6, ServiceMode::Spin, true)
        );
        assert_eq!(spec.sched.steal_k, Some(2));
        assert_eq!(spec.sched.batch_workers, [4, 5]);
        // flags -> spec -> JSON -> --spec -> the same spec.
        let json = spec.to_json();
        let from_json = args(&["--spec", &json, "--addr", "127.0.0.1:0"]).unwrap();
        assert_eq!(from_json.spec().unwrap(), spec);
        let (a, b) = (flags.to_config().unwrap(), from_json.to_config().unwrap());
        assert_eq!(a.spec, b.spec);
        assert_eq!(
            a.server_config().core_config().unwrap(),
            b.server_config().core_config().unwrap()
        );
    }

    #[test]
    fn runtime_overrides_the_mode_as_before() {
        let a = args(&["--runtime", "tokio"]).unwrap();
        assert_eq!(a.spec().unwrap().mode, Mode::Tokio);
        let a = args(&["--mode", "epoll"]).unwrap();
        assert_eq!(a.spec().unwrap().mode, Mode::EpollShared);
        assert_eq!(
            args(&[]).unwrap().spec().unwrap(),
            ServerSpec::new(Mode::default(), 8)
        );
    }

    #[test]
    fn async_modes_come_from_the_mode_flag_and_the_spec() {
        for mode in ["async-hybrid", "async-best2+steal", "async-tokio"] {
            let flags = args(&["--mode", mode, "--workers", "3"]).unwrap();
            let spec = flags.spec().unwrap();
            assert_eq!(spec.mode.to_string(), mode);
            let json = spec.to_json();
            let from_json = args(&["--spec", &json]).unwrap();
            assert_eq!(from_json.spec().unwrap(), spec);
            assert_eq!(flags.to_config().unwrap().mode_name(), mode);
        }
        let e = args(&["--mode", "async-epoll-1to1"])
            .unwrap()
            .spec()
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--mode: unknown mode `async-epoll-1to1`"),
            "{e}"
        );
    }

    #[test]
    fn spec_replaces_its_flags_and_bad_values_name_the_field() {
        let json = ServerSpec::new(Mode::Tokio, 2).to_json();
        let e = args(&["--spec", &json, "--steal-k", "2"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ArgumentConflict);
        let spec = |j: &str| {
            args(&["--spec", j])
                .unwrap()
                .spec()
                .unwrap_err()
                .to_string()
        };
        let e = spec(r#"{"mode":"hybrid","workers":2,"sched":{"pollers":-1}}"#);
        assert!(
            e.starts_with("--spec: field `sched.pollers`: invalid value"),
            "{e}"
        );
        let e = spec(r#"{"mode":"vanilla+steal","workers":2}"#);
        assert!(
            e.starts_with("--spec: field `mode`: vanilla+steal is not allowed"),
            "{e}"
        );
        let e = args(&["--mode", "fastest"]).unwrap().spec().unwrap_err();
        assert!(
            e.to_string().starts_with("--mode: unknown mode `fastest`"),
            "{e}"
        );
    }
}
