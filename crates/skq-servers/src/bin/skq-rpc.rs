//! `skq-rpc`: the RPC server alone, with the flags of `skq serve rpc`.
//!
//! The same entry point as the `skq` binary's subcommand; it exists so this
//! crate's tests can run the server as a separate process (its own fd limit,
//! its own /proc/PID/fd) without building the whole CLI.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "skq-rpc",
    about = "The skq synthetic RPC server (same flags as `skq serve rpc`)"
)]
struct Cli {
    #[command(flatten)]
    args: skq_servers::cli::RpcArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = skq_servers::cli::run_rpc(cli.args) {
        eprintln!("error: {e:#}");
        std::process::exit(skq_net::serve::EXIT_FAILURE);
    }
}
