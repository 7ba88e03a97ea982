//! The library face of the RPC server: configuration and start.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use skq_net::{Driver, Server, ServerConfig, ServerSpec, Timeouts, DEFAULT_MAX_OUTPUT};

use crate::rpc::{Classify, RpcProtocol, DEFAULT_MAX_SERVICE_US};

pub use skq_net::{ServerHandle as RpcServerHandle, MAX_CONNS, MAX_WORKERS};

/// Which driver serves the connections: `Skq` (every skq scheduling mode),
/// the plain-Linux baselines `Epoll1to1` and `EpollShared`, or `Tokio`;
/// `Async` for the `async-` modes (the async handler, [`crate::async_rpc`],
/// on skq-net's async drivers).
pub type RuntimeKind = Driver;

/// Largest `max_service_us`: the wire format's service field counts ns in
/// 32 bits.
const MAX_SERVICE_US_LIMIT: u64 = u32::MAX as u64 / 1_000;

/// Why an [`RpcConfig`] was refused; one line naming the flag and value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RpcConfigError {
    /// `max_service_us` is outside 1..=4294967.
    #[error("--max-service-us {0} is out of range: allowed 1..={MAX_SERVICE_US_LIMIT}")]
    MaxServiceUs(u64),
    /// The server layer refused an option.
    #[error(transparent)]
    Server(#[from] skq_net::InvalidConfig),
}

/// Everything needed to start a server.
#[derive(Clone, Debug)]
pub struct RpcConfig {
    /// Address to listen on (port 0 picks a free port).
    pub addr: SocketAddr,
    /// Mode, workers, service (spin or emulate), pinning (skq: to the
    /// runtime's CPU for each worker, which its locality decisions assume;
    /// others: thread i to the i-th allowed CPU) and scheduling tunables
    /// (`batch` applies to the epoll drivers too).
    pub spec: ServerSpec,
    /// Most connections served at once; more are accepted and closed at once.
    pub max_conns: usize,
    /// Checkpoint interval inside a request's service (µs); `None`: none.
    pub checkpoint_us: Option<u64>,
    /// How requests are classified (priority classes).
    pub classify: Classify,
    /// Longest service one request may ask for (µs); longer ones are refused.
    pub max_service_us: u64,
    /// Close connections idle this long (`None`: never, the default, like
    /// memcached's `idle_timeout`).
    pub idle_timeout: Option<Duration>,
}

impl RpcConfig {
    /// Serves `spec` on 127.0.0.1, a free port, 65,536 connections.
    pub fn new(spec: ServerSpec) -> Self {
        RpcConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            spec,
            max_conns: 65_536,
            checkpoint_us: None,
            classify: Classify::Header,
            max_service_us: DEFAULT_MAX_SERVICE_US,
            idle_timeout: None,
        }
    }

    /// The server layer's configuration.
    pub fn server_config(&self) -> ServerConfig {
        let mut c = ServerConfig::from_spec(&self.spec);
        c.addr = self.addr;
        c.max_conns = self.max_conns;
        c.max_output = DEFAULT_MAX_OUTPUT;
        c.timeouts = Timeouts {
            idle: self.idle_timeout,
            ..Timeouts::default()
        };
        c
    }

    /// Checks every option; the error names the option and its range.
    pub fn validate(&self) -> Result<(), RpcConfigError> {
        if !(1..=MAX_SERVICE_US_LIMIT).contains(&self.max_service_us) {
            return Err(RpcConfigError::MaxServiceUs(self.max_service_us));
        }
        Ok(self.server_config().validate()?)
    }

    /// The mode name reported in stats: the skq mode, or the driver's name.
    pub fn mode_name(&self) -> String {
        self.server_config().mode_name()
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
        let mut proto = RpcProtocol::new(cfg.spec.service, cfg.classify);
        proto.checkpoint_ns = cfg.checkpoint_us.map_or(0, |us| us.saturating_mul(1_000));
        proto.max_service_ns = cfg.max_service_us * 1_000;
        if let skq_net::Mode::Async(runtime) = cfg.spec.mode {
            // The handler written once as async code (`async_rpc`), on
            // skq-net's async drivers.
            return crate::async_rpc::start(
                &cfg,
                runtime,
                proto.max_service_ns,
                proto.checkpoint_ns,
            );
        }
        let proto = Arc::new(proto);
        Server::start(&cfg.server_config(), proto)
    }
}
