//! `skq pipes`: the pipe benchmark's flags, run for a fraction of a second
//! (behaviour, not speed: the figures themselves belong to benchmarks).

use std::process::{Command, Output};

/// `skq pipes` at 2 workers, spun service only, 0.2 s per configuration,
/// with `modes` (the first is the baseline) and `extra` flags.
fn pipes(modes: &str, extra: &[&str]) -> Output {
    let baseline = modes.split(',').next().unwrap();
    Command::new(env!("CARGO_BIN_EXE_skq"))
        .args(["pipes", "--modes", modes, "--baseline", baseline])
        .args([
            "--workers",
            "2",
            "--emulated-workers",
            "0",
            "--duration",
            "0.2",
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn batch_polls_above_is_passed_to_the_skq_modes_and_refused_out_of_range() {
    let out = pipes("hybrid", &["--batch-polls-above", "65"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--batch-polls-above 65 is out of range: allowed 0..=64"),
        "{err}"
    );
    let json = std::env::temp_dir().join(format!("skq-pipes-{}.json", std::process::id()));
    let out = pipes(
        "epoll-shared,hybrid",
        &["--batch-polls-above", "0", "--json", json.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let rows = v.as_array().expect("a list of results");
    assert_eq!(rows.len(), 2, "{v}");
    for r in rows {
        assert!(r["events_per_s"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
        // The setting is recorded with each skq row; the baseline has none.
        let want = if r["mode"] == "hybrid" {
            serde_json::json!(0)
        } else {
            serde_json::Value::Null
        };
        assert_eq!(r["batch_polls_above"], want, "{r}");
    }
}
