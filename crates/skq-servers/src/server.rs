//! The library face of the RPC server: configuration, start, handle.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::str::FromStr;

use crate::service::ServiceMode;
use crate::stats::ServerStats;
use crate::{skq_backend, tokio_backend};

/// Most worker threads (the core's limit, applied to tokio too).
pub const MAX_WORKERS: usize = 64;
/// Largest connection table.
pub const MAX_CONNS: usize = 1 << 20;

/// Which runtime serves the connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeKind {
    /// skq: N workers sharing one `Skq` instance.
    Skq,
    /// tokio's multi-thread work-stealing runtime (the peer).
    Tokio,
}

impl FromStr for RuntimeKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skq" => Ok(RuntimeKind::Skq),
            "tokio" => Ok(RuntimeKind::Tokio),
            other => Err(format!("unknown runtime `{other}`: expected skq or tokio")),
        }
    }
}

impl fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuntimeKind::Skq => "skq",
            RuntimeKind::Tokio => "tokio",
        })
    }
}

/// Scheduling options of the skq runtime; `None` keeps the core's default.
/// Ignored by tokio.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedOptions {
    /// Policy with optional `+steal` (`vanilla`, `shared`, `queue`, `cpu`, `best2`, `hybrid`).
    pub mode: String,
    /// Events taken per steal (1..=8).
    pub steal_k: Option<usize>,
    /// Idle worker's steal retry period (µs).
    pub steal_retry_us: Option<u64>,
    /// Percent of a batch that high-priority events may fill (1..=100).
    pub rtshare: Option<u32>,
    /// Target waits per second per worker (0 = off).
    pub rtfreq: Option<u32>,
    /// Hybrid's cache-miss penalty (ns).
    pub penalty_ns: Option<u64>,
    /// Most events one `wait()` returns (1..=1024). Events in a worker's
    /// batch are processing and cannot be stolen, so large batches trade
    /// tail latency (head-of-line blocking) for fewer waits.
    pub batch: usize,
}

impl Default for SchedOptions {
    fn default() -> Self {
        SchedOptions {
            mode: "hybrid".into(),
            steal_k: None,
            steal_retry_us: None,
            rtshare: None,
            rtfreq: None,
            penalty_ns: None,
            batch: 1,
        }
    }
}

/// Everything needed to start a server.
#[derive(Clone, Debug)]
pub struct RpcConfig {
    /// Address to listen on (port 0 picks a free port).
    pub addr: SocketAddr,
    /// skq or tokio.
    pub runtime: RuntimeKind,
    /// Worker threads (1..=64).
    pub workers: usize,
    /// skq scheduling options.
    pub sched: SchedOptions,
    /// Spin or emulate.
    pub service: ServiceMode,
    /// Pin worker threads (skq: to the runtime's CPU for each worker, which
    /// its locality decisions assume; tokio: thread i to CPU i % ncpus).
    pub pin: bool,
    /// Most connections served at once; more are accepted and closed at once.
    pub max_conns: usize,
}

