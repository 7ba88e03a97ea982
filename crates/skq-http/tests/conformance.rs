//! HTTP/1.1 conformance over loopback: every feature and error the server
//! promises, on every driver (skq policies, epoll-1to1, epoll-shared, tokio).

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{page, start, Client, Root, MODES};

#[test]
fn get_and_head_carry_length_date_type_and_validators_on_every_mode() {
    let root = Root::new("get");
    for mode in MODES {
        let (server, _) = start(&root.www, mode);
        let mut c = Client::connect(server.local_addr());
        let r = c.get("/");
        assert_eq!(r.code, 200, "{mode}");
        assert_eq!(r.body, page(), "{mode}");
        assert_eq!(r.header("Content-Length"), Some(&*page().len().to_string()));
        assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
        assert!(skq_http::date::parse(r.header("Date").unwrap().as_bytes()).is_some());
        assert!(skq_http::date::parse(r.header("Last-Modified").unwrap().as_bytes()).is_some());
        assert!(r.header("ETag").unwrap().starts_with('"'));
        let css = c.get("/a.css");
        assert_eq!(css.header("Content-Type"), Some("text/css; charset=utf-8"));
        c.send(b"HEAD /index.html HTTP/1.1\r\nHost: t\r\n\r\n");
        let h = c.reply(true);
        assert_eq!(h.code, 200);
        assert_eq!(h.header("Content-Length"), r.header("Content-Length"));
        assert_eq!(h.header("ETag"), r.header("ETag"));
        // The connection is still usable: nothing followed the HEAD head.
        assert_eq!(c.get("/sub/").body, b"<p>sub</p>\n");
        let stats = server.shutdown();
        assert_eq!(stats.requests, 4, "{mode}");
    }
}

