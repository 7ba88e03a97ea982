//! Disturbed points and `--strict` with the fake runner: the decisive
//! points' disturbances are counted per curve, reach every output, and
//! `--strict`'s verdict fails on a disturbed or failed decisive point only;
//! every output names how each server was started (nginx's whole
//! configuration among them).

mod common;

use common::{temp_dir, FakeRunner};
use skq_bench::cli::{strict_verdict, StrictFailed, EXIT_STRICT};
use skq_bench::config::{ConfigEntry, Sweep, SweepFile};
use skq_bench::output::{self, RunInfo};
use skq_bench::peers;
use skq_bench::summary::{self, CurveSummary, SelfCheck};
use skq_bench::sweep::{self, PointRecord, Quiet};

/// One curve of `mode` over loads that reach past the SLO without
/// saturating at once (the fixture's queueing shape).
fn one_curve(mode: &str) -> Sweep {
    let mut f = skq_bench::config::default_file();
    f.matrix = None;
    f.config = vec![ConfigEntry {
        mode: Some(mode.into()),
        ..Default::default()
    }];
    f.sweep.loads = Some(vec![0.2, 0.4, 0.6, 0.75, 0.85]);
    f.sweep.point_secs = Some(1.0);
    Sweep::from_file(&f, 2).unwrap()
}

fn run(s: &Sweep, runner: &mut FakeRunner, tag: &str) -> (Vec<PointRecord>, Vec<CurveSummary>) {
    let dir = temp_dir(tag);
    let records = sweep::run(s, &dir, runner, &mut Quiet);
    let sums = summary::summarize(s, &records);
    std::fs::remove_dir_all(&dir).unwrap();
    (records, sums)
}

