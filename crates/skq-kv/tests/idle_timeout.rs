//! `--idle-timeout` (memcached's `-o idle_timeout`), both architectures and the shared
//! one's drivers: with a 1 s timeout, a connection that sent one command and went quiet,
//! one that never sent anything and one stuck in the middle of a command line are closed
//! and counted as `idle_kicks`, while a connection that keeps sending commands keeps its
//! replies, every one checked. Off by default: a connection idle for 2.5 s still gets
//! its reply. Bounded: about 2.5 s of waiting per case, the cases in parallel.

mod common;

use std::time::{Duration, Instant};

use common::{config, Client};
use skq_kv::server::{Arch, KvMode, ServerConfig};

fn with_timeout(arch: Arch, mode: &str) -> ServerConfig {
    let mut cfg = config(arch, 2);
    if arch == Arch::Shared {
        cfg.mode = KvMode::Shared(mode.parse().unwrap());
    }
    cfg.idle_timeout = Some(Duration::from_secs(1));
    cfg
}

/// One set and get of a fresh value on `c`, checked byte for byte.
fn round_trip(c: &mut Client, n: usize) {
    let v = format!("v{n}");
    c.expect(
        format!("set k{n} 0 0 {}\r\n{v}\r\n", v.len()).as_bytes(),
        b"STORED\r\n",
    );
    c.expect(
        format!("get k{n}\r\n").as_bytes(),
        format!("VALUE k{n} 0 {}\r\n{v}\r\nEND\r\n", v.len()).as_bytes(),
    );
}

fn idle_connections_are_closed_and_counted(arch: Arch, mode: &str) {
    let srv = skq_kv::server::start(with_timeout(arch, mode)).expect("server starts");
    let mut active = Client::connect(srv.addr);
    let mut quiet = Client::connect(srv.addr);
    quiet.expect(b"version\r\n", b"VERSION ");
    quiet.read_until(b"\r\n");
    let mut silent = Client::connect(srv.addr);
    let mut partial = Client::connect(srv.addr);
    partial.send(b"get half");
    // Commands every 100 ms for 2.5 s: the active connection never idles 1 s.
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed() < Duration::from_millis(2500) {
        round_trip(&mut active, n);
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    for (name, c) in [
        ("quiet", &mut quiet),
        ("silent", &mut silent),
        ("partial", &mut partial),
    ] {
        assert!(
            c.closed_by_server(),
            "{arch:?}/{mode}: the {name} connection is still open"
        );
    }
    // The server counts a closure when the owning worker handles it, which may come
    // just after the client sees the end of the stream.
    let mut counts = (0, 0);
    for _ in 0..200 {
        counts = (active.stat("idle_kicks"), active.stat("curr_connections"));
        if counts.0 >= 3 && counts.1 <= 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        counts,
        (3, 1),
        "{arch:?}/{mode}: idle_kicks and curr_connections"
    );
    round_trip(&mut active, n);
    active.send(b"stats settings\r\n");
    let settings = String::from_utf8(active.read_until(b"END\r\n")).unwrap();
    assert!(
        settings.contains("STAT idle_timeout 1\r\n"),
        "{arch:?}/{mode}: {settings}"
    );
    srv.stop();
}

#[test]
fn idle_timeout_tpc() {
    idle_connections_are_closed_and_counted(Arch::Tpc, "tpc");
}

#[test]
fn idle_timeout_shared_skq() {
    idle_connections_are_closed_and_counted(Arch::Shared, "hybrid");
}

#[test]
fn idle_timeout_shared_epoll() {
    idle_connections_are_closed_and_counted(Arch::Shared, "epoll-1to1");
}

#[test]
fn idle_timeout_shared_tokio() {
    idle_connections_are_closed_and_counted(Arch::Shared, "tokio");
}

#[test]
fn idle_timeout_is_off_by_default() {
    let servers: Vec<_> = [Arch::Shared, Arch::Tpc]
        .into_iter()
        .map(|arch| skq_kv::server::start(config(arch, 2)).expect("server starts"))
        .collect();
    let mut clients: Vec<Client> = servers.iter().map(|s| Client::connect(s.addr)).collect();
    for c in &mut clients {
        round_trip(c, 0);
    }
    std::thread::sleep(Duration::from_millis(2500));
    for (c, arch) in clients.iter_mut().zip([Arch::Shared, Arch::Tpc]) {
        round_trip(c, 1);
        assert_eq!(c.stat("idle_kicks"), 0, "{arch:?}");
        c.send(b"stats settings\r\n");
        let settings = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
        assert!(settings.contains("STAT idle_timeout 0\r\n"), "{settings}");
    }
    for s in servers {
        s.stop();
    }
}
