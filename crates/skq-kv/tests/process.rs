//! The standalone binary: prints `listening on ADDR`, serves, exits cleanly on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn sigterm_stops_the_server_in_order() {
    for arch in ["shared", "tpc"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skq-kv"))
            .args([
                "--arch",
                arch,
                "--addr",
                "127.0.0.1:0",
                "--workers",
                "2",
                "-m",
                "16",
            ])
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
        // The child's pid stays live until we wait for it.
        skq_sys::process::send_signal(child.id(), skq_sys::process::Signal::Term).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "{arch}: server did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{arch}: exit status {status}");
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
