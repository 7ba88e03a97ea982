//! `skq sim` end to end through its argument parser.

use clap::Parser;
use skq_sim::cli::{run, SimArgs};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SimArgs,
}

fn args(extra: &[&str]) -> SimArgs {
    let mut v = vec![
        "sim",
        "--requests",
        "20000",
        "--workers",
        "4",
        "--connections",
        "64",
    ];
    v.extend_from_slice(extra);
    Cli::try_parse_from(v).expect("arguments parse").args
}

#[test]
fn writes_csv_and_json_reproducibly() {
    let dir = std::env::temp_dir().join(format!("skq-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (j1, j2, csv) = (dir.join("a.json"), dir.join("b.json"), dir.join("a.csv"));
    let common = [
        "--model",
        "centralized-fcfs,partitioned-ps",
        "--loads",
        "0.5,0.9",
        "--seed",
        "4",
    ];
    let mut a = args(&common);
    a.output.json = Some(j1.clone());
    a.output.csv = Some(csv.clone());
    a.threads = Some(1);
    run(a).unwrap();
    let mut b = args(&common);
    b.output.json = Some(j2.clone());
    b.threads = Some(2);
    run(b).unwrap();
    let (t1, t2) = (
        std::fs::read_to_string(&j1).unwrap(),
        std::fs::read_to_string(&j2).unwrap(),
    );
    assert_eq!(t1, t2, "same seed, different thread count: output differs");
    let recs: Vec<skq_sim::output::SimRecord> = serde_json::from_str(&t1).unwrap();
    assert_eq!(recs.len(), 4);
    assert_eq!(recs[0].config, "centralized-fcfs");
    assert_eq!(recs[0].result.meta.service_mode, "simulated");
    let c = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(c.lines().count(), 5);
    assert!(c.starts_with("config,workload,"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_values_name_their_flag() {
    let cases: [(&[&str], &str); 10] = [
        (&["--loads", "x"], "--loads"),
        (
            &["--checkpoint-us", "0", "--model", "hybrid"],
            "--checkpoint-us",
        ),
        (
            &["--checkpoint-us=-3", "--model", "hybrid"],
            "--checkpoint-us",
        ),
        (&["--workload", "nope"], "--workload"),
        (&["--model", "nope"], "--model"),
        (&["--migrate-prob", "2"], "--migrate-prob"),
        (&["--harvest", "later", "--model", "hybrid"], "--harvest"),
        (&["--server-cpus", "x", "--model", "cpu"], "--server-cpus"),
        (&["--rss", "2-1", "--model", "cpu"], "--rss"),
        (&["--topology", "smt=0", "--model", "cpu"], "--topology"),
    ];
    for (extra, flag) in cases {
        let e = run(args(extra)).unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains(flag),
            "{extra:?}: `{msg}` does not name {flag}"
        );
        assert!(
            !msg.contains('\n'),
            "{extra:?}: message is not one line: `{msg}`"
        );
    }
}
