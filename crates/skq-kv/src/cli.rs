//! `skq serve kv`: command-line arguments and entry point.

use std::net::SocketAddr;

use skq_net::{Lifecycle, Started};

use crate::config::KvMode;
use crate::protocol::Limits;
use crate::server::{self, Arch, ServerConfig};
use crate::spec::KvSpec;
use skq_net::CoreTunables;

/// The flags a `--spec` replaces (it conflicts with each).
const SPEC_FLAGS: [&str; 13] = [
    "arch",
    "mode",
    "workers",
    "pin",
    "tpc_strict",
    "steal_k",
    "steal_retry_us",
    "promote_min_us",
    "poll_groups",
    "pollers",
    "batch_polls_above",
    "penalty_ns",
    "idle_tick_us",
];

/// Arguments of `skq serve kv`.
#[derive(clap::Args, Debug, Clone)]
pub struct KvArgs {
    /// Architecture: one store shared by all workers, or thread-per-core partitions.
    #[arg(long, value_enum, default_value = "shared")]
    pub arch: Arch,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:11311")]
    pub addr: SocketAddr,
    /// Worker threads.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// What serves the shared architecture: an skq runtime mode (vanilla, shared, queue,
    /// cpu, best2, hybrid, with +steal/-steal), or a baseline without skq: epoll-1to1
    /// (one epoll per thread, connections round-robin at accept: memcached's model),
    /// epoll-shared (one epoll set, ONESHOT + re-arm; `epoll` is its older name) or tokio.
    #[arg(long, default_value = "hybrid")]
    pub mode: String,
    /// Item memory limit in MiB (item data never exceeds it; the index is extra).
    #[arg(short = 'm', long = "memory-limit", default_value_t = 64)]
    pub memory_mb: usize,
    /// Largest item accepted, in bytes (suffix k or m allowed), 1k..=1m: memcached's `-I`,
    /// counted like memcached 1.6 — key, value and 56–60 bytes of header, so with a 1-byte
    /// key the largest value is this minus 60 (see `protocol::Limits::max_item_size`).
    #[arg(long, default_value = "1m")]
    pub max_item_size: String,
    /// Ceiling of one connection's pending output, in bytes (suffix k or m allowed),
    /// 4k..=1024m: unsent replies and replies being computed. Above it the server reads
    /// nothing more from that connection and pauses a multi-key get between keys until
    /// the client reads (memcached also stops a connection whose replies are unread).
    #[arg(long, default_value = "2m")]
    pub max_conn_output: String,
    /// Maximum simultaneous connections.
    #[arg(long, default_value_t = 1024)]
    pub max_conns: usize,
    /// Close a connection idle longer than this many seconds: no whole command for
    /// that long while no reply is unsent or being computed (a partial command counts
    /// as idle), as memcached's `-o idle_timeout=N`. 0 (the default, as in memcached):
    /// never. Closures are counted in `stats` as `idle_kicks`; a connection is closed
    /// between N and N + 1 seconds idle (a sweep looks once a second, or every N/4
    /// seconds when that is shorter). See docs/CONNECTIONS.md.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub idle_timeout: u64,
    /// Keep the server's CPUs from idling longer than this many µs: one thread per
    /// CPU the server may run on, sleeping that long in a loop (100..=100000; 0, the
    /// default: off). On a VM, a CPU idle for a while can take 100-300 µs to run the
    /// thread a packet wakes; memcached's LRU maintainer wakes its CPU about every
    /// 800 µs. See docs/KV-PROFILE.md ("The one-thread tail is the idle CPU's").
    #[arg(long, value_name = "US", default_value_t = 0)]
    pub idle_tick_us: u64,
    /// Pin worker threads to CPUs.
    #[arg(long)]
    pub pin: bool,
    /// `--arch tpc` only: forward every command for a key owned by another worker over
    /// the rings, even when that worker sleeps (thread-per-core as the Sphinx paper runs
    /// it). Without it, a command for a sleeping worker's partition runs on that
    /// partition in the worker that read it: no message, no wake-up.
    #[arg(long)]
    pub tpc_strict: bool,
    /// skq's scheduler tunables (`--steal-k`, `--steal-retry-us`,
    /// `--promote-min-us`, `--poll-groups`, `--pollers`, `--penalty-ns`): the
    /// shared store on an skq mode only.
    #[command(flatten)]
    pub core: CoreTunables,
    /// A priority rule, `CLASS:COND[&COND...]` (repeatable; first match wins;
    /// unmatched requests are regular). CLASS: high, regular or batch. COND:
    /// cmd=NAME[|NAME...], prefix=KEYPREFIX (first key), multikey (a get of
    /// two or more keys), any. E.g. --priority regular:multikey
    /// --priority 'high:cmd=get|gets|mg&prefix=user:'. Needs --arch shared
    /// with an skq mode.
    #[arg(long = "priority", value_name = "RULE")]
    pub priority: Vec<String>,
    /// Priority diffusion: workers that take batch-class requests (e.g. 3 or
    /// 2-3); the others never run them. skq modes only.
    #[arg(long)]
    pub batch_workers: Option<Workers>,
    /// The whole spec (what serves, workers, pinning, scheduler tunables) as
    /// JSON, or `@FILE` holding it, e.g. `{"mode":"tpc","workers":2}` or
    /// `{"mode":"cpu","workers":4,"pin":true,"sched":{"poll_groups":4}}`:
    /// what `skq bench` passes. Refused together with the flags it replaces
    /// (--arch, --mode, --workers, --pin, --tpc-strict and the tunables).
    #[arg(long, value_name = "JSON|@FILE", conflicts_with_all = SPEC_FLAGS)]
    pub spec: Option<String>,
}

