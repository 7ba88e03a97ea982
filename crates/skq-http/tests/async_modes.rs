//! `--mode async-MODE` and `async-tokio`: the static-file protocol served
//! by async code (skq-net's async drivers, `skq_net::async_driver`) on
//! skq-async and on tokio.
//! Small and large files byte-exact (the large one is a file region, read
//! in bounded pieces on this path), keep-alive, 404, and a malformed
//! request closing only its own connection.

mod common;

use common::{Client, Root};
use rand::{RngCore, SeedableRng};

const MODES: [&str; 2] = ["async-hybrid", "async-tokio"];

/// 2 MiB of seeded random bytes.
fn random_file(seed: u64) -> Vec<u8> {
    let mut data = vec![0u8; 2 << 20];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut data);
    data
}

#[test]
fn files_are_served_byte_exact_with_keep_alive() {
    let root = Root::new("async-files");
    let data = random_file(23);
    root.write("rand.bin", &data);
    for mode in MODES {
        let (h, proto) = common::start(&root.www, mode);
        let mut c = Client::connect(h.local_addr());
        // Two requests on one connection: a small file, then the large one.
        let r = c.get("/index.html");
        assert_eq!((r.code, r.body), (200, common::page()), "{mode}");
        let r = c.get("/rand.bin");
        assert_eq!(r.code, 200, "{mode}");
        assert_eq!(r.header("Content-Length"), Some("2097152"), "{mode}");
        assert!(r.body == data, "{mode}: large body differs");
        // Still alive after the file region: 404, then a pipelined pair.
        let r = c.get("/missing.html");
        assert_eq!(r.code, 404, "{mode}");
        assert_eq!(r.body, b"404 Not Found\n", "{mode}");
        c.send(b"GET /a.css HTTP/1.1\r\nHost: t\r\n\r\nGET /rand.bin HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.reply(false).body, b"body { color: #123; }\n", "{mode}");
        assert!(
            c.reply(false).body == data,
            "{mode}: pipelined body differs"
        );
        // `Connection: close` is answered, then the connection ends.
        c.send(b"GET /a.css HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        let r = c.reply(false);
        assert_eq!(
            (r.code, r.header("Connection")),
            (200, Some("close")),
            "{mode}"
        );
        assert!(c.closed(), "{mode}: open after Connection: close");
        let stats = h.shutdown();
        assert_eq!(stats.driver, "async", "{mode}");
        assert_eq!(stats.mode, mode);
        assert_eq!(stats.requests, 6, "{mode}");
        assert_eq!(proto.access_log().len(), 6, "{mode}");
    }
}

#[test]
fn a_malformed_request_closes_only_its_connection() {
    let root = Root::new("async-malformed");
    for mode in MODES {
        let (h, _proto) = common::start(&root.www, mode);
        let addr = h.local_addr();
        let mut good = Client::connect(addr);
        assert_eq!(good.get("/a.css").code, 200, "{mode}");
        let mut bad = Client::connect(addr);
        bad.send(b"GET / HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n");
        let r = bad.reply(false);
        assert_eq!(
            (r.code, r.header("Connection")),
            (400, Some("close")),
            "{mode}"
        );
        assert!(bad.closed(), "{mode}: the malformed connection stays open");
        // The other client is still served, on its same connection.
        let r = good.get("/index.html");
        assert_eq!((r.code, r.body), (200, common::page()), "{mode}");
        let mut fresh = Client::connect(addr);
        assert_eq!(fresh.get("/sub/").code, 200, "{mode}");
        drop((good, fresh));
        let stats = h.shutdown();
        assert_eq!(stats.accepted, 3, "{mode}");
        assert_eq!(stats.protocol_errors, 1, "{mode}");
    }
}

#[test]
fn priority_rules_are_refused_on_an_async_mode() {
    let root = Root::new("async-cli");
    let mut cfg = skq_http::HttpConfig::new(&root.www, "async-tokio".parse().unwrap(), 2);
    cfg.priority = vec!["high:path=/api/".into()];
    let Err(e) = skq_http::start(&cfg, skq_http::AccessLog::Off) else {
        panic!("--priority accepted on async-tokio");
    };
    assert!(e.to_string().contains("--priority"), "{e}");
}
