//! TOML parsing, flag merging and the built-in default's plan.

use skq_bench::cli::{build_sweep, BenchArgs};
use skq_bench::config::{Affinity, ServerKind, ServiceMode, Sweep, SweepFile};
use skq_bench::sweep;

const EXAMPLE: &str = include_str!("../examples/sweep.toml");

#[test]
fn example_file_parses_and_expands() {
    let f = SweepFile::parse(EXAMPLE).unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    // 4 modes × 2 workloads from the matrix, then two explicit entries.
    assert_eq!(s.curves.len(), 10);
    let names: Vec<&str> = s.curves.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(&names[..4], ["vanilla", "shared", "hybrid", "tokio"]);
    assert_eq!(s.curves[4].workload, "bimodal-1");
    let b2 = &s.curves[8];
    assert_eq!(
        (b2.name.as_str(), b2.mode.as_str(), b2.steal_k),
        ("best2+steal k=4", "best2+steal", Some(4))
    );
    assert_eq!(b2.workers, 8, "inherits [defaults]");
    let mc = &s.curves[9];
    assert_eq!(mc.server, ServerKind::Memcached);
    assert_eq!(
        (mc.capacity_rps, mc.slo_us, mc.nominal_service_us),
        (50_000.0, Some(500.0), None)
    );
    assert_eq!(
        mc.affinity,
        Affinity::Split,
        "spin defaults to split placement"
    );
    assert_eq!(mc.service, ServiceMode::Spin);
    assert_eq!(s.settings.loads, vec![0.2, 0.4, 0.6, 0.7, 0.8, 0.9]);
    assert_eq!(s.settings.cdf_load, 0.6);
    assert_eq!(
        f.sweep.out.as_deref(),
        Some(std::path::Path::new("results/example-sweep"))
    );
    // Capacity N/S̄ with the nominal S̄ of bimodal-1 (= S̄).
    assert!((s.curves[4].capacity_rps - 8.0 * 1e6 / 1000.0).abs() < 1e-6);
    assert_eq!(s.curves[3].server, ServerKind::Tokio);
}

#[test]
fn kv_example_crosses_connections_and_takes_memcached_as_baseline() {
    let f = SweepFile::parse(include_str!("../examples/kv-vs-memcached.toml")).unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    // 4 modes × 3 workloads × 3 connection counts.
    assert_eq!(s.curves.len(), 36);
    assert_eq!(s.settings.baseline, "memcached");
    let conns: Vec<usize> = s.curves[..12].iter().map(|c| c.connections).collect();
    assert_eq!(conns, [24, 24, 24, 24, 96, 96, 96, 96, 384, 384, 384, 384]);
    // Each connection count is its own group (own baseline and plot), and
    // point files do not collide.
    assert_ne!(s.curves[0].group(), s.curves[4].group());
    assert_eq!(s.curves[0].group(), s.curves[1].group());
    assert_ne!(s.curves[0].slug(), s.curves[4].slug());
    assert_eq!(s.curves[0].server, ServerKind::Memcached);
    assert!(s
        .curves
        .iter()
        .all(|c| c.workers == 1 && c.slo_us == Some(500.0)));
}

#[test]
fn errors_name_the_key() {
    let err = |text: &str| {
        let f = SweepFile::parse(text);
        match f {
            Err(e) => format!("{e:#}"),
            Ok(f) => format!("{:#}", Sweep::from_file(&f, 2).unwrap_err()),
        }
    };
    assert!(err("[sweep]\nloads = []\n[matrix]\nmodes=['vanilla']").contains("`loads`"));
    assert!(err("[sweep]\npoint_secs = -1\n[matrix]\nmodes=['vanilla']").contains("`point_secs`"));
    assert!(err("[matrix]\nmodes=['fastest']").contains("unknown mode `fastest`"));
    assert!(err("[matrix]\nmodes=['vanilla+steal']").contains("`mode`"));
    assert!(err("[[config]]\nmode='hybrid'\nworkers=0").contains("`workers`"));
    assert!(err("[[config]]\nmode='hybrid'\nworkload='nope'").contains("unknown workload `nope`"));
    assert!(err("[[config]]\nmode='memcached'\nslo_us=100").contains("`capacity_rps`"));
    assert!(err("[[config]]\nmode='memcached'\ncapacity_rps=1000").contains("`slo_us`"));
    assert!(
        err("[[config]]\nmode='hybrid'\nwrokers=3").contains("wrokers"),
        "unknown keys are refused"
    );
    assert!(err("[sweep]\n").contains("no configurations"));
    assert!(err("[[config]]\nmode='hybrid'\n[[config]]\nmode='hybrid'").contains("appears twice"));
}

