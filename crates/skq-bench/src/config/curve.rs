//! One configuration of the sweep: what serves ([`ServerKind`]), how the
//! service is done ([`ServiceMode`]), where it runs ([`Affinity`]), and the
//! validated [`Curve`] a configuration entry becomes.
//!
//! A configuration's mode and scheduling keys are parsed here, once, into
//! the server spec skq's own servers are handed ([`ServerSetup::spec`],
//! skq-net's [`ServerSpec`]); the harness passes it whole (`--spec JSON`),
//! never knob by knob.
//!
//! The TOML entry stays flat ([`ConfigEntry`]: serde's `flatten` does not
//! combine with `deny_unknown_fields`); a [`Curve`] holds its settings in
//! groups ([`ServerSetup`], [`LoadSpec`], and per protocol, priority and
//! elastic settings from [`super::parts`]).

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use skq_kv::config::KvMode;
use skq_kv::spec::KvSpec;
use skq_net::config::WorkerList;
use skq_net::CoreTunables;
use skq_net::{Mode, ModeError, ServerSpec};
use skq_proto::workload::{ServiceSpec, Workload};

pub use skq_net::ServiceMode;

use super::parts::{io_spec, ElasticSpec, HttpSpec, PrioritySpec, RocksdbSpec};
use super::ConfigEntry;

/// What serves the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// `skq serve rpc --runtime skq --mode MODE`.
    Skq,
    /// `skq serve rpc --mode tokio` or `--mode tokio-spawn-blocking`.
    Tokio,
    /// A plain epoll server with no skq scheduling (BRIEF §10):
    /// `skq serve rpc --mode epoll-1to1` (one epoll per thread, connections
    /// round-robin at accept) or `--mode epoll-shared` (one epoll set, all
    /// threads waiting, ONESHOT + re-arm).
    Epoll,
    /// Debian's memcached.
    Memcached,
    /// Debian's nginx.
    Nginx,
    /// `skq serve kv`: `kv-tpc` (thread-per-core) or `kv-MODE` (shared
    /// architecture on skq mode MODE, e.g. `kv-hybrid`, or the plain epoll
    /// servers `kv-epoll-1to1`, `kv-epoll-shared`, or `kv-tokio`), handed
    /// its [`KvSpec`] as `--spec`.
    Kv,
    /// `skq serve http --mode MODE` for modes `http-MODE`: an skq policy
    /// (`http-hybrid`), a plain epoll server (`http-epoll-1to1`,
    /// `http-epoll-shared`) or tokio (`http-tokio`), serving the same
    /// document root as the nginx peer.
    Http,
    /// `skq serve rocksdb --mode MODE` for modes `rocksdb-MODE`: MODE is an
    /// skq policy, `epoll-1to1`, `epoll-shared`, `tokio` (each request's
    /// RocksDB call inline on a tokio worker thread) or
    /// `tokio-spawn-blocking` (each in `tokio::task::spawn_blocking`, the
    /// honest tokio baseline for blocking calls).
    Rocksdb,
}

impl ServerKind {
    /// The server a `mode` string names.
    pub fn from_mode(mode: &str) -> ServerKind {
        match mode {
            "tokio" | "tokio-spawn-blocking" => ServerKind::Tokio,
            m if EPOLL_MODES.contains(&m) => ServerKind::Epoll,
            "memcached" => ServerKind::Memcached,
            "nginx" => ServerKind::Nginx,
            m if m.starts_with("kv-") => ServerKind::Kv,
            m if m.starts_with("http-") => ServerKind::Http,
            m if m.starts_with("rocksdb-") => ServerKind::Rocksdb,
            _ => ServerKind::Skq,
        }
    }

    /// The load generator protocol it speaks.
    pub fn default_protocol(self) -> &'static str {
        match self {
            ServerKind::Skq | ServerKind::Tokio | ServerKind::Epoll => "rpc",
            ServerKind::Memcached | ServerKind::Kv => "memcached",
            ServerKind::Nginx | ServerKind::Http => "http",
            ServerKind::Rocksdb => "rocksdb",
        }
    }
}

