//! Standalone `skq-kv` server: the same as `skq serve kv` (used by this crate's process-level
//! tests, e.g. SIGTERM handling, without building the whole `skq` binary).

use clap::Parser;

/// memcached-compatible cache (shared or thread-per-core).
#[derive(Parser)]
#[command(name = "skq-kv", version)]
struct Cli {
    #[command(flatten)]
    kv: skq_kv::cli::KvArgs,
}

fn main() {
    if let Err(e) = skq_kv::cli::run_kv(Cli::parse().kv) {
        eprintln!("skq-kv: {e:#}");
        std::process::exit(2);
    }
}
