//! The disturbance figure of a real point (`ProcessRunner`, real processes,
//! /proc/stat): a thread burning CPU beside a short sweep shows clearly
//! above the threshold and adds most of a CPU to what the same sweep reads
//! without it, though the server burns a whole CPU all along (its CPU is
//! the run's, taken away). On an otherwise idle machine the run without the
//! burner reads under the threshold (the test prints both readings).
//!
//! Other jobs on a shared CI host must not fail it, and a host whose CPUs
//! are all taken leaves no room for the burner to add anything: the same
//! sweep can only read the machine as busy with or without it. So the
//! accounting (window, server measured apart, flag against threshold) is
//! checked on every pair, and the burner's contrast on the first pair
//! whose quiet run left the burner a CPU to take; up to three pairs. A host
//! that never leaves one fails nothing but says so. One test, so nothing
//! else of this binary runs beside the measurements.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{fixture_result, temp_dir, write_executable};
use skq_bench::config::{self, ConfigEntry, Sweep};
use skq_bench::process::{allowed_cpus, ProcessRunner};
use skq_bench::sweep::{self, PointRecord, Quiet};

/// A stand-in `skq`: `serve` announces itself and spins until SIGTERM
/// (a server using a whole CPU); `load` sleeps through warm-up and the
/// measured window, then writes `result` where `--json` says.
fn fake_skq(dir: &Path, result: &Path, run_s: f64) -> PathBuf {
    let path = dir.join("skq");
    let script = format!(
        "#!/bin/bash\n\
         case \"$1\" in\n\
         serve) echo \"listening on $4\"; while :; do :; done ;;\n\
         load) while [ $# -gt 0 ]; do [ \"$1\" = --json ] && json=\"$2\"; shift; done\n\
         \x20     sleep {run_s}; cp '{result}' \"$json\" ;;\n\
         esac\n",
        result = result.display()
    );
    write_executable(&path, &script);
    path
}

fn sweep_of(point_secs: f64, warmup_secs: f64) -> Sweep {
    let mut f = config::default_file();
    f.matrix = None;
    f.config = vec![ConfigEntry {
        mode: Some("hybrid".into()),
        ..Default::default()
    }];
    f.sweep.loads = Some(vec![0.3]);
    f.sweep.point_secs = Some(point_secs);
    f.sweep.warmup_secs = Some(warmup_secs);
    Sweep::from_file(&f, 2).unwrap()
}

/// Runs the one-point sweep, with a thread spinning beside it when `burn`.
fn one_point(dir: &Path, s: &Sweep, skq: &Path, burn: bool) -> PointRecord {
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        if burn {
            sc.spawn(|| {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            });
        }
        let mut runner = ProcessRunner::new(skq.to_path_buf(), allowed_cpus(), dir.to_path_buf());
        runner.ready_timeout = Duration::from_secs(2);
        let out = dir.join(if burn { "out-burn" } else { "out-quiet" });
        let records = sweep::run(s, &out, &mut runner, &mut Quiet);
        stop.store(true, Ordering::Relaxed);
        records.into_iter().next().unwrap()
    })
}

#[test]
fn a_cpu_burner_beside_the_sweep_is_seen_on_top_of_what_the_machine_does_anyway() {
    let dir = temp_dir("disturbance");
    let (point_s, warmup_s) = (2.0, 0.2);
    let s = sweep_of(point_s, warmup_s);
    let threshold = s.settings.disturbed_above;
    assert_eq!(threshold, 0.05, "the default threshold");
    let p = &sweep::plan(&s)[0][0];
    let result = dir.join("result.json");
    let r = fixture_result(&s.curves[0], &s.settings, p);
    std::fs::write(&result, serde_json::to_string(&r).unwrap()).unwrap();
    let skq = fake_skq(&dir, &result, warmup_s + point_s);

    let cpus = allowed_cpus().len() as f64;
    let mut readings = Vec::new();
    for _ in 0..3 {
        let quiet = one_point(&dir, &s, &skq, false);
        let burnt = one_point(&dir, &s, &skq, true);
        let q = *quiet.disturbance().expect("disturbance measured");
        let b = *burnt.disturbance().expect("disturbance measured");
        eprintln!("quiet: {q:?}\nburner: {b:?}");
        for (rec, d) in [(&quiet, &q), (&burnt, &b)] {
            // The window is the measured one; the server's spinning CPU was
            // measured and taken away, not counted as disturbance; each
            // point's flag is its figure against the threshold.
            assert!((d.window_s - point_s).abs() < 0.5, "{d:?}");
            assert!(d.server_cpu > 0.1, "the spinning server: {d:?}");
            assert!(d.machine_busy_cpu >= d.cpu, "{d:?}");
            assert_eq!(d.disturbed, d.cpu > threshold, "{d:?}");
            assert_eq!(rec.disturbed(), d.disturbed);
        }
        // Room for the burner: beside the server's CPU and what else ran,
        // at least one CPU stood idle in the quiet run.
        let room = cpus - q.machine_busy_cpu >= 0.9 && q.server_cpu > 0.5;
        if !room {
            readings.push(format!("quiet {q:?}"));
            continue;
        }
        // Whatever else the machine runs, the burner's whole CPU shows on
        // top of it.
        assert!(
            b.disturbed && b.cpu > 0.5,
            "a spinning thread beside the sweep reads well above {threshold} CPU: {b:?}"
        );
        assert!(
            b.cpu - q.cpu > 0.5,
            "the burner adds most of a CPU to what the same sweep reads without it: quiet {q:?}, burner {b:?}"
        );
        assert!(burnt.disturbed());
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    eprintln!(
        "the host left no idle CPU beside the server in three quiet runs; \
         the accounting was checked, the burner's contrast could not be:\n{}",
        readings.join("\n")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