/// The plain epoll servers' modes (`skq serve rpc --mode ...`).
pub const EPOLL_MODES: [&str; 2] = ["epoll-1to1", "epoll-shared"];

/// CPU placement of server and load generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Affinity {
    /// Leave placement to the kernel.
    None,
    /// Server on the first half of the CPUs, generator on the rest.
    Split,
}

/// One fully specified configuration: one curve of the sweep. Its
/// identity (name, mode, workload, workers, connections: what tables,
/// plots and baselines key on) at the top; the rest in groups, each serialized flat, so the
/// `spec` of `summary.json` has the same keys as ever.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// Label.
    pub name: String,
    /// Mode string (`vanilla`, `best2+steal`, `tokio`, `memcached`, ...).
    pub mode: String,
    /// Workload name.
    pub workload: String,
    /// Worker threads.
    pub workers: usize,
    /// Load connections.
    pub connections: usize,
    /// What serves the requests, and how.
    #[serde(flatten)]
    pub server: ServerSetup,
    /// What the generator offers, and the yardsticks it is judged by.
    #[serde(flatten)]
    pub load: LoadSpec,
    /// CPU placement.
    pub affinity: Affinity,
    /// The HTTP servers' settings.
    #[serde(flatten)]
    pub http: HttpSpec,
    /// The RocksDB front end's settings.
    #[serde(flatten)]
    pub rocksdb: RocksdbSpec,
    /// Priority experiment traffic and diffusion (SKQ §6.8, QStack).
    #[serde(default)]
    pub prio: PrioritySpec,
    /// Elastic worker count and fluctuating load (issue 15).
    #[serde(default)]
    pub elastic: ElasticSpec,
}

/// What serves a curve's requests (in [`Curve::mode`], with
/// [`Curve::workers`] threads).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerSetup {
    /// Server kind (derived from the mode).
    #[serde(rename = "server")]
    pub kind: ServerKind,
    /// Service mode.
    pub service: ServiceMode,
    /// `--pin`.
    pub pin: bool,
    /// What skq's own servers (rpc, http, rocksdb; not kv) are handed as
    /// `--spec`: the mode parsed, `workers`, `service` and `pin` as above,
    /// and the scheduling keys each server takes (rpc: all; http:
    /// `steal_k`, `batch`; rocksdb: `steal_k`). `None` for the peers and kv.
    #[serde(default, rename = "server_spec")]
    pub spec: Option<ServerSpec>,
    /// What `skq serve kv` is handed as `--spec` (mode parsed, `workers`,
    /// `pin`). `None` for every other server.
    #[serde(default, rename = "kv_spec", skip_serializing_if = "Option::is_none")]
    pub kv: Option<KvSpec>,
    /// The RPC server's `--checkpoint-us` (skq modes only): its service
    /// loop calls the runtime's cooperative checkpoint every this many µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_us: Option<u64>,
}

/// The load a curve offers (over [`Curve::connections`] connections) and
/// what its points are measured against.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// Generator threads.
    pub threads: usize,
    /// Generator protocol.
    pub protocol: String,
    /// S̄ argument (µs) given to the generator for parametric workloads.
    pub mean_us: f64,
    /// Emulation scale.
    pub scale: f64,
    /// Nominal mean service time (µs), None when unknown (peers).
    pub nominal_service_us: Option<f64>,
    /// Requests/s that load fraction 1.0 means.
    pub capacity_rps: f64,
    /// Fixed SLO (µs), overriding slo_factor × S̄.
    pub slo_us: Option<f64>,
}

