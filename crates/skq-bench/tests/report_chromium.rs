//! The HTML report opens in headless Chromium without console errors, and
//! its plots are in the rendered DOM.
//!
//! Chromium is installed by `scripts/setup.sh` (setup.d/10-bench.sh). When
//! it is missing this test fails, saying so: a silent skip would let a
//! broken report through CI.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{temp_dir, FakeRunner};
use skq_bench::config::{self, Sweep};
use skq_bench::output::{self, RunInfo};
use skq_bench::rss::RssStatus;
use skq_bench::summary;
use skq_bench::sweep::{self, Quiet};

const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless Chromium on `page`; returns (dumped DOM, stderr).
fn dump_dom(page: &Path, profile: &Path) -> (String, String) {
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} not found: run `bash scripts/setup.sh` (installs chromium via scripts/setup.d/10-bench.sh)"
    );
    std::fs::create_dir_all(profile).unwrap();
    let out = profile.join("dom.html");
    let err = profile.join("stderr.txt");
    let mut child = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.join("profile").display()
        ))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("starting chromium");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = std::fs::read_to_string(&out).unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "chromium failed ({status}): {stderr}");
    (dom, stderr)
}

/// Console output lines Chromium logged for the page.
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect()
}

#[test]
fn report_renders_in_chromium_without_console_errors() {
    let dir = temp_dir("chromium");
    let s = Sweep::from_file(&config::default_file(), 2).unwrap();
    let mut runner = FakeRunner {
        hdr: true,
        fail: vec![("tokio".into(), 2)],
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    let sums = summary::summarize(&s, &records);
    let info = RunInfo {
        started: "2026-01-01 00:00:00".into(),
        command: "skq bench".into(),
        cpus: 2,
        wall_s: 1.0,
        loadavg_before: Some(3.5),
        loadavg_after: Some(1.0),
        rss: RssStatus::off("network namespaces not permitted: `ip netns add skq-1-0` failed"),
        interrupted: true,
        cross_checks: Vec::new(),
    };
    output::write_all(&dir, &s, &records, &sums, &info).unwrap();

    // Negative control: the detection must see a console error when there is one.
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><script>console.error('planted')</script></body></html>",
    )
    .unwrap();
    let (_, stderr) = dump_dom(&bad, &dir.join("bad"));
    assert!(
        console_errors(&stderr)
            .iter()
            .any(|l| l.contains("planted")),
        "console detection is blind: {stderr}"
    );

    let (dom, stderr) = dump_dom(&dir.join("report.html"), &dir.join("good"));
    let errors = console_errors(&stderr);
    assert!(
        errors.is_empty(),
        "console output while rendering the report: {errors:#?}"
    );
    // Two groups (exponential, bimodal-1) × (p99 plot + CDF plot).
    let svgs = dom.matches("<svg").count();
    assert_eq!(
        svgs, 4,
        "expected 4 plots in the rendered DOM, found {svgs}"
    );
    for chunk in dom.split("<svg").skip(1) {
        let body = &chunk[..chunk.find("</svg>").expect("closed svg")];
        assert!(
            body.contains("<polyline") || body.contains("<path"),
            "a plot without lines"
        );
    }
    assert!(dom.contains("p99 vs throughput"));
    assert!(dom.contains("latency CDF"));
    assert!(
        dom.contains(
            "self-check FAILED: cpu [exponential · 8 workers · 64 conns · emulate · rpc] at load 0.40"
        ),
        "self-check failures are visible"
    );
    // The simulator's bound lines are drawn beside the measured curves.
    assert!(
        dom.contains("centralized FCFS (M/G/n)"),
        "bound lines missing"
    );
    assert!(dom.contains("the machine was busy: 1-minute load average 3.50 before"));
    assert!(dom.contains("<td class=\"fail\">FAIL</td>"));
    // How it was measured: emulated RSS refused (an alert says why) and the
    // interruption; the ratio column names the default's baseline.
    assert!(dom.contains("emulated RSS was asked for but is off: network namespaces not permitted"));
    assert!(dom.contains("off: network namespaces not permitted"));
    assert!(dom.contains("interrupted: a signal stopped the sweep"));
    assert!(dom.contains("× epoll-1to1"));
    // SKQ_BENCH_KEEP=1 keeps the fixture report for a look.
    if std::env::var_os("SKQ_BENCH_KEEP").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    } else {
        eprintln!("kept {}", dir.display());
    }
}
