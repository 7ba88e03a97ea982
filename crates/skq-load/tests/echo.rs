//! The reference echo server speaks every protocol `--capacity` measures:
//! the generator's own codecs drive it at a low rate and every request gets
//! exactly one well-formed answer (counts, not timing).

use std::time::Duration;

use skq_load::refserver::{echo_one, EchoProtocol, Malformed, RefServer};
use skq_load::{LoadConfig, Protocol};
use skq_proto::workload::{ServiceSpec, Workload};

#[test]
fn every_protocol_is_answered_once_per_request() {
    for (echo, proto) in [
        (EchoProtocol::Rpc, Protocol::Rpc),
        (EchoProtocol::Memcached, Protocol::Memcached),
        (EchoProtocol::Http, Protocol::Http),
    ] {
        let server = RefServer::start_echo(echo, false, None).unwrap();
        let mut cfg = LoadConfig::new(server.addr(), 1000.0);
        cfg.protocol = proto.into();
        cfg.connections = 4;
        cfg.duration = Duration::from_millis(500);
        cfg.warmup = Duration::from_millis(100);
        cfg.drain = Duration::from_secs(2);
        cfg.service = ServiceSpec::new(Workload::Fixed, 0.0);
        let r = skq_load::run(&cfg).unwrap();
        assert_eq!(r.errors.total(), 0, "{proto:?}: {:?}", r.errors);
        assert!(r.sent > 100, "{proto:?}: sent {}", r.sent);
        assert_eq!(r.received, r.sent, "{proto:?}: one answer per request");
        assert!(
            server.served() >= r.sent,
            "{proto:?}: served {} < sent {}",
            server.served(),
            r.sent
        );
    }
}

#[test]
fn echo_framing_waits_for_whole_requests_and_refuses_garbage() {
    let mut out = Vec::new();
    let mc = EchoProtocol::Memcached;
    assert_eq!(echo_one(mc, b"get k1", &mut out), Ok(None));
    assert_eq!(echo_one(mc, b"get k1\r\n", &mut out), Ok(Some(8)));
    assert_eq!(out, b"END\r\n");
    out.clear();
    assert_eq!(echo_one(mc, b"set k 0 0 3\r\nab", &mut out), Ok(None));
    assert_eq!(
        echo_one(mc, b"set k 0 0 3\r\nabc\r\nget", &mut out),
        Ok(Some(18))
    );
    assert_eq!(out, b"STORED\r\n");
    assert_eq!(
        echo_one(mc, b"set k 0 0 3\r\nabcd\r\n", &mut out),
        Err(Malformed)
    );
    assert_eq!(echo_one(mc, b"set k 0 0 x\r\n", &mut out), Err(Malformed));
    assert_eq!(echo_one(mc, b"flush_all\r\n", &mut out), Err(Malformed));
    out.clear();
    let http = EchoProtocol::Http;
    assert_eq!(
        echo_one(http, b"GET / HTTP/1.1\r\nHost: x\r\n", &mut out),
        Ok(None)
    );
    let req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(echo_one(http, req, &mut out), Ok(Some(req.len())));
    assert!(out.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert_eq!(
        echo_one(http, b"POST / HTTP/1.1\r\n\r\n", &mut out),
        Err(Malformed)
    );
}
