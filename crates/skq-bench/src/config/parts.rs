//! The groups of settings a [`super::Curve`] holds beside its identity and
//! server: per protocol (HTTP's IO variance and `wrk` cross-check,
//! RocksDB's database), the priority experiments' extra traffic, and the
//! elastic worker count's load profile. Each is built and checked from the
//! flat TOML entry ([`ConfigEntry`]) once; errors name the configuration
//! and key.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use super::{ConfigEntry, ServerKind};

/// IO variance of the HTTP server (`skq serve http --io-variance`): a
/// fraction of file reads miss the page cache, for real (`fadvise`) or with
/// an emulated storage latency (`emulate`). SKQ §6.7's disk-backed pages.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoSpec {
    /// `fadvise` or `emulate`.
    pub variance: String,
    /// Fraction of reads that miss (0..=1).
    pub miss: f64,
    /// Mean emulated storage latency of a miss (µs; `emulate` only).
    pub latency_us: f64,
}

impl IoSpec {
    /// How every output names it: `io=emulate miss=0.10 latency=exp(1000µs)`.
    pub fn label(&self) -> String {
        match self.variance.as_str() {
            "emulate" => format!(
                "io=emulate miss={:.2} latency=exp({}µs)",
                self.miss, self.latency_us
            ),
            v => format!("io={v} miss={:.2}", self.miss),
        }
    }

    /// The server's arguments.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--io-variance".to_string(),
            self.variance.clone(),
            "--io-miss".into(),
            self.miss.to_string(),
        ];
        if self.variance == "emulate" {
            a.extend([
                "--io-latency-us".into(),
                self.latency_us.to_string(),
                "--io-dist".into(),
                "exp".into(),
            ]);
        }
        a
    }
}

/// The HTTP servers' settings (`http-MODE` curves; `wrk` and `tcp_nopush`
/// also nginx).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HttpSpec {
    /// IO variance (http modes only).
    #[serde(default)]
    pub io: Option<IoSpec>,
    /// Cross-check the curve with `wrk` (http servers and nginx).
    #[serde(default)]
    pub wrk: bool,
    /// nginx's `tcp_nopush` (on unless the curve turns it off; written out
    /// only when off, so other curves' specs keep their keys).
    #[serde(default = "yes", skip_serializing_if = "is_on")]
    pub tcp_nopush: bool,
}

fn yes() -> bool {
    true
}

fn is_on(b: &bool) -> bool {
    *b
}

impl Default for HttpSpec {
    fn default() -> Self {
        HttpSpec {
            io: None,
            wrk: false,
            tcp_nopush: true,
        }
    }
}

/// The RocksDB front end's settings (`rocksdb-MODE` curves; defaults
/// elsewhere).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RocksdbSpec {
    /// Database directory.
    #[serde(default)]
    pub db_dir: String,
    /// Records preloaded.
    #[serde(default)]
    pub db_keys: u64,
    /// The generator's `--db-dilate`.
    #[serde(default)]
    pub dilate: f64,
}

impl RocksdbSpec {
    pub(super) fn from_entry(e: &ConfigEntry, name: &str) -> Result<RocksdbSpec> {
        let dilate = e.dilate.unwrap_or(0.0);
        if !(dilate.is_finite() && dilate >= 0.0) {
            bail!("configuration `{name}`: `dilate`: {dilate} must be >= 0");
        }
        Ok(RocksdbSpec {
            db_dir: e
                .db_dir
                .clone()
                .unwrap_or_else(|| "/dev/shm/skq-rocksdb".into()),
            db_keys: e.db_keys.unwrap_or(10_000_000),
            dilate,
        })
    }
}

/// A time-varying rate on the generator, fixed at every load point of a
/// curve (the server's elastic settings, `min_workers` and
/// `elastic_period_us`, are checked here and travel in the server spec).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ElasticSpec {
    /// The generator's `--rate-profile`; the point's rate is its base rate.
    pub rate_profile: Option<String>,
    /// The generator's `--interval-ms`, also the period at which the
    /// harness samples the server's CPU time.
    pub interval_ms: Option<u64>,
}