/// The longest `--idle-timeout`, in seconds (about 11.5 days).
pub const MAX_IDLE_TIMEOUT: u64 = 1_000_000;

/// A worker list such as `3`, `2,3` or `2-3`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workers(pub Vec<usize>);

impl std::str::FromStr for Workers {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_workers(s).map(Workers)
    }
}

fn parse_workers(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("`{s}` is not a worker list (e.g. 3, 2,3 or 2-3)");
    let mut out = Vec::new();
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a > b || b >= 64 {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// Parses `1048576`, `512k`, `1m`.
fn parse_size(s: &str) -> Option<usize> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(mult)
}

impl KvArgs {
    /// The spec: `--spec`, or the one the flags describe; errors name the
    /// flag (and for `--spec`, the field).
    pub fn spec(&self) -> anyhow::Result<KvSpec> {
        if let Some(spec) = &self.spec {
            return Ok(KvSpec::parse_arg(spec)?);
        }
        let mode = match self.arch {
            Arch::Tpc if self.tpc_strict => KvMode::TpcStrict,
            Arch::Tpc => KvMode::Tpc,
            Arch::Shared if self.tpc_strict => {
                anyhow::bail!("--tpc-strict applies to thread-per-core only: add --arch tpc")
            }
            Arch::Shared => match self.mode.parse::<KvMode>() {
                Ok(m @ KvMode::Shared(_)) => m,
                Ok(KvMode::Tpc | KvMode::TpcStrict) => {
                    anyhow::bail!("--mode {}: thread-per-core is --arch tpc", self.mode)
                }
                Err(e) => anyhow::bail!("--mode {}: {e}", self.mode),
            },
        };
        Ok(KvSpec {
            mode,
            workers: self.workers,
            pin: self.pin,
            sched: self.core.clone(),
            idle_tick_us: (self.idle_tick_us > 0).then_some(self.idle_tick_us),
        })
    }

    /// Validates the arguments into a server configuration; errors name the flag.
    pub fn config(&self) -> anyhow::Result<ServerConfig> {
        let spec = self.spec()?;
        anyhow::ensure!(
            (1..=64).contains(&spec.workers),
            "--workers {}: must be 1..=64",
            spec.workers
        );
        anyhow::ensure!(
            self.max_conns >= 1,
            "--max-conns {}: must be at least 1",
            self.max_conns
        );
        let max_item = parse_size(&self.max_item_size)
            .filter(|s| (1 << 10..=1 << 20).contains(s))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--max-item-size {}: must be 1k..=1m bytes (e.g. 1048576, 512k, 1m)",
                    self.max_item_size
                )
            })?;
        let max_conn_output = parse_size(&self.max_conn_output)
            .filter(|s| (4 << 10..=1 << 30).contains(s))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--max-conn-output {}: must be 4k..=1024m bytes (e.g. 2m, 65536)",
                    self.max_conn_output
                )
            })?;
        let limit_bytes = self
            .memory_mb
            .checked_mul(1 << 20)
            .filter(|&b| b >= crate::config::MIN_SHARD_BYTES)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "-m {}: must be at least 4 (MiB; two 2 MiB segments)",
                    self.memory_mb
                )
            })?;
        anyhow::ensure!(
            self.idle_timeout <= MAX_IDLE_TIMEOUT,
            "--idle-timeout {}: must be 0 (off) to {MAX_IDLE_TIMEOUT} seconds",
            self.idle_timeout
        );
        if let Some(us) = spec.idle_tick_us {
            let r = crate::config::IDLE_TICK_US;
            anyhow::ensure!(
                r.contains(&us),
                "--idle-tick-us {us}: must be 0 (off) or {} to {} µs",
                r.start(),
                r.end()
            );
        }
        let cfg = ServerConfig {
            addr: self.addr,
            workers: spec.workers,
            mode: spec.mode,
            limit_bytes,
            limits: Limits {
                max_item_size: max_item,
                max_conn_output,
                ..Limits::default()
            },
            max_conns: self.max_conns,
            pin: spec.pin,
            priority: crate::priority::Rules::parse(&self.priority)?,
            batch_workers: self.batch_workers.clone().unwrap_or_default().0,
            sched: spec.sched.clone(),
            idle_timeout: (self.idle_timeout > 0)
                .then(|| std::time::Duration::from_secs(self.idle_timeout)),
            idle_tick: spec.idle_tick_us.map(std::time::Duration::from_micros),
        };
        let prioritized = !self.priority.is_empty() || self.batch_workers.is_some();
        let serving = match spec.mode {
            KvMode::Tpc => "--arch tpc".to_string(),
            KvMode::TpcStrict => "--arch tpc --tpc-strict".to_string(),
            m => m.to_string(),
        };
        anyhow::ensure!(
            !prioritized || spec.mode.has_core(),
            "--priority and --batch-workers need --arch shared with an skq mode (not {serving})"
        );
        if let (Some(flag), KvMode::Tpc | KvMode::TpcStrict) = (spec.sched.first_given(), spec.mode)
        {
            anyhow::bail!(
                "{flag} tunes skq's scheduler, which thread-per-core does not run: \
                 leave it out or use --arch shared with an skq mode (not {serving})"
            );
        }
        if let KvMode::Shared(m) = spec.mode {
            crate::shared::net_config(&cfg)
                .and_then(|n| n.validate().map_err(|e| e.to_string()))
                .map_err(|e| anyhow::anyhow!("--mode {m}: {e}"))?;
        }
        Ok(cfg)
    }
}