impl Curve {
    /// Builds and validates a curve; `cpus` is the machine's CPU count (spin
    /// capacity cannot exceed it). Errors name the configuration and key.
    pub fn from_entry(e: &ConfigEntry, cpus: usize) -> Result<Curve> {
        let mode = e.mode.clone().unwrap_or_else(|| "vanilla".into());
        let name = e.name.clone().unwrap_or_else(|| mode.clone());
        let ctx = |key: &str| format!("configuration `{name}`: `{key}`");
        let server = ServerKind::from_mode(&mode);
        // The mode skq's own server is handed, in its one spelling (the
        // older alias `epoll` is refused here, as before).
        let inner = match server {
            ServerKind::Skq | ServerKind::Tokio | ServerKind::Epoll => Some(mode.as_str()),
            ServerKind::Http => mode.strip_prefix("http-"),
            ServerKind::Rocksdb => mode.strip_prefix("rocksdb-"),
            ServerKind::Memcached | ServerKind::Nginx | ServerKind::Kv => None,
        };
        let server_mode = match inner.map(|m| (m, m.parse::<Mode>())) {
            None => None,
            Some((m, Ok(parsed))) if parsed.to_string() == m => Some(parsed),
            Some((_, Err(ModeError::Refused(why)))) => bail!("{}: `{mode}`: {why}", ctx("mode")),
            Some(_) => bail!("{}: unknown mode `{mode}`; expected a policy (vanilla, shared, queue, cpu, best2, hybrid, optionally +steal), epoll-1to1, epoll-shared, tokio, tokio-spawn-blocking, async-MODE, async-tokio, memcached, nginx, kv-tpc, kv-MODE, http-MODE or rocksdb-MODE", ctx("mode")),
        };
        // The cache's spec: `kv-tpc` or `kv-MODE` (the shared store on MODE).
        let kv_mode = match (server, mode.strip_prefix("kv-")) {
            (ServerKind::Kv, Some(m)) => match m.parse::<KvMode>() {
                Ok(parsed) if parsed.to_string() == m => Some(parsed),
                Ok(parsed) => bail!(
                    "{}: `{mode}`: write it as `kv-{parsed}` (one spelling per mode)",
                    ctx("mode")
                ),
                Err(why) => bail!("{}: `{mode}`: {why}", ctx("mode")),
            },
            _ => None,
        };
        if let Some(us) = e.idle_tick_us {
            if kv_mode.is_none() {
                bail!(
                    "{}: `idle_tick_us` is the cache's (kv-tpc, kv-MODE), not `{mode}`'s",
                    ctx("idle_tick_us")
                );
            }
            let r = skq_kv::config::IDLE_TICK_US;
            if !r.contains(&us) {
                bail!(
                    "{}: {us} must be {} to {} µs",
                    ctx("idle_tick_us"),
                    r.start(),
                    r.end()
                );
            }
        }
        if matches!(server_mode, Some(Mode::Async(_))) && server != ServerKind::Skq {
            bail!(
                "{}: `{mode}`: only the rpc server has an async handler (async-MODE, async-tokio)",
                ctx("mode")
            );
        }
        let io = io_spec(e, server).map_err(|m| anyhow::anyhow!("{}: {m}", ctx("io_variance")))?;
        if let Some(b) = e.batch {
            if !(1..=1024).contains(&b) {
                bail!("{}: {b} is out of range 1..=1024", ctx("batch"));
            }
            let skq_mode = matches!(server, ServerKind::Skq | ServerKind::Http)
                && server_mode.is_some_and(Mode::is_skq);
            if !skq_mode {
                bail!(
                    "{}: only skq modes of the rpc and http servers take a batch size (`{mode}` does not)",
                    ctx("batch")
                );
            }
        }
        let wrk = e.wrk.unwrap_or(false);
        if wrk && !matches!(server, ServerKind::Http | ServerKind::Nginx) {
            bail!(
                "{}: the wrk cross-check speaks HTTP: only http-MODE and nginx curves take it",
                ctx("wrk")
            );
        }
        if e.nginx_tcp_nopush.is_some() && server != ServerKind::Nginx {
            bail!(
                "{}: an nginx setting: only nginx curves take it",
                ctx("nginx_tcp_nopush")
            );
        }
        let tcp_nopush = e.nginx_tcp_nopush.unwrap_or(true);
        let rocksdb = RocksdbSpec::from_entry(e, &name)?;
        let workers = e.workers.unwrap_or(8);
        if !(1..=64).contains(&workers) {
            bail!("{}: {workers} is out of range 1..=64", ctx("workers"));
        }
        // Peers do their real work: `service` (often inherited from
        // [defaults] or --service) does not apply to them.
        let service = match server {
            ServerKind::Memcached | ServerKind::Nginx | ServerKind::Kv | ServerKind::Http => {
                ServiceMode::Spin
            }
            _ => e.service.unwrap_or(ServiceMode::Emulate),
        };
        let mean_us = e.mean_us.unwrap_or(500.0);
        if !(mean_us.is_finite() && mean_us > 0.0) {
            bail!(
                "{}: {mean_us} must be a positive number of microseconds",
                ctx("mean_us")
            );
        }
        let scale = e.scale.unwrap_or(1.0);
        if !(scale.is_finite() && scale > 0.0) {
            bail!("{}: {scale} must be positive", ctx("scale"));
        }
        let protocol = e
            .protocol
            .clone()
            .unwrap_or_else(|| server.default_protocol().into());
        let default_workload = match protocol.as_str() {
            "rpc" => "exponential",
            "memcached" => "etc",
            "http" => "page-640B",
            "rocksdb" => "zippydb",
            _ => "default",
        };
        let workload = e
            .workload
            .clone()
            .unwrap_or_else(|| default_workload.into());
        let nominal_service_us = if protocol == "rpc" {
            // `priority` is exponential service plus a high-priority client.
            let w: Workload = match workload.as_str() {
                "priority" => Workload::Exponential,
                name => name
                    .parse()
                    .map_err(|m: String| anyhow::anyhow!("{}: {m}, priority", ctx("workload")))?,
            };
            let spec = ServiceSpec {
                workload: w,
                mean_ns: mean_us * 1000.0,
                scale,
            };
            Some(spec.mean() / 1000.0)
        } else {
            None
        };
        let capacity_rps = match (e.capacity_rps, nominal_service_us) {
            (Some(c), _) if c.is_finite() && c > 0.0 => c,
            (Some(c), _) => bail!("{}: {c} must be positive", ctx("capacity_rps")),
            (None, Some(s)) => {
                let effective = if service == ServiceMode::Spin {
                    workers.min(cpus.max(1))
                } else {
                    workers
                };
                effective as f64 * 1e6 / s
            }
            (None, None) => bail!(
                "{}: required for protocol `{protocol}` (no mean service time to derive it from)",
                ctx("capacity_rps")
            ),
        };
        if nominal_service_us.is_none() && e.slo_us.is_none() {
            bail!(
                "{}: required for protocol `{protocol}` (no mean service time to derive it from)",
                ctx("slo_us")
            );
        }
        // Split by default: measured on the 2-core VM (2026-11-22), emulated
        // 8-worker runs failed the generator's lateness check at most points
        // with shared CPUs and passed it at every point with the generator on
        // its own CPU (the sleeping workers need little CPU).
        let affinity = e.affinity.unwrap_or(match service {
            ServiceMode::Spin => Affinity::Split,
            ServiceMode::Emulate => Affinity::Split,
        });
        let prio = PrioritySpec::from_entry(e, &name, server)?;
        let has_core = server_mode.is_some_and(Mode::has_core);
        let elastic = ElasticSpec::from_entry(e, &name, server, has_core, workers)?;
        if let Some(u) = e.checkpoint_us {
            if server != ServerKind::Skq || !has_core {
                bail!(
                    "{}: only skq modes of the RPC server (MODE or async-MODE) make checkpoints",
                    ctx("checkpoint_us")
                );
            }
            if u == 0 {
                bail!("{}: must be positive", ctx("checkpoint_us"));
            }
        }
        let batch_workers = match e.batch_workers.as_deref() {
            None | Some("") => Vec::new(),
            Some(w) => {
                w.parse::<WorkerList>()
                    .map_err(|m| anyhow::anyhow!("{}: {m}", ctx("batch_workers")))?
                    .0
            }
        };
        let pin = e.pin.unwrap_or(false);
        let server_spec = server_mode.map(|m| {
            let mut spec = ServerSpec::new(m, workers);
            spec.service = service;
            spec.pin = pin;
            let s = &mut spec.sched;
            // The scheduler's tunables go to skq modes only: a baseline
            // refuses them (`skq_net::InvalidConfig::SchedNeedsSkq`), and
            // `[defaults]` may name them for a matrix that has baselines.
            s.steal_k = e.steal_k.filter(|_| has_core);
            if server == ServerKind::Rocksdb {
                return spec;
            }
            s.batch = e.batch.unwrap_or(1);
            if server == ServerKind::Http {
                return spec;
            }
            s.rtshare = e.rtshare.filter(|_| has_core);
            s.rtfreq = e.rtfreq.filter(|_| has_core);
            s.batch_workers = batch_workers;
            s.min_workers = e.min_workers;
            s.elastic_period_us = e.elastic_period_us;
            if server == ServerKind::Skq {
                s.pollers = e.pollers.filter(|_| has_core);
                s.batch_polls_above = e.batch_polls_above.filter(|_| has_core);
                s.poll_groups = e.poll_groups.filter(|_| has_core);
            }
            spec
        });
        Ok(Curve {
            name,
            mode,
            workload,
            workers,
            connections: e.connections.unwrap_or(64).max(1),
            server: ServerSetup {
                kind: server,
                service,
                pin,
                spec: server_spec,
                kv: kv_mode.map(|mode| {
                    // As for the rpc server: skq's tunables reach skq modes
                    // only (thread-per-core and the baselines refuse them).
                    let core = mode.has_core();
                    KvSpec {
                        mode,
                        workers,
                        pin,
                        sched: CoreTunables {
                            steal_k: e.steal_k.filter(|_| core),
                            poll_groups: e.poll_groups.filter(|_| core),
                            pollers: e.pollers.filter(|_| core),
                            batch_polls_above: e.batch_polls_above.filter(|_| core),
                            ..CoreTunables::default()
                        },
                        idle_tick_us: e.idle_tick_us,
                    }
                }),
                checkpoint_us: e.checkpoint_us,
            },
            load: LoadSpec {
                threads: e.threads.unwrap_or(1).max(1),
                protocol,
                mean_us,
                scale,
                nominal_service_us,
                capacity_rps,
                slo_us: e.slo_us,
            },
            affinity,
            http: HttpSpec {
                io,
                wrk,
                tcp_nopush,
            },
            rocksdb,
            prio,
            elastic,
        })
    }

    /// The service label every output carries: `spin`, `emulate`, or for
    /// an http curve with IO variance `spin+io=emulate miss=0.10 ...`.
    pub fn service_label(&self) -> String {
        let service = self.server.service.as_str();
        match &self.http.io {
            Some(io) => format!("{service}+{}", io.label()),
            None => service.to_string(),
        }
    }

    /// The key of the group of curves that share a plot and a baseline:
    /// same workload, workers, connections, service mode and protocol.
    pub fn group(&self) -> String {
        format!(
            "{} · {} workers · {} conns · {} · {}",
            self.workload,
            self.workers,
            self.connections,
            self.service_label(),
            self.load.protocol
        )
    }

    /// File-name-safe identifier (`best2-steal_bimodal-1_w8_c64_emulate`).
    pub fn slug(&self) -> String {
        let raw = format!(
            "{}_{}_w{}_c{}_{}",
            self.name,
            self.workload,
            self.workers,
            self.connections,
            self.server.service.as_str()
        );
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }
}
