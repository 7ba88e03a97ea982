//! Meta commands end to end on both architectures (4 workers, so thread-per-core forwards
//! most keys): CAS round trips, quiet pipelines closed by `mn` whose replies must stay in
//! request order across owners, and binary keys sent base64-encoded. Reply wording is
//! checked against memcached itself in tests/clients.rs.

mod common;

use common::{start, Client};
use skq_kv::server::Arch;

/// The number after ` c` in a meta reply line.
fn cas_of(line: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(line);
    text.split_whitespace()
        .find_map(|t| t.strip_prefix('c'))
        .unwrap_or_else(|| panic!("no c flag in {text:?}"))
        .parse()
        .unwrap()
}

#[test]
fn cas_round_trip() {
    for arch in [Arch::Shared, Arch::Tpc] {
        let srv = start(arch, 4);
        let mut c = Client::connect(srv.addr);
        for i in 0..20 {
            let key = format!("cas{i}");
            c.send(format!("ms {key} 2 c T0 F3\r\nv1\r\n").as_bytes());
            let set = c.read_until(b"\r\n");
            assert!(set.starts_with(b"HD c"), "{arch:?}: {set:?}");
            let cas = cas_of(&set);
            assert!(cas > 0);
            c.send(format!("mg {key} c f v\r\n").as_bytes());
            let got = c.read_until(b"v1\r\n");
            assert_eq!(
                got,
                format!("VA 2 c{cas} f3\r\nv1\r\n").into_bytes(),
                "{arch:?}"
            );
            // A stale compare value fails, the current one succeeds and changes the CAS.
            c.expect(
                format!("ms {key} 2 C{} k\r\nv2\r\n", cas + 1000).as_bytes(),
                format!("EX k{key}\r\n").as_bytes(),
            );
            c.send(format!("ms {key} 2 C{cas} c\r\nv2\r\n").as_bytes());
            let new_cas = cas_of(&c.read_until(b"\r\n"));
            assert_ne!(new_cas, cas, "{arch:?}");
            c.expect(format!("md {key} C{cas}\r\n").as_bytes(), b"EX\r\n");
            c.expect(
                format!("md {key} C{new_cas} q\r\nmn\r\n").as_bytes(),
                b"MN\r\n",
            );
            c.expect(format!("mg {key} v\r\n").as_bytes(), b"EN\r\n");
        }
        srv.stop();
    }
}

/// A pipeline of quiet commands over keys owned by every worker: only the hits come back,
/// in request order, and `mn` arrives last.
#[test]
fn quiet_pipeline_keeps_order_across_owners() {
    for arch in [Arch::Shared, Arch::Tpc] {
        let srv = start(arch, 4);
        let mut c = Client::connect(srv.addr);
        let mut req = Vec::new();
        for i in (0..300).step_by(2) {
            req.extend_from_slice(
                format!("ms q{i} {} q T0\r\nval{i}\r\n", 3 + digits(i)).as_bytes(),
            );
        }
        let mut want = Vec::new();
        for i in 0..300 {
            req.extend_from_slice(format!("mg q{i} v q k\r\n").as_bytes());
            if i % 2 == 0 {
                want.extend_from_slice(
                    format!("VA {} kq{i}\r\nval{i}\r\n", 3 + digits(i)).as_bytes(),
                );
            }
        }
        // Quiet deletes: hits are silent, misses (odd keys) still answer NF.
        for i in 0..10 {
            req.extend_from_slice(format!("md q{i} q\r\n").as_bytes());
            if i % 2 == 1 {
                want.extend_from_slice(b"NF\r\n");
            }
        }
        req.extend_from_slice(b"mn\r\n");
        want.extend_from_slice(b"MN\r\n");
        c.send(&req);
        let got = c.read_until(b"MN\r\n");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{arch:?}"
        );
        srv.stop();
    }
}

fn digits(i: usize) -> usize {
    i.to_string().len()
}

/// Keys that only base64 can carry (spaces, control bytes) are stored and found.
#[test]
fn binary_keys_via_base64() {
    for arch in [Arch::Shared, Arch::Tpc] {
        let srv = start(arch, 4);
        let mut c = Client::connect(srv.addr);
        // "a b\r\n\x00" and "\xff\xfe" in base64.
        for (b64, value) in [("YSBiDQoA", "one"), ("//4=", "two")] {
            c.expect(
                format!("ms {b64} 3 b k\r\n{value}\r\n").as_bytes(),
                format!("HD k{b64} b\r\n").as_bytes(),
            );
            c.expect(
                format!("mg {b64} b v k\r\n").as_bytes(),
                format!("VA 3 k{b64} b\r\n{value}\r\n").as_bytes(),
            );
        }
        c.expect(b"md //4= b q\r\nmg //4= b v\r\n", b"EN\r\n");
        c.expect(b"mg YSBiDQoA b s\r\n", b"HD s3\r\n");
        srv.stop();
    }
}
