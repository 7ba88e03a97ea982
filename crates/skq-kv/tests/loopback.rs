//! End-to-end protocol behaviour over loopback, for both architectures.

mod common;

use common::{start, Client};
use skq_kv::server::{Arch, KvMode};

const ARCHS: [Arch; 2] = [Arch::Shared, Arch::Tpc];

/// Runs `f` on the thread-per-core server and on the shared one with the skq runtime
/// (default mode, hybrid) — tests that take a config also cover `--mode epoll`.
fn each_arch(f: impl Fn(Arch)) {
    for a in ARCHS {
        f(a);
    }
}

#[test]
fn basic_commands() {
    each_arch(|arch| {
        let srv = start(arch, 3);
        let mut c = Client::connect(srv.addr);
        c.expect(b"set a 5 0 3\r\nabc\r\n", b"STORED\r\n");
        c.expect(b"get a\r\n", b"VALUE a 5 3\r\nabc\r\nEND\r\n");
        c.expect(b"get missing\r\n", b"END\r\n");
        c.expect(b"add a 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
        c.expect(b"replace nope 0 0 1\r\nx\r\n", b"NOT_STORED\r\n");
        c.expect(b"append a 0 0 2\r\nde\r\n", b"STORED\r\n");
        c.expect(b"prepend a 0 0 2\r\nzz\r\n", b"STORED\r\n");
        c.expect(b"get a\r\n", b"VALUE a 5 7\r\nzzabcde\r\nEND\r\n");
        c.send(b"gets a\r\n");
        let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
        let cas: u64 = r
            .lines()
            .next()
            .unwrap()
            .split(' ')
            .nth(4)
            .unwrap()
            .parse()
            .unwrap();
        c.expect(
            format!("cas a 0 0 1 {}\r\nq\r\n", cas + 1000).as_bytes(),
            b"EXISTS\r\n",
        );
        c.expect(
            format!("cas a 0 0 1 {cas}\r\nq\r\n").as_bytes(),
            b"STORED\r\n",
        );
        c.expect(b"cas gone 0 0 1 1\r\nq\r\n", b"NOT_FOUND\r\n");
        c.expect(b"set n 0 0 2\r\n10\r\n", b"STORED\r\n");
        c.expect(b"incr n 5\r\n", b"15\r\n");
        c.expect(b"decr n 100\r\n", b"0\r\n");
        c.expect(
            b"incr a 1\r\n",
            b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        );
        c.expect(b"incr nope 1\r\n", b"NOT_FOUND\r\n");
        c.expect(b"touch n 100\r\n", b"TOUCHED\r\n");
        c.expect(b"touch nope 100\r\n", b"NOT_FOUND\r\n");
        // decr kept the value's length, space-padded, as memcached does.
        c.expect(b"gat 100 n\r\n", b"VALUE n 0 2\r\n0 \r\nEND\r\n");
        c.expect(b"delete n\r\n", b"DELETED\r\n");
        c.expect(b"delete n\r\n", b"NOT_FOUND\r\n");
        c.expect(b"set e 0 -1 1\r\nx\r\n", b"STORED\r\n");
        c.expect(b"get e\r\n", b"END\r\n");
        c.expect(b"verbosity 1\r\n", b"OK\r\n");
        c.expect(b"bogus\r\n", b"ERROR\r\n");
        c.expect(
            b"set k 0 0 x\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
        );
        c.send(b"version\r\n");
        assert!(c.read_until(b"\r\n").starts_with(b"VERSION 1.6"));
        // noreply: nothing comes back, and the next reply is the next command's.
        c.expect(
            b"set q 0 0 1 noreply\r\nz\r\nincr q 1 noreply\r\ndelete zz noreply\r\nget q\r\n",
            b"VALUE q 0 1\r\nz\r\nEND\r\n",
        );
        c.expect(b"flush_all\r\n", b"OK\r\n");
        c.expect(b"get a q\r\n", b"END\r\n");
        c.send(b"quit\r\n");
        assert!(c.closed_by_server());
        srv.stop();
    });
}

#[test]
fn too_large_value_is_refused_and_stream_stays_in_sync() {
    each_arch(|arch| {
        let srv = start(arch, 2);
        let mut c = Client::connect(srv.addr);
        // memcached counts the whole item: a value of exactly 1 MiB is too large.
        let big = vec![b'x'; 1 << 20];
        let mut req = format!("set big 0 0 {}\r\n", big.len()).into_bytes();
        req.extend_from_slice(&big);
        req.extend_from_slice(b"\r\nget big\r\n");
        c.expect(&req, b"SERVER_ERROR object too large for cache\r\nEND\r\n");
        // The largest value for the 3-byte key "max" with flags 0: 1 MiB - 62 bytes.
        let len = (1 << 20) - skq_kv::protocol::item_size(3, 0, 0);
        let max = vec![b'y'; len];
        let mut req = format!("set max 0 0 {len}\r\n").into_bytes();
        req.extend_from_slice(&max);
        req.extend_from_slice(b"\r\n");
        c.expect(&req, b"STORED\r\n");
        c.send(b"get max\r\n");
        assert_eq!(
            c.read_until(b"END\r\n").len(),
            format!("VALUE max 0 {len}\r\n").len() + len + 2 + 5
        );
        // One byte more is refused, and (as in memcached) the refused set unlinks the item.
        let mut req = format!("set max 0 0 {}\r\n", len + 1).into_bytes();
        req.extend_from_slice(&max);
        req.extend_from_slice(b"z\r\nget max\r\n");
        c.expect(&req, b"SERVER_ERROR object too large for cache\r\nEND\r\n");
        assert_eq!(c.stat("store_too_large"), 2, "{arch:?}");
        srv.stop();
    });
}

/// Pipelined multi-key gets across owners come back in request order.
#[test]
fn multiget_order_and_pipelining() {
    each_arch(|arch| {
        let srv = start(arch, 4);
        let mut c = Client::connect(srv.addr);
        let mut req = Vec::new();
        let mut want = Vec::new();
        for i in 0..200 {
            req.extend_from_slice(
                format!("set key{i} {i} 0 {}\r\nval{i}\r\n", format!("val{i}").len()).as_bytes(),
            );
            want.extend_from_slice(b"STORED\r\n");
        }
        c.expect(&req, &want);
        let keys: Vec<String> = (0..200).rev().map(|i| format!("key{i}")).collect();
        let mut line = format!(
            "get {} nothere {}\r\n",
            keys[..100].join(" "),
            keys[100..].join(" ")
        );
        line.push_str("get key7\r\n");
        let mut want = Vec::new();
        for (j, i) in (0..200).rev().enumerate() {
            let _ = j;
            want.extend_from_slice(
                format!("VALUE key{i} {i} {}\r\nval{i}\r\n", format!("val{i}").len()).as_bytes(),
            );
        }
        want.extend_from_slice(b"END\r\nVALUE key7 7 4\r\nval7\r\nEND\r\n");
        c.expect(line.as_bytes(), &want);
        srv.stop();
    });
}

#[test]
fn bad_input_closes_only_that_connection() {
    each_arch(|arch| {
        let srv = start(arch, 2);
        let mut good = Client::connect(srv.addr);
        good.expect(b"set g 0 0 1\r\n1\r\n", b"STORED\r\n");
        let cases: Vec<(Vec<u8>, &[u8])> = vec![
            (vec![b'a'; 20_000], b"CLIENT_ERROR line too long\r\n"),
            (
                vec![0x80, 0x01, 0x00, 0x03, 0x00, 0x00],
                b"CLIENT_ERROR binary data in command line\r\n",
            ),
            (
                b"get \x00\xff\xfe\r\n".to_vec(),
                b"CLIENT_ERROR binary data in command line\r\n",
            ),
            // memcached's t/malicious-commands.t: an HTTP request is hung up on, silently.
            (b"GET / HTTP/1.0\r\n".to_vec(), b""),
            (b"DELETE HTTP/1.1\r\n".to_vec(), b""),
        ];
        for (input, msg) in &cases {
            let mut bad = Client::connect(srv.addr);
            bad.send(input);
            assert_eq!(bad.read_exact(msg.len()), *msg);
            assert!(bad.closed_by_server(), "connection closed after {msg:?}");
            good.expect(b"get g\r\n", b"VALUE g 0 1\r\n1\r\nEND\r\n");
        }
        assert_eq!(good.stat("skq_protocol_closes"), cases.len() as u64);
        srv.stop();
    });
}

/// memcached 1.6.18 answers a badly terminated data block with `CLIENT_ERROR bad data
/// chunk`, reads the announced length plus two bytes, parses on from there and keeps the
/// connection; the old item stays. Replies here are memcached's, byte for byte.
#[test]
fn bad_data_chunk_keeps_the_connection() {
    each_arch(|arch| {
        let srv = start(arch, 2);
        let mut c = Client::connect(srv.addr);
        c.expect(b"set x 0 0 2\r\nab\r\n", b"STORED\r\n");
        c.expect(
            b"set x 0 0 2\r\ncdX\r\nget x\r\n",
            b"CLIENT_ERROR bad data chunk\r\nERROR\r\nVALUE x 0 2\r\nab\r\nEND\r\n",
        );
        c.expect(
            b"set y 0 0 2\r\nabXYget y\r\n",
            b"CLIENT_ERROR bad data chunk\r\nEND\r\n",
        );
        c.expect(
            b"append x 0 0 1\r\nxyz\r\nget x\r\n",
            b"CLIENT_ERROR bad data chunk\r\nERROR\r\nVALUE x 0 2\r\nab\r\nEND\r\n",
        );
        c.expect(
            b"set x 0 0 2 noreply\r\nabc\r\nget x\r\n",
            b"ERROR\r\nVALUE x 0 2\r\nab\r\nEND\r\n",
        );
        c.expect(
            b"ms x 2 q\r\nabc\r\nmn\r\n",
            b"CLIENT_ERROR bad data chunk\r\nERROR\r\nMN\r\n",
        );
        // The block may arrive in pieces; the check waits for all of it.
        c.send(b"set z 0 0 3\r\nab");
        c.expect(b"cd\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n");
        assert_eq!(c.stat("skq_protocol_closes"), 0);
        srv.stop();
    });
}

/// From memcached's t/cas.t and t/flush-all.t: two keys never share a CAS unique (on
/// thread-per-core they live in different partitions), and `flush_all <time>` past 30 days
/// is a unix time, not a delay (replies checked against memcached 1.6.18).
#[test]
fn cas_uniques_differ_and_flush_all_takes_a_unix_time() {
    each_arch(|arch| {
        let srv = start(arch, 4);
        let mut c = Client::connect(srv.addr);
        let keys: Vec<String> = (0..16).map(|i| format!("key{i}")).collect();
        for k in &keys {
            c.expect(format!("set {k} 0 0 1\r\nv\r\n").as_bytes(), b"STORED\r\n");
        }
        c.send(format!("gets {}\r\n", keys.join(" ")).as_bytes());
        let reply = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
        let uniques: std::collections::HashSet<&str> = reply
            .lines()
            .filter(|l| l.starts_with("VALUE"))
            .map(|l| l.split(' ').nth(4).expect("gets shows the CAS"))
            .collect();
        assert_eq!(uniques.len(), keys.len(), "one unique per key: {reply}");
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        c.expect(
            format!("flush_all {}\r\n", unix + 3600).as_bytes(),
            b"OK\r\n",
        );
        c.expect(b"get key0\r\n", b"VALUE key0 0 1\r\nv\r\nEND\r\n");
        // Before the server started (2001-09-09): memcached flushes nothing.
        c.expect(b"flush_all 1000000000\r\n", b"OK\r\n");
        c.expect(b"get key0\r\n", b"VALUE key0 0 1\r\nv\r\nEND\r\n");
        // A negative delay flushes at once.
        c.expect(b"flush_all -1\r\n", b"OK\r\n");
        for k in &keys {
            c.expect(format!("get {k}\r\n").as_bytes(), b"END\r\n");
        }
        srv.stop();
    });
}

/// memcached answers `stats cachedump <class> <n>` and `stats detail dump` with a list
/// ending in `END` (empty here: no slab classes, no per-prefix detail), so clients reading
/// to `END` do not hang; an unknown group is `ERROR`, as in memcached.
#[test]
fn multi_word_stats_groups_answer() {
    each_arch(|arch| {
        let srv = start(arch, 2);
        let mut c = Client::connect(srv.addr);
        c.expect(b"stats cachedump 1 100\r\n", b"END\r\n");
        c.expect(b"stats detail dump\r\n", b"END\r\n");
        c.expect(b"stats foo bar\r\n", b"ERROR\r\n");
        c.expect(b"version\r\n", b"VERSION ");
        srv.stop();
    });
}

/// `ma` (meta arithmetic), replies checked against memcached 1.6.18 for the same session
/// (the sequence of memcached's t/metaget.t "marithmetic tests").
#[test]
fn meta_arithmetic_matches_memcached() {
    each_arch(|arch| {
        let srv = start(arch, 2);
        let mut c = Client::connect(srv.addr);
        c.expect(b"ma mo\r\nma mo D1\r\n", b"NF\r\nNF\r\n");
        c.expect(b"set mo 0 0 1\r\n1\r\nma mo\r\n", b"STORED\r\nHD\r\n");
        c.expect(
            b"set mo 0 0 1\r\nq\r\nma mo\r\n",
            b"STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
        );
        c.expect(b"ma mi N0 J13 v t\r\n", b"VA 2 t-1\r\n13\r\n");
        c.expect(b"ma mi N0 J13 v t\r\n", b"VA 2 t-1\r\n14\r\n");
        c.expect(b"ma mi v D30 Oab k\r\n", b"VA 2 Oab kmi\r\n44\r\n");
        c.expect(b"ma mi v MD D22\r\n", b"VA 2\r\n22\r\n");
        c.expect(b"ma mi v M- D9000\r\n", b"VA 1\r\n0\r\n");
        c.expect(b"ma mi q D1\r\nmn\r\n", b"MN\r\n");
        c.expect(b"ma mi q N0 C1 v\r\n", b"EX\r\n");
        c.expect(
            b"ma mi MX\r\n",
            b"CLIENT_ERROR invalid mode for ma M token\r\n",
        );
        // q hides a successful increment, not a creation.
        c.expect(b"ma mi N0 J1 q\r\nma mz N0 J7 q\r\n", b"HD\r\n");
        c.expect(b"ma mi v T0 t\r\n", b"VA 1 t-1\r\n3\r\n");
        c.expect(b"ma mn q\r\nmn\r\n", b"NF\r\nMN\r\n");
        c.expect(
            b"ma mi Dx\r\n",
            b"CLIENT_ERROR invalid or duplicate flag\r\n",
        );
        // A created item carries the N exptime; the CAS shown is the item's.
        c.expect(b"ma mt N90 J5 t\r\n", b"HD t90\r\n");
        c.send(b"ma mt c\r\n");
        let got = String::from_utf8(c.read_until(b"\r\n")).unwrap();
        c.send(b"mg mt c\r\n");
        let again = String::from_utf8(c.read_until(b"\r\n")).unwrap();
        assert_eq!(got, again, "ma's c is the item's CAS");
        c.expect(
            b"get mt mz\r\n",
            b"VALUE mt 0 1\r\n6\r\nVALUE mz 0 1\r\n7\r\nEND\r\n",
        );
        srv.stop();
    });
}

#[test]
fn max_conns_rejects_with_memcached_message() {
    each_arch(|arch| {
        let mut cfg = common::config(arch, 2);
        cfg.max_conns = 2;
        let srv = skq_kv::server::start(cfg).unwrap();
        let mut a = Client::connect(srv.addr);
        let mut b = Client::connect(srv.addr);
        a.expect(b"version\r\n", b"VERSION ");
        a.read_until(b"\r\n");
        b.expect(b"version\r\n", b"VERSION ");
        b.read_until(b"\r\n");
        let mut c = Client::connect(srv.addr);
        assert_eq!(
            c.read_until(b"\r\n"),
            b"ERROR Too many open connections\r\n"
        );
        assert!(c.closed_by_server());
        assert_eq!(a.stat("rejected_connections"), 1);
        drop(b);
        // The slot frees once the server notices the close.
        let mut tries = 0;
        loop {
            let mut d = Client::connect(srv.addr);
            d.send(b"version\r\n");
            let r = d.read_until(b"\r\n");
            if r.starts_with(b"VERSION") {
                break;
            }
            tries += 1;
            assert!(tries < 200, "slot never freed");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        srv.stop();
    });
}

#[test]
fn stats_counters() {
    each_arch(|arch| {
        let srv = start(arch, 2);
        let mut c = Client::connect(srv.addr);
        c.expect(
            b"set a 0 0 1\r\n1\r\nget a\r\nget b\r\n",
            b"STORED\r\nVALUE a 0 1\r\n1\r\nEND\r\nEND\r\n",
        );
        let stats = c.stats();
        let get = |n: &str| {
            stats
                .iter()
                .find(|(k, _)| k == n)
                .unwrap_or_else(|| panic!("stat {n} missing"))
                .1
                .clone()
        };
        for name in [
            "pid",
            "uptime",
            "time",
            "version",
            "curr_connections",
            "total_connections",
            "threads",
            "limit_maxbytes",
        ] {
            get(name);
        }
        assert_eq!(get("cmd_get"), "2");
        assert_eq!(get("cmd_set"), "1");
        assert_eq!(get("get_hits"), "1");
        assert_eq!(get("get_misses"), "1");
        assert_eq!(get("curr_items"), "1");
        assert_eq!(get("total_items"), "1");
        assert_eq!(get("threads"), "2");
        assert_eq!(get("limit_maxbytes"), (64u64 << 20).to_string());
        // Said in full when it fails: it once read 0 in CI (not reproduced in 370 runs),
        // and which architecture and the other connection counters tell where to look.
        assert_eq!(
            get("curr_connections"),
            "1",
            "{}: total_connections {}, rejected_connections {}",
            arch.name(),
            get("total_connections"),
            get("rejected_connections"),
        );
        assert_eq!(get("skq_arch"), arch.name());
        let overhead: f64 = get("skq_overhead_per_item").parse().unwrap();
        assert!(overhead > 21.0, "at least the record header");
        srv.stop();
    });
}

/// Eviction keeps the server serving and item memory under -m.
#[test]
fn memory_limit_holds_under_overwrite_load() {
    each_arch(|arch| {
        let mut cfg = common::config(arch, 2);
        cfg.limit_bytes = 8 << 20;
        let srv = skq_kv::server::start(cfg).unwrap();
        let mut c = Client::connect(srv.addr);
        let value = vec![b'v'; 4000];
        for batch in 0..10 {
            let mut req = Vec::new();
            let mut want = Vec::new();
            for i in 0..500 {
                req.extend_from_slice(
                    format!("set k{batch}_{i} 0 0 {}\r\n", value.len()).as_bytes(),
                );
                req.extend_from_slice(&value);
                req.extend_from_slice(b"\r\n");
                want.extend_from_slice(b"STORED\r\n");
            }
            c.expect(&req, &want);
        }
        let bytes = c.stat("bytes");
        let alloc = c.stat("skq_segment_bytes_allocated");
        assert!(alloc <= 8 << 20, "segments {alloc} within -m");
        assert!(bytes <= alloc);
        assert!(c.stat("evictions") > 0);
        c.expect(
            b"set last 0 0 1\r\nz\r\nget last\r\n",
            b"STORED\r\nVALUE last 0 1\r\nz\r\nEND\r\n",
        );
        srv.stop();
    });
}

/// Every scheduling mode of the shared architecture serves the protocol, including
/// pipelined multi-key gets from several concurrent clients.
#[test]
fn every_shared_mode_serves() {
    let modes = [
        "vanilla",
        "shared",
        "queue",
        "cpu",
        "best2",
        "hybrid",
        "best2+steal",
        "hybrid-steal",
        "epoll",
        "epoll-1to1",
        "epoll-shared",
        "tokio",
    ];
    for mode in modes {
        let mut cfg = common::config(Arch::Shared, 3);
        cfg.mode = KvMode::Shared(mode.parse().unwrap());
        let srv = skq_kv::server::start(cfg).unwrap_or_else(|e| panic!("--mode {mode}: {e}"));
        std::thread::scope(|s| {
            for t in 0..4 {
                let addr = srv.addr;
                s.spawn(move || {
                    let mut c = Client::connect(addr);
                    let mut req = Vec::new();
                    let mut want = Vec::new();
                    for i in 0..50 {
                        req.extend_from_slice(
                            format!("set {mode}{t}_{i} 0 0 1\r\n{}\r\n", i % 10).as_bytes(),
                        );
                        want.extend_from_slice(b"STORED\r\n");
                    }
                    let keys: Vec<String> = (0..50).map(|i| format!("{mode}{t}_{i}")).collect();
                    req.extend_from_slice(format!("get {}\r\n", keys.join(" ")).as_bytes());
                    for (i, k) in keys.iter().enumerate() {
                        want.extend_from_slice(
                            format!("VALUE {k} 0 1\r\n{}\r\n", i % 10).as_bytes(),
                        );
                    }
                    want.extend_from_slice(b"END\r\n");
                    c.expect(&req, &want);
                });
            }
        });
        let mut c = Client::connect(srv.addr);
        assert_eq!(c.stat("curr_items"), 200, "--mode {mode}");
        // `stats` names the mode in its one spelling (`epoll` reads as epoll-shared).
        let shown = KvMode::Shared(mode.parse().unwrap()).to_string();
        assert!(
            c.stats()
                .iter()
                .any(|(k, v)| k == "skq_mode" && *v == shown),
            "--mode {mode}: skq_mode {shown}"
        );
        srv.stop();
    }
}