impl ElasticSpec {
    pub(super) fn from_entry(
        e: &ConfigEntry,
        name: &str,
        server: ServerKind,
        has_core: bool,
        workers: usize,
    ) -> Result<Self> {
        let ctx = |key: &str| format!("configuration `{name}`: `{key}`");
        if let Some(m) = e.min_workers {
            if server != ServerKind::Skq || !has_core {
                bail!(
                    "{}: only skq modes of the RPC server (MODE or async-MODE) have an elastic worker count",
                    ctx("min_workers")
                );
            }
            if !(1..=workers).contains(&m) {
                bail!(
                    "{}: {m} is out of range 1..=workers ({workers})",
                    ctx("min_workers")
                );
            }
        }
        if let Some(p) = e.elastic_period_us {
            if e.min_workers.is_none() {
                bail!(
                    "{}: needs `min_workers` (an elastic worker count)",
                    ctx("elastic_period_us")
                );
            }
            if p == 0 {
                bail!("{}: must be positive", ctx("elastic_period_us"));
            }
        }
        if let Some(r) = &e.rate_profile {
            r.parse::<skq_proto::profile::RateProfile>()
                .map_err(|m| anyhow::anyhow!("{}: {m}", ctx("rate_profile")))?;
        }
        if e.interval_ms == Some(0) {
            bail!("{}: must be positive", ctx("interval_ms"));
        }
        Ok(ElasticSpec {
            rate_profile: e.rate_profile.clone(),
            interval_ms: e.interval_ms.or(e.rate_profile.as_ref().map(|_| 1000)),
        })
    }
}

/// The priority experiments' extra traffic and server setting, fixed at
/// every load point of a curve.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioritySpec {
    /// Probe client rate (req/s), 0 = none.
    pub probe_rps: f64,
    /// Whether the probe is the high-priority client (else a regular probe).
    pub probe_high: bool,
    /// Connections the probe's rate is split over.
    pub probe_connections: usize,
    /// Best-effort (class 2) rate (req/s), 0 = none.
    pub batch_rps: f64,
    /// Best-effort connections.
    pub batch_connections: usize,
    /// Best-effort service (µs).
    pub batch_service_us: f64,
}

impl PrioritySpec {
    pub(super) fn from_entry(
        e: &ConfigEntry,
        name: &str,
        server: ServerKind,
    ) -> Result<PrioritySpec> {
        let ctx = |key: &str| format!("configuration `{name}`: `{key}`");
        let probe_rps = e.probe_rps.unwrap_or(0.0);
        if !(probe_rps.is_finite() && probe_rps >= 0.0) {
            bail!("{}: {probe_rps} must be >= 0", ctx("probe_rps"));
        }
        let probe_high = match e.probe_class.as_deref().unwrap_or("regular") {
            "regular" => false,
            "high" => true,
            other => bail!(
                "{}: `{other}` is unknown: expected regular or high",
                ctx("probe_class")
            ),
        };
        let batch_rps = e.batch_rps.unwrap_or(0.0);
        if !(batch_rps.is_finite() && batch_rps >= 0.0) {
            bail!("{}: {batch_rps} must be >= 0", ctx("batch_rps"));
        }
        let batch_service_us = e.batch_service_us.unwrap_or(10_000.0);
        if !(batch_service_us.is_finite() && batch_service_us > 0.0) {
            bail!(
                "{}: {batch_service_us} must be positive",
                ctx("batch_service_us")
            );
        }
        if e.batch_workers.as_ref().is_some_and(|w| !w.is_empty()) && server != ServerKind::Skq {
            bail!(
                "{}: priority diffusion needs an skq mode",
                ctx("batch_workers")
            );
        }
        Ok(PrioritySpec {
            probe_rps,
            probe_high,
            probe_connections: e.probe_connections.unwrap_or(8).clamp(1, 1024),
            batch_rps,
            batch_connections: e.batch_connections.unwrap_or(4).max(1),
            batch_service_us,
        })
    }
}

/// The IO variance an entry asks for: `None` for `none` or no key; an error
/// for a bad value or for a server that is not `http-MODE` (nginx reads
/// through the page cache as it always does).
pub(super) fn io_spec(
    e: &ConfigEntry,
    server: ServerKind,
) -> std::result::Result<Option<IoSpec>, String> {
    let variance = e.io_variance.as_deref().unwrap_or("none");
    if variance == "none" {
        if e.io_miss.is_some() || e.io_latency_us.is_some() {
            return Err(
                "io_miss and io_latency_us need io_variance = \"fadvise\" or \"emulate\"".into(),
            );
        }
        return Ok(None);
    }
    if !matches!(variance, "fadvise" | "emulate") {
        return Err(format!(
            "unknown IO variance `{variance}`; expected none, fadvise or emulate"
        ));
    }
    if server != ServerKind::Http {
        return Err("only http-MODE servers take IO variance".into());
    }
    let miss = e.io_miss.unwrap_or(0.1);
    if !(0.0..=1.0).contains(&miss) {
        return Err(format!("io_miss {miss} is out of range 0..=1"));
    }
    let latency_us = e.io_latency_us.unwrap_or(1000.0);
    if !(latency_us.is_finite() && latency_us >= 0.0) {
        return Err(format!(
            "io_latency_us {latency_us} must be a non-negative number"
        ));
    }
    Ok(Some(IoSpec {
        variance: variance.into(),
        miss,
        latency_us,
    }))
}
