//! Runs the built-in reference server on its own, for trying `skq load`
//! without a real server: `cargo run --release -p skq-load --example refserver
//! -- echo|echo-busy|emulate [SECONDS]`; prints the address it listens on.

use skq_load::refserver::{RefMode, RefServer};

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = match args.next().as_deref() {
        Some("emulate") => RefMode::Emulate,
        Some("echo") | None => RefMode::Echo,
        Some("echo-busy") => RefMode::EchoBusy,
        Some(other) => {
            eprintln!("refserver: unknown mode `{other}`; expected echo, echo-busy or emulate");
            std::process::exit(2);
        }
    };
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(60);
    let server = match RefServer::start(mode) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("refserver: {e}");
            std::process::exit(2);
        }
    };
    println!("{}", server.addr());
    std::thread::sleep(std::time::Duration::from_secs(secs));
    eprintln!("refserver: served {} replies", server.served());
}
