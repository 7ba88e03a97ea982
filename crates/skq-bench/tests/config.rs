//! TOML parsing, flag merging and the built-in default's plan.

use skq_bench::cli::{build_sweep, BenchArgs};
use skq_bench::config::{Affinity, ServerKind, ServiceMode, Sweep, SweepFile};
use skq_bench::rss::RssSpec;
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
        (
            b2.name.as_str(),
            b2.mode.as_str(),
            b2.server.spec.as_ref().unwrap().sched.steal_k
        ),
        ("best2+steal k=4", "best2+steal", Some(4))
    );
    assert_eq!(b2.workers, 8, "inherits [defaults]");
    let mc = &s.curves[9];
    assert_eq!(mc.server.kind, ServerKind::Memcached);
    assert_eq!(
        (
            mc.load.capacity_rps,
            mc.load.slo_us,
            mc.load.nominal_service_us
        ),
        (50_000.0, Some(500.0), None)
    );
    assert_eq!(
        mc.affinity,
        Affinity::Split,
        "spin defaults to split placement"
    );
    assert_eq!(mc.server.service, ServiceMode::Spin);
    assert_eq!(s.settings.loads, vec![0.2, 0.4, 0.6, 0.7, 0.8, 0.9]);
    assert_eq!(s.settings.cdf_load, 0.6);
    assert_eq!(
        f.sweep.out.as_deref(),
        Some(std::path::Path::new("results/example-sweep"))
    );
    // Capacity N/S̄ with the nominal S̄ of bimodal-1 (= S̄).
    assert!((s.curves[4].load.capacity_rps - 8.0 * 1e6 / 1000.0).abs() < 1e-6);
    assert_eq!(s.curves[3].server.kind, ServerKind::Tokio);
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
    assert_eq!(s.curves[0].server.kind, ServerKind::Memcached);
    assert!(s
        .curves
        .iter()
        .all(|c| c.workers == 1 && c.load.slo_us == Some(500.0)));
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
    let e = err("[matrix]\nmodes=['vanilla+steal']");
    assert!(e.contains("`mode`"), "{e}");
    // The core's reason, not a generic "unknown mode".
    assert!(e.contains("vanilla+steal is not allowed"), "{e}");
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
fn default_sweep_is_the_issue_matrix_with_8_s_points_and_fits_ten_minutes() {
    let (s, out) = build_sweep(&BenchArgs::default(), 2).unwrap();
    assert_eq!(out, None);
    assert_eq!(s.curves.len(), 10);
    for c in &s.curves {
        assert_eq!(
            (
                c.workers,
                c.server.service,
                c.load.mean_us,
                c.load.protocol.as_str()
            ),
            (8, ServiceMode::Emulate, 500.0, "rpc")
        );
        assert_eq!(c.load.capacity_rps, 16_000.0);
    }
    let modes: Vec<&str> = s.curves[..5].iter().map(|c| c.mode.as_str()).collect();
    assert_eq!(
        modes,
        ["hybrid", "cpu", "epoll-1to1", "epoll-shared", "tokio"]
    );
    let servers: Vec<ServerKind> = s.curves[..5].iter().map(|c| c.server.kind).collect();
    assert_eq!(
        servers,
        [
            ServerKind::Skq,
            ServerKind::Skq,
            ServerKind::Epoll,
            ServerKind::Epoll,
            ServerKind::Tokio
        ]
    );
    assert!(s.curves[..5].iter().all(|c| c.workload == "exponential"));
    assert!(s.curves[5..].iter().all(|c| c.workload == "bimodal-1"));
    // Ratios against the plain one-epoll-per-thread server; emulated RSS
    // over every CPU, flows left where they hash.
    assert_eq!(s.settings.baseline, "epoll-1to1");
    assert_eq!(s.settings.rss, RssSpec::All);
    assert_eq!(s.settings.rss_migrate_ms, None);
    // 8-s points (the independence check needs them near the knee): at
    // worst about 9 minutes (544 s), within a 10-minute budget.
    assert_eq!(s.settings.point_secs, skq_bench::config::DEFAULT_POINT_SECS);
    assert_eq!(s.settings.point_secs, 8.0);
    let est = sweep::estimate(&s);
    assert!(
        est.as_secs_f64() <= 600.0,
        "worst case {est:?} exceeds the 10-minute budget"
    );
    let plan = sweep::plan(&s);
    assert_eq!(
        plan[0].iter().map(|p| p.target_rps).collect::<Vec<_>>(),
        [3200.0, 6400.0, 9600.0, 12000.0, 13600.0, 14400.0]
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
    assert_eq!(
        s.curves[3].server.service,
        ServiceMode::Spin,
        "peers always spin"
    );
    assert_eq!(s.curves[0].load.mean_us, 2000.0);
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

#[test]
fn the_host_gate_comes_from_toml_and_flags_and_is_off_by_default() {
    use skq_bench::hostgate::{DEFAULT_MAX_WAIT, DEFAULT_SLEEPS};
    let settings = |text: &str| Sweep::from_file(&SweepFile::parse(text).unwrap(), 2);
    let s = settings("[matrix]\nmodes=['cpu']").unwrap().settings;
    assert_eq!(s.host_gate, None);
    let s = settings("[sweep]\nhost_gate = 3\nhost_gate_wait_s = 30\n[matrix]\nmodes=['cpu']")
        .unwrap()
        .settings;
    let g = s.host_gate.expect("on");
    assert_eq!((g.max_late, g.sleeps), (3, DEFAULT_SLEEPS));
    assert_eq!(g.max_wait, std::time::Duration::from_secs(30));
    assert_eq!(
        g.warmup_stall_ms_per_s,
        Some(skq_bench::hostgate::DEFAULT_WARMUP_STALL_MS_PER_S)
    );
    let g =
        settings("[sweep]\nhost_gate = 3\nhost_gate_warmup_ms_per_s = 0\n[matrix]\nmodes=['cpu']")
            .unwrap()
            .settings
            .host_gate
            .expect("on");
    assert_eq!(
        g.warmup_stall_ms_per_s, None,
        "0 turns the warm-up limit off"
    );
    let err = |text: &str| format!("{:#}", settings(text).unwrap_err());
    assert!(
        err("[sweep]\nhost_gate_wait_s = 30\n[matrix]\nmodes=['cpu']")
            .contains("needs `host_gate`")
    );
    assert!(
        err("[sweep]\nhost_gate = 2\nhost_gate_wait_s = -1\n[matrix]\nmodes=['cpu']")
            .contains("0 to 3600")
    );
    assert!(err("[sweep]\nhost_gate = 201\n[matrix]\nmodes=['cpu']").contains("at most 200"));
    assert!(
        err("[sweep]\nhost_gate_warmup_ms_per_s = 5\n[matrix]\nmodes=['cpu']")
            .contains("needs `host_gate`")
    );
    // Flags: on over the built-in default, with its default longest wait.
    let a = BenchArgs {
        host_gate: Some(4),
        ..Default::default()
    };
    let g = build_sweep(&a, 2)
        .unwrap()
        .0
        .settings
        .host_gate
        .expect("on");
    assert_eq!((g.max_late, g.max_wait), (4, DEFAULT_MAX_WAIT));
    let a = BenchArgs {
        host_gate_wait: Some(10.0),
        ..Default::default()
    };
    assert!(format!("{:#}", build_sweep(&a, 2).unwrap_err()).contains("needs `host_gate`"));
}

#[test]
fn rss_settings_come_from_toml_and_flags() {
    let f = SweepFile::parse("[sweep]\nrss = '0-1'\nrss_migrate_ms = 200\n[matrix]\nmodes=['cpu']")
        .unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    assert_eq!(s.settings.rss, RssSpec::Cpus(vec![0, 1]));
    assert_eq!(s.settings.rss_migrate_ms, Some(200));
    // Files that do not ask for it run without; the built-in default asks.
    let f = SweepFile::parse("[matrix]\nmodes=['cpu']").unwrap();
    assert_eq!(Sweep::from_file(&f, 2).unwrap().settings.rss, RssSpec::Off);
    let err = |text: &str| {
        format!(
            "{:#}",
            Sweep::from_file(&SweepFile::parse(text).unwrap(), 2).unwrap_err()
        )
    };
    assert!(
        err("[sweep]\nrss_migrate_ms = 100\n[matrix]\nmodes=['cpu']").contains("set `rss` too")
    );
    assert!(
        err("[sweep]\nrss = 'all'\nrss_migrate_ms = 5\n[matrix]\nmodes=['cpu']")
            .contains("too short")
    );
    assert!(SweepFile::parse("[sweep]\nrss = 'fast'\n").is_err());
    // Flags override the file and the default.
    let a = BenchArgs {
        rss: Some(RssSpec::Off),
        ..Default::default()
    };
    assert_eq!(build_sweep(&a, 2).unwrap().0.settings.rss, RssSpec::Off);
    let a = BenchArgs {
        rss: Some("1".parse().unwrap()),
        rss_migrate_ms: Some(300),
        ..Default::default()
    };
    let s = build_sweep(&a, 2).unwrap().0.settings;
    assert_eq!(
        (s.rss, s.rss_migrate_ms),
        (RssSpec::Cpus(vec![1]), Some(300))
    );
    // 0 means never.
    let a = BenchArgs {
        rss_migrate_ms: Some(0),
        ..Default::default()
    };
    assert_eq!(build_sweep(&a, 2).unwrap().0.settings.rss_migrate_ms, None);
}

#[test]
fn epoll_and_kv_epoll_modes_are_accepted() {
    let f = SweepFile::parse(
        "[matrix]\nmodes=['epoll-1to1','epoll-shared']\n[[config]]\nmode='kv-epoll-1to1'\ncapacity_rps=1000\nslo_us=500\n[[config]]\nmode='kv-epoll-shared'\ncapacity_rps=1000\nslo_us=500",
    )
    .unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let kinds: Vec<(ServerKind, &str)> = s
        .curves
        .iter()
        .map(|c| (c.server.kind, c.load.protocol.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (ServerKind::Epoll, "rpc"),
            (ServerKind::Epoll, "rpc"),
            (ServerKind::Kv, "memcached"),
            (ServerKind::Kv, "memcached")
        ]
    );
}

#[test]
fn the_async_example_sweeps_the_async_modes_beside_tokio() {
    let f = SweepFile::parse(include_str!("../examples/async-vs-tokio.toml")).unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let mut modes: Vec<_> = s.curves.iter().map(|c| c.mode.as_str()).collect();
    modes.sort();
    modes.dedup();
    assert_eq!(modes, ["async-hybrid", "async-tokio", "hybrid", "tokio"]);
    for c in &s.curves {
        let spec = c.server.spec.as_ref().unwrap();
        assert_eq!(spec.mode.to_string(), c.mode);
        assert_eq!((spec.workers, spec.service), (8, ServiceMode::Emulate));
        assert!(c.load.nominal_service_us.is_some(), "{}", c.name);
    }
    assert_eq!(s.curves.len(), 8);
}

#[test]
fn http_examples_parse_with_their_io_variance_and_wrk_cross_checks() {
    for (text, io) in [
        (include_str!("../examples/http-vs-nginx.toml"), None),
        (
            include_str!("../examples/http-io.toml"),
            Some("io=emulate miss=0.10 latency=exp(5000µs)"),
        ),
    ] {
        let s = Sweep::from_file(&SweepFile::parse(text).unwrap(), 2).unwrap();
        for c in &s.curves {
            assert_eq!(c.load.protocol, "http", "{}", c.name);
            assert_eq!(c.server.service, ServiceMode::Spin, "{}", c.name);
            assert!(
                matches!(c.server.kind, ServerKind::Http | ServerKind::Nginx),
                "{}",
                c.name
            );
            assert_eq!(
                c.http.io.as_ref().map(|i| i.label()).as_deref(),
                io,
                "{}",
                c.name
            );
            // Every output's group names the IO variance.
            if let Some(io) = io {
                assert!(c.group().contains(io), "{}", c.group());
                assert!(c.service_label().starts_with("spin+io=emulate"));
            }
        }
    }
    let s = Sweep::from_file(
        &SweepFile::parse(include_str!("../examples/http-vs-nginx.toml")).unwrap(),
        2,
    )
    .unwrap();
    let wrk: Vec<&str> = s
        .curves
        .iter()
        .filter(|c| c.http.wrk)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(wrk, ["nginx", "hybrid"]);
    let batch = s
        .curves
        .iter()
        .find(|c| c.name == "hybrid-batch64")
        .unwrap();
    assert_eq!(batch.server.spec.as_ref().unwrap().sched.batch, 64);
    // nginx keeps the guide's tcp_nopush unless a curve turns it off.
    let nopush: Vec<(&str, bool)> = s
        .curves
        .iter()
        .filter(|c| c.mode == "nginx")
        .map(|c| (c.name.as_str(), c.http.tcp_nopush))
        .collect();
    assert_eq!(nopush, [("nginx", true), ("nginx-nopush-off", false)]);
    let conf = |on| skq_bench::peers::nginx_conf(1, 80, std::path::Path::new("/w"), on);
    assert!(conf(true).contains("tcp_nopush on;"));
    assert!(conf(false).contains("tcp_nopush off;"));
}

#[test]
fn http_keys_are_refused_where_they_do_not_apply() {
    let err = |entry: &str| {
        let text = format!("[[config]]\ncapacity_rps=1000\nslo_us=500\n{entry}");
        format!(
            "{:#}",
            Sweep::from_file(&SweepFile::parse(&text).unwrap(), 2).unwrap_err()
        )
    };
    let e = err("mode='nginx'\nio_variance='emulate'");
    assert!(
        e.contains("`io_variance`") && e.contains("only http-MODE"),
        "{e}"
    );
    let e = err("mode='http-hybrid'\nnginx_tcp_nopush=false");
    assert!(
        e.contains("`nginx_tcp_nopush`") && e.contains("only nginx curves"),
        "{e}"
    );
    let e = err("mode='http-hybrid'\nio_variance='slow'");
    assert!(e.contains("unknown IO variance `slow`"), "{e}");
    let e = err("mode='http-hybrid'\nio_variance='fadvise'\nio_miss=1.5");
    assert!(e.contains("out of range 0..=1"), "{e}");
    let e = err("mode='http-hybrid'\nio_miss=0.5");
    assert!(e.contains("need io_variance"), "{e}");
    let e = err("mode='memcached'\nwrk=true");
    assert!(e.contains("`wrk`") && e.contains("HTTP"), "{e}");
    let e = err("mode='http-epoll-1to1'\nbatch=8");
    assert!(e.contains("`batch`"), "{e}");
    let e = err("mode='http-fastest'");
    assert!(e.contains("unknown mode `http-fastest`"), "{e}");
    // And accepted where they do.
    for mode in [
        "http-hybrid",
        "http-best2+steal",
        "http-epoll-1to1",
        "http-epoll-shared",
        "http-tokio",
    ] {
        let text = format!("[[config]]\nmode='{mode}'\ncapacity_rps=1000\nslo_us=500\nio_variance='fadvise'\nwrk=true");
        let s = Sweep::from_file(&SweepFile::parse(&text).unwrap(), 2).unwrap();
        assert_eq!(s.curves[0].server.kind, ServerKind::Http, "{mode}");
    }
}

#[test]
fn elastic_step_example_parses_with_its_elastic_and_profile_keys() {
    let f = SweepFile::parse(include_str!("../examples/elastic-step.toml")).unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let names: Vec<&str> = s.curves.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["hybrid elastic", "hybrid fixed 8", "epoll-1to1", "tokio"]
    );
    let elastic = &s.curves[0];
    assert_eq!(
        elastic.server.spec.as_ref().unwrap().sched.min_workers,
        Some(1)
    );
    assert_eq!(elastic.workers, 8);
    assert_eq!(elastic.server.service, ServiceMode::Emulate);
    assert_eq!(
        (elastic.load.capacity_rps, elastic.load.nominal_service_us),
        (8000.0, Some(1000.0))
    );
    for c in &s.curves {
        assert_eq!(
            c.elastic.rate_profile.as_deref(),
            Some("steps=0.1,0.9,0.1@4")
        );
        assert_eq!(c.elastic.interval_ms, Some(250));
        assert_eq!(c.group(), s.curves[0].group(), "one group, one baseline");
    }
    assert!(s.curves[1..].iter().all(|c| c
        .server
        .spec
        .as_ref()
        .unwrap()
        .sched
        .min_workers
        .is_none()));
    assert_eq!(s.settings.loads, vec![1.0]);
    assert_eq!(s.settings.baseline, "hybrid fixed 8");
    assert_eq!(s.settings.rss, RssSpec::Off);
}

#[test]
fn async_elastic_step_example_parses_with_the_elastic_async_curve() {
    let f = SweepFile::parse(include_str!("../examples/async-elastic-step.toml")).unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let got: Vec<(&str, &str, Option<usize>)> = s
        .curves
        .iter()
        .map(|c| {
            let spec = c.server.spec.as_ref().unwrap();
            (c.name.as_str(), c.mode.as_str(), spec.sched.min_workers)
        })
        .collect();
    assert_eq!(
        got,
        [
            ("async-hybrid elastic", "async-hybrid", Some(1)),
            ("async-hybrid fixed 8", "async-hybrid", None),
            ("async-tokio", "async-tokio", None),
        ]
    );
    for c in &s.curves {
        assert_eq!(c.workers, 8);
        assert_eq!(c.elastic.interval_ms, Some(250));
        assert_eq!(c.group(), s.curves[0].group(), "one group, one baseline");
    }
    assert_eq!(s.settings.baseline, "async-hybrid fixed 8");
}

#[test]
fn elastic_keys_are_refused_where_they_do_not_apply() {
    let err = |body: &str| {
        let f = SweepFile::parse(&format!("[[config]]\n{body}\n")).unwrap();
        format!("{:#}", Sweep::from_file(&f, 2).unwrap_err())
    };
    let e = err("mode = \"tokio\"\nmin_workers = 2");
    assert!(
        e.contains("`min_workers`") && e.contains("only skq modes"),
        "{e}"
    );
    let e = err("mode = \"epoll-1to1\"\nmin_workers = 2");
    assert!(e.contains("only skq modes"), "{e}");
    // The async handler on tokio has a fixed worker count; on skq-async
    // the count is elastic.
    let e = err("mode = \"async-tokio\"\nmin_workers = 2");
    assert!(e.contains("only skq modes"), "{e}");
    let f = SweepFile::parse("[[config]]\nmode = \"async-hybrid\"\nworkers = 4\nmin_workers = 1\n")
        .unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    assert_eq!(
        s.curves[0].server.spec.as_ref().unwrap().sched.min_workers,
        Some(1)
    );
    let e = err("mode = \"hybrid\"\nworkers = 4\nmin_workers = 5");
    assert!(e.contains("out of range 1..=workers (4)"), "{e}");
    let e = err("mode = \"hybrid\"\nelastic_period_us = 1000");
    assert!(e.contains("needs `min_workers`"), "{e}");
    let e = err("mode = \"hybrid\"\nrate_profile = \"steps=0.1\"");
    assert!(e.contains("`rate_profile`") && e.contains("@SECS"), "{e}");
    let e = err("mode = \"hybrid\"\ninterval_ms = 0");
    assert!(e.contains("`interval_ms`: must be positive"), "{e}");
    // A rate profile alone gets 1 s intervals, as the generator does.
    let f =
        SweepFile::parse("[[config]]\nmode = \"tokio\"\nrate_profile = \"diurnal=10\"\n").unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    assert_eq!(s.curves[0].elastic.interval_ms, Some(1000));
}

#[test]
fn the_sweep_is_checked_against_the_generators_recorded_capacity() {
    use skq_bench::capacity::capacity_lines;
    use skq_report::capacity::{CapacityEntry, CapacityFile, Machine};
    let (s, _) = build_sweep(&BenchArgs::default(), 2).unwrap();
    let here = Machine {
        hostname: "h".into(),
        cpus: 2,
        kernel: "k".into(),
    };
    let with_met_from = |rps: f64, met_from: Option<f64>| {
        let mut f = None;
        for c in &s.curves {
            let e = CapacityEntry {
                protocol: c.load.protocol.clone(),
                connections: c.connections,
                bound_us: 20.0,
                at_bound_rps: rps,
                relative_bound_us: 30.0,
                at_relative_bound_rps: rps,
                met_from_rps: met_from,
                ceiling_rps: 2.0 * rps,
                cpu_us_per_request: 5.0,
                measured_unix_s: 0,
            };
            f = Some(CapacityFile::record(f, &here, e));
        }
        f.unwrap()
    };
    let with = |rps: f64| with_met_from(rps, None);
    // Nothing recorded: one note per protocol and connection count.
    let lines = capacity_lines(&s, None, &here, "test");
    assert!(!lines.is_empty() && lines.iter().all(|l| l.starts_with("note:")));
    assert!(
        lines[0].contains("skq load --capacity --protocol"),
        "{}",
        lines[0]
    );
    // A generator far faster than any point: silence.
    assert!(capacity_lines(&s, Some(&with(1e9)), &here, "test").is_empty());
    // A generator slower than every curve's top rate: every curve is named
    // in a warning (curves asking the same rate share one).
    let lines = capacity_lines(&s, Some(&with(1.0)), &here, "test");
    assert!(!lines.is_empty() && lines.iter().all(|l| l.starts_with("warning:")));
    for c in &s.curves {
        assert!(
            lines.iter().any(|l| l.contains(&c.name)),
            "{} not warned",
            c.name
        );
    }
    // A capacity of 0 (measured while the machine itself missed the bound)
    // says so and how to measure it again, rather than "above 0 req/s".
    let lines = capacity_lines(&s, Some(&with(0.0)), &here, "test");
    assert!(!lines.is_empty() && lines.iter().all(|l| l.starts_with("warning:")));
    for l in &lines {
        assert!(
            l.contains("no rate kept one generator thread's lateness and read lag within 20 us")
                && l.contains("floor plus margin was 30 us")
                && l.contains("days ago")
                && l.contains("skq load --capacity --protocol"),
            "{l}"
        );
        assert!(!l.contains("above the 0 req/s"), "{l}");
    }
    // A search whose slower steps failed the bound, met from a rate above
    // every curve's slowest point: each curve is warned about its slowest
    // points, and about nothing else.
    let lines = capacity_lines(&s, Some(&with_met_from(1e9, Some(1e8))), &here, "test");
    assert!(!lines.is_empty());
    for l in &lines {
        assert!(
            l.starts_with("warning:")
                && l.contains("below the 100000000 req/s from which one thread kept")
                && l.contains("slowest points may fail"),
            "{l}"
        );
    }
    for c in &s.curves {
        assert!(lines.iter().any(|l| l.contains(&c.name)), "{}", c.name);
    }
    // Met from a rate below every curve's slowest point: silence.
    assert!(capacity_lines(&s, Some(&with_met_from(1e9, Some(1.0))), &here, "test").is_empty());
    // Another machine's figures do not count.
    let elsewhere = Machine {
        hostname: "other".into(),
        ..here.clone()
    };
    let lines = capacity_lines(&s, Some(&with(1.0)), &elsewhere, "test");
    assert!(lines.iter().all(|l| l.starts_with("note:")));
}

/// `Curve` holds its settings in groups, serialized flat: the `spec` of
/// `summary.json` keeps exactly the keys it always had, and reads back.
#[test]
fn a_curve_serializes_with_the_flat_keys_and_reads_back() {
    use skq_bench::config::{ConfigEntry, Curve};
    let e = ConfigEntry {
        mode: Some("http-hybrid".into()),
        io_variance: Some("emulate".into()),
        wrk: Some(true),
        capacity_rps: Some(1000.0),
        slo_us: Some(1000.0),
        ..Default::default()
    };
    let c = Curve::from_entry(&e, 2).unwrap();
    let v = serde_json::to_value(&c).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = vec![
        "name",
        "server",
        "mode",
        "workload",
        "workers",
        "service",
        "mean_us",
        "scale",
        "pin",
        "server_spec",
        "connections",
        "threads",
        "protocol",
        "nominal_service_us",
        "capacity_rps",
        "slo_us",
        "affinity",
        "io",
        "wrk",
        "db_dir",
        "db_keys",
        "dilate",
        "prio",
        "elastic",
    ];
    want.sort_unstable();
    assert_eq!(keys, want);
    assert_eq!(v["server"], "http");
    assert_eq!(v["io"]["variance"], "emulate");
    assert_eq!(v["server_spec"]["mode"], "hybrid");
    let back: Curve = serde_json::from_value(v).unwrap();
    assert_eq!(back, c);
}

#[test]
fn every_example_configuration_parses() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let f = SweepFile::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let s = Sweep::from_file(&f, 2).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
        assert!(!s.curves.is_empty(), "{}", path.display());
        seen += 1;
    }
    assert!(
        seen >= 10,
        "only {seen} examples found in {}",
        dir.display()
    );
}

