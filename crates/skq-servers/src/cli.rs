//! `skq serve rpc`: command-line flags and the process around the server
//! (file-descriptor limit, readiness line, signals, stats file).

use std::net::SocketAddr;
use std::path::PathBuf;

use skq_net::{Lifecycle, ServeError, Started};

use crate::server::{RpcConfig, RpcServer, RuntimeKind, SchedOptions};
use crate::service::ServiceMode;

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
    /// ONESHOT + re-arm) or tokio.
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
    /// Events taken per steal (1..=8).
    #[arg(long)]
    pub steal_k: Option<usize>,
    /// Optional safety-net steal retry period of an idle worker, µs (off by
    /// default: idle workers are woken to steal on demand).
    #[arg(long)]
    pub steal_retry_us: Option<u64>,
    /// A poller that wakes with work of its own wakes a parked follower to
    /// take over the poll only if its processing time per event is at least
    /// this, µs (0 = always, the default; try 20 for uniform µs-scale
    /// handlers: a long one then holds readiness back for its length).
    #[arg(long)]
    pub promote_min_us: Option<u64>,
    /// Epoll sets the workers are split into, each polled and harvested by
    /// its own group of workers (1..=workers; default 1, one shared set;
    /// = workers: one set per worker, woken directly by the kernel).
    #[arg(long)]
    pub poll_groups: Option<usize>,
    /// Most workers blocked in one epoll set at once (0, the default: every
    /// idle worker, and the one the kernel wakes keeps the event when the
    /// policy allows; 1: leader/follower, one poller that hands the poll to
    /// a parked worker when it leaves to work).
    #[arg(long)]
    pub pollers: Option<usize>,
    /// Percent of a batch high-priority events may fill (1..=100).
    #[arg(long)]
    pub rtshare: Option<u32>,
    /// Target waits per second per worker (0 = off).
    #[arg(long)]
    pub rtfreq: Option<u32>,
    /// Hybrid's cache-miss penalty in ns.
    #[arg(long)]
    pub penalty_ns: Option<u64>,
    /// Most events one wait() returns (skq runtime; 1..=1024). Batched events
    /// are processing and cannot be stolen: 1 keeps every queued event
    /// stealable (best tail latency), larger values save waits.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub batch: u16,
    /// Elastic worker count (skq modes): fewest active workers. A resource
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
}

impl RpcArgs {
    /// The server configuration these flags describe; errors name the flag.
    pub fn to_config(&self) -> anyhow::Result<RpcConfig> {
        let runtime = match self.runtime {
            RuntimeKind::Skq => RuntimeKind::of_mode(&self.mode),
            other => other,
        };
        let idle_timeout = skq_net::Timeouts::parse_secs("idle-timeout", self.idle_timeout)?;
        Ok(RpcConfig {
            addr: self.addr,
            runtime,
            workers: self.workers,
            sched: SchedOptions {
                mode: self.mode.clone(),
                steal_k: self.steal_k,
                steal_retry_us: self.steal_retry_us,
                promote_min_us: self.promote_min_us,
                poll_groups: self.poll_groups,
                pollers: self.pollers,
                rtshare: self.rtshare,
                rtfreq: self.rtfreq,
                penalty_ns: self.penalty_ns,
                batch: self.batch as usize,
                min_workers: self.min_workers,
                elastic_period_us: self.elastic_period_us,
                elastic_backlog_us: self.elastic_backlog_us,
                batch_workers: self.batch_workers.clone().unwrap_or_default().0,
            },
            checkpoint_us: self.checkpoint_us,
            classify: self.classify,
            service: self.service,
            pin: self.pin,
            max_conns: self.max_conns,
            max_service_us: self
                .max_service_us
                .unwrap_or(crate::rpc::DEFAULT_MAX_SERVICE_US),
            idle_timeout,
        })
    }
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
