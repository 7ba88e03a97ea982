//! The library face of the HTTP server: configuration and start.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use skq_net::{Mode, Server, ServerConfig, ServerHandle, ServerSpec, Timeouts, DEFAULT_MAX_OUTPUT};

use crate::docroot::DocRoot;
use crate::iovar::IoVariance;
use crate::priority::Rules;
use crate::protocol::{AccessLog, HttpProtocol};

/// Default `--header-timeout` (nginx's `client_header_timeout`).
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(60);
/// Default `--idle-timeout` (nginx's `keepalive_timeout`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
/// Default `--send-timeout` (nginx's `send_timeout`).
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// Everything needed to start a server.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Address to listen on (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Document root.
    pub root: PathBuf,
    /// Mode (an skq policy, `epoll-1to1`, `epoll-shared`, `tokio`, or
    /// `async-MODE`/`async-tokio`: the protocol served by async code on
    /// skq-async or tokio, see `skq_net::async_driver`),
    /// workers (1..=64), pinning and scheduling tunables; the server does
    /// real work, so the spec's service is not used.
    pub spec: ServerSpec,
    /// Most connections served at once.
    pub max_conns: usize,
    /// IO variance.
    pub io: IoVariance,
    /// Priority rules (`--priority`, see [`crate::priority`]); empty = none.
    /// Batch workers (diffusion) are `sched.batch_workers`.
    pub priority: Vec<String>,
    /// A request head must arrive whole within this, from its first byte
    /// (and a new connection's first one from the accept); `None`: no limit.
    pub header_timeout: Option<Duration>,
    /// Close a keep-alive connection idle this long between requests.
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose replies make no write progress this long.
    pub send_timeout: Option<Duration>,
}

impl HttpConfig {
    /// Defaults: 127.0.0.1 on a free port, `mode`, no IO variance.
    pub fn new(root: impl Into<PathBuf>, mode: Mode, workers: usize) -> Self {
        HttpConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            root: root.into(),
            spec: ServerSpec::new(mode, workers),
            max_conns: 65_536,
            io: IoVariance::None,
            priority: Vec::new(),
            header_timeout: Some(DEFAULT_HEADER_TIMEOUT),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            send_timeout: Some(DEFAULT_SEND_TIMEOUT),
        }
    }

    /// The server layer's configuration. The service label says the work is
    /// real (spin) and which IO variance is in force.
    pub fn server_config(&self) -> ServerConfig {
        let mut c = ServerConfig::from_spec(&self.spec);
        c.addr = self.addr;
        c.max_conns = self.max_conns;
        c.service_label = self.service_label();
        c.max_output = DEFAULT_MAX_OUTPUT;
        c.timeouts = Timeouts {
            idle: self.idle_timeout,
            request: self.header_timeout,
            send: self.send_timeout,
        };
        c
    }

    /// `spin io=...`: the server does its real work; misses may be emulated.
    pub fn service_label(&self) -> String {
        format!("spin {}", self.io.label())
    }
}

/// Starts `cfg` with access log `log`; returns the handle and the protocol
/// (for its access log and emulated-miss totals). Errors are one line
/// naming the flag.
pub fn start(cfg: &HttpConfig, log: AccessLog) -> io::Result<(ServerHandle, Arc<HttpProtocol>)> {
    let sc = cfg.server_config();
    sc.validate()
        .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
    let rules = Rules::parse(&cfg.priority)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let prioritized = !rules.is_empty() || !cfg.spec.sched.batch_workers.is_empty();
    if prioritized && !cfg.spec.mode.is_skq() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--priority and --batch-workers need an skq mode (not {})",
                cfg.spec.mode
            ),
        ));
    }
    let root =
        DocRoot::open(&cfg.root).map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
    let proto = Arc::new(HttpProtocol::new(root, cfg.io, log).with_rules(rules));
    let handle = match sc.mode {
        // The protocol served by async code on skq-async or tokio.
        Mode::Async(_) => skq_net::async_driver::start(&sc, proto.clone())?,
        _ => Server::start(&sc, proto.clone())?,
    };
    Ok((handle, proto))
}