/// Indexes of the measured points whose p99 is over `slo`.
fn over_the_slo(records: &[PointRecord], slo: f64) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.result().is_some_and(|x| x.latency.p99.value > slo))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn strict_fails_on_a_disturbed_or_failed_decisive_point_only() {
    // Clean: every decisive point passed and was quiet.
    let s = one_curve("hybrid");
    let (records, sums) = run(&s, &mut FakeRunner::default(), "strict-clean");
    assert_eq!(sums[0].self_check, SelfCheck::Pass);
    assert!(sums[0].decisive_points >= 2, "{:?}", sums[0]);
    assert!(sums[0].disturbed.is_empty());
    assert_eq!(sums[0].max_disturbance_cpu, Some(0.01));
    assert_eq!(
        sums[0].disturbed_cell(),
        format!("0/{}", sums[0].decisive_points)
    );
    assert!(strict_verdict(&sums, &records).is_ok());

    // A point past the crossing decides nothing: disturbing it passes.
    let slo = sums[0].slo_us.unwrap();
    let over = over_the_slo(&records, slo);
    assert!(
        over.len() >= 2,
        "the fixture curve goes past its crossing: {over:?}"
    );
    let mut runner = FakeRunner {
        disturb: vec![("hybrid".into(), over[1], 0.4)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "strict-late");
    assert!(records[over[1]].disturbed(), "measured and marked");
    assert!(sums[0].disturbed.is_empty());
    assert!(strict_verdict(&sums, &records).is_ok());

    // A disturbed point under the SLO, and the crossing itself: both count.
    for at in [0, over[0]] {
        let mut runner = FakeRunner {
            disturb: vec![("hybrid".into(), at, 0.3)],
            ..Default::default()
        };
        let (records, sums) = run(&s, &mut runner, "strict-disturbed");
        assert_eq!(sums[0].self_check, SelfCheck::Pass);
        assert_eq!(sums[0].disturbed.len(), 1, "{:?}", sums[0].disturbed);
        assert!(sums[0].disturbed[0].contains("0.30 CPU"), "{:?}", sums[0]);
        assert_eq!(sums[0].max_disturbance_cpu, Some(0.3));
        let e = strict_verdict(&sums, &records).unwrap_err();
        assert!(e.0.contains("disturbed: hybrid"), "{e}");
        // What the skq binary turns into exit status 3.
        let e = anyhow::Error::from(e);
        assert!(e.downcast_ref::<StrictFailed>().is_some());
    }
    assert_eq!(EXIT_STRICT, 3);

    // A failed self-check under the SLO (the fixture's `cpu` at load 0.4),
    // on a quiet machine.
    let s = one_curve("cpu");
    let (records, sums) = run(&s, &mut FakeRunner::default(), "strict-failed");
    assert!(matches!(sums[0].self_check, SelfCheck::Fail(_)));
    assert!(sums[0].disturbed.is_empty());
    let e = strict_verdict(&sums, &records).unwrap_err();
    assert!(e.0.contains("self-check failed: cpu"), "{e}");

    // A curve without an answer (its server never started).
    let s = one_curve("hybrid");
    let mut runner = FakeRunner {
        fail: vec![("hybrid".into(), 0)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "strict-error");
    assert!(strict_verdict(&sums, &records)
        .unwrap_err()
        .0
        .contains("error"));
}

#[test]
fn disturbances_reach_every_output() {
    let s = one_curve("hybrid");
    let dir = temp_dir("strict-outputs");
    let mut runner = FakeRunner {
        disturb: vec![("hybrid".into(), 1, 0.25)],
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    let sums = summary::summarize(&s, &records);
    let info = common::run_info("skq bench --strict");
    output::write_all(&dir, &s, &records, &sums, &info).unwrap();
    let decisive = sums[0].decisive_points;

    // points.csv: the figure and the mark of every measured point.
    let rows = output::parse_points_csv(&std::fs::read_to_string(dir.join("points.csv")).unwrap())
        .unwrap();
    for (row, rec) in rows.iter().zip(&records) {
        match rec.disturbance() {
            Some(d) => {
                assert_eq!(row.num("disturbance_cpu"), Some(d.cpu));
                assert_eq!(row.get("disturbed"), d.disturbed.to_string());
            }
            None => assert_eq!(row.get("disturbance_cpu"), ""),
        }
    }
    assert_eq!(rows[1].get("disturbed"), "true");
    assert_eq!(rows[0].get("disturbed"), "false");

    // points.json and summary.json.
    let pj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("points.json")).unwrap()).unwrap();
    assert_eq!(pj[1]["disturbance"]["cpu"], 0.25);
    assert_eq!(pj[1]["disturbance"]["disturbed"], true);
    let back: Vec<PointRecord> = serde_json::from_value(pj).unwrap();
    let figures =
        |r: &[PointRecord]| -> Vec<_> { r.iter().map(|r| r.disturbance().copied()).collect() };
    assert_eq!(figures(&back), figures(&records), "read back");
    let sj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let c = &sj["curves"][0];
    assert_eq!(c["decisive_points"], decisive);
    assert_eq!(c["disturbed"].as_array().unwrap().len(), 1);
    assert_eq!(c["max_disturbance_cpu"], 0.25);
    assert_eq!(sj["settings"]["disturbed_above"], 0.05);

    // summary.txt (and the terminal's table): the count per curve, the run's
    // total, the per-load table with the mark.
    let text = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    let table = output::summary_table(&sums, &s.settings.baseline).to_text();
    assert!(table.lines().next().unwrap().contains("disturbed/decisive"));
    assert!(table.contains(&format!("1/{decisive}")), "{table}");
    assert!(text.contains(&table), "{text}");
    assert!(
        text.contains(&format!("disturbed decisive points: 1 of {decisive}")),
        "{text}"
    );
    assert!(text.contains("0.25!") && text.contains("0.01"), "{text}");

    // The report: the column, the total, the per-load table, an alert.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for want in [
        "disturbed/decisive",
        "Disturbed decisive points (1)",
        "Disturbance at each offered load",
        "0.25!",
        "disturbed: hybrid",
    ] {
        assert!(html.contains(want), "report lacks {want}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_tail_episode_at_a_decisive_point_is_named_in_every_summary_and_fails_nothing() {
    let s = one_curve("hybrid");
    let (records, sums) = run(&s, &mut FakeRunner::default(), "episode-none");
    assert!(sums[0].episodes.is_empty());
    assert_eq!(output::episode_lines(&sums), None);
    let slo = sums[0].slo_us.unwrap();
    let over = over_the_slo(&records, slo);
    assert!(over.len() >= 2, "{over:?}");

    // Past the crossing a point decides nothing: its episode is not named.
    let mut runner = FakeRunner {
        episode: vec![("hybrid".into(), over[1])],
        ..Default::default()
    };
    let (_, sums) = run(&s, &mut runner, "episode-late");
    assert!(sums[0].episodes.is_empty(), "{:?}", sums[0].episodes);

    // Under the SLO and at the crossing it is, as information only.
    for at in [1, over[0]] {
        let dir = temp_dir("episode-outputs");
        let mut runner = FakeRunner {
            episode: vec![("hybrid".into(), at)],
            ..Default::default()
        };
        let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
        let sums = summary::summarize(&s, &records);
        assert_eq!(sums[0].episodes.len(), 1, "{:?}", sums[0].episodes);
        let e = &sums[0].episodes[0];
        assert!(
            e.starts_with(&format!(
                "hybrid [{}] at load {:.2}",
                s.curves[0].group(),
                records[at].load
            )) && e.contains("2 of 8 one-second intervals (0–1 s, 1–2 s)"),
            "{e}"
        );
        assert_eq!(sums[0].self_check, SelfCheck::Pass);
        assert!(
            strict_verdict(&sums, &records).is_ok(),
            "not a --strict problem"
        );
        let decisive = sums[0].decisive_points;
        let lines = output::episode_lines(&sums).unwrap();
        assert!(
            lines.starts_with(&format!(
                "tail episodes at decisive points: 1 of {decisive}"
            )),
            "{lines}"
        );

        let info = common::run_info("skq bench");
        output::write_all(&dir, &s, &records, &sums, &info).unwrap();
        let text = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
        assert!(text.contains(&lines), "{text}");
        let sj: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(sj["curves"][0]["episodes"][0], e.as_str());
        let back: Vec<CurveSummary> = serde_json::from_value(sj["curves"].clone()).unwrap();
        assert_eq!(back[0].episodes, sums[0].episodes, "read back");
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(html.contains("tail episodes at decisive points: 1 of"));
        assert!(html.contains("episode: hybrid"), "an alert per episode");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_tail_the_host_held_is_measured_again_and_counted_while_it_stays_held() {
    let s = under_the_slo("hybrid");
    assert_eq!(s.settings.retries, 1);

    // Held once at load 0.4: measured again, the clean attempt kept, no
    // episode and nothing disturbed.
    let mut runner = FakeRunner {
        held: vec![("hybrid".into(), 3, 1)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "held-once");
    assert_eq!(calls_at(&runner, 0.4), 2);
    assert_eq!(calls_at(&runner, 0.3), 1);
    assert!(!records[3].disturbed());
    let x = records[3].result().unwrap();
    assert!(x.intervals.is_empty(), "the clean attempt was kept");
    assert!(
        x.checks.notes.iter().any(|n| n.contains(
            "measured 2 times because the host held the machine through the point's tail"
        )),
        "{:?}",
        x.checks.notes
    );
    assert!(sums[0].disturbed.is_empty() && sums[0].episodes.is_empty());
    assert!(strict_verdict(&sums, &records).is_ok());

    // Held at every attempt: kept, named as an episode that says so,
    // counted among the disturbed decisive points, and --strict fails.
    let mut runner = FakeRunner {
        held: vec![("hybrid".into(), 3, usize::MAX)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "held-always");
    assert_eq!(calls_at(&runner, 0.4), 2, "one retry");
    assert!(records[3].disturbed() && !records[2].disturbed());
    assert_eq!(sums[0].disturbed.len(), 1, "{:?}", sums[0].disturbed);
    assert!(
        sums[0].disturbed[0]
            .contains("at load 0.40: the host held the machine through the tail: p99"),
        "{:?}",
        sums[0].disturbed
    );
    assert_eq!(sums[0].episodes.len(), 1);
    assert!(
        sums[0].episodes[0].contains("the host held the machine"),
        "{:?}",
        sums[0].episodes
    );
    let e = strict_verdict(&sums, &records).unwrap_err();
    assert!(e.0.contains("the host held the machine"), "{e}");
    // points.csv marks the point held and disturbed.
    let dir = temp_dir("held-csv");
    let info = common::run_info("skq bench");
    output::write_all(&dir, &s, &records, &sums, &info).unwrap();
    let rows = output::parse_points_csv(&std::fs::read_to_string(dir.join("points.csv")).unwrap())
        .unwrap();
    assert_eq!(
        (rows[3].get("host_held"), rows[3].get("disturbed")),
        ("true", "true")
    );
    assert_eq!(rows[2].get("host_held"), "false");
    std::fs::remove_dir_all(&dir).unwrap();

    // An episode whose seconds show no host (no overshoot or stall
    // figures) is not measured again and stays information only.
    let mut runner = FakeRunner {
        episode: vec![("hybrid".into(), 3)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "episode-not-held");
    assert_eq!(calls_at(&runner, 0.4), 1);
    assert!(!records[3].disturbed());
    assert_eq!(sums[0].episodes.len(), 1);
    assert!(strict_verdict(&sums, &records).is_ok());
}

/// One curve of `mode` over loads that all meet the SLO.
fn under_the_slo(mode: &str) -> Sweep {
    let mut s = one_curve(mode);
    s.settings.loads = vec![0.1, 0.2, 0.3, 0.4, 0.5];
    s
}

fn calls_at(runner: &FakeRunner, load: f64) -> usize {
    runner.calls.iter().filter(|(_, l)| *l == load).count()
}

#[test]
fn a_server_the_host_delays_is_measured_again_and_counted_while_it_stays_delayed() {
    let s = under_the_slo("hybrid");
    assert_eq!(s.settings.retries, 1);
    let (records, sums) = run(&s, &mut FakeRunner::default(), "delay-none");
    assert!(sums[0].disturbed.is_empty(), "{:?}", sums[0].disturbed);
    assert_eq!(sums[0].decisive_points, 5, "every load under the SLO");
    let o = records[3].overshoot().expect("emulated and judged");
    assert_eq!(o.overshoot_us, common::OVERSHOOT_US);
    assert_eq!(o.reference_us, common::OVERSHOOT_US);
    assert!(!o.delayed);

    // Delayed once at load 0.4 (three points before it give the
    // reference): measured again, the undelayed attempt kept, nothing
    // disturbed.
    let mut runner = FakeRunner {
        delay: vec![("hybrid".into(), 3, 1)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "delay-once");
    assert_eq!(calls_at(&runner, 0.4), 2);
    assert_eq!(calls_at(&runner, 0.3), 1);
    assert!(!records[3].disturbed());
    let x = records[3].result().unwrap();
    assert_eq!(x.service_overshoot_us(), Some(common::OVERSHOOT_US));
    assert!(
        x.checks
            .notes
            .iter()
            .any(|n| n.contains("measured 2 times because the host delayed the server")),
        "{:?}",
        x.checks.notes
    );
    assert!(sums[0].disturbed.is_empty());
    assert!(strict_verdict(&sums, &records).is_ok());

    // Delayed at every attempt: retries run out, the point is kept, marked
    // and counted among the disturbed decisive points, and --strict fails.
    let mut runner = FakeRunner {
        delay: vec![("hybrid".into(), 3, usize::MAX)],
        ..Default::default()
    };
    let dir = temp_dir("delay-always");
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    let sums = summary::summarize(&s, &records);
    assert_eq!(calls_at(&runner, 0.4), 2, "one retry");
    assert!(records[3].disturbed());
    assert!(!records[2].disturbed());
    let o = records[3].overshoot().unwrap();
    assert!(o.delayed);
    assert_eq!(o.overshoot_us, common::DELAYED_OVERSHOOT_US);
    assert_eq!(sums[0].disturbed.len(), 1, "{:?}", sums[0].disturbed);
    assert!(
        sums[0].disturbed[0].contains(
            "at load 0.40: the host delayed the server: emulated service 450 µs over the requested"
        ),
        "{:?}",
        sums[0].disturbed
    );
    let e = strict_verdict(&sums, &records).unwrap_err();
    assert!(e.0.contains("the host delayed the server"), "{e}");
    // points.csv carries the overshoot and both marks; points.json reads back.
    let info = common::run_info("skq bench");
    output::write_all(&dir, &s, &records, &sums, &info).unwrap();
    let rows = output::parse_points_csv(&std::fs::read_to_string(dir.join("points.csv")).unwrap())
        .unwrap();
    assert_eq!(
        rows[3].num("service_overshoot_us"),
        Some(common::DELAYED_OVERSHOOT_US)
    );
    assert_eq!(rows[3].get("host_delayed"), "true");
    assert_eq!(rows[3].get("disturbed"), "true");
    assert_eq!(rows[2].get("host_delayed"), "false");
    assert_eq!(rows[2].get("disturbed"), "false");
    let back: Vec<PointRecord> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("points.json")).unwrap()).unwrap();
    assert_eq!(back[3].overshoot(), records[3].overshoot());
    std::fs::remove_dir_all(&dir).unwrap();

    // The first point has no reference while it runs: measured once, but
    // judged against the whole sweep's once the sweep is done.
    let mut runner = FakeRunner {
        delay: vec![("hybrid".into(), 0, usize::MAX)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "delay-first");
    assert_eq!(calls_at(&runner, 0.1), 1);
    assert!(records[0].overshoot().unwrap().delayed);
    assert_eq!(sums[0].disturbed.len(), 1);
}

/// Two curves under the SLO: ten emulated points, enough to judge the run
/// as a whole.
fn two_curves_under_the_slo() -> Sweep {
    let mut f = skq_bench::config::default_file();
    f.matrix = None;
    f.config = ["hybrid", "epoll-shared"]
        .iter()
        .map(|m| ConfigEntry {
            mode: Some((*m).into()),
            ..Default::default()
        })
        .collect();
    f.sweep.loads = Some(vec![0.1, 0.2, 0.3, 0.4, 0.5]);
    f.sweep.point_secs = Some(1.0);
    Sweep::from_file(&f, 2).unwrap()
}

/// The host delays most of a run: the median rises with it, so no point
/// is delayed against it, but the run is, in every output and for
/// `--strict`; a run with fewer delayed points than half is not.
#[test]
fn a_run_the_host_delays_throughout_is_flagged_as_a_whole() {
    let s = two_curves_under_the_slo();
    let (records, sums) = run(&s, &mut FakeRunner::default(), "run-quiet");
    assert_eq!(records.len(), 10);
    let o = skq_bench::overshoot::run_level(records.iter().filter_map(|r| r.result())).unwrap();
    assert_eq!((o.points, o.median_us, o.floor_us), (10, 50.0, 50.0));
    assert!(!o.delayed);
    assert_eq!(output::host_delay_warning(&records), None);
    assert!(strict_verdict(&sums, &records).is_ok());

    // Six of ten points delayed at every attempt.
    let mut delay: Vec<(String, usize, usize)> = (0..5)
        .map(|i| ("hybrid".to_string(), i, usize::MAX))
        .collect();
    delay.push(("epoll-shared".into(), 0, usize::MAX));
    let mut runner = FakeRunner {
        delay,
        ..Default::default()
    };
    let dir = temp_dir("run-delayed");
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    let sums = summary::summarize(&s, &records);
    assert!(
        records.iter().all(|r| !r.disturbed()),
        "judged against a median of {} µs, no single point is delayed",
        common::DELAYED_OVERSHOOT_US
    );
    assert!(sums.iter().all(|c| c.disturbed.is_empty()));
    let w = output::host_delay_warning(&records).expect("the run is delayed");
    assert!(
        w.contains("the host delayed most of the run: the median emulated point's service overshot 450 µs, the fastest tenth 50 µs (400 µs apart, more than 50; over 10 points)"),
        "{w}"
    );
    let e = strict_verdict(&sums, &records).unwrap_err();
    assert!(e.0.contains("the host delayed most of the run"), "{e}");
    assert!(e.0.starts_with("--strict: 1 problem(s)"), "{e}");
    let info = common::run_info("skq bench");
    output::write_all(&dir, &s, &records, &sums, &info).unwrap();
    let text = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(
        text.contains("warning: the host delayed most of the run"),
        "{text}"
    );
    let file: output::SummaryFile =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let back = file.run_overshoot.unwrap();
    assert!(back.delayed);
    assert_eq!(back.median_us, common::DELAYED_OVERSHOOT_US);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("the host delayed most of the run"));
    std::fs::remove_dir_all(&dir).unwrap();

    // Four of ten: the median stays at the quiet overshoot, and each of the
    // four is delayed against it instead.
    let delay = (0..4)
        .map(|i| ("hybrid".to_string(), i, usize::MAX))
        .collect();
    let mut runner = FakeRunner {
        delay,
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "run-some");
    assert_eq!(output::host_delay_warning(&records), None);
    assert_eq!(sums[0].disturbed.len(), 4, "{:?}", sums[0].disturbed);
    let e = strict_verdict(&sums, &records).unwrap_err();
    assert!(!e.0.contains("most of the run"), "{e}");
}

/// Spun service is not judged: its overshoot is the server's own.
#[test]
fn spun_service_is_not_judged_for_host_delay() {
    let mut s = under_the_slo("hybrid");
    s.curves[0].server.service = skq_bench::config::ServiceMode::Spin;
    let mut runner = FakeRunner {
        delay: vec![("hybrid".into(), 3, usize::MAX)],
        ..Default::default()
    };
    let (records, sums) = run(&s, &mut runner, "delay-spin");
    assert_eq!(calls_at(&runner, 0.4), 1);
    assert!(records.iter().all(|r| r.overshoot().is_none()));
    assert!(sums[0].disturbed.is_empty());
}

#[test]
fn every_output_names_how_each_server_was_started() {
    let f = SweepFile::parse(
        "[sweep]\nloads = [0.2, 0.4]\npoint_secs = 1.0\nbaseline = \"nginx\"\n\
         [defaults]\nworkers = 2\ncapacity_rps = 5000.0\nslo_us = 1000.0\n\
         [[config]]\nmode = \"nginx\"\n\
         [[config]]\nmode = \"memcached\"\n\
         [[config]]\nname = \"memcached-etc\"\nmode = \"memcached\"\nworkload = \"etc\"\n\
         [[config]]\nmode = \"rocksdb-tokio-spawn-blocking\"\n\
         [[config]]\nmode = \"rocksdb-tokio\"\n",
    )
    .unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let setups = peers::server_setups(&s.curves);
    // The two memcached curves start the same server: one entry.
    assert_eq!(setups.len(), 4, "{setups:#?}");
    assert_eq!(setups[1].configs, ["memcached", "memcached-etc"]);
    assert!(
        setups[1]
            .command
            .starts_with("memcached -p PORT -t 2 -U 0 -l 127.0.0.1"),
        "memcached runs the skq servers' worker count as threads: {}",
        setups[1].command
    );
    let conf = &setups[0].files[0];
    assert_eq!(conf.0, "nginx.conf");
    for directive in [
        "worker_processes 2;",
        "access_log off;",
        "sendfile on;",
        "tcp_nopush on;",
        "tcp_nodelay on;",
        "open_file_cache max=1000 inactive=20s;",
        "open_file_cache_valid 30s;",
        "keepalive_requests 1000000;",
        "listen 127.0.0.1:PORT;",
    ] {
        assert!(conf.1.contains(directive), "{directive} in {}", conf.1);
    }
    assert!(setups[2].about.contains("spawn_blocking"), "{setups:#?}");
    assert!(setups[2].command.contains("tokio-spawn-blocking"));
    assert!(setups[3].about.contains("inline"), "{setups:#?}");

    let dir = temp_dir("strict-servers");
    let records = sweep::run(&s, &dir, &mut FakeRunner::default(), &mut Quiet);
    let sums = summary::summarize(&s, &records);
    output::write_all(&dir, &s, &records, &sums, &RunInfo::default()).unwrap();
    let text = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for setup in &setups {
        assert!(text.contains(&setup.command), "{text}");
        assert!(text.contains(&setup.about), "{text}");
        assert!(html.contains(&skq_report::html::escape(&setup.command)));
        assert!(html.contains(&skq_report::html::escape(&setup.about)));
    }
    // nginx's configuration verbatim: every line in summary.txt, the whole
    // text in the report.
    for line in conf.1.lines() {
        assert!(text.contains(line.trim()), "{line} not in summary.txt");
    }
    assert!(html.contains(&skq_report::html::escape(&conf.1)));
    assert!(html.contains("Servers"));
    let sj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(sj["servers"][0]["files"][0][1], conf.1.as_str());
    std::fs::remove_dir_all(&dir).unwrap();
}
