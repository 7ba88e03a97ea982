//! The `skq-http` binary (the same flags as `skq serve http`): help, one-line
//! errors for a bad document root or address, and a short run whose outputs
//! state the IO variance.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::Root;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skq-http"))
}

/// Runs with `args`; returns (exit code, stderr).
fn fails(args: &[&str]) -> (i32, String) {
    let out = bin().args(args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_lists_the_flags() {
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--root",
        "--addr",
        "--workers",
        "--mode",
        "--io-variance",
        "--io-miss",
        "--io-latency-us",
        "--stats-json",
        "--header-timeout",
        "--idle-timeout",
        "--send-timeout",
    ] {
        assert!(help.contains(flag), "{flag} missing from --help:\n{help}");
    }
}

#[test]
fn a_bad_root_or_address_is_one_line_naming_the_flag() {
    let root = Root::new("cli");
    let www = root.www.to_str().unwrap();
    let file = root.www.join("a.css");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--root", "/no/such/dir"], "--root /no/such/dir"),
        (
            vec!["--root", www, "--header-timeout=-1"],
            "--header-timeout",
        ),
        (
            vec!["--root", www, "--idle-timeout", "inf"],
            "--idle-timeout",
        ),
        (vec!["--root", file.to_str().unwrap()], "not a directory"),
        (
            vec!["--root", www, "--addr", "localhost"],
            "--addr localhost",
        ),
        (
            vec!["--root", www, "--addr", "203.0.113.1:80"],
            "--addr 203.0.113.1:80",
        ),
        (
            vec!["--root", www, "--addr", "127.0.0.1:0", "--workers", "0"],
            "workers",
        ),
        (
            vec![
                "--root",
                www,
                "--addr",
                "127.0.0.1:0",
                "--io-variance",
                "emulate",
                "--io-miss",
                "2",
            ],
            "--io-miss",
        ),
    ];
    for (args, needle) in cases {
        let (code, err) = fails(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_run_serves_and_states_its_io_variance_in_every_output() {
    let root = Root::new("cli-run");
    let stats = root.base.join("stats.json");
    let mut child = bin()
        .args([
            "--root",
            root.www.to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
        ])
        .args(["--mode", "hybrid", "--workers", "2", "--duration", "3"])
        .args([
            "--io-variance",
            "emulate",
            "--io-miss",
            "1",
            "--io-latency-us",
            "1500",
            "--io-dist",
            "fixed",
        ])
        .arg("--stats-json")
        .arg(&stats)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.contains("io=emulated miss=1.000 latency=fixed(1500us)"),
        "{line}"
    );
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /a.css HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    assert_eq!(
        reply
            .windows(15)
            .filter(|w| w == b"HTTP/1.1 200 OK")
            .count(),
        2
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("service: spin io=emulated"), "{err}");
    assert!(err.contains("2 emulated misses"), "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(
        json["io_variance"],
        "io=emulated miss=1.000 latency=fixed(1500us)"
    );
    assert_eq!(json["io_misses"], 2);
    assert_eq!(json["requests"], 2);
    // An absolute-deadline sleep never ends early.
    assert!(json["io_miss_wait_ns"].as_u64().unwrap() >= 2 * 1_500_000);
}