#[test]
fn scheduler_keys_of_defaults_reach_skq_modes_only() {
    // priority-skq68.toml sets rtshare and rtfreq in [defaults] beside a
    // tokio and an epoll-1to1 curve: those run without them (a baseline
    // refuses skq's tunables), the hybrid curves keep them.
    let f = SweepFile::parse(include_str!("../examples/priority-skq68.toml")).unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let mut seen = (0, 0);
    for c in &s.curves {
        let spec = c.server.spec.as_ref().expect("an rpc server spec");
        let config = skq_net::ServerConfig::from_spec(spec);
        config
            .validate()
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        if spec.mode.has_core() {
            assert_eq!(
                (spec.sched.rtshare, spec.sched.rtfreq),
                (Some(100), Some(200)),
                "{}",
                c.name
            );
            seen.0 += 1;
        } else {
            assert_eq!(spec.sched.core_tunable_given(), None, "{}", c.name);
            seen.1 += 1;
        }
    }
    assert_eq!(seen, (2, 2), "two skq curves and two baselines");
}

#[test]
fn poll_groups_reach_the_caches_skq_modes_only() {
    // One [defaults] for the cache on skq, on thread-per-core and on
    // memcached's own model: only the skq curve gets the tunables, and each
    // spec is one `skq serve kv` accepts.
    let f = SweepFile::parse(
        r#"
[sweep]
loads = [0.5]
[defaults]
workload = "etc"
protocol = "memcached"
workers = 2
poll_groups = 2
pollers = 1
capacity_rps = 50000.0
slo_us = 500.0
[[config]]
mode = "kv-cpu"
[[config]]
mode = "kv-tpc"
[[config]]
mode = "kv-epoll-1to1"
"#,
    )
    .unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let mut tuned = Vec::new();
    for c in &s.curves {
        let kv = c.server.kv.as_ref().expect("a cache spec");
        let argv = ["kv", "--spec", &kv.to_json()];
        let args = <KvCli as clap::Parser>::try_parse_from(argv).unwrap();
        args.kv
            .config()
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        if kv.sched.poll_groups.is_some() {
            assert_eq!(kv.sched.pollers, Some(1), "{}", c.name);
            tuned.push(kv.mode.to_string());
        } else {
            assert!(kv.sched.is_default(), "{}", c.name);
        }
    }
    assert_eq!(tuned, ["cpu"], "only the skq mode is tuned");
}

