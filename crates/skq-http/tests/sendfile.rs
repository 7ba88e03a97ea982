//! Large file bodies are sent as file regions (`sendfile(2)` on sockets):
//! served byte-exact on every driver, to a fast reader and to a slow one
//! with a small receive buffer, with keep-alive, HEAD, 304 and 404 still
//! right after them.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{Client, Root};
use rand::{RngCore, SeedableRng};

/// Drivers with distinct send paths: skq (one policy is enough: the
/// connection layer is the same), both epoll models, tokio inline and on
/// its blocking pool.
const DRIVERS: [&str; 5] = [
    "hybrid",
    "epoll-1to1",
    "epoll-shared",
    "tokio",
    "tokio-spawn-blocking",
];

const SIZE: usize = 5 * 1024 * 1024 + 12_345;

fn random_file(seed: u64, size: usize) -> Vec<u8> {
    let mut data = vec![0u8; size];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut data);
    data
}

/// A client whose receive buffer is 4 KiB (set before connecting, so the
/// window stays small).
fn slow_client(addr: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&addr.into()).unwrap();
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads one 200 reply's head and returns its Content-Length.
fn read_head(s: &mut TcpStream) -> usize {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).unwrap();
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    head.lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a length")
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_large_file_is_sent_byte_exact_on_every_driver() {
    let root = Root::new("sendfile");
    let data = random_file(26, SIZE);
    root.write("rand.bin", &data);
    for mode in DRIVERS {
        let (h, _proto) = common::start(&root.www, mode);
        let addr = h.local_addr();
        let mut c = Client::connect(addr);
        let r = c.get("/rand.bin");
        assert_eq!(r.code, 200, "{mode}");
        assert_eq!(r.body.len(), SIZE, "{mode}");
        assert!(r.body == data, "{mode}: body differs");
        // Keep-alive after a file region: the next replies are right.
        let r = c.get("/index.html");
        assert_eq!((r.code, r.body), (200, common::page()), "{mode}");
        c.send(b"HEAD /rand.bin HTTP/1.1\r\nHost: t\r\n\r\n");
        let head = c.reply(true);
        assert_eq!(head.code, 200, "{mode}");
        assert_eq!(head.header("Content-Length"), Some(&*SIZE.to_string()));
        let etag = head.header("ETag").unwrap().to_string();
        c.send(
            format!("GET /rand.bin HTTP/1.1\r\nHost: t\r\nIf-None-Match: {etag}\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(c.reply(false).code, 304, "{mode}");
        assert_eq!(c.get("/missing.bin").code, 404, "{mode}");
        // Two file replies pipelined, then a small one: all in order.
        c.send(b"GET /rand.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /rand.bin HTTP/1.1\r\nHost: t\r\n\r\nGET /a.css HTTP/1.1\r\nHost: t\r\n\r\n");
        for _ in 0..2 {
            let r = c.reply(false);
            assert!(
                r.code == 200 && r.body == data,
                "{mode}: pipelined body differs"
            );
        }
        assert_eq!(c.reply(false).body, b"body { color: #123; }\n", "{mode}");
        drop(c);
        let _ = h.shutdown();
    }
}

#[test]
fn a_slow_reader_with_a_small_window_gets_every_byte() {
    let root = Root::new("sendfile-slow");
    let data = random_file(27, SIZE);
    root.write("rand.bin", &data);
    for mode in DRIVERS {
        let (h, _proto) = common::start(&root.www, mode);
        let mut s = slow_client(h.local_addr());
        s.write_all(b"GET /rand.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_head(&mut s), SIZE, "{mode}");
        // Small reads with pauses: the server meets a full socket often.
        let mut got = vec![0u8; SIZE];
        let mut at = 0;
        while at < SIZE {
            let n = s.read(&mut got[at..(at + 4096).min(SIZE)]).unwrap();
            assert!(n > 0, "{mode}: closed at {at}");
            at += n;
            if at % (512 * 1024) < n {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert!(got == data, "{mode}: body differs");
        // The connection is still good.
        s.write_all(b"GET /a.css HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let len = read_head(&mut s);
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).unwrap();
        assert_eq!(body, b"body { color: #123; }\n", "{mode}");
        drop(s);
        let _ = h.shutdown();
    }
}

#[test]
fn a_file_that_shrinks_while_sent_closes_the_connection() {
    let root = Root::new("sendfile-shrink");
    // Larger than the server's largest send buffer (tcp_wmem's 4 MiB by
    // default) and the client's 4 KiB window together: the server cannot
    // have sent it all before it is cut.
    let data = random_file(28, 3 * SIZE);
    root.write("rand.bin", &data);
    for mode in ["hybrid", "tokio"] {
        root.write("rand.bin", &data);
        let (h, _proto) = common::start(&root.www, mode);
        let mut s = slow_client(h.local_addr());
        s.write_all(b"GET /rand.bin HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        assert_eq!(read_head(&mut s), data.len(), "{mode}");
        // The server is blocked on the small window: cut the file short.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(root.www.join("rand.bin"))
            .unwrap();
        f.set_len(1024 * 1024).unwrap();
        let mut got = Vec::new();
        let end = s.read_to_end(&mut got);
        // Closed (EOF or reset) before the announced length.
        assert!(got.len() < data.len(), "{mode}: {} bytes", got.len());
        let _ = end;
        let _ = h.shutdown();
    }
}