impl RpcConfig {
    /// Defaults: 127.0.0.1 on a free port, hybrid, emulated service, 65,536 connections.
    pub fn new(runtime: RuntimeKind, workers: usize) -> Self {
        RpcConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            runtime,
            workers,
            sched: SchedOptions::default(),
            service: ServiceMode::Emulate,
            pin: false,
            max_conns: 65_536,
        }
    }

    /// Checks what this crate owns; the skq runtime additionally validates
    /// the scheduling options through the core.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_WORKERS).contains(&self.workers) {
            return Err(format!(
                "--workers {} is out of range: allowed 1..={MAX_WORKERS}",
                self.workers
            ));
        }
        if !(1..=MAX_CONNS).contains(&self.max_conns) {
            return Err(format!(
                "--max-conns {} is out of range: allowed 1..={MAX_CONNS}",
                self.max_conns
            ));
        }
        if self.runtime == RuntimeKind::Skq {
            self.core_config().map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The skq core configuration: `--mode` parsed by the core, the tunables
    /// applied on top, capacity for the listener plus `max_conns`
    /// connections. Worker CPUs are left to the runtime (topology spread
    /// order), which `--pin` then follows. The error is the core's
    /// one-line message naming the option and its range.
    pub fn core_config(&self) -> Result<skq_core::Config, skq_core::ConfigError> {
        let s = &self.sched;
        let mut c = skq_core::Config::parse_mode(&s.mode, self.workers)?;
        if let Some(k) = s.steal_k {
            c.steal_k = k;
        }
        if let Some(us) = s.steal_retry_us {
            c.steal_retry_ns = us.saturating_mul(1_000);
        }
        if let Some(v) = s.rtshare {
            c.rtshare = v;
        }
        if let Some(v) = s.rtfreq {
            c.rtfreq = v;
        }
        if let Some(v) = s.penalty_ns {
            c.penalty_ns = v;
        }
        c.capacity = self.max_conns + 1;
        c.validate()?;
        Ok(c)
    }

    /// The mode name reported in stats: the skq mode, or `tokio`.
    pub fn mode_name(&self) -> String {
        match self.runtime {
            RuntimeKind::Skq => self
                .core_config()
                .map_or_else(|_| self.sched.mode.clone(), |c| c.mode_name()),
            RuntimeKind::Tokio => "tokio".into(),
        }
    }
}

/// Starts servers.
pub struct RpcServer;

impl RpcServer {
    /// Binds, spawns the workers and returns once the server accepts
    /// connections. Invalid configuration is an `InvalidInput` error whose
    /// message names the option and its range.
    pub fn start(cfg: RpcConfig) -> io::Result<RpcServerHandle> {
        cfg.validate()
            .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        let backend = match cfg.runtime {
            RuntimeKind::Tokio => Backend::Tokio(tokio_backend::TokioServer::start(&cfg)?),
            RuntimeKind::Skq => Backend::Skq(skq_backend::SkqServer::start(&cfg)?),
        };
        Ok(RpcServerHandle {
            backend: Some(backend),
        })
    }
}

enum Backend {
    Tokio(tokio_backend::TokioServer),
    Skq(skq_backend::SkqServer),
}

/// A running server. Dropping it shuts the server down.
pub struct RpcServerHandle {
    backend: Option<Backend>,
}

impl RpcServerHandle {
    fn backend(&self) -> &Backend {
        self.backend.as_ref().expect("server already shut down")
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        match self.backend() {
            Backend::Tokio(s) => s.local_addr(),
            Backend::Skq(s) => s.local_addr(),
        }
    }

    /// Current counters.
    pub fn stats(&self) -> ServerStats {
        match self.backend() {
            Backend::Tokio(s) => s.stats(),
            Backend::Skq(s) => s.stats(),
        }
    }

    /// Makes worker `i` leave mid-run (`Worker::exit()`): it finishes its
    /// current batch and the core reschedules its queued events to the
    /// others. Unsupported by tokio.
    pub fn retire_worker(&self, i: usize) -> io::Result<()> {
        match self.backend() {
            Backend::Tokio(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "retire_worker: the tokio runtime cannot remove a worker thread",
            )),
            Backend::Skq(s) => s.retire_worker(i),
        }
    }

    /// Stops accepting, stops the workers, closes every connection and
    /// returns the final counters.
    pub fn shutdown(mut self) -> ServerStats {
        self.stop()
    }

    fn stop(&mut self) -> ServerStats {
        match self.backend.take().expect("server already shut down") {
            Backend::Tokio(s) => s.shutdown(),
            Backend::Skq(s) => s.shutdown(),
        }
    }
}

impl Drop for RpcServerHandle {
    fn drop(&mut self) {
        if self.backend.is_some() {
            self.stop();
        }
    }
}