#[test]
fn the_cache_s_idle_tick_reaches_its_spec_and_nothing_else_takes_it() {
    let text = |mode: &str, tick: &str| {
        format!(
            "[sweep]\nloads = [0.5]\n[defaults]\nworkload = \"sphinx-wo\"\nprotocol = \"memcached\"\n\
             workers = 1\ncapacity_rps = 50000.0\nslo_us = 500.0\n[[config]]\nmode = \"{mode}\"\n{tick}"
        )
    };
    let s = Sweep::from_file(
        &SweepFile::parse(&text("kv-tpc", "idle_tick_us = 2000")).unwrap(),
        2,
    )
    .unwrap();
    let kv = s.curves[0].server.kv.as_ref().expect("a cache spec");
    assert_eq!(kv.idle_tick_us, Some(2000));
    // The spec is one `skq serve kv` accepts, with the tick on.
    let args = <KvCli as clap::Parser>::try_parse_from(["kv", "--spec", &kv.to_json()]).unwrap();
    let cfg = args.kv.config().unwrap();
    assert_eq!(cfg.idle_tick, Some(std::time::Duration::from_millis(2)));
    // Without it, none.
    let s = Sweep::from_file(&SweepFile::parse(&text("kv-tpc", "")).unwrap(), 2).unwrap();
    assert_eq!(s.curves[0].server.kv.as_ref().unwrap().idle_tick_us, None);
    // Another server, or a value out of range: refused with the key named.
    for (mode, tick, why) in [
        ("memcached", "idle_tick_us = 2000", "is the cache's"),
        ("kv-tpc", "idle_tick_us = 50", "must be 100 to 100000"),
    ] {
        let e = match SweepFile::parse(&text(mode, tick)) {
            Err(e) => format!("{e:#}"),
            Ok(f) => format!("{:#}", Sweep::from_file(&f, 2).unwrap_err()),
        };
        assert!(
            e.contains("`idle_tick_us`") && e.contains(why),
            "{mode}: {e}"
        );
    }
}

