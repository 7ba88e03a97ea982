//! Hostile clients (issue 26): each attack runs against the server binary (tpc, and the
//! shared architecture on the skq runtime and on epoll) while a good client checks every
//! reply; after each, the server is still up, the good client's replies are correct, and
//! the server's peak RSS (`VmHWM`, reset before the attack) grew by less than 64 MiB.
//! Unread replies of large multi-gets, the attack that took gigabytes, are in
//! `bounded_output.rs`. Loopback only, bounded in count.

use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Stdio};

mod common;
use common::{spawn_listening, status_bytes, Process};
use std::time::Duration;

const GROWTH_BOUND: u64 = 64 << 20;

fn spawn(arch: &str, mode: &str) -> Process {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_skq-kv"));
    cmd.args(["--arch", arch, "--mode", mode, "--addr", "127.0.0.1:0"])
        .args(["--workers", "2", "-m", "64", "--max-conns", "4096"])
        .stderr(Stdio::null());
    spawn_listening(&mut cmd, &format!("{arch}/{mode}"))
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// The good client: a set and a get of a fresh value, checked byte for byte.
fn good_round_trip(addr: &str, n: usize, ctx: &str) {
    let mut s = BufReader::new(connect(addr));
    let v = format!("value-{n}-{}", "x".repeat(n % 100));
    let req = format!("set good{n} 0 0 {}\r\n{v}\r\nget good{n}\r\n", v.len());
    s.get_mut().write_all(req.as_bytes()).unwrap();
    let want = format!("STORED\r\nVALUE good{n} 0 {}\r\n{v}\r\nEND\r\n", v.len());
    let mut got = vec![0; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), want, "{ctx}: good client");
}

/// Runs `attack` against a fresh server of each kind, checking the good client before
/// and after and the peak RSS growth.
fn each_server(name: &str, attack: impl Fn(&str)) {
    for (arch, mode) in [
        ("tpc", "tpc"),
        ("shared", "hybrid"),
        ("shared", "epoll-1to1"),
    ] {
        let ctx = format!("{name} on {arch}/{mode}");
        let srv = spawn(arch, mode);
        let pid = srv.child.id();
        good_round_trip(&srv.addr, 0, &ctx);
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        let base = status_bytes(pid, "VmRSS:");
        attack(&srv.addr);
        for n in 1..20 {
            good_round_trip(&srv.addr, n, &ctx);
        }
        let growth = status_bytes(pid, "VmHWM:").saturating_sub(base);
        assert!(
            growth < GROWTH_BOUND,
            "{ctx}: peak RSS grew by {} MiB",
            growth >> 20
        );
        assert!(srv.child.id() == pid && status_bytes(pid, "VmRSS:") > 0);
    }
}

#[test]
fn slow_and_unfinished_requests() {
    each_server("slowloris", |addr| {
        let mut held = Vec::new();
        // Lines that never end, and a 1 MB value of which half arrives.
        for i in 0..200 {
            let mut s = connect(addr);
            s.write_all(format!("get k{i} k").as_bytes()).unwrap();
            held.push(s);
        }
        for _ in 0..20 {
            let mut s = connect(addr);
            s.write_all(b"set big 0 0 1000000\r\n").unwrap();
            s.write_all(&vec![b'v'; 500_000]).unwrap();
            held.push(s);
        }
        good_round_trip(addr, 100, "slowloris, while held");
        drop(held);
    });
}

/// SO_LINGER with a zero timeout: closing sends a reset.
fn reset_on_close(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `s` is an open socket for the call's duration and `l` a valid linger
    // struct whose size is passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt SO_LINGER");
}

#[test]
fn connection_churn_and_resets() {
    each_server("churn", |addr| {
        for i in 0..1500 {
            let s = connect(addr);
            if i % 3 == 0 {
                // Close with a reset (SO_LINGER 0) after a request.
                let _ = (&s).write_all(b"get a b c\r\n");
                reset_on_close(&s);
            } else if i % 3 == 1 {
                let _ = s.shutdown(Shutdown::Write);
            }
        }
    });
}

#[test]
fn garbage_and_oversized_input() {
    each_server("garbage", |addr| {
        let inputs: Vec<Vec<u8>> = vec![
            vec![0x80, 0x01, 0x00, 0x03, 0, 0, 0, 0],
            b"get a\x00b\r\n".to_vec(),
            vec![b'z'; 300_000],
            // A get of 40,000 keys: over the 256 KiB retrieval line.
            [b"get".to_vec(), b" key12".repeat(40_000), b"\r\n".to_vec()].concat(),
            b"set k 0 0 4294967295\r\n".to_vec(),
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        ];
        for input in &inputs {
            for _ in 0..20 {
                let mut s = connect(addr);
                let _ = s.write_all(input);
                let mut sink = Vec::new();
                // The server answers or closes; it never hangs the client.
                let _ = s.shutdown(Shutdown::Write);
                let _ = s.read_to_end(&mut sink);
            }
        }
    });
}
