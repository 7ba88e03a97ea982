//! The command line the harness builds for a curve is one the server
//! accepts, and it hands the server exactly the curve's spec: the argv is
//! parsed by `skq serve rpc`'s own flag parser (`skq_servers::cli::RpcArgs`)
//! and the spec it yields compared with the curve's.

use std::path::Path;

use clap::Parser;
use skq_bench::config::{ConfigEntry, Curve};
use skq_bench::peers::server_command;
use skq_servers::cli::RpcArgs;

#[derive(Parser)]
struct ServeRpc {
    #[command(flatten)]
    rpc: RpcArgs,
}

fn parsed_by_the_server(curve: &Curve) -> RpcArgs {
    let c = server_command(curve, Path::new("/bin/skq"), 4242, Path::new("/tmp")).unwrap();
    let argv: Vec<String> = c
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(&argv[..2], ["serve", "rpc"]);
    ServeRpc::try_parse_from(std::iter::once("rpc".to_string()).chain(argv[2..].iter().cloned()))
        .unwrap_or_else(|e| panic!("{}: {e}", curve.name))
        .rpc
}

#[test]
fn every_rpc_curve_hands_the_server_its_spec() {
    let entries = [
        ConfigEntry {
            mode: Some("best2+steal".into()),
            workers: Some(6),
            steal_k: Some(2),
            pollers: Some(1),
            poll_groups: Some(2),
            batch_polls_above: Some(16),
            rtshare: Some(40),
            batch: Some(4),
            pin: Some(true),
            ..ConfigEntry::default()
        },
        ConfigEntry {
            mode: Some("hybrid".into()),
            min_workers: Some(2),
            elastic_period_us: Some(5_000),
            batch_workers: Some("6-7".into()),
            service: Some(skq_bench::config::ServiceMode::Spin),
            ..ConfigEntry::default()
        },
        ConfigEntry {
            mode: Some("epoll-1to1".into()),
            ..ConfigEntry::default()
        },
        ConfigEntry {
            mode: Some("tokio".into()),
            steal_k: Some(3),
            ..ConfigEntry::default()
        },
        // The async handler (issue 23): skq-async with an skq mode and its
        // tunables, and tokio.
        ConfigEntry {
            mode: Some("async-hybrid".into()),
            steal_k: Some(2),
            rtshare: Some(40),
            pin: Some(true),
            ..ConfigEntry::default()
        },
        ConfigEntry {
            mode: Some("async-best2+steal".into()),
            batch_workers: Some("6-7".into()),
            ..ConfigEntry::default()
        },
        ConfigEntry {
            mode: Some("async-tokio".into()),
            ..ConfigEntry::default()
        },
    ];
    for e in &entries {
        let curve = Curve::from_entry(e, 2).unwrap();
        let want = curve.server.spec.clone().unwrap();
        let args = parsed_by_the_server(&curve);
        assert_eq!(args.spec().unwrap(), want, "{}", curve.name);
        // And the server would start it: the configuration validates.
        let cfg = args.to_config().unwrap();
        cfg.validate()
            .unwrap_or_else(|e| panic!("{}: {e}", curve.name));
        assert_eq!(cfg.server_config().driver(), want.mode.driver());
    }
    for (i, mode) in [
        (4, "async-hybrid"),
        (5, "async-best2+steal"),
        (6, "async-tokio"),
    ] {
        let spec = Curve::from_entry(&entries[i], 2)
            .unwrap()
            .server
            .spec
            .unwrap();
        assert_eq!(spec.mode.to_string(), mode);
        assert!(matches!(spec.mode, skq_net::Mode::Async(_)), "{mode}");
    }
    let skq = Curve::from_entry(&entries[0], 2).unwrap();
    let spec = skq.server.spec.unwrap();
    assert_eq!(
        (spec.sched.steal_k, spec.sched.pollers, spec.sched.batch),
        (Some(2), Some(1), 4)
    );
    assert_eq!(spec.sched.batch_polls_above, Some(16));
}

#[test]
fn bad_scheduling_keys_are_refused_at_the_config_naming_the_key() {
    let e = ConfigEntry {
        mode: Some("hybrid".into()),
        batch_workers: Some("six".into()),
        ..ConfigEntry::default()
    };
    let err = Curve::from_entry(&e, 2).unwrap_err().to_string();
    assert!(err.contains("`batch_workers`"), "{err}");
    let e = ConfigEntry {
        mode: Some("http-epoll".into()),
        capacity_rps: Some(1000.0),
        slo_us: Some(500.0),
        ..ConfigEntry::default()
    };
    let err = Curve::from_entry(&e, 2).unwrap_err().to_string();
    assert!(err.contains("unknown mode `http-epoll`"), "{err}");
    // Only the rpc server has an async handler.
    let e = ConfigEntry {
        mode: Some("http-async-hybrid".into()),
        capacity_rps: Some(1000.0),
        slo_us: Some(500.0),
        ..ConfigEntry::default()
    };
    let err = Curve::from_entry(&e, 2).unwrap_err().to_string();
    assert!(
        err.contains("only the rpc server has an async handler"),
        "{err}"
    );
}
