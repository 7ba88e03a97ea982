//! `skq serve http`: command-line flags and the process around the server
//! (file-descriptor limit, readiness line, signals, stats file).

use std::net::SocketAddr;
use std::path::PathBuf;

use skq_net::{Lifecycle, Mode, SchedSpec, ServeError, ServerSpec, Started};

use crate::iovar::IoVariance;
use crate::protocol::AccessLog;
use crate::server::{start, HttpConfig};

/// Flags of `skq serve http`.
#[derive(clap::Args, Debug, Clone)]
pub struct HttpArgs {
    /// Directory whose files are served (`/` serves its index.html).
    #[arg(long)]
    pub root: PathBuf,
    /// Address to listen on (IP:PORT).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Worker threads (1..=64).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// What serves the connections: an skq scheduling mode
    /// (vanilla|shared|queue|cpu|best2|hybrid, optionally with +steal), or a
    /// baseline without skq: epoll-1to1, epoll-shared or tokio; or
    /// async-MODE / async-tokio: the same protocol served by async code on
    /// skq-async (skq mode MODE) or on tokio.
    #[arg(long, default_value = "hybrid")]
    pub mode: String,
    /// Pin worker threads to CPUs.
    #[arg(long)]
    pub pin: bool,
    /// Most events one wait() returns (1..=1024; skq and epoll drivers).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub batch: u16,
    /// Events taken per steal (1..=8).
    #[arg(long)]
    pub steal_k: Option<usize>,
    /// Hybrid's cache-miss penalty in ns.
    #[arg(long)]
    pub penalty_ns: Option<u64>,
    /// IO variance: none, fadvise (drop the file's cached pages before a
    /// read: a real miss) or emulate (wait a storage latency after the read).
    #[arg(long, default_value = "none")]
    pub io_variance: String,
    /// Fraction of file reads that miss the page cache (0..=1).
    #[arg(long, default_value_t = 0.0)]
    pub io_miss: f64,
    /// Mean emulated storage latency of a miss in µs.
    #[arg(long, default_value_t = 1000.0)]
    pub io_latency_us: f64,
    /// Emulated latency distribution: fixed or exp.
    #[arg(long, default_value = "exp")]
    pub io_dist: String,
    /// Print `METHOD PATH STATUS` for every request on standard error.
    #[arg(long)]
    pub access_log: bool,
    /// Most connections served at once.
    #[arg(long, default_value_t = 65_536)]
    pub max_conns: usize,
    /// Write final statistics (JSON) here at shutdown.
    #[arg(long)]
    pub stats_json: Option<PathBuf>,
    /// A priority rule, `CLASS:COND[&COND...]` (repeatable; first match wins;
    /// unmatched requests are regular). CLASS: high, regular or batch. COND:
    /// path=PREFIX (the request target as sent starts with PREFIX),
    /// header=NAME:VALUE (a header NAME, any case, whose value is exactly
    /// VALUE), header=NAME (the header is present) or any. E.g.
    /// --priority high:path=/api/ --priority 'batch:header=X-Priority:batch'.
    /// skq modes only.
    #[arg(long = "priority", value_name = "RULE")]
    pub priority: Vec<String>,
    /// Priority diffusion: workers that take batch-class requests, e.g. 6,7
    /// or 4-7; the others never run them. skq modes only.
    #[arg(long)]
    pub batch_workers: Option<skq_net::config::WorkerList>,
    /// Seconds a request head may take to arrive whole, from its first
    /// byte (a new connection's first request: from the accept); the
    /// connection is then closed (nginx's client_header_timeout). 0: no limit.
    #[arg(long, default_value_t = 60.0)]
    pub header_timeout: f64,
    /// Seconds a keep-alive connection may stay idle between requests
    /// (nginx's keepalive_timeout). 0: no limit.
    #[arg(long, default_value_t = 75.0)]
    pub idle_timeout: f64,
    /// Seconds a connection's replies may make no write progress because
    /// the client does not read (nginx's send_timeout). 0: no limit.
    #[arg(long, default_value_t = 60.0)]
    pub send_timeout: f64,
    /// Stop by itself after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// The server spec (mode, workers, pinning, scheduling tunables: every
    /// tunable of `skq serve rpc`, not only those with a flag here) as
    /// JSON, or `@FILE` holding it, instead of their flags; its `service`
    /// is not used (the server does real work). `skq bench` passes it.
    #[arg(long, value_name = "JSON|@FILE",
          conflicts_with_all = ["mode", "workers", "pin", "batch", "steal_k", "penalty_ns", "batch_workers"])]
    pub spec: Option<String>,
}

