//! `skq`: one binary, one subcommand per tool.
//!
//! Each library crate owns its subcommand's arguments (`cli::*Args`, a clap
//! `Args` struct) and its entry point (`cli::run*`); this file only wires them.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "skq",
    version,
    about = "SKQ-style event scheduling for Linux servers: runtime, servers, load generator, benchmark harness and simulator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a server (rpc, kv, http, rocksdb).
    #[command(subcommand)]
    Serve(Serve),
    /// Build or measure the RocksDB front end's database (preload, sample).
    #[command(subcommand)]
    Db(skq_db::cli::DbCmd),
    /// Open-loop load generator with self-checks.
    Load(skq_load::cli::LoadArgs),
    /// Sweep offered load over configurations and report max load at SLO (the main job).
    Bench(skq_bench::cli::BenchArgs),
    /// Pool several `skq bench` runs of one sweep: per configuration and load, merge every
    /// class's latency histograms (regular, probe, high-priority, best-effort) and print the
    /// pooled percentiles, each configuration's p99 growth from low load to peak and its
    /// max load at SLO from the pooled p99s, and where the points left out for failed
    /// checks would change that max load.
    Pool(skq_bench::pool::PoolArgs),
    /// Discrete-event simulator driving the real scheduling core in virtual time.
    Sim(skq_sim::cli::SimArgs),
    /// Hold many idle connections to a running server and report its memory per
    /// idle connection (RSS growth) while a busy client checks its replies.
    Conns(skq_load::idle::IdleArgs),
    /// SKQ's pipe scalability benchmark (paper §6.1).
    Pipes(skq_servers::pipes::PipesArgs),
    /// Print the CPU topology tree (NUMA node → last-level cache → core → CPUs), the CPUs this
    /// process may use, and where CPU hints from every online CPU go for a worker count.
    Topology {
        /// Workers to place as the runtime places them (default: one per CPU this process may use).
        #[arg(long)]
        workers: Option<usize>,
    },
}

#[derive(Subcommand)]
enum Serve {
    /// The synthetic RPC server (skq runtime or tokio).
    Rpc(skq_servers::cli::RpcArgs),
    /// The memcached-compatible cache (shared or thread-per-core).
    Kv(skq_kv::cli::KvArgs),
    /// A static-file HTTP/1.1 server (every skq mode, epoll and tokio baselines).
    Http(skq_http::cli::HttpArgs),
    /// The RocksDB front end: GET/PUT/SEEK over a real RocksDB (SKQ §6.6's ZippyDB).
    Rocksdb(skq_db::cli::ServeArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Serve(Serve::Rpc(a)) => skq_servers::cli::run_rpc(a),
        Cmd::Serve(Serve::Kv(a)) => skq_kv::cli::run_kv(a),
        Cmd::Serve(Serve::Http(a)) => skq_http::cli::run_http(a),
        Cmd::Serve(Serve::Rocksdb(a)) => skq_db::cli::run_serve(a),
        Cmd::Db(c) => skq_db::cli::run_db(c),
        Cmd::Load(a) => skq_load::cli::run(a),
        Cmd::Bench(a) => skq_bench::cli::run(a),
        Cmd::Pool(a) => skq_bench::pool::run(a),
        Cmd::Sim(a) => skq_sim::cli::run(a),
        Cmd::Pipes(a) => skq_servers::pipes::run(a),
        Cmd::Conns(a) => skq_load::idle::run(a),
        Cmd::Topology { workers } => skq_rt::topology::report(workers)
            .map(|t| print!("{t}"))
            .map_err(anyhow::Error::from),
    };
    if let Err(e) = result {
        eprintln!("skq: {e:#}");
        if e.downcast_ref::<skq_load::cli::CheckFailed>().is_some() {
            std::process::exit(skq_load::cli::EXIT_CHECK_FAILED);
        }
        if e.downcast_ref::<skq_load::engine::WarmupStalled>()
            .is_some()
        {
            std::process::exit(skq_load::engine::EXIT_WARMUP_STALLED);
        }
        if e.downcast_ref::<skq_bench::cli::StrictFailed>().is_some() {
            std::process::exit(skq_bench::cli::EXIT_STRICT);
        }
        std::process::exit(2);
    }
}
