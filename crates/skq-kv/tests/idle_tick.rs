//! `--idle-tick-us`: with it, each architecture runs one tick thread per CPU
//! the process may use (named `kv-tick-CPU`, seen in /proc), serves as before,
//! and stopping the server ends those threads; without it there are none.

mod common;

use std::time::Duration;

use common::{config, Client};
use skq_kv::server::Arch;

/// Names of this process's threads that are tick threads.
fn tick_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .filter(|n| n.starts_with("kv-tick-"))
        .collect()
}

#[test]
fn the_tick_runs_per_cpu_serves_and_stops_with_the_server() {
    // One test for both architectures, one after the other: other tests of
    // this binary start no tick, so the count in /proc is this server's.
    let cpus = skq_sys::cpu::allowed_cpus().unwrap().len();
    for arch in [Arch::Tpc, Arch::Shared] {
        let plain = skq_kv::server::start(config(arch, 2)).expect("server starts");
        assert_eq!(plain.idle_tick_threads(), 0);
        assert!(tick_threads().is_empty(), "off by default");
        plain.stop();

        let mut cfg = config(arch, 2);
        cfg.idle_tick = Some(Duration::from_micros(800));
        let srv = skq_kv::server::start(cfg).expect("server starts");
        assert_eq!(srv.idle_tick_threads(), cpus, "{arch:?}");
        // A thread names itself once it runs: give them a moment.
        let named = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            tick_threads().len() == cpus
        });
        assert!(named, "{arch:?}: {:?} for {cpus} CPUs", tick_threads());
        let mut c = Client::connect(srv.addr);
        c.expect(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
        c.expect(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
        drop(c);
        srv.stop();
        assert!(tick_threads().is_empty(), "{arch:?}: stop ends them");
    }
}