#[test]
fn toml_syntax_errors_are_one_line_with_position() {
    let e = format!(
        "{:#}",
        SweepFile::parse("[sweep]\nloads = \"x\"\n").unwrap_err()
    );
    assert!(!e.contains('\n'), "{e}");
    assert!(e.starts_with("line 2, column 9: "), "{e}");
    assert!(e.contains("expected a sequence"), "{e}");
}

#[test]
fn default_sweep_is_the_issue_matrix_and_fits_three_minutes() {
    let (s, out) = build_sweep(&BenchArgs::default(), 2).unwrap();
    assert_eq!(out, None);
    assert_eq!(s.curves.len(), 12);
    for c in &s.curves {
        assert_eq!(
            (c.workers, c.service, c.mean_us, c.protocol.as_str()),
            (8, ServiceMode::Emulate, 500.0, "rpc")
        );
        assert_eq!(c.capacity_rps, 16_000.0);
    }
    let modes: Vec<&str> = s.curves[..6].iter().map(|c| c.mode.as_str()).collect();
    assert_eq!(
        modes,
        ["vanilla", "shared", "cpu", "best2+steal", "hybrid", "tokio"]
    );
    assert!(s.curves[..6].iter().all(|c| c.workload == "exponential"));
    assert!(s.curves[6..].iter().all(|c| c.workload == "bimodal-1"));
    let est = sweep::estimate(&s);
    assert!(
        est.as_secs_f64() <= 180.0,
        "worst case {est:?} exceeds the 3-minute budget"
    );
    let plan = sweep::plan(&s);
    assert_eq!(
        plan[0].iter().map(|p| p.target_rps).collect::<Vec<_>>(),
        [3200.0, 6400.0, 9600.0, 12000.0, 14400.0]
    );
}

#[test]
fn flags_override_file_and_defaults() {
    let dir = std::env::temp_dir().join(format!("skq-bench-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.toml");
    std::fs::write(&path, EXAMPLE).unwrap();
    let a = BenchArgs {
        config: Some(path),
        modes: vec!["hybrid".into()],
        workers: Some(4),
        mean_us: Some(2000.0),
        loads: vec![0.5, 0.1],
        slo_factor: Some(5.0),
        service: Some(ServiceMode::Emulate),
        out: Some("elsewhere".into()),
        ..Default::default()
    };
    let (s, out) = build_sweep(&a, 2).unwrap();
    assert_eq!(out.as_deref(), Some(std::path::Path::new("elsewhere")));
    // Matrix replaced by hybrid × the file's two workloads, explicit entries kept.
    let names: Vec<&str> = s.curves.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["hybrid", "hybrid", "best2+steal k=4", "memcached"]);
    assert!(
        s.curves.iter().all(|c| c.workers == 4),
        "--workers applies everywhere"
    );
    assert_eq!(s.curves[3].service, ServiceMode::Spin, "peers always spin");
    assert_eq!(s.curves[0].mean_us, 2000.0);
    assert_eq!(s.settings.loads, vec![0.1, 0.5], "loads are sorted");
    assert_eq!(s.settings.slo_factor, 5.0);
    assert_eq!(
        s.settings.point_secs, 2.0,
        "unchanged keys come from the file"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    let bad = BenchArgs {
        modes: vec!["warp".into()],
        ..Default::default()
    };
    let e = format!("{:#}", build_sweep(&bad, 2).unwrap_err());
    assert!(e.contains("unknown mode `warp`"), "{e}");
}
