//! How precisely this machine delivers synthetic service: for a few requested
//! times, the overshoot (delivered − requested) of spin and emulated service,
//! measured on the server's own clock, as the RPC server's workers do it.
//!
//! `cargo run --release -p skq-servers --example service_precision [SAMPLES]`

use skq_servers::service::Deliver;
use skq_servers::ServiceMode;

fn main() {
    let samples: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    println!("{samples} samples per row, overshoot in µs (delivered − requested)");
    println!(
        "{:<8} {:>10} {:>8} {:>8} {:>8} {:>8}",
        "mode", "asked_us", "p50", "p90", "p99", "max"
    );
    for mode in [ServiceMode::Spin, ServiceMode::Emulate] {
        mode.prepare_thread();
        for asked in [10_000u32, 100_000, 1_000_000] {
            let mut over: Vec<u32> = (0..samples).map(|_| mode.serve(asked) - asked).collect();
            over.sort_unstable();
            let q = |p: f64| over[((over.len() - 1) as f64 * p) as usize] as f64 / 1e3;
            println!(
                "{:<8} {:>10} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
                mode.to_string(),
                asked / 1_000,
                q(0.5),
                q(0.9),
                q(0.99),
                q(1.0)
            );
        }
    }
}
