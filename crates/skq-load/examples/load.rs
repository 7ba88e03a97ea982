//! Stand-alone `skq load` (same flags), for when the whole `skq` binary is not
//! at hand: `cargo run --release -p skq-load --example load -- --validate`.

use clap::Parser;

#[derive(Parser)]
#[command(name = "skq-load", about = "Open-loop load generator with self-checks")]
struct Cli {
    #[command(flatten)]
    args: skq_load::cli::LoadArgs,
}

fn main() {
    if let Err(e) = skq_load::cli::run(Cli::parse().args) {
        eprintln!("skq load: {e:#}");
        if e.downcast_ref::<skq_load::cli::CheckFailed>().is_some() {
            std::process::exit(skq_load::cli::EXIT_CHECK_FAILED);
        }
        std::process::exit(2);
    }
}
