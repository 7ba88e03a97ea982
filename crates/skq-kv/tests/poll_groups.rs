//! `--poll-groups` on the cache: the shared store on skq with one epoll set per worker
//! holds that many sets and serves every key to every connection as with one set.
//!
//! One test in its own binary: it counts the process's epoll descriptors, which other
//! tests' servers running beside it would change.

mod common;

use common::{config, Client};
use skq_kv::server::{Arch, KvMode};
use skq_net::CoreTunables;

/// Open epoll instances of this process.
fn epoll_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy() == "anon_inode:[eventpoll]")
        .count()
}

/// Starts `cpu` on 4 workers in `groups` sets; every one of 8 connections sets its own
/// keys, then reads every connection's keys back. Returns the epoll sets the server
/// held while it ran.
fn serve_with(groups: Option<usize>) -> usize {
    let before = epoll_fds();
    let mut cfg = config(Arch::Shared, 4);
    cfg.mode = KvMode::Shared("cpu".parse().unwrap());
    cfg.sched = CoreTunables {
        poll_groups: groups,
        ..CoreTunables::default()
    };
    let srv = skq_kv::server::start(cfg).expect("server starts");
    let held = epoll_fds() - before;
    let mut clients: Vec<Client> = (0..8).map(|_| Client::connect(srv.addr)).collect();
    for (c, cl) in clients.iter_mut().enumerate() {
        for k in 0..20 {
            let value = format!("v{c}-{k}");
            let req = format!("set k{c}-{k} 0 0 {}\r\n{value}\r\n", value.len());
            cl.expect(req.as_bytes(), b"STORED\r\n");
        }
    }
    for cl in clients.iter_mut() {
        for c in 0..8 {
            for k in 0..20 {
                let value = format!("v{c}-{k}");
                let want = format!("VALUE k{c}-{k} 0 {}\r\n{value}\r\nEND\r\n", value.len());
                cl.expect(format!("get k{c}-{k}\r\n").as_bytes(), want.as_bytes());
            }
        }
    }
    drop(clients);
    srv.stop();
    assert_eq!(epoll_fds(), before, "stopping the server closes its sets");
    held
}

#[test]
fn one_set_per_worker_serves_every_key_and_holds_a_set_per_worker() {
    let one = serve_with(None);
    let four = serve_with(Some(4));
    assert_eq!(
        four,
        one + 3,
        "4 groups hold 3 more epoll sets than 1 ({one} with one group)"
    );
}
