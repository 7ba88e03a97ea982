//! The simple cross-check client (`skq_load::simple`) as a stand-alone
//! program, for `scripts/bench/load-crosscheck.sh` until `skq load
//! --simple-client` exists. Flags mirror `skq load`'s; the result is printed
//! as one line and, with `--json FILE`, written as JSON (`SimpleResult`).
//! Run as root (or with CAP_SYS_NICE) so the receivers get `SCHED_FIFO`
//! (`--recv-rt-priority`, see `skq_load::simple`); the line says whether they did.
//! Receivers read only while the senders lend them the CPU, stopping
//! `--guard-us` (default 60) before a send; `--lend off` lets them read
//! whenever a reply is ready, as before (to compare).
//!
//! cargo run --release -p skq-load --example simple_client -- \
//!     --addr 127.0.0.1:7878 --rate 8000 --connections 64 --json /tmp/s.json

use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::builder::BoolishValueParser;
use clap::{ArgAction, Parser};
use skq_load::protocol::memcached::KvSpec;
use skq_load::simple::{self, RecvSharing, RpcService, SimpleConfig, SimpleProtocol};

#[derive(Parser, Debug)]
struct Args {
    /// Server address (HOST:PORT).
    #[arg(long, default_value = "127.0.0.1:7878")]
    addr: String,
    /// rpc, memcached or http.
    #[arg(long, default_value = "rpc")]
    protocol: String,
    /// Offered rate, requests/s.
    #[arg(long)]
    rate: f64,
    /// Connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Sender threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Receiver threads (each polls its share of the connections).
    #[arg(long, default_value_t = 1)]
    receivers: usize,
    /// SCHED_FIFO priority of the receivers, 0 = normal class.
    #[arg(long, default_value_t = 1)]
    recv_rt_priority: i32,
    /// Receivers read only while the senders lend them the CPU (on/off).
    #[arg(long, default_value = "on", action = ArgAction::Set,
          value_parser = BoolishValueParser::new())]
    lend: bool,
    /// With --lend on: stop reading this many µs before a send.
    #[arg(long, default_value_t = 60)]
    guard_us: u64,
    /// Measured seconds.
    #[arg(long, default_value_t = 5.0)]
    duration: f64,
    /// Warm-up seconds, discarded.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Seconds to wait for replies after the last send.
    #[arg(long, default_value_t = 2.0)]
    drain: f64,
    /// rpc: fixed or exponential requested service.
    #[arg(long, default_value = "exponential")]
    workload: String,
    /// rpc: mean requested service, µs.
    #[arg(long, default_value_t = 500.0)]
    mean_us: f64,
    /// memcached mix: etc, sphinx-ro, sphinx-wo or custom (as `skq load`).
    #[arg(long, default_value = "etc")]
    kv_workload: String,
    /// memcached key size (custom mix).
    #[arg(long, default_value_t = 30)]
    key_size: u32,
    /// memcached value size (custom mix).
    #[arg(long, default_value_t = 200)]
    value_size: u32,
    /// Fraction of gets (custom mix).
    #[arg(long, default_value_t = 0.9)]
    get_ratio: f64,
    /// Distinct memcached keys.
    #[arg(long, default_value_t = 10_000)]
    keyspace: u32,
    /// http: path to GET.
    #[arg(long, default_value = "/")]
    http_path: String,
    /// Spin instead of sleeping for the last µs before each send.
    #[arg(long, default_value_t = 2000)]
    spin_us: u64,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pin threads round-robin to these CPUs (comma-separated).
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<u32>,
    /// Write the result as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let addr = a
        .addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut i| i.next())
        .with_context(|| format!("--addr {}: not a HOST:PORT", a.addr))?;
    let protocol = match a.protocol.as_str() {
        "rpc" => {
            let ns = (a.mean_us * 1e3).clamp(0.0, u32::MAX as f64) as u32;
            SimpleProtocol::Rpc(match a.workload.as_str() {
                "fixed" => RpcService::Fixed(ns),
                "exponential" => RpcService::Exponential(ns),
                w => anyhow::bail!("--workload {w}: the simple client knows fixed and exponential"),
            })
        }
        "memcached" | "mc" => SimpleProtocol::Memcached(
            KvSpec::named(
                &a.kv_workload,
                a.key_size,
                a.value_size,
                a.get_ratio,
                a.keyspace,
            )
            .map_err(anyhow::Error::msg)?,
        ),
        "http" => SimpleProtocol::Http(a.http_path.clone()),
        p => anyhow::bail!("--protocol {p}: expected rpc, memcached or http"),
    };
    let secs = |flag: &str, s: f64| {
        Duration::try_from_secs_f64(s).with_context(|| format!("--{flag} {s}: not a duration"))
    };
    let mut cfg = SimpleConfig::new(addr, a.rate);
    cfg.protocol = protocol;
    cfg.connections = a.connections;
    cfg.threads = a.threads;
    cfg.receivers = a.receivers;
    cfg.recv_rt_priority = (a.recv_rt_priority != 0).then_some(a.recv_rt_priority);
    cfg.sharing = if a.lend {
        RecvSharing::Lend {
            guard: Duration::from_micros(a.guard_us),
        }
    } else {
        RecvSharing::Free
    };
    cfg.duration = secs("duration", a.duration)?;
    cfg.warmup = secs("warmup", a.warmup)?;
    cfg.drain = secs("drain", a.drain)?;
    cfg.spin = Duration::from_micros(a.spin_us);
    cfg.seed = a.seed;
    cfg.cpus = a.cpus;
    let r = simple::run(&cfg)?;
    let cpu: f64 = r.thread_cpu.iter().map(|t| t.user_s + t.sys_s).sum();
    println!(
        "simple client: sent {} received {} errors {:?} | latency p50 {:.1} p99 {:.1} p99.9 {:.1} µs \
         (from send: p99 {:.1}) | lateness p50 {:.1} p99 {:.1} µs (over 50 µs: {}, {} due during the \
         previous send) | send call p99 {:.1} µs | \
         kernel stamps {} of {} (shared {}, before send {}), receiver delay p99 {:.1} µs, \
         receivers realtime {}, lend guard {}, reads held back {}, clock step {:.3} µs | \
         cpu {:.2} s",
        r.sent,
        r.received,
        r.errors,
        r.latency.p50_us,
        r.latency.p99_us,
        r.latency.p999_us,
        r.raw_latency.p99_us,
        r.lateness.p50_us,
        r.lateness.p99_us,
        r.late_sends.late,
        r.late_sends.behind_previous_send,
        r.send_call.p99_us,
        r.stamps.kernel,
        r.received,
        r.stamps.shared,
        r.stamps.before_send,
        r.recv_delay.p99_us,
        r.receivers_realtime,
        r.lend_guard_us
            .map_or_else(|| "off".to_string(), |g| format!("{g:.0} µs")),
        r.recv_yields,
        r.realtime_step_us,
        cpu
    );
    if let Some(p) = &a.json {
        let f = std::fs::File::create(p).with_context(|| format!("--json {}", p.display()))?;
        serde_json::to_writer_pretty(std::io::BufWriter::new(f), &r)
            .with_context(|| format!("--json {}", p.display()))?;
    }
    Ok(())
}
