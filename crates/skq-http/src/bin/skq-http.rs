//! Standalone `skq-http` server: the same as `skq serve http` (used by this
//! crate's process-level tests without building the whole `skq` binary).

use clap::Parser;

/// Static-file HTTP/1.1 server on skq.
#[derive(Parser)]
#[command(name = "skq-http", version)]
struct Cli {
    #[command(flatten)]
    http: skq_http::cli::HttpArgs,
}

fn main() {
    if let Err(e) = skq_http::cli::run_http(Cli::parse().http) {
        eprintln!("skq-http: {e:#}");
        std::process::exit(skq_net::serve::EXIT_FAILURE);
    }
}
