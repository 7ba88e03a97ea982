//! `skq sim` without the rest of the `skq` binary: the same arguments, for
//! working on the simulator alone (`cargo run --release -p skq-sim --example sim -- --help`).

use clap::Parser;

#[derive(Parser)]
#[command(name = "sim")]
struct Cli {
    #[command(flatten)]
    args: skq_sim::cli::SimArgs,
}

fn main() {
    if let Err(e) = skq_sim::cli::run(Cli::parse().args) {
        eprintln!("sim: {e:#}");
        std::process::exit(2);
    }
}
