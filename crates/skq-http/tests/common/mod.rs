//! Helpers shared by the loopback tests: a document root in a temporary
//! folder, a started server, and a raw HTTP/1.1 client that reads replies
//! by their framing.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use skq_http::{AccessLog, HttpConfig, HttpProtocol};
use skq_net::ServerHandle;

/// The ~640-byte page the benchmarks also serve.
pub fn page() -> Vec<u8> {
    let mut p = b"<!DOCTYPE html>\n<html><head><title>skq</title></head><body>\n".to_vec();
    while p.len() < 620 {
        p.extend_from_slice(b"<p>static page for skq serve http</p>\n");
    }
    p.extend_from_slice(b"</body></html>\n");
    p
}

/// A fresh document root: index.html (the page), a.css, sub/index.html,
/// big.bin (8 MiB), a symlink inside (`inner.html` → index.html) and one
/// leading out (`out` → ../secret.txt).
pub struct Root {
    pub base: PathBuf,
    pub www: PathBuf,
}

impl Root {
    pub fn new(tag: &str) -> Root {
        static N: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir().join(format!(
            "skq-http-test-{}-{tag}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let www = base.join("www");
        std::fs::create_dir_all(www.join("sub")).unwrap();
        std::fs::write(www.join("index.html"), page()).unwrap();
        std::fs::write(www.join("a.css"), b"body { color: #123; }\n").unwrap();
        std::fs::write(www.join("sub/index.html"), b"<p>sub</p>\n").unwrap();
        std::fs::write(www.join("big.bin"), vec![7u8; 8 << 20]).unwrap();
        std::fs::write(base.join("secret.txt"), b"TOP-SECRET\n").unwrap();
        std::os::unix::fs::symlink("../secret.txt", www.join("out")).unwrap();
        std::os::unix::fs::symlink("index.html", www.join("inner.html")).unwrap();
        Root { base, www }
    }

    pub fn write(&self, rel: &str, data: &[u8]) {
        let p = self.www.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(p, data).unwrap();
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Starts a server on `root` in `mode` with 2 workers and an in-memory access log.
pub fn start(root: &Path, mode: &str) -> (ServerHandle, Arc<HttpProtocol>) {
    let cfg = HttpConfig::new(root, mode.parse().unwrap(), 2);
    skq_http::start(&cfg, AccessLog::Memory(Default::default())).unwrap()
}

/// Every mode the server runs on: the skq policies and the baselines.
pub const MODES: [&str; 10] = [
    "vanilla",
    "shared",
    "queue",
    "cpu",
    "best2",
    "hybrid",
    "hybrid+steal",
    "epoll-1to1",
    "epoll-shared",
    "tokio",
];

/// One reply as read off the wire.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A raw client connection.
pub struct Client {
    pub r: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Client {
            r: BufReader::new(s),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.r.get_mut().write_all(bytes).unwrap();
    }

    /// Reads one reply; `head_only` for a reply to HEAD (no body follows).
    pub fn reply(&mut self, head_only: bool) -> Reply {
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 "), "status line {line:?}");
        let code = line[9..12].parse().unwrap();
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.r.read_line(&mut line).unwrap();
            let l = line.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').expect("a header field");
            headers.push((n.to_string(), v.trim().to_string()));
        }
        let mut reply = Reply {
            code,
            headers,
            body: Vec::new(),
        };
        if !head_only && code != 304 {
            let len: usize = reply
                .header("Content-Length")
                .expect("every reply has a length")
                .parse()
                .unwrap();
            reply.body = vec![0; len];
            self.r.read_exact(&mut reply.body).unwrap();
        }
        reply
    }

    /// `GET path` with keep-alive; the reply.
    pub fn get(&mut self, path: &str) -> Reply {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        self.reply(false)
    }

    /// Whether the server closed the connection (reads end of stream).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.r.read(&mut b), Ok(0))
    }
}