impl HttpArgs {
    /// The server spec: `--spec`, or the one the flags describe; errors
    /// name the flag (and for `--spec`, the field).
    pub fn spec(&self) -> anyhow::Result<ServerSpec> {
        if let Some(spec) = &self.spec {
            return Ok(ServerSpec::parse_arg(spec)?);
        }
        let mode: Mode = self
            .mode
            .parse()
            .map_err(|e| anyhow::anyhow!("--mode: {e}"))?;
        let mut spec = ServerSpec::new(mode, self.workers);
        spec.pin = self.pin;
        spec.sched = SchedSpec {
            steal_k: self.steal_k,
            penalty_ns: self.penalty_ns,
            batch: self.batch as usize,
            batch_workers: self.batch_workers.clone().unwrap_or_default().0,
            ..SchedSpec::default()
        };
        Ok(spec)
    }

    /// The configuration these flags describe; errors name the flag.
    pub fn to_config(&self) -> anyhow::Result<HttpConfig> {
        let addr: SocketAddr = self.addr.parse().map_err(|_| {
            anyhow::anyhow!(
                "--addr {}: not an IP:PORT address (e.g. 127.0.0.1:8080)",
                self.addr
            )
        })?;
        let io = IoVariance::from_flags(
            &self.io_variance,
            self.io_miss,
            self.io_latency_us,
            &self.io_dist,
        )
        .map_err(anyhow::Error::msg)?;
        crate::priority::Rules::parse(&self.priority)?;
        let secs = skq_net::Timeouts::parse_secs;
        Ok(HttpConfig {
            header_timeout: secs("header-timeout", self.header_timeout)?,
            idle_timeout: secs("idle-timeout", self.idle_timeout)?,
            send_timeout: secs("send-timeout", self.send_timeout)?,
            addr,
            root: self.root.clone(),
            spec: self.spec()?,
            max_conns: self.max_conns,
            io,
            priority: self.priority.clone(),
        })
    }
}

/// Runs the server until SIGINT/SIGTERM (or `--duration`), then writes the
/// stats file and returns (the steps: [`skq_net::serve`]).
pub fn run_http(args: HttpArgs) -> anyhow::Result<()> {
    let life = Lifecycle::new(args.duration, args.stats_json.clone())?;
    let cfg = args.to_config()?;
    let log = if args.access_log {
        AccessLog::Stderr
    } else {
        AccessLog::Off
    };
    let done = life.serve(&mut std::io::stdout(), &mut std::io::stderr(), || {
        let (server, proto) = start(&cfg, log).map_err(|e| ServeError::start(cfg.addr, e))?;
        let detail = format!(
            " (root {}, mode {}, {} workers, service: {})",
            proto.root().path().display(),
            cfg.spec.mode,
            cfg.spec.workers,
            cfg.service_label()
        );
        Ok::<_, ServeError>(Started {
            server,
            detail,
            app: proto,
        })
    })?;
    let (stats, proto) = (&done.stats, &done.app);
    let (misses, wait_ns) = proto.emulated_misses();
    let delivered = if misses > 0 && proto.io().is_emulated() {
        format!(
            ", {misses} emulated misses with mean delivered latency {:.0} us",
            wait_ns as f64 / misses as f64 / 1000.0
        )
    } else if misses > 0 {
        format!(", {misses} page-cache drops")
    } else {
        String::new()
    };
    eprintln!(
        "skq serve http: {}, service: {}{delivered}",
        skq_net::serve::counts(stats),
        cfg.service_label()
    );
    let mut json = serde_json::to_value(stats)?;
    json["io_variance"] = serde_json::Value::String(cfg.io.label());
    json["io_misses"] = misses.into();
    json["io_miss_wait_ns"] = wait_ns.into();
    life.write_stats(&json)?;
    Ok(())
}
