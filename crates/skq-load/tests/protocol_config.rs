//! `skq load`'s flags, unchanged for users, land in the protocol's own
//! settings ([`ProtocolConfig`]) and in the extra clients' groups.

use clap::Parser;
use skq_load::cli::LoadArgs;
use skq_load::{Client, Protocol, ProtocolConfig};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: LoadArgs,
}

fn config(line: &str) -> anyhow::Result<skq_load::LoadConfig> {
    Cli::try_parse_from(std::iter::once("skq-load").chain(line.split_whitespace()))
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .args
        .to_config()
}

#[test]
fn each_protocol_carries_its_own_flags() {
    let c = config("--rate 10 --protocol http --http-path /a --db-keys 99").unwrap();
    assert_eq!(c.protocol, ProtocolConfig::Http { path: "/a".into() });
    let c =
        config("--rate 10 --protocol rocksdb --db-keys 99 --db-dilate 2 --http-path /a").unwrap();
    assert_eq!(
        c.protocol,
        ProtocolConfig::Rocksdb {
            keys: 99,
            dilate: 2.0
        }
    );
    let c = config("--rate 10 --protocol memcached --no-prefill").unwrap();
    assert!(matches!(
        c.protocol,
        ProtocolConfig::Memcached { prefill: false, .. }
    ));
    let c = config("--rate 10 --protocol memcached").unwrap();
    assert_eq!(c.protocol.kv().map(|kv| kv.name.as_str()), Some("etc"));
    let c = config("--rate 10 --protocol http").unwrap();
    assert_eq!(c.protocol, ProtocolConfig::from(Protocol::Http));
    assert_eq!(config("--rate 10").unwrap().protocol, ProtocolConfig::Rpc);
    // Another protocol's flags are still checked, as before.
    let e = config("--rate 10 --db-dilate=-1").unwrap_err().to_string();
    assert!(e.contains("--db-dilate"), "{e}");
    assert!(config("--rate 10 --kv-workload nope").is_err());
}

#[test]
fn the_extra_clients_keep_their_flags() {
    let c = config(
        "--rate 1000 --probe-connections 3 --probe-rate 30 --high-priority-rate 20 \
         --high-priority-connections 2 --batch-rate 10 --batch-connections 5 --batch-service-us 70",
    )
    .unwrap();
    assert_eq!(
        c.probe,
        Client {
            connections: 3,
            rate: 30.0
        }
    );
    assert_eq!(
        c.high_priority,
        Client {
            connections: 2,
            rate: 20.0
        }
    );
    assert_eq!(
        c.batch.client,
        Client {
            connections: 5,
            rate: 10.0
        }
    );
    assert_eq!(c.batch.service_us, 70.0);
    let e = config("--rate 10 --batch-rate 5 --batch-connections 0").unwrap_err();
    assert!(e.to_string().contains("--batch-connections"), "{e}");
    let e = config("--rate 10 --protocol http --batch-rate 5").unwrap_err();
    assert!(e.to_string().contains("--protocol rpc"), "{e}");
}
