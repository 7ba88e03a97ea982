//! The `skq-rpc` process (same entry point as `skq serve rpc`): readiness
//! line, self-stop, stats file, and one-line errors for bad flags.

use std::process::{Command, Stdio};

fn server() -> Command {
    Command::new(env!("CARGO_BIN_EXE_skq-rpc"))
}

#[test]
fn stops_by_itself_and_writes_stats() {
    for runtime in ["skq", "tokio", "epoll-1to1", "epoll-shared"] {
        let path =
            std::env::temp_dir().join(format!("skq-rpc-cli-{}-{runtime}.json", std::process::id()));
        let out = server()
            .args([
                "--addr",
                "127.0.0.1:0",
                "--workers",
                "3",
                "--runtime",
                runtime,
                "--duration",
                "0.2",
            ])
            .arg("--stats-json")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{runtime}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 1, "{stdout:?}");
        assert!(
            lines[0].starts_with("listening on 127.0.0.1:"),
            "{stdout:?}"
        );
        let stats: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(stats["driver"], runtime);
        assert_eq!(stats["workers"], 3);
        assert_eq!(stats["per_worker"].as_array().unwrap().len(), 3);
        assert_eq!(stats.get("scheduler").is_some(), runtime == "skq");
    }
}

#[test]
fn bad_values_fail_with_one_line_naming_the_option() {
    let cases: [(&[&str], &str); 14] = [
        (&["--max-service-us", "0"], "--max-service-us"),
        (&["--max-service-us", "5000000"], "--max-service-us"),
        (&["--idle-timeout=-1"], "--idle-timeout"),
        (
            &["--min-workers", "1", "--elastic-backlog-us", "0"],
            "--elastic-backlog-us",
        ),
        (&["--workers", "2", "--min-workers", "3"], "--min-workers"),
        (&["--mode", "tokio", "--min-workers", "1"], "--min-workers"),
        (&["--mode", "fastest"], "--mode"),
        (&["--mode", "shared+steal"], "--mode"),
        (&["--workers", "0"], "--workers"),
        (&["--rtshare", "101"], "--rtshare"),
        (&["--runtime", "tokio", "--max-conns", "0"], "--max-conns"),
        (
            &[
                "--spec",
                r#"{"mode":"hybrid","workers":2,"sched":{"steal_k":"two"}}"#,
            ],
            "--spec: field `sched.steal_k`",
        ),
        (
            &[
                "--spec",
                r#"{"mode":"hybrid","workers":2,"sched":{"steal_k":9}}"#,
            ],
            "--steal-k 9",
        ),
        (
            &["--spec", "@/nonexistent/spec.json"],
            "--spec @/nonexistent",
        ),
    ];
    for (args, option) in cases {
        let out = server()
            .args(["--addr", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(option), "{args:?}: {stderr}");
    }
}

/// `--spec` (JSON, or `@FILE`) starts the server its flags would: same
/// driver, mode, workers and service in the stats file.
#[test]
fn a_spec_starts_the_server_its_flags_would() {
    let spec =
        r#"{"mode":"best2+steal","workers":3,"service":"spin","sched":{"steal_k":2,"pollers":1}}"#;
    let file = std::env::temp_dir().join(format!("skq-rpc-spec-{}.json", std::process::id()));
    std::fs::write(&file, spec).unwrap();
    let from_file = format!("@{}", file.display());
    for arg in [spec, from_file.as_str()] {
        let path = std::env::temp_dir().join(format!("skq-rpc-spec-{}.stats", std::process::id()));
        let out = server()
            .args(["--addr", "127.0.0.1:0", "--duration", "0.2", "--spec", arg])
            .arg("--stats-json")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stats: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            (
                &stats["driver"],
                &stats["mode"],
                &stats["workers"],
                &stats["service"]
            ),
            (
                &serde_json::json!("skq"),
                &serde_json::json!("best2+steal"),
                &serde_json::json!(3),
                &serde_json::json!("spin")
            )
        );
    }
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn an_address_in_use_fails_with_one_line_naming_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for runtime in ["skq", "tokio", "epoll-1to1"] {
        let out = server()
            .args(["--addr", &addr, "--runtime", runtime, "--duration", "5"])
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{runtime}");
        assert!(out.stdout.is_empty(), "{runtime}: no `listening on` line");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{runtime}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: --addr {addr}: ")),
            "{runtime}: {stderr}"
        );
    }
}
