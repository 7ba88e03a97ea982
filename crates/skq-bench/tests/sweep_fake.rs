//! The harness end to end with a fake runner: planning, saturation stop,
//! failure isolation, max load at SLO, ratios, self-checks and every output
//! file (CSV and JSON read back).

mod common;

use common::{six_mode_sweep, temp_dir, FakeRunner};
use skq_bench::config::{self, Sweep, SweepFile};
use skq_bench::output::{self, RunInfo};
use skq_bench::rss::RssStatus;
use skq_bench::summary::{self, SelfCheck};
use skq_bench::sweep::{self, Outcome, PointRecord, Quiet};
use skq_report::result::{IntervalPoint, PointResult};

#[test]
fn saturated_curves_stop_and_failures_do_not_stop_the_sweep() {
    let s = six_mode_sweep();
    let dir = temp_dir("stop");
    let mut runner = FakeRunner {
        fail: vec![("shared".into(), 1)],
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(records.len(), 12 * 5, "one record per planned point");

    // vanilla (55% efficient) saturates at load 0.6: 0.6 × 550/500 / 0.55 > 1.
    let vanilla: Vec<&PointRecord> = records.iter().filter(|r| r.curve == 0).collect();
    let kinds: Vec<&str> = vanilla.iter().map(|r| kind(&r.outcome)).collect();
    assert_eq!(
        kinds,
        ["measured", "measured", "saturated", "skipped", "skipped"]
    );
    assert!(
        !runner.calls.contains(&("vanilla".into(), 0.75)),
        "no run after saturation"
    );

    // shared's server fails at the second point: that curve ends, the next one runs.
    let shared: Vec<&str> = records
        .iter()
        .filter(|r| r.curve == 1)
        .map(|r| kind(&r.outcome))
        .collect();
    assert_eq!(
        shared,
        ["measured", "failed", "skipped", "skipped", "skipped"]
    );
    assert!(
        runner.calls.iter().any(|c| c.0 == "cpu"),
        "the sweep went on after the failure"
    );

    let sums = summary::summarize(&s, &records);
    assert!(
        matches!(&sums[1].self_check, SelfCheck::Error(e) if e.contains("never") || e.contains("not ready"))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn kind(o: &Outcome) -> &'static str {
    match o {
        Outcome::Measured {
            saturated: true, ..
        } => "saturated",
        Outcome::Measured { .. } => "measured",
        Outcome::Failed { .. } => "failed",
        Outcome::Skipped => "skipped",
    }
}

#[test]
fn saturation_rule() {
    let s = six_mode_sweep().settings;
    let mut r = PointResult {
        achieved_rps: 1000.0,
        ..Default::default()
    };
    r.latency.p99.value = 5000.0;
    assert!(
        !sweep::saturated(&r, 1000.0, Some(5000.0), &s),
        "at the SLO is not saturated"
    );
    r.latency.p99.value = 4.0 * 5000.0 + 1.0;
    assert!(
        sweep::saturated(&r, 1000.0, Some(5000.0), &s),
        "far above the SLO"
    );
    r.latency.p99.value = 100.0;
    r.achieved_rps = 850.0;
    assert!(
        sweep::saturated(&r, 1000.0, Some(5000.0), &s),
        "achieved well below target"
    );
    r.achieved_rps = 950.0;
    assert!(!sweep::saturated(&r, 1000.0, None, &s));
    // Judged against what the seed's schedule sent: 858 replies to the 858
    // requests a sparse 1-s Poisson sample offered is not saturation, 780
    // of them is.
    r.meta.duration_s = 1.0;
    r.sent = 858;
    r.achieved_rps = 858.0;
    assert!(
        !sweep::saturated(&r, 1000.0, Some(5000.0), &s),
        "a sparse schedule answered in full"
    );
    r.achieved_rps = 760.0;
    assert!(
        sweep::saturated(&r, 1000.0, Some(5000.0), &s),
        "well below what was sent"
    );
    r.achieved_rps = 950.0;
    r.latency.p99.value = f64::NAN;
    assert!(
        sweep::saturated(&r, 1000.0, Some(5000.0), &s),
        "an unmeasurable p99 is not a pass"
    );
}

#[test]
fn max_load_column_uses_measured_service_time() {
    let s = six_mode_sweep();
    let dir = temp_dir("maxload");
    let records = sweep::run(&s, &dir, &mut FakeRunner::default(), &mut Quiet);
    let sums = summary::summarize(&s, &records);
    let v = &sums[0];
    // S̄ measured = 500 + 50 µs (fixture overshoot), SLO = 10 × 550.
    assert_eq!(v.measured_service_us, Some(550.0));
    assert_eq!(v.slo_us, Some(5500.0));
    // Expected: the crossing of the fixture curve between its points, by the
    // same interpolation rule, recomputed here from the records.
    let pts: Vec<(f64, f64)> = records
        .iter()
        .filter(|r| r.curve == 0)
        .filter_map(|r| r.result().map(|x| (r.target_rps, x.latency.p99.value)))
        .collect();
    let want = skq_report::slo::max_load_at_slo(&pts, 5500.0).unwrap();
    assert_eq!(v.max_load_rps, Some(want.load));
    assert!(!v.max_load_is_lower_bound);
    assert!(
        want.load > 3200.0 && want.load < 9600.0,
        "crossing lies between the measured points"
    );
    // Fraction of N/S̄ with the measured S̄: 8 / 550 µs.
    let frac = v.max_load_fraction.unwrap();
    assert!((frac - want.load / (8e6 / 550.0)).abs() < 1e-9);
    // Ratios to vanilla within the same workload group.
    assert_eq!(v.vs_baseline, Some(1.0));
    let hybrid = &sums[4];
    assert!(
        hybrid.vs_baseline.unwrap() > 1.0,
        "fixture hybrid is more efficient"
    );
    let bim_hybrid = &sums[10];
    assert_eq!(bim_hybrid.spec.workload, "bimodal-1");
    assert_eq!(
        bim_hybrid.vs_baseline.unwrap(),
        bim_hybrid.max_load_rps.unwrap() / sums[6].max_load_rps.unwrap()
    );
    // Every catalogue workload gets the simulator's centralized-FCFS bound,
    // and the ratio is max load over that bound.
    for x in &sums {
        if let (Some(m), Some(b)) = (x.max_load_rps, x.bound_rps) {
            assert!((x.vs_bound.unwrap() - m / b).abs() < 1e-9);
        }
    }
    assert!(sums.iter().all(|x| x.bound_rps.is_some_and(|b| b > 0.0)));
    // Self-checks: the fixture's cpu curve fails independence at 0.4 (under the SLO).
    assert_eq!(sums[2].self_check.label(), "FAIL");
    assert_eq!(
        v.self_check,
        SelfCheck::Pass,
        "rate failures past the SLO do not count"
    );
    let table = output::summary_table(&sums, "vanilla").to_text();
    assert!(!table.contains("missing"), "{table}");
    assert!(table.contains("× vanilla"), "{table}");
    // Another baseline: ratios are taken against it, within each group.
    let mut s2 = s.clone();
    s2.settings.baseline = "hybrid".into();
    let sums2 = summary::summarize(&s2, &records);
    assert_eq!(sums2[4].vs_baseline, Some(1.0));
    assert_eq!(
        sums2[0].vs_baseline.unwrap(),
        sums[0].max_load_rps.unwrap() / sums[4].max_load_rps.unwrap()
    );
    assert!(output::summary_table(&sums2, "hybrid")
        .to_text()
        .contains("× hybrid"));
    // p99 at each offered load: one row per curve, one column per load, "-"
    // where a saturated curve skipped the point.
    let p99 = output::p99_table(&s, &records).to_text();
    assert_eq!(p99.lines().count(), 2 + s.curves.len(), "{p99}");
    let first = records
        .iter()
        .find(|r| r.curve == 0)
        .and_then(|r| r.result())
        .unwrap();
    let row0 = p99.lines().nth(2).unwrap();
    assert!(
        row0.contains(&format!("{:.0}", first.latency.p99.value)),
        "{row0}"
    );
    if records.iter().any(|r| r.result().is_none()) {
        assert!(p99.contains(" -"), "{p99}");
    }
    // Server CPU per reply: user + system over the replies of the window.
    let mut recs = records.clone();
    let Outcome::Measured { result, .. } = &mut recs[0].outcome else {
        panic!("first point measured")
    };
    result.server_cpu = Some(skq_report::result::CpuTime {
        user_s: 0.3,
        sys_s: 0.1,
    });
    let replies = result.achieved_rps * result.meta.duration_s;
    let want = format!("{:.1}", 0.4e6 / replies);
    let cpu = output::load_table(&s, &recs, output::PointMetric::ServerCpuPerRequest).to_text();
    let row0 = cpu.lines().nth(2).unwrap();
    assert!(row0.contains(&want), "{row0} lacks {want}");
    assert!(
        cpu.lines().nth(3).unwrap().contains(" -"),
        "no CPU time recorded: -"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn outputs_round_trip() {
    let s = six_mode_sweep();
    let dir = temp_dir("outputs");
    let mut runner = FakeRunner {
        hdr: true,
        fail: vec![("tokio".into(), 0)],
        rss: Some("0,1 migrate 250ms".into()),
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    let sums = summary::summarize(&s, &records);
    let info = RunInfo {
        started: "2026-01-01 00:00:00".into(),
        command: "skq bench".into(),
        cpus: 2,
        wall_s: 1.0,
        loadavg_before: Some(0.3),
        loadavg_after: Some(0.5),
        rss: RssStatus {
            on: true,
            cpus: vec![0, 1],
            migrate_ms: Some(250),
            namespace: Some("skq-1-0".into()),
            off_reason: None,
        },
        interrupted: false,
        cross_checks: Vec::new(),
    };
    output::write_all(&dir, &s, &records, &sums, &info).unwrap();
    for f in [
        "summary.txt",
        "summary.csv",
        "summary.json",
        "points.csv",
        "points.json",
        "report.html",
    ] {
        assert!(dir.join(f).is_file(), "{f} written");
    }
    // JSON: the records come back equal (serde_json's default float parser
    // may differ from the written value in the last bit, hence `close`).
    let back: Vec<PointRecord> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("points.json")).unwrap()).unwrap();
    close(
        &serde_json::to_value(&back).unwrap(),
        &serde_json::to_value(&records).unwrap(),
        "points",
    );
    let sj: output::SummaryFile =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    close(
        &serde_json::to_value(&sj.curves).unwrap(),
        &serde_json::to_value(&sums).unwrap(),
        "curves",
    );
    // CSV: one row per record, numbers identical after parsing.
    let rows = output::parse_points_csv(&std::fs::read_to_string(dir.join("points.csv")).unwrap())
        .unwrap();
    assert_eq!(rows.len(), records.len());
    for (row, rec) in rows.iter().zip(&records) {
        assert_eq!(row.get("config"), rec.config);
        assert_eq!(row.num("load"), Some(rec.load));
        assert_eq!(row.num("target_rps"), Some(rec.target_rps));
        match &rec.outcome {
            Outcome::Measured {
                result, saturated, ..
            } => {
                assert_eq!(row.get("status"), "measured");
                assert_eq!(row.get("saturated"), saturated.to_string());
                assert_eq!(row.num("p99_us"), Some(result.latency.p99.value));
                assert_eq!(row.num("achieved_rps"), Some(result.achieved_rps));
                assert_eq!(row.num("measured_service_us"), result.measured_service_us);
                assert_eq!(row.get("notes"), result.checks.notes.join("; "));
            }
            Outcome::Failed { error } => {
                assert_eq!(row.get("status"), "failed");
                assert_eq!(row.get("notes"), error);
            }
            Outcome::Skipped => assert_eq!(row.get("status"), "skipped"),
        }
    }
    // Emulated RSS is in every output: each point record, both CSVs, the
    // text summary and the report.
    assert!(records.iter().all(|r| r.rss == "0,1 migrate 250ms"));
    assert!(rows.iter().all(|r| r.get("rss") == "0,1 migrate 250ms"));
    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",rss"), "{csv}");
    assert!(
        csv.lines()
            .skip(1)
            .all(|l| l.ends_with(",\"0,1 migrate 250ms\"")),
        "{csv}"
    );
    let txt = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(
        txt.starts_with("emulated RSS: on: RPS spreads flows over CPUs 0,1"),
        "{txt}"
    );
    assert!(
        txt.lines().next().unwrap().contains("every 250 ms"),
        "{txt}"
    );
    assert!(!txt.contains("interrupted"), "{txt}");
    assert_eq!(sj.run.rss, info.rss);
    // Interval logs were found and used for the CDF.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("CDF from the generator&#39;s HdrHistogram interval logs"));
    assert!(html.contains("emulated RSS") && html.contains("flows migrate every 250 ms"));
    assert!(html.contains("ERROR"), "the failed tokio curve is visible");
    assert!(
        !html.contains("the machine was busy"),
        "load 0.5 on 2 CPUs is quiet"
    );
    // The load after the sweep includes the sweep's own processes: only the
    // load before it decides.
    let own = RunInfo {
        loadavg_after: Some(1.9),
        ..info.clone()
    };
    assert_eq!(output::busy_machine_warning(&own), None);
    let busy = RunInfo {
        loadavg_before: Some(1.5),
        ..info.clone()
    };
    let w = output::busy_machine_warning(&busy).unwrap();
    assert!(w.contains("1.50 before the sweep on 2 CPUs"), "{w}");
    // A sample of the terminal table, for the record.
    println!(
        "{}",
        std::fs::read_to_string(dir.join("summary.txt")).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_sweep_runs_with_peers_in_the_plan() {
    let text = "[sweep]\nloads=[0.5, 1.0]\n[[config]]\nmode='memcached'\ncapacity_rps=1000\nslo_us=200\nworkers=2\n";
    let s = Sweep::from_file(&SweepFile::parse(text).unwrap(), 2).unwrap();
    let plan = sweep::plan(&s);
    assert_eq!(
        plan[0].iter().map(|p| p.target_rps).collect::<Vec<_>>(),
        [500.0, 1000.0]
    );
    let dir = temp_dir("peer-plan");
    let records = sweep::run(&s, &dir, &mut FakeRunner::default(), &mut Quiet);
    let sums = summary::summarize(&s, &records);
    assert_eq!(sums[0].slo_us, Some(200.0), "fixed SLO for a peer");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// JSON values equal up to a relative 1e-12 on numbers.
fn close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "{at}: {x} != {y}"
            );
        }
        (V::Array(x), V::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: lengths");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                close(x, y, &format!("{at}[{i}]"));
            }
        }
        (V::Object(x), V::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{at}: keys"
            );
            for (k, v) in x {
                close(v, &y[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn self_check_judges_points_under_the_slo_and_the_crossing() {
    let s = six_mode_sweep();
    let dir = temp_dir("selfcheck");
    let records = sweep::run(&s, &dir, &mut FakeRunner::default(), &mut Quiet);
    let verdict = |recs: &[PointRecord]| summary::summarize(&s, recs)[0].self_check.label();
    assert_eq!(verdict(&records), "PASS");
    // vanilla: point 0 is under the SLO, point 1 is the crossing (p99 7700
    // µs > 5500), point 2 is saturated beyond it.
    let with = |i: usize, f: &dyn Fn(&mut PointResult)| {
        let mut recs = records.clone();
        let idx = recs.iter().position(|r| r.curve == 0).unwrap() + i;
        let Outcome::Measured { result, .. } = &mut recs[idx].outcome else {
            panic!()
        };
        f(result);
        recs
    };
    let late = |x: &mut PointResult| {
        x.checks.lateness_ok = false;
        x.checks.pass = false;
        x.checks
            .notes
            .push("lateness: p99 send lateness 4905 us exceeds 50 us".into());
    };
    let correlated = |x: &mut PointResult| {
        x.checks.independence_ok = false;
        x.checks.pass = false;
    };
    assert_eq!(
        verdict(&with(0, &late)),
        "FAIL",
        "under the SLO every check counts"
    );
    assert_eq!(verdict(&with(0, &correlated)), "FAIL");
    assert_eq!(
        verdict(&with(1, &late)),
        "FAIL",
        "the crossing must be on schedule"
    );
    assert_eq!(
        verdict(&with(1, &correlated)),
        "PASS",
        "correlation past the knee is expected"
    );
    assert_eq!(verdict(&with(1, &|x| x.errors.missing = 3)), "FAIL");
    assert_eq!(
        verdict(&with(2, &late)),
        "PASS",
        "points beyond the crossing do not count"
    );
    let notes = match &summary::summarize(&s, &with(1, &late))[0].self_check {
        SelfCheck::Fail(n) => n.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains("at load 0.40") && notes[0].contains("lateness"),
        "{notes:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Fixture results, except that the generator is late on the first
/// `late_first` attempts of every point.
struct LateRunner {
    inner: FakeRunner,
    late_first: usize,
    /// The late attempts read replies late instead of sending late.
    reading: bool,
    attempts: std::collections::HashMap<(String, usize), usize>,
}

impl LateRunner {
    /// Late (reading late if `reading`) in its first `late_first` attempts
    /// at each point.
    fn new(late_first: usize, reading: bool) -> LateRunner {
        LateRunner {
            inner: FakeRunner::default(),
            late_first,
            reading,
            attempts: Default::default(),
        }
    }
}

/// One curve measured at one load (0.2).
fn one_point_sweep() -> Sweep {
    let mut s = six_mode_sweep();
    s.curves.truncate(1);
    s.settings.loads = vec![0.2];
    s
}

impl sweep::Runner for LateRunner {
    fn run_point(
        &mut self,
        curve: &config::Curve,
        s: &config::Settings,
        p: &sweep::PlannedPoint,
        files: &sweep::PointFiles,
    ) -> anyhow::Result<PointResult> {
        let n = self
            .attempts
            .entry((curve.name.clone(), p.index))
            .or_default();
        *n += 1;
        let mut r = self.inner.run_point(curve, s, p, files)?;
        if *n <= self.late_first && self.reading {
            r.checks.read_lag_ok = false;
            r.checks.pass = false;
            r.checks.read_lag_p99_us = Some(5000.0 - *n as f64);
            r.latency.p99.value *= 100.0;
        } else if *n <= self.late_first {
            r.checks.lateness_ok = false;
            r.checks.pass = false;
            r.checks.lateness_p99_us = 900.0 - *n as f64;
            // A stalled generator also inflates p99 past the saturation stop.
            r.latency.p99.value *= 100.0;
        }
        Ok(r)
    }

    fn take_ctx_switches(&mut self) -> Option<skq_report::result::CtxSwitches> {
        self.inner.take_ctx_switches()
    }
}

#[test]
fn a_late_generator_is_measured_again_and_the_least_late_attempt_kept() {
    let mut s = one_point_sweep();
    let dir = temp_dir("retry");
    let mut runner = LateRunner::new(1, false);
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.inner.calls.len(), 2, "one retry");
    let r = records[0].result().unwrap();
    assert!(
        r.checks.lateness_ok && r.checks.pass,
        "{:?}",
        r.checks.notes
    );
    assert!(r
        .checks
        .notes
        .iter()
        .any(|n| n.contains("measured 2 times")));
    assert!(matches!(
        records[0].outcome,
        Outcome::Measured {
            saturated: false,
            ..
        }
    ));
    assert_eq!(
        records[0].ctx_switches().map(|c| c.involuntary),
        Some(2),
        "the switches of the kept (second) attempt"
    );
    // Late every time: retries run out, the least late attempt is kept and
    // still fails (and here, saturates the curve).
    s.settings.retries = 2;
    let mut runner = LateRunner::new(10, false);
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.inner.calls.len(), 3);
    let r = records[0].result().unwrap();
    assert!(!r.checks.lateness_ok);
    assert_eq!(
        r.checks.lateness_p99_us, 897.0,
        "the third attempt was least late"
    );
    assert_eq!(records[0].ctx_switches().map(|c| c.involuntary), Some(3));
    // retries = 0: measured once.
    s.settings.retries = 0;
    let mut runner = LateRunner::new(1, false);
    sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.inner.calls.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_generator_that_read_late_is_measured_again_and_the_least_late_attempt_kept() {
    let mut s = one_point_sweep();
    let dir = temp_dir("retry-read");
    let mut runner = LateRunner::new(1, true);
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.inner.calls.len(), 2, "one retry");
    let r = records[0].result().unwrap();
    assert!(
        r.checks.read_lag_ok && r.checks.pass,
        "{:?}",
        r.checks.notes
    );
    // Late reading every time: the attempt that read least late is kept.
    s.settings.retries = 2;
    let mut runner = LateRunner::new(10, true);
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.inner.calls.len(), 3);
    let r = records[0].result().unwrap();
    assert!(!r.checks.read_lag_ok);
    assert_eq!(r.checks.read_lag_p99_us, Some(4997.0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Stops after `after` points have started, as Ctrl-C does.
struct StopAfter {
    started: usize,
    after: usize,
}

impl sweep::Progress for StopAfter {
    fn start(&mut self, _: &config::Curve, _: &sweep::PlannedPoint) {
        self.started += 1;
    }
    fn cancelled(&self) -> bool {
        self.started >= self.after
    }
}

#[test]
fn a_cancelled_sweep_records_the_rest_as_skipped() {
    let s = six_mode_sweep();
    let dir = temp_dir("cancel");
    let mut runner = FakeRunner::default();
    let mut stop = StopAfter {
        started: 0,
        after: 3,
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut stop);
    assert_eq!(records.len(), 12 * 5, "every planned point has a record");
    assert_eq!(runner.calls.len(), 3, "nothing runs after the stop");
    let measured = records.iter().filter(|r| r.result().is_some()).count();
    assert_eq!(measured, 3);
    assert!(records
        .iter()
        .filter(|r| r.result().is_none())
        .all(|r| r.outcome == Outcome::Skipped));
    assert!(records.iter().all(|r| r.rss == "off"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Plants a p99 of twice the SLO in the first `spikes` attempts at point
/// `index` of every curve: a stall of the machine during that point.
struct SpikeRunner {
    inner: FakeRunner,
    index: usize,
    spikes: usize,
    attempts: usize,
    /// Attempts at `index` after this many fail (the server died).
    fail_after: Option<usize>,
    /// With `Some(k)`, a spiked attempt has eight one-second intervals of
    /// which `k` read half the SLO and the others four times it.
    seconds: Option<usize>,
}

impl sweep::Runner for SpikeRunner {
    fn run_point(
        &mut self,
        curve: &config::Curve,
        s: &config::Settings,
        p: &sweep::PlannedPoint,
        files: &sweep::PointFiles,
    ) -> anyhow::Result<PointResult> {
        if p.index == self.index && self.fail_after.is_some_and(|n| self.attempts >= n) {
            anyhow::bail!("server not ready (fixture)");
        }
        let mut r = self.inner.run_point(curve, s, p, files)?;
        if p.index == self.index {
            self.attempts += 1;
            if self.attempts <= self.spikes {
                let slo = sweep::slo_us(curve, s, &[&r]).unwrap();
                r.latency.p99.value = 2.0 * slo;
                if let Some(met) = self.seconds {
                    r.intervals = (0..8)
                        .map(|k| IntervalPoint {
                            start_s: k as f64,
                            offered_rps: r.target_rps,
                            achieved_rps: r.target_rps,
                            p50_us: Some(slo / 8.0),
                            p99_us: Some(if k < met { slo / 2.0 } else { 4.0 * slo }),
                            ..Default::default()
                        })
                        .collect();
                }
            }
        }
        Ok(r)
    }
}

fn spike_sweep() -> Sweep {
    let mut s = six_mode_sweep();
    s.curves.retain(|c| c.mode == "hybrid");
    s.curves.truncate(1);
    // Every load under the SLO in the fixtures.
    s.settings.loads = vec![0.1, 0.2, 0.3];
    s
}

fn calls_at(runner: &SpikeRunner, load: f64) -> usize {
    runner
        .inner
        .calls
        .iter()
        .filter(|(_, l)| (l - load).abs() < 1e-9)
        .count()
}

#[test]
fn a_crossing_below_a_load_that_met_the_slo_is_measured_three_times_and_the_median_kept() {
    let s = spike_sweep();
    let dir = temp_dir("crossing");
    let run_failing = |spikes: usize, index: usize, s: &Sweep, fail_after: Option<usize>| {
        let mut runner = SpikeRunner {
            inner: FakeRunner {
                hdr: true,
                ..Default::default()
            },
            index,
            spikes,
            attempts: 0,
            fail_after,
            seconds: None,
        };
        let records = sweep::run(s, &dir, &mut runner, &mut Quiet);
        (runner, records)
    };
    let run = |spikes: usize, index: usize, s: &Sweep| run_failing(spikes, index, s, None);
    // One spike in three: the median attempt meets the SLO.
    let (runner, records) = run(1, 1, &s);
    assert_eq!(calls_at(&runner, 0.2), 3, "{:?}", runner.inner.calls);
    assert_eq!(runner.inner.calls.len(), 5);
    let r = records[1].result().unwrap();
    let slo = sweep::slo_us(&s.curves[0], &s.settings, &[r]).unwrap();
    assert!(
        r.latency.p99.value < slo,
        "{} vs SLO {slo}",
        r.latency.p99.value
    );
    assert!(
        r.checks
            .notes
            .iter()
            .any(|n| n.contains("measured 3 times")),
        "{:?}",
        r.checks.notes
    );
    let Outcome::Measured { hdr_log, .. } = &records[1].outcome else {
        panic!("measured")
    };
    assert!(
        hdr_log.as_ref().is_some_and(|p| p.exists()),
        "the kept attempt's log"
    );
    let hdr_dir = hdr_log.as_ref().unwrap().parent().unwrap();
    assert!(
        std::fs::read_dir(hdr_dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("attempt")),
        "the other attempts' logs are gone"
    );
    // A crossing that holds in every attempt stays.
    let (runner, records) = run(10, 1, &s);
    assert_eq!(calls_at(&runner, 0.2), 3);
    assert!(records[1].result().unwrap().latency.p99.value > slo);
    // A crossing at the last load has nothing above it that met the SLO.
    let (runner, _) = run(1, 2, &s);
    assert_eq!(runner.inner.calls.len(), 3);
    // A second attempt that fails leaves the first in place, files and all.
    let (_, records) = run_failing(1, 1, &s, Some(1));
    let r = records[1].result().expect("the first attempt stays");
    assert!(r.latency.p99.value > slo);
    let Outcome::Measured { hdr_log, .. } = &records[1].outcome else {
        panic!("measured")
    };
    assert!(
        hdr_log.as_ref().is_some_and(|p| p.exists()),
        "its log is back"
    );
    // Switched off.
    let mut off = spike_sweep();
    off.settings.crossing_attempts = 1;
    let (runner, records) = run(1, 1, &off);
    assert_eq!(runner.inner.calls.len(), 3);
    assert!(records[1].result().unwrap().latency.p99.value > slo);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `s` with a [`SpikeRunner`] whose first `spikes` attempts at point
/// `index` read twice the SLO (`seconds`: how many of their eight
/// one-second intervals met it).
fn run_spiked(
    s: &Sweep,
    dir: &std::path::Path,
    index: usize,
    spikes: usize,
    seconds: Option<usize>,
) -> (SpikeRunner, Vec<PointRecord>) {
    let mut runner = SpikeRunner {
        inner: FakeRunner::default(),
        index,
        spikes,
        attempts: 0,
        fail_after: None,
        seconds,
    };
    let records = sweep::run(s, dir, &mut runner, &mut Quiet);
    (runner, records)
}

#[test]
fn a_crossing_that_most_of_its_own_seconds_met_is_measured_three_times_and_the_median_kept() {
    let s = spike_sweep();
    let dir = temp_dir("seconds");
    // The crossing is the curve's last load: no load above it met the SLO.
    let run = |spikes: usize, seconds: Option<usize>| run_spiked(&s, &dir, 2, spikes, seconds);
    // Six of its eight seconds met the SLO; one spike in three: the median
    // attempt meets it, and the note says why it was measured again.
    let (runner, records) = run(1, Some(6));
    assert_eq!(calls_at(&runner, 0.3), 3, "{:?}", runner.inner.calls);
    assert_eq!(runner.inner.calls.len(), 5);
    let r = records[2].result().unwrap();
    let slo = sweep::slo_us(&s.curves[0], &s.settings, &[r]).unwrap();
    assert!(
        r.latency.p99.value < slo,
        "{} vs {slo}",
        r.latency.p99.value
    );
    assert!(
        r.checks
            .notes
            .iter()
            .any(|n| n.contains("though 6 of its 8 seconds met it: measured 3 times")),
        "{:?}",
        r.checks.notes
    );
    // Half of its seconds is enough.
    let (runner, _) = run(1, Some(4));
    assert_eq!(calls_at(&runner, 0.3), 3);
    // A crossing that holds in every attempt stays.
    let (runner, records) = run(10, Some(6));
    assert_eq!(calls_at(&runner, 0.3), 3);
    assert!(records[2].result().unwrap().latency.p99.value > slo);
    // Three of eight: the tail is most of the point's seconds, its own.
    let (runner, records) = run(1, Some(3));
    assert_eq!(runner.inner.calls.len(), 3);
    assert!(records[2].result().unwrap().latency.p99.value > slo);
    // No intervals to judge by: measured once, as before.
    let (runner, _) = run(1, None);
    assert_eq!(runner.inner.calls.len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_curve_stopped_at_a_crossing_that_measured_again_meets_the_slo_goes_on() {
    let mut s = spike_sweep();
    // The spike (twice the SLO) saturates the curve.
    s.settings.stop_p99_factor = 1.5;
    let dir = temp_dir("resume");
    let run = |spikes: usize, seconds: Option<usize>| run_spiked(&s, &dir, 1, spikes, seconds);
    // Six of eight seconds met the SLO, one spike in three: the median
    // attempt meets it and the load above is measured after all.
    let (runner, records) = run(1, Some(6));
    assert_eq!(calls_at(&runner, 0.2), 3, "{:?}", runner.inner.calls);
    assert_eq!(calls_at(&runner, 0.3), 1);
    assert_eq!(records.len(), 3);
    assert!(records[2].result().is_some(), "{:?}", records[2].outcome);
    let Outcome::Measured { saturated, .. } = &records[1].outcome else {
        panic!("measured")
    };
    assert!(!saturated);
    // The spike holds: the curve stays stopped there.
    let (runner, records) = run(10, Some(6));
    assert_eq!(runner.inner.calls.len(), 4);
    assert!(matches!(records[2].outcome, Outcome::Skipped));
    // Nothing to judge the seconds by: stopped after one attempt.
    let (runner, records) = run(1, None);
    assert_eq!(runner.inner.calls.len(), 2);
    assert!(matches!(records[2].outcome, Outcome::Skipped));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn each_load_has_a_schedule_of_its_own_shared_by_the_configurations_and_measured_again_afresh() {
    let dir = temp_dir("seeds");
    let mut s = six_mode_sweep();
    s.settings.loads = vec![0.2, 0.4];
    // Every point under the SLO in the fixtures: nothing saturates.
    s.settings.seed = 7;
    let seeds_of = |s: &Sweep| {
        let mut runner = FakeRunner::default();
        let records = sweep::run(s, &dir, &mut runner, &mut Quiet);
        // The seed each point's result was measured with.
        for r in &records {
            let at = s.settings.loads.iter().position(|&l| l == r.load).unwrap();
            assert_eq!(
                r.result().unwrap().meta.seed,
                Some(sweep::point_seed(s.settings.seed, at))
            );
        }
        runner
            .calls
            .iter()
            .map(|c| c.1)
            .zip(runner.seeds)
            .collect::<Vec<_>>()
    };
    let seven = seeds_of(&s);
    assert_eq!(seven.len(), 2 * s.curves.len());
    let at = |calls: &[(f64, u64)], load: f64| -> Vec<u64> {
        calls.iter().filter(|c| c.0 == load).map(|c| c.1).collect()
    };
    let (low, high) = (at(&seven, 0.2), at(&seven, 0.4));
    assert!(low.iter().all(|&x| x == low[0]), "{low:?}");
    assert!(high.iter().all(|&x| x == high[0]), "{high:?}");
    assert_ne!(low[0], high[0], "each load its own schedule");
    // The same run seed repeats every schedule; another changes them all.
    assert_eq!(seeds_of(&s), seven);
    s.settings.seed = 8;
    let eight = seeds_of(&s);
    assert!(eight.iter().all(|c| !seven.contains(c)), "{eight:?}");

    // Measured again because the generator was late: a fresh schedule, and
    // the kept attempt records its own.
    let one = one_point_sweep();
    let mut runner = LateRunner::new(1, false);
    let records = sweep::run(&one, &dir, &mut runner, &mut Quiet);
    let tried = &runner.inner.seeds;
    assert_eq!(tried.len(), 2);
    assert_ne!(tried[0], tried[1]);
    assert_eq!(records[0].result().unwrap().meta.seed, Some(tried[1]));

    // Measured three times for a crossing: three schedules.
    let spikes = spike_sweep();
    let mut runner = SpikeRunner {
        inner: FakeRunner::default(),
        index: 1,
        spikes: 1,
        attempts: 0,
        fail_after: None,
        seconds: None,
    };
    sweep::run(&spikes, &dir, &mut runner, &mut Quiet);
    let mut at_crossing = at(
        &runner
            .inner
            .calls
            .iter()
            .map(|c| c.1)
            .zip(runner.inner.seeds.iter().copied())
            .collect::<Vec<_>>(),
        0.2,
    );
    assert_eq!(at_crossing.len(), 3);
    at_crossing.sort_unstable();
    at_crossing.dedup();
    assert_eq!(at_crossing.len(), 3, "{at_crossing:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_host_gate_probes_before_each_measurement_and_waits_while_the_host_is_busy() {
    use skq_bench::hostgate::GateSpec;
    use std::time::Duration;
    let mut s = one_point_sweep();
    s.settings.loads = vec![0.2, 0.4];
    let dir = temp_dir("hostgate");
    let fast = |max_late, max_wait_ms| GateSpec {
        max_wait: Duration::from_millis(max_wait_ms),
        retry_every: Duration::from_millis(1),
        ..GateSpec::new(max_late)
    };

    // Off: the runner is never asked, and nothing is recorded.
    let mut runner = FakeRunner {
        probe: true,
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert!(runner.probed_before.is_empty());
    assert!(records.iter().all(|r| matches!(
        &r.outcome,
        Outcome::Measured {
            host_gate: None,
            ..
        }
    )));

    // On: the first point waits out two busy probes, the second is probed once;
    // every probe comes before its measurement.
    s.settings.host_gate = Some(fast(2, 1_000));
    let mut runner = FakeRunner {
        probe: true,
        host_busy: 2,
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.probed_before, vec![0, 0, 0, 1]);
    assert_eq!(runner.calls.len(), 2, "each point measured once");
    let gate = |r: &PointRecord| match &r.outcome {
        Outcome::Measured { host_gate, .. } => host_gate.clone().expect("gated"),
        _ => panic!("measured"),
    };
    let (g0, g1) = (gate(&records[0]), gate(&records[1]));
    assert_eq!((g0.probes, g0.passed, g0.waited_s), (3, true, 0.002));
    assert_eq!((g1.probes, g1.passed), (1, true));
    assert_eq!(g0.last.worst_late(), 0);
    let notes = &records[0].result().unwrap().checks.notes;
    assert!(
        notes.iter().any(|n| n.contains("host gate: waited")),
        "{notes:?}"
    );
    // The record reads back from points.json with the gate's figures.
    let json = serde_json::to_string(&records).unwrap();
    let back: Vec<PointRecord> = serde_json::from_str(&json).unwrap();
    assert_eq!(gate(&back[0]), g0);

    // A host busy past the longest wait: measured all the same, and said so.
    s.settings.host_gate = Some(fast(2, 3));
    let mut runner = FakeRunner {
        probe: true,
        host_busy: usize::MAX,
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.calls.len(), 2);
    let g = gate(&records[0]);
    assert_eq!((g.probes, g.passed), (4, false));
    assert!(has_note(&records[0], "stayed busy"));

    // A runner that cannot probe measures ungated.
    let mut runner = FakeRunner::default();
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.calls.len(), 2);
    assert!(matches!(
        &records[0].outcome,
        Outcome::Measured {
            host_gate: None,
            ..
        }
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_start_the_host_stalled_in_its_warm_up_is_started_again_within_the_longest_wait() {
    use skq_bench::hostgate::GateSpec;
    use std::time::Duration;
    let mut s = one_point_sweep();
    let dir = temp_dir("stalledstart");
    s.settings.host_gate = Some(GateSpec {
        max_wait: Duration::from_millis(50),
        retry_every: Duration::from_millis(10),
        ..GateSpec::new(2)
    });
    // Two starts end in the warm-up, the third measures.
    let mut runner = FakeRunner {
        probe: true,
        stalled_starts: 2,
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.calls.len(), 3);
    assert_eq!(runner.warmup_limit, vec![true; 3]);
    assert_eq!(
        runner.probed_before,
        vec![0, 1, 2],
        "the gate before every start"
    );
    let Outcome::Measured {
        host_gate: Some(g), ..
    } = &records[0].outcome
    else {
        panic!("measured and gated: {:?}", records[0].outcome);
    };
    assert_eq!((g.stalled_starts, g.probes, g.passed), (2, 3, true));
    assert!((g.waited_s - 0.02).abs() < 1e-9, "{}", g.waited_s);
    assert!(has_note(
        &records[0],
        "2 start(s) ended at the warm-up's end"
    ));
    // A host that stalls every warm-up: once the longest wait leaves no room
    // for a pause and another start, the last start measures whatever its
    // warm-up saw (the limit off), and the point is measured.
    let mut runner = FakeRunner {
        probe: true,
        stalled_starts: usize::MAX,
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(
        runner.warmup_limit,
        vec![true, true, true, true, true, false]
    );
    assert!(records[0].result().is_some());
    assert_eq!(records[0].host_gate().unwrap().stalled_starts, 5);
    // A runner that cannot probe: the starts ended early are still counted.
    let mut runner = FakeRunner {
        stalled_starts: 1,
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    let g = records[0].host_gate().expect("the ended start is recorded");
    assert_eq!((g.probes, g.stalled_starts), (0, 1));
    // Without the warm-up limit the generator is never asked to end early.
    s.settings.host_gate.as_mut().unwrap().warmup_stall_ms_per_s = None;
    let mut runner = FakeRunner {
        probe: true,
        stalled_starts: 3,
        ..Default::default()
    };
    sweep::run(&s, &dir, &mut runner, &mut Quiet);
    assert_eq!(runner.warmup_limit, vec![false]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Whether a measured point's notes hold a line containing `text`.
fn has_note(r: &PointRecord, text: &str) -> bool {
    r.result()
        .is_some_and(|x| x.checks.notes.iter().any(|n| n.contains(text)))
}
