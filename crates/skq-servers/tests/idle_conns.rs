//! 10,000 idle connections held open against a server process: a busy client
//! beside them still gets every reply, the server accepts them all, and its
//! file-descriptor count returns to the baseline once they close.
//!
//! Runs the server as a separate process: together, client and server ends
//! would not fit under this machine's fd hard limit of 20,000.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Client, Pipelined, ServerProcess};

const IDLE: usize = 10_000;

/// The client ends of two runs would not fit under the fd limit together:
/// the tests of this file run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn idle_connections(server_args: &[&str]) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    common::raise_fd_limit();
    let server = ServerProcess::spawn(server_args);
    let addr = server.addr;
    let warm = Pipelined::new(2, 2, 10, Arc::new(|_, _| 0));
    assert_eq!(warm.run(addr).unwrap(), 20);
    let baseline = server.wait_fds(Duration::from_secs(10), "after warm-up", |_| true);

    let idle: Vec<Client> = (0..IDLE)
        .map(|i| Client::connect(addr).unwrap_or_else(|e| panic!("idle connection {i}: {e}")))
        .collect();
    // Every idle connection is accepted (not just queued in the backlog).
    server.wait_fds(Duration::from_secs(30), "accepting idle connections", |n| {
        n >= baseline + IDLE
    });

    let busy = Pipelined::new(4, 8, 200, Arc::new(|_, s| (s % 7) as u32 * 3_000));
    assert_eq!(busy.run(addr).unwrap(), 800);

    drop(idle);
    server.wait_fds(
        Duration::from_secs(30),
        "after the idle connections closed",
        |n| n == baseline,
    );
    let stats = server.stop();
    let get = |k: &str| {
        stats[k]
            .as_u64()
            .unwrap_or_else(|| panic!("stats field {k}"))
    };
    assert_eq!(get("accepted"), (IDLE + 2 + 4) as u64, "{stats}");
    assert_eq!(
        (get("protocol_errors"), get("rejected"), get("open")),
        (0, 0, 0),
        "{stats}"
    );
    assert_eq!(get("requests"), 820, "{stats}");
}

#[test]
fn ten_thousand_idle_connections_tokio() {
    idle_connections(&["--runtime", "tokio", "--workers", "4"]);
}

#[test]
fn ten_thousand_idle_connections_skq() {
    idle_connections(&["--runtime", "skq", "--mode", "hybrid", "--workers", "4"]);
}

#[test]
fn ten_thousand_idle_connections_epoll_1to1() {
    idle_connections(&["--mode", "epoll-1to1", "--workers", "4"]);
}
