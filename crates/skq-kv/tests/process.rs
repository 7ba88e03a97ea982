//! The standalone binary: prints `listening on ADDR`, serves, exits cleanly on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn sigterm_stops_the_server_in_order() {
    // (how it is started, what `stats` must call its architecture and mode)
    let starts: [(&[&str], &str, &str); 3] = [
        (&["--arch", "shared", "--workers", "2"], "shared", "hybrid"),
        (&["--arch", "tpc", "--workers", "2"], "tpc", "tpc"),
        (
            &["--spec", r#"{"mode":"epoll-1to1","workers":2}"#],
            "shared",
            "epoll-1to1",
        ),
    ];
    for (args, arch, mode) in starts {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skq-kv"))
            .args(args)
            .args(["--addr", "127.0.0.1:0", "-m", "16"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn skq-kv");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"set k 0 0 2\r\nhi\r\nget k\r\n").unwrap();
        let want = b"STORED\r\nVALUE k 0 2\r\nhi\r\nEND\r\n";
        let mut got = vec![0u8; want.len()];
        s.read_exact(&mut got).unwrap();
        assert_eq!(got, want);
        s.write_all(b"stats\r\n").unwrap();
        let mut stats = Vec::new();
        while !stats.ends_with(b"END\r\n") {
            let mut b = [0u8; 4096];
            let n = s.read(&mut b).unwrap();
            assert!(n > 0, "{args:?}: closed during stats");
            stats.extend_from_slice(&b[..n]);
        }
        let stats = String::from_utf8_lossy(&stats);
        assert!(
            stats.contains(&format!("STAT skq_arch {arch}\r\n")),
            "{args:?}: {stats}"
        );
        assert!(
            stats.contains(&format!("STAT skq_mode {mode}\r\n")),
            "{args:?}: {stats}"
        );
        // The child's pid stays live until we wait for it.
        skq_sys::process::send_signal(child.id(), skq_sys::process::Signal::Term).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "{args:?}: server did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{args:?}: exit status {status}");
        // The open connection was closed by the server.
        let mut rest = Vec::new();
        assert_eq!(s.read_to_end(&mut rest).unwrap_or(0), 0);
    }
}

#[test]
fn bad_flag_is_one_clear_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_skq-kv"))
        .args(["-m", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("-m 1"), "{err}");
}