#[derive(clap::Parser)]
struct KvCli {
    #[command(flatten)]
    kv: skq_kv::cli::KvArgs,
}

#[test]
fn checkpoints_reach_the_rpc_server_of_skq_modes_only() {
    let err = |body: &str| {
        let f = SweepFile::parse(&format!("[[config]]\n{body}\n")).unwrap();
        format!("{:#}", Sweep::from_file(&f, 2).unwrap_err())
    };
    for mode in [
        "tokio",
        "epoll-shared",
        "async-tokio",
        "memcached",
        "kv-hybrid",
    ] {
        let e = err(&format!(
            "mode = \"{mode}\"\ncapacity_rps = 10000.0\nslo_us = 500.0\ncheckpoint_us = 20"
        ));
        assert!(
            e.contains("`checkpoint_us`") && e.contains("only skq modes"),
            "{mode}: {e}"
        );
    }
    let e = err("mode = \"hybrid\"\ncheckpoint_us = 0");
    assert!(e.contains("`checkpoint_us`: must be positive"), "{e}");
    for mode in ["hybrid", "async-hybrid"] {
        let f = SweepFile::parse(&format!(
            "[[config]]\nmode = \"{mode}\"\npoll_groups = 8\ncheckpoint_us = 20\n"
        ))
        .unwrap();
        let s = Sweep::from_file(&f, 2).unwrap();
        let curve = &s.curves[0];
        assert_eq!(curve.server.checkpoint_us, Some(20), "{mode}");
        let dir = std::env::temp_dir();
        let cmd =
            skq_bench::peers::server_command(curve, std::path::Path::new("skq"), 1, &dir).unwrap();
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = args.iter().position(|a| a == "--checkpoint-us");
        assert_eq!(
            at.map(|i| args[i + 1].as_str()),
            Some("20"),
            "{mode}: {args:?}"
        );
    }
    // Without the key no checkpoint flag is passed.
    let f = SweepFile::parse("[[config]]\nmode = \"hybrid\"\n").unwrap();
    let s = Sweep::from_file(&f, 2).unwrap();
    let cmd = skq_bench::peers::server_command(
        &s.curves[0],
        std::path::Path::new("skq"),
        1,
        &std::env::temp_dir(),
    )
    .unwrap();
    assert!(!cmd.get_args().any(|a| a == "--checkpoint-us"));
}
