//! The server's cost per reply in every output: context switches
//! (voluntary+involuntary) beside CPU time, per point and per curve, in the
//! terminal summary table, summary.txt, summary.json, points.csv,
//! points.json and the HTML report, with the fake runner's fixture counts.

mod common;

use common::{six_mode_sweep, temp_dir, FakeRunner};
use skq_bench::output;
use skq_bench::summary;
use skq_bench::sweep::{self, Outcome, PointRecord, Quiet};

#[test]
fn context_switches_per_reply_per_point_and_per_curve() {
    let s = six_mode_sweep();
    let dir = temp_dir("cost-tables");
    let records = sweep::run(&s, &dir, &mut FakeRunner::default(), &mut Quiet);
    let sums = summary::summarize(&s, &records);
    // Per point: the fixture's counts over the replies of the window (the
    // denominator of server CPU per reply), voluntary+involuntary.
    let first = &records[0];
    let c = first.ctx_switches().expect("fixture switches recorded");
    let x = first.result().unwrap();
    let replies = x.achieved_rps * x.meta.duration_s;
    let per = (c.voluntary as f64 / replies, c.involuntary as f64 / replies);
    assert_eq!(first.ctx_switches_per_reply(), Some(per));
    let want = format!("{:.2}+{:.2}", per.0, per.1);
    let table =
        output::load_table(&s, &records, output::PointMetric::CtxSwitchesPerRequest).to_text();
    let row0 = table.lines().nth(2).unwrap();
    assert!(row0.contains(&want), "{row0} lacks {want}");
    // A point without them shows "-".
    let mut without = records.clone();
    let Outcome::Measured {
        server_ctx_switches,
        ..
    } = &mut without[0].outcome
    else {
        panic!("first point measured")
    };
    *server_ctx_switches = None;
    let table =
        output::load_table(&s, &without, output::PointMetric::CtxSwitchesPerRequest).to_text();
    let row0_without = table.lines().nth(2).unwrap();
    assert_eq!(
        row0_without.matches('-').count(),
        row0.matches('-').count() + 1,
        "{row0} vs {row0_without}"
    );
    // Per curve: switches summed over its measured points, over the replies
    // received in them (as server CPU per request is).
    let (mut vol, mut invol, mut received) = (0, 0, 0);
    for r in records.iter().filter(|r| r.curve == 0) {
        if let (Some(c), Some(x)) = (r.ctx_switches(), r.result()) {
            vol += c.voluntary;
            invol += c.involuntary;
            received += x.received;
        }
    }
    let per = sums[0].ctx_switches_per_request.unwrap();
    assert_eq!(per.voluntary, vol as f64 / received as f64);
    assert_eq!(per.involuntary, invol as f64 / received as f64);
    // The terminal's summary table shows it beside server CPU per request.
    let table = output::summary_table(&sums, "vanilla").to_text();
    let head = table.lines().next().unwrap();
    let cpu_at = head.find("server CPU µs/req").expect("CPU column");
    let cs_at = head.find("ctx sw/req vol+invol").expect("switches column");
    assert!(cs_at > cpu_at, "{head}");
    let row = table.lines().nth(2).unwrap();
    assert!(row.contains(&per.cell()), "{row} lacks {}", per.cell());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn context_switches_reach_every_output_file() {
    let s = six_mode_sweep();
    let dir = temp_dir("cost-files");
    let mut runner = FakeRunner {
        fail: vec![("tokio".into(), 0)],
        no_switches: vec!["cpu".into()],
        ..Default::default()
    };
    let records = sweep::run(&s, &dir, &mut runner, &mut Quiet);
    let sums = summary::summarize(&s, &records);
    let info = common::run_info("skq bench");
    output::write_all(&dir, &s, &records, &sums, &info).unwrap();
    assert!(records.iter().any(|r| r.ctx_switches().is_some()));
    assert!(records
        .iter()
        .filter(|r| r.config == "cpu")
        .all(|r| r.ctx_switches().is_none()));

    // points.csv: the counts of each measured point, empty where none.
    let rows = output::parse_points_csv(&std::fs::read_to_string(dir.join("points.csv")).unwrap())
        .unwrap();
    assert_eq!(rows.len(), records.len());
    for (row, rec) in rows.iter().zip(&records) {
        let c = rec.ctx_switches();
        assert_eq!(
            (
                row.num("server_ctx_voluntary"),
                row.num("server_ctx_involuntary")
            ),
            (
                c.map(|c| c.voluntary as f64),
                c.map(|c| c.involuntary as f64)
            ),
            "{} at {}",
            rec.config,
            rec.load
        );
        if c.is_none() {
            assert_eq!(row.get("server_ctx_voluntary"), "");
        }
    }

    // points.json: the counts per point, the key absent where not measured;
    // records written before the field existed still read back.
    let pj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("points.json")).unwrap()).unwrap();
    for (v, rec) in pj.as_array().unwrap().iter().zip(&records) {
        let c = &v["server_ctx_switches"];
        match rec.ctx_switches() {
            Some(want) => {
                assert_eq!(c["voluntary"].as_u64(), Some(want.voluntary));
                assert_eq!(c["involuntary"].as_u64(), Some(want.involuntary));
            }
            None => assert!(v.get("server_ctx_switches").is_none(), "{v}"),
        }
    }
    let mut old = pj.clone();
    for v in old.as_array_mut().unwrap() {
        v.as_object_mut().unwrap().remove("server_ctx_switches");
    }
    let old: Vec<PointRecord> = serde_json::from_value(old).unwrap();
    assert_eq!(old.len(), records.len());
    assert!(old.iter().all(|r| r.ctx_switches().is_none()));

    // summary.json: per curve, absent for the curve that measured none.
    let sv: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    for (v, sum) in sv["curves"].as_array().unwrap().iter().zip(&sums) {
        let c = &v["ctx_switches_per_request"];
        match sum.ctx_switches_per_request {
            Some(want) => {
                let back = c["involuntary"].as_f64().unwrap();
                assert!((back - want.involuntary).abs() <= 1e-12 * back.abs());
                assert!(c["voluntary"].as_f64().unwrap() > 0.0);
            }
            None => assert!(c.is_null(), "{}: {c}", sum.spec.name),
        }
    }
    assert!(sums
        .iter()
        .filter(|x| x.spec.mode == "cpu")
        .all(|x| x.ctx_switches_per_request.is_none()));
    assert!(sums
        .iter()
        .filter(|x| x.spec.mode == "vanilla")
        .all(|x| x.ctx_switches_per_request.is_some()));

    // summary.txt and report.html: the column and the per-load table.
    let x = records[0].ctx_switches_per_reply().unwrap();
    let cell = format!("{:.2}+{:.2}", x.0, x.1);
    let txt = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert!(txt.contains("ctx sw/req vol+invol"), "{txt}");
    let table_at = txt
        .find("server context switches per reply, voluntary+involuntary:")
        .expect("per-load table in summary.txt");
    assert!(txt[table_at..].contains(&cell), "{txt}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("ctx sw/req vol+invol"));
    let table_at = html
        .find("Server context switches per request at each offered load")
        .expect("per-load table in the report");
    assert!(html[table_at..].contains(&cell), "the first point's cell");
    std::fs::remove_dir_all(&dir).unwrap();
}