#[test]
fn pipelined_requests_are_answered_in_order_on_every_mode() {
    let root = Root::new("pipe");
    for i in 0..20 {
        root.write(&format!("f{i}.txt"), format!("file {i}\n").as_bytes());
    }
    for mode in MODES {
        let (server, _) = start(&root.www, mode);
        let mut c = Client::connect(server.local_addr());
        let mut batch = Vec::new();
        for i in 0..20 {
            batch
                .extend_from_slice(format!("GET /f{i}.txt HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
            if i == 10 {
                batch.extend_from_slice(b"HEAD /f3.txt HTTP/1.1\r\nHost: t\r\n\r\n");
                batch.extend_from_slice(b"GET /missing HTTP/1.1\r\nHost: t\r\n\r\n");
            }
        }
        c.send(&batch);
        for i in 0..20 {
            let r = c.reply(false);
            assert_eq!(r.code, 200);
            assert_eq!(r.body, format!("file {i}\n").as_bytes(), "{mode}");
            if i == 10 {
                let h = c.reply(true);
                assert_eq!((h.code, h.header("Content-Length")), (200, Some("7")));
                assert_eq!(c.reply(false).code, 404);
            }
        }
        server.shutdown();
    }
}

#[test]
fn a_request_split_at_every_byte_is_served_the_same() {
    let root = Root::new("split");
    let (server, _) = start(&root.www, "hybrid");
    let req: &[u8] = b"GET /a.css HTTP/1.1\r\nHost: t\r\nX-Pad: 1234567890\r\n\r\n";
    let mut c = Client::connect(server.local_addr());
    let whole = c.get("/a.css");
    for cut in 1..req.len() {
        c.send(&req[..cut]);
        std::thread::sleep(Duration::from_millis(2));
        c.send(&req[cut..]);
        let r = c.reply(false);
        assert_eq!((r.code, &r.body), (200, &whole.body), "cut at {cut}");
    }
    // One byte per write, all the way through.
    for &b in req {
        c.send(&[b]);
    }
    assert_eq!(c.reply(false).body, whole.body);
    server.shutdown();
}

#[test]
fn conditional_requests_answer_304() {
    let root = Root::new("cond");
    let (server, _) = start(&root.www, "hybrid");
    let mut c = Client::connect(server.local_addr());
    let r = c.get("/index.html");
    let etag = r.header("ETag").unwrap().to_string();
    let lm = r.header("Last-Modified").unwrap().to_string();
    let ask = |c: &mut Client, field: &str| {
        c.send(format!("GET /index.html HTTP/1.1\r\nHost: t\r\n{field}\r\n\r\n").as_bytes());
        c.reply(false)
    };
    let nm = ask(&mut c, &format!("If-None-Match: {etag}"));
    assert_eq!(nm.code, 304);
    assert!(nm.body.is_empty());
    assert_eq!(nm.header("ETag"), Some(&*etag));
    assert_eq!(
        ask(&mut c, &format!("If-None-Match: \"x\", W/{etag}")).code,
        304
    );
    assert_eq!(ask(&mut c, "If-None-Match: *").code, 304);
    assert_eq!(ask(&mut c, "If-None-Match: \"other\"").code, 200);
    assert_eq!(ask(&mut c, &format!("If-Modified-Since: {lm}")).code, 304);
    assert_eq!(
        ask(&mut c, "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT").code,
        200
    );
    assert_eq!(ask(&mut c, "If-Modified-Since: yesterday").code, 200);
    // If-None-Match decides when both are present.
    assert_eq!(
        ask(
            &mut c,
            &format!("If-None-Match: \"other\"\r\nIf-Modified-Since: {lm}")
        )
        .code,
        200
    );
    server.shutdown();
}

#[test]
fn connection_close_and_http_1_0_keep_alive_rules() {
    let root = Root::new("close");
    let (server, _) = start(&root.www, "hybrid");
    let addr = server.local_addr();
    let mut c = Client::connect(addr);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let r = c.reply(false);
    assert_eq!((r.code, r.header("Connection")), (200, Some("close")));
    assert!(c.closed());
    let mut c = Client::connect(addr);
    c.send(b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!(c.reply(false).header("Connection"), Some("close"));
    assert!(c.closed());
    let mut c = Client::connect(addr);
    c.send(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(c.reply(false).header("Connection"), None);
    assert_eq!(c.get("/a.css").code, 200);
    // Requests pipelined behind a `Connection: close` are not served.
    let mut c = Client::connect(addr);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /a.css HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.reply(false).code, 200);
    assert!(c.closed());
    server.shutdown();
}

/// Sends `req` on a fresh connection and returns the reply and whether the
/// server then closed.
fn one(addr: std::net::SocketAddr, req: &[u8]) -> (u16, bool, Option<String>) {
    let mut c = Client::connect(addr);
    c.send(req);
    let r = c.reply(false);
    let conn = r.header("Connection").map(str::to_string);
    (r.code, c.closed(), conn)
}

#[test]
fn errors_close_only_their_own_connection_on_every_mode() {
    let root = Root::new("errors");
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(5000));
    let big_head = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "b".repeat(9000)
    );
    // Host plus 100 more: one past the 100 fields served (as nginx does).
    let many: String = (0..100).map(|i| format!("X-{i}: v\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n");
    let closing: Vec<(&[u8], u16)> = vec![
        (b"BLAH\x01 / HTTP/1.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400), // no Host
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            400,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 1000000\r\n\r\n",
            413,
        ),
        (long_uri.as_bytes(), 414),
        (big_head.as_bytes(), 431),
        (many.as_bytes(), 431),
        (b"GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505),
        (
            b"GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
        (b"GET /../secret.txt HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    ];
    for mode in MODES {
        let (server, _) = start(&root.www, mode);
        let addr = server.local_addr();
        // A bystander connection opened before the errors keeps working.
        let mut bystander = Client::connect(addr);
        assert_eq!(bystander.get("/a.css").code, 200);
        for (req, code) in &closing {
            let (got, closed, conn) = one(addr, req);
            assert_eq!(
                got,
                *code,
                "{mode}: {:?}",
                String::from_utf8_lossy(&req[..req.len().min(60)])
            );
            assert!(closed, "{mode}: {code} closes");
            assert_eq!(conn.as_deref(), Some("close"));
            assert_eq!(bystander.get("/a.css").code, 200, "{mode}");
        }
        // Errors with sound framing keep the connection open.
        let mut c = Client::connect(addr);
        c.send(b"POST /index.html HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd");
        let r = c.reply(false);
        assert_eq!((r.code, r.header("Allow")), (405, Some("GET, HEAD")));
        assert_eq!(c.get("/nope.html").code, 404);
        assert_eq!(c.get("/a.css").code, 200);
        let stats = server.shutdown();
        assert_eq!(stats.protocol_errors, closing.len() as u64, "{mode}");
    }
}

#[test]
fn traversal_is_refused_in_every_spelling_and_through_symlinks() {
    let root = Root::new("traverse");
    let (server, proto) = start(&root.www, "hybrid");
    let addr = server.local_addr();
    for path in [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/%2E%2E%2Fsecret.txt",
        "/sub/..%2f..%2fsecret.txt",
        "/.%2e/secret.txt",
        "/sub/../../secret.txt",
        "http://x/../secret.txt",
    ] {
        let mut c = Client::connect(addr);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        let r = c.reply(false);
        assert_eq!(r.code, 400, "{path}");
        assert!(!String::from_utf8_lossy(&r.body).contains("TOP-SECRET"));
    }
    // Dot-dot below the root is normalised, as nginx does.
    let mut c = Client::connect(addr);
    for path in [
        "/sub/../a.css",
        "/sub/%2e%2e/a.css",
        "/x/y/../../sub/./../a.css",
    ] {
        let r = c.get(path);
        assert_eq!(
            (r.code, &r.body[..]),
            (200, &b"body { color: #123; }\n"[..]),
            "{path}"
        );
    }
    let out = c.get("/out");
    assert_eq!(out.code, 403);
    assert!(!String::from_utf8_lossy(&out.body).contains("TOP-SECRET"));
    assert_eq!(c.get("/inner.html").body, page());
    // A directory without its slash is redirected; with it, its index is served.
    let r = c.get("/sub");
    assert_eq!((r.code, r.header("Location")), (301, Some("/sub/")));
    assert_eq!(c.get("/sub/").body, b"<p>sub</p>\n");
    assert_eq!(c.get("/sub/index.html/x").code, 404);
    let log = proto.access_log();
    assert!(log.contains(&"GET /out 403".to_string()), "{log:?}");
    server.shutdown();
}

#[test]
fn up_to_100_header_fields_are_served_and_http09_gets_the_bare_body() {
    let root = Root::new("nginx-like");
    for mode in ["hybrid", "epoll-1to1", "epoll-shared", "tokio"] {
        let (server, _) = start(&root.www, mode);
        let addr = server.local_addr();
        let mut c = Client::connect(addr);
        let many: String = (0..99).map(|i| format!("X-{i}: v\r\n")).collect();
        c.send(format!("GET /a.css HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes());
        let r = c.reply(false);
        assert_eq!(r.code, 200, "{mode}: 100 fields");
        // HTTP/0.9: no status line, no fields, the body, then close.
        for (req, want) in [
            (&b"GET /a.css\r\n"[..], &b"body { color: #123; }\n"[..]),
            (b"GET /index.html\n", &page()[..]),
            (b"GET /nope\r\n", b"404 Not Found\n"),
        ] {
            let mut c = Client::connect(addr);
            c.send(req);
            let mut got = Vec::new();
            c.r.read_to_end(&mut got).unwrap();
            assert_eq!(got, want, "{mode}: {:?}", String::from_utf8_lossy(req));
        }
        // A large file over HTTP/0.9 is streamed whole.
        let mut c = Client::connect(addr);
        c.send(b"GET /big.bin\r\n");
        let mut got = Vec::new();
        c.r.read_to_end(&mut got).unwrap();
        assert!(
            got.len() == 8 << 20 && got.iter().all(|&b| b == 7),
            "{mode}"
        );
        let stats = server.shutdown();
        assert_eq!(stats.protocol_errors, 0, "{mode}");
    }
}

#[test]
fn a_client_that_vanishes_mid_response_costs_only_its_connection() {
    let root = Root::new("vanish");
    for mode in ["hybrid", "epoll-1to1", "epoll-shared", "tokio"] {
        let (server, _) = start(&root.www, mode);
        let addr = server.local_addr();
        for _ in 0..3 {
            let mut c = Client::connect(addr);
            c.send(b"GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
            let mut first = [0u8; 4096];
            c.r.read_exact(&mut first).unwrap();
            assert!(first.starts_with(b"HTTP/1.1 200 OK"));
            drop(c);
        }
        let mut other = Client::connect(addr);
        assert_eq!(other.get("/a.css").code, 200, "{mode}");
        // The vanished connections end as aborted (the server sees the
        // reset when it next writes); wait for that, without a time assertion.
        let deadline = Instant::now() + Duration::from_secs(30);
        while server.stats().aborted < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let stats = server.shutdown();
        assert_eq!(stats.aborted, 3, "{mode}");
    }
}

#[test]
fn io_variance_misses_keep_replies_correct_and_are_counted() {
    use skq_http::iovar::{IoVariance, Latency};
    let root = Root::new("iovar");
    for io in [
        IoVariance::Fadvise { miss: 1.0 },
        IoVariance::Emulate {
            miss: 1.0,
            mean_us: 200.0,
            latency: Latency::Exponential,
        },
    ] {
        for mode in ["hybrid", "epoll-1to1"] {
            let mut cfg = skq_http::HttpConfig::new(&root.www, mode.parse().unwrap(), 2);
            cfg.io = io;
            let (server, proto) = skq_http::start(&cfg, Default::default()).unwrap();
            assert_eq!(server.stats().service, format!("spin {}", io.label()));
            let mut c = Client::connect(server.local_addr());
            let mut batch = Vec::new();
            for _ in 0..5 {
                batch.extend_from_slice(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
            }
            // HEAD and 304 read no file, so they draw no miss.
            batch.extend_from_slice(b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n");
            c.send(&batch);
            for _ in 0..5 {
                assert_eq!(c.reply(false).body, page(), "{mode} {io}");
            }
            assert_eq!(c.reply(true).code, 200);
            drop(c);
            let deadline = Instant::now() + Duration::from_secs(30);
            while server.stats().closed < 1 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            server.shutdown();
            let (misses, waited_ns) = proto.emulated_misses();
            assert_eq!(misses, 5, "{mode} {io}");
            assert_eq!(waited_ns > 0, io.is_emulated(), "{mode} {io}");
        }
    }
}

/// `--priority` rules reach the scheduler: connections whose requests a
/// `path=` rule classifies high are served from the high-priority queues
/// (without the rules, nothing is), batch-header requests with diffusion on
/// are all answered in order, and rules on a baseline driver are refused.
#[test]
fn priority_rules_give_connections_their_class_in_the_scheduler() {
    use skq_http::{AccessLog, HttpConfig};
    let root = Root::new("prio");
    root.write("api/v1.json", b"{}");
    let high_served = |rules: &[&str]| {
        let mut cfg = HttpConfig::new(&root.www, skq_net::Mode::default(), 2);
        cfg.priority = rules.iter().map(|r| r.to_string()).collect();
        cfg.spec.sched.batch_workers = vec![1];
        let (server, _) = skq_http::start(&cfg, AccessLog::Off).unwrap();
        let mut clients: Vec<Client> = (0..4)
            .map(|_| Client::connect(server.local_addr()))
            .collect();
        for round in 0..25 {
            for (i, c) in clients.iter_mut().enumerate() {
                if i % 2 == 0 {
                    let r = c.get("/api/v1.json");
                    assert_eq!((r.code, &r.body[..]), (200, &b"{}"[..]), "round {round}");
                } else {
                    c.send(b"GET / HTTP/1.1\r\nHost: t\r\nX-Priority: batch\r\n\r\n");
                    let r = c.reply(false);
                    assert_eq!((r.code, r.body.len()), (200, page().len()));
                }
            }
        }
        drop(clients);
        let stats = server.shutdown();
        assert_eq!(stats.requests, 100);
        let sched = stats.scheduler.unwrap();
        assert_eq!(sched.ownership_violations, 0);
        sched
            .per_worker
            .iter()
            .map(|w| w["high_served"].as_u64().unwrap())
            .sum::<u64>()
    };
    let rules = ["high:path=/api/", "batch:header=X-Priority:batch"];
    assert!(high_served(&rules) > 0, "no high-priority deliveries");
    assert_eq!(high_served(&[]), 0);

    let mut cfg = HttpConfig::new(&root.www, skq_net::Mode::Epoll1to1, 2);
    cfg.priority = vec!["high:path=/api/".into()];
    let e = skq_http::start(&cfg, AccessLog::Off)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("need an skq mode"), "{e}");
    cfg.spec.mode = skq_net::Mode::default();
    cfg.priority = vec!["urgent:path=/api/".into()];
    let e = skq_http::start(&cfg, AccessLog::Off)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with("--priority `urgent:path=/api/`: class"),
        "{e}"
    );
}
