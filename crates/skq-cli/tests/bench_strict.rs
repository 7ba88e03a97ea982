//! `skq bench --strict` end to end: with a thread of this test burning CPU
//! beside a one-point sweep of the real RPC server, the point is measured
//! disturbed, every output is written, and the command exits with status 3
//! naming the disturbed point. The run's `--seed` reaches the generator:
//! the point's result records the seed `skq bench` derived for it.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("skq-bench-strict-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_disturbed_decisive_point_fails_strict_with_status_3_after_writing_everything() {
    let out = out_dir("burn");
    let config = out.with_extension("toml");
    std::fs::write(
        &config,
        "[sweep]\nloads = [0.2]\npoint_secs = 1.0\nwarmup_secs = 0.2\nretries = 0\nrss = \"off\"\n\
         [defaults]\nworkers = 1\nservice = \"emulate\"\nmean_us = 200.0\nconnections = 8\n\
         [[config]]\nmode = \"epoll-1to1\"\n",
    )
    .unwrap();
    let stop = AtomicBool::new(false);
    let run = std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        let run = Command::new(env!("CARGO_BIN_EXE_skq"))
            .args(["bench", "--strict", "--seed", "42", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        run
    });
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("--strict") && stderr.contains("disturbed: epoll-1to1"),
        "{stderr}"
    );
    // Everything was written first, and says so.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let curve = &summary["curves"][0];
    assert_eq!(curve["decisive_points"], 1, "{curve}");
    assert_eq!(curve["disturbed"].as_array().unwrap().len(), 1, "{curve}");
    assert!(
        curve["max_disturbance_cpu"].as_f64().unwrap() > 0.05,
        "{curve}"
    );
    // The seed: printed, kept in the settings, and the one the generator
    // drew the point's schedule from.
    assert!(stdout.contains("; seed 42;"), "{stdout}");
    assert_eq!(summary["settings"]["seed"], 42, "{summary}");
    let points: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("points.json")).unwrap()).unwrap();
    assert_eq!(
        points[0]["result"]["meta"]["seed"],
        skq_bench::sweep::point_seed(42, 0),
        "{}",
        points[0]["result"]["meta"]
    );
    let text = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(text.contains("disturbed decisive points: 1 of 1"), "{text}");
    assert!(
        stdout.contains("disturbed decisive points: 1 of 1"),
        "{stdout}"
    );
    assert!(out.join("report.html").is_file() && out.join("points.csv").is_file());
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}
