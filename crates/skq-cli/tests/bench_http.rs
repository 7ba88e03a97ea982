//! `skq bench` runs `skq serve http` and nginx on the same ~640-byte page
//! and cross-checks them with wrk (issue 13): a short real sweep, judged on
//! what it wrote (every point measured without errors, the wrk figures
//! beside the curve's, the IO variance named in the outputs).
//!
//! Needs nginx and wrk (scripts/setup.sh installs both).

use std::path::PathBuf;
use std::process::Command;

fn out_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("skq-bench-http-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn bench_serves_skq_http_and_nginx_and_cross_checks_with_wrk() {
    let out = out_dir("wrk");
    let config = out.with_extension("toml");
    std::fs::write(
        &config,
        "[sweep]\nloads = [0.1, 0.2]\npoint_secs = 1.0\nwarmup_secs = 0.3\nbaseline = \"nginx\"\n\
         [defaults]\nworkers = 1\nconnections = 8\nprotocol = \"http\"\ncapacity_rps = 5000.0\nslo_us = 100000.0\n\
         [[config]]\nmode = \"nginx\"\nwrk = true\n\
         [[config]]\nname = \"hybrid\"\nmode = \"http-hybrid\"\nwrk = true\n\
         [[config]]\nname = \"epoll-1to1-io\"\nmode = \"http-epoll-1to1\"\nio_variance = \"emulate\"\nio_miss = 0.5\nio_latency_us = 200.0\n",
    )
    .unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_skq"))
        .args(["bench", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let points: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("points.json")).unwrap()).unwrap();
    // Every point of every curve was measured, and every reply was a
    // correct HTTP response (the generator counts anything else as an
    // error).
    let points = points.as_array().unwrap();
    assert_eq!(points.len(), 6);
    for p in points {
        assert_eq!(p["status"], "measured", "{p}\n{stdout}");
        let errors = &p["result"]["errors"];
        let total: u64 = errors
            .as_object()
            .unwrap()
            .values()
            .filter_map(|v| v.as_u64())
            .sum();
        assert_eq!(total, 0, "{}: {errors}", p["config"]);
        assert!(p["result"]["received"].as_u64().unwrap() > 0, "{p}");
    }
    // Both cross-checks ran; wrk's figures and the matched point sit beside
    // the curve's.
    let checks = summary["run"]["cross_checks"].as_array().unwrap();
    let names: Vec<&str> = checks
        .iter()
        .map(|c| c["config"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nginx", "hybrid"]);
    for c in checks {
        let wrk = &c["wrk"]["Ok"];
        assert!(wrk["rps"].as_f64().unwrap() > 0.0, "{c}");
        assert!(wrk["requests"].as_u64().unwrap() > 0, "{c}");
        assert_eq!(wrk["non_2xx"], 0, "{c}");
        assert!(c["matched"]["achieved_rps"].as_f64().unwrap() > 0.0, "{c}");
        assert!(c["peak_achieved_rps"].as_f64().unwrap() > 0.0, "{c}");
    }
    let text = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(text.contains("cross-check: wrk"), "{text}");
    assert!(stdout.contains("cross-check: wrk"), "{stdout}");
    // The IO variance is named wherever the curve is.
    assert!(
        text.contains("spin+io=emulate miss=0.50 latency=exp(200µs)"),
        "{text}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Cross-check with wrk"));
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&config).unwrap();
}