/// Runs the cache until SIGTERM or SIGINT under skq-net's serve lifecycle
/// (the one every `skq serve` command runs: signals blocked before any
/// worker exists, `listening on ADDR` once ready, the drivers' notices on
/// standard error), then stops every worker and returns.
pub fn run_kv(args: KvArgs) -> anyhow::Result<()> {
    let cfg = args.config()?;
    let life = Lifecycle::new(None, None)?;
    life.serve(&mut std::io::stdout(), &mut std::io::stderr(), || {
        anyhow::Ok(Started::new(server::start(cfg)?, ()))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        kv: KvArgs,
    }

    fn cfg(args: &[&str]) -> anyhow::Result<ServerConfig> {
        let mut v = vec!["kv"];
        v.extend_from_slice(args);
        Wrap::try_parse_from(v)?.kv.config()
    }

    #[test]
    fn defaults_and_errors_name_the_flag() {
        let c = cfg(&[]).unwrap();
        assert_eq!(
            (
                c.workers,
                c.limit_bytes,
                c.limits.max_item_size,
                c.max_conns
            ),
            (4, 64 << 20, 1 << 20, 1024)
        );
        assert_eq!(
            cfg(&["--max-item-size", "512k"])
                .unwrap()
                .limits
                .max_item_size,
            512 << 10
        );
        assert!(cfg(&["--max-item-size", "2m"])
            .unwrap_err()
            .to_string()
            .starts_with("--max-item-size 2m"));
        assert!(cfg(&["-m", "1"])
            .unwrap_err()
            .to_string()
            .starts_with("-m 1"));
        assert!(cfg(&["--workers", "0"])
            .unwrap_err()
            .to_string()
            .starts_with("--workers 0"));
        let err = cfg(&["--mode", "fastest"]).unwrap_err().to_string();
        assert!(err.starts_with("--mode fastest"), "{err}");
        let mode = |a: &[&str]| cfg(a).unwrap().mode.to_string();
        assert_eq!(mode(&["--mode", "best2+steal"]), "best2+steal");
        assert_eq!(mode(&["--mode", "epoll"]), "epoll-shared");
        assert_eq!(mode(&[]), "hybrid");
        assert_eq!(mode(&["--arch", "tpc"]), "tpc");
        assert_eq!(cfg(&["--arch", "tpc"]).unwrap().arch(), Arch::Tpc);
        assert_eq!(mode(&["--arch", "tpc", "--tpc-strict"]), "tpc-strict");
        assert_eq!(
            cfg(&["--arch", "tpc", "--tpc-strict"]).unwrap().mode,
            KvMode::TpcStrict
        );
        let e = cfg(&["--tpc-strict"]).unwrap_err().to_string();
        assert!(
            e.contains("--tpc-strict") && e.contains("--arch tpc"),
            "{e}"
        );
        let e = cfg(&["--mode", "tpc-strict"]).unwrap_err().to_string();
        assert!(e.contains("--arch tpc"), "{e}");
        assert_eq!(cfg(&[]).unwrap().idle_timeout, None, "off by default");
        assert_eq!(
            cfg(&["--idle-timeout", "30"]).unwrap().idle_timeout,
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(cfg(&["--idle-timeout", "0"]).unwrap().idle_timeout, None);
        assert_eq!(cfg(&[]).unwrap().idle_tick, None, "no idle tick by default");
        assert_eq!(
            cfg(&["--idle-tick-us", "800"]).unwrap().idle_tick,
            Some(std::time::Duration::from_micros(800))
        );
        for bad in ["50", "100001"] {
            let e = cfg(&["--idle-tick-us", bad]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--idle-tick-us {bad}:")), "{e}");
        }
        // The spec carries it (what skq bench hands the cache), and the
        // flag and the spec build the same configuration.
        let flag = cfg(&["--arch", "tpc", "--idle-tick-us", "2000"]).unwrap();
        let spec = cfg(&[
            "--spec",
            r#"{"mode":"tpc","workers":1,"idle_tick_us":2000}"#,
        ])
        .unwrap();
        assert_eq!(spec.idle_tick, Some(std::time::Duration::from_millis(2)));
        assert_eq!(flag.idle_tick, spec.idle_tick);
        let e = cfg(&["--spec", r#"{"mode":"tpc","workers":1,"idle_tick_us":5}"#])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--idle-tick-us 5:"), "{e}");
        let e = cfg(&["--idle-timeout", "2000000"]).unwrap_err().to_string();
        assert!(e.starts_with("--idle-timeout 2000000"), "{e}");
    }

    #[test]
    fn flags_and_spec_build_the_same_config() {
        for flags in [
            &["--arch", "tpc", "--workers", "2"][..],
            &["--mode", "best2+steal", "--workers", "3", "--pin"][..],
            &["--mode", "epoll-1to1"][..],
            &[
                "--mode",
                "cpu",
                "--workers",
                "2",
                "--poll-groups",
                "2",
                "--pollers",
                "1",
            ][..],
        ] {
            let mut v = vec!["kv"];
            v.extend_from_slice(flags);
            let spec = Wrap::try_parse_from(&v).unwrap().kv.spec().unwrap();
            let from_flags = cfg(flags).unwrap();
            let from_spec = cfg(&["--spec", &spec.to_json()]).unwrap();
            assert_eq!(
                (from_spec.mode, from_spec.workers, from_spec.pin),
                (from_flags.mode, from_flags.workers, from_flags.pin),
                "{flags:?}"
            );
            assert_eq!(from_spec.sched, from_flags.sched, "{flags:?}");
        }
        let e = cfg(&["--spec", r#"{"mode":"fastest","workers":2}"#])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--spec: field `mode`"), "{e}");
        let e = cfg(&["--spec", r#"{"mode":"tpc","workers":0}"#])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--workers 0"), "{e}");
        assert!(
            cfg(&["--spec", r#"{"mode":"tpc","workers":2}"#, "--mode", "cpu"]).is_err(),
            "--spec and a flag it replaces are refused together"
        );
    }

    #[test]
    fn scheduler_tunables_reach_the_runtime_and_are_refused_where_nothing_runs_them() {
        let c = cfg(&[
            "--mode",
            "cpu",
            "--workers",
            "4",
            "--poll-groups",
            "4",
            "--pollers",
            "1",
            "--steal-k",
            "2",
            "--promote-min-us",
            "20",
            "--batch-polls-above",
            "2",
        ])
        .unwrap();
        let net = crate::shared::net_config(&c).unwrap();
        assert_eq!(
            (
                net.sched.poll_groups,
                net.sched.pollers,
                net.sched.steal_k,
                net.sched.promote_min_us
            ),
            (Some(4), Some(1), Some(2), Some(20))
        );
        assert_eq!(net.sched.batch, 64, "the cache's batch is kept");
        let core = net.core_config().unwrap();
        assert_eq!(
            (core.poll_groups, core.pollers, core.batch_polls_above),
            (4, 1, 2)
        );
        let plain = crate::shared::net_config(&cfg(&["--mode", "cpu"]).unwrap()).unwrap();
        assert_eq!(
            plain.core_config().unwrap().poll_groups,
            0,
            "the policy's choice by default"
        );

        let e = cfg(&["--arch", "tpc", "--poll-groups", "2"])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--poll-groups tunes skq's scheduler") && e.contains("not --arch tpc"),
            "{e}"
        );
        let e = cfg(&["--arch", "tpc", "--tpc-strict", "--pollers", "1"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--pollers") && e.contains("--tpc-strict"), "{e}");
        let e = cfg(&["--mode", "epoll-1to1", "--poll-groups", "2"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--poll-groups") && e.contains("epoll-1to1"),
            "{e}"
        );
        let e = cfg(&["--mode", "tokio", "--steal-k", "2"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--steal-k") && e.contains("tokio"), "{e}");
        let e = cfg(&["--mode", "cpu", "--workers", "2", "--poll-groups", "3"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("poll-groups") && e.contains("1..=workers"),
            "{e}"
        );
        assert!(
            cfg(&[
                "--spec",
                r#"{"mode":"cpu","workers":2}"#,
                "--poll-groups",
                "2"
            ])
            .is_err(),
            "--spec and a tunable it replaces are refused together"
        );
    }

    #[test]
    fn priority_rules_and_batch_workers_are_checked() {
        let c = cfg(&[
            "--priority",
            "regular:multikey",
            "--priority",
            "high:cmd=get|gets|mg&prefix=user:",
            "--batch-workers",
            "3",
        ])
        .unwrap();
        assert_eq!(c.priority.len(), 2);
        assert_eq!(c.batch_workers, vec![3]);
        let e = cfg(&["--priority", "urgent:any"]).unwrap_err().to_string();
        assert!(
            e.starts_with("--priority `urgent:any`: class `urgent`"),
            "{e}"
        );
        let e = cfg(&["--arch", "tpc", "--priority", "high:any"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--arch shared with an skq mode"), "{e}");
        let e = cfg(&["--mode", "tokio", "--batch-workers", "1"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not tokio"), "{e}");
        let e = cfg(&["--batch-workers", "4"]).unwrap_err().to_string();
        assert!(e.contains("--batch-workers names worker 4"), "{e}");
        let e = cfg(&["--batch-workers", "0-3"]).unwrap_err().to_string();
        assert!(e.contains("every worker"), "{e}");
        assert!(cfg(&["--batch-workers", "x"]).is_err());
    }
}
