//! Hostile clients against the RocksDB front end (in this process, alone in
//! its test binary; loopback only, bounded in count and time), on every
//! driver:
//! * 16 connections each pipelining 40 SEEKs of 10,000 entries (replies of
//!   over 256 KiB each, at most 1 MiB by the frame limit) and reading
//!   nothing: the server serves none of a connection's requests while its
//!   output is at the ceiling, so the process's RSS (sampled every 5 ms)
//!   grows less than [`RSS_BOUND`] (unbounded, the replies would take
//!   hundreds of MiB); a good client is served
//!   meanwhile with answers equal to RocksDB's; once the attackers read,
//!   every reply arrives, in order, each the same snapshot's answer;
//! * a request asking for more service than `--max-service-us` is refused
//!   (`FLAG_REFUSED`, no payload) and the connection kept.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use skq_db::DbProtocol;
use skq_net::{Server, ServerSpec};
use skq_proto::db::{self, DbOp, Status, KEY_LEN, MAX_SCAN};
use skq_proto::wire::{self, Header, HEADER_LEN};
use skq_servers::{RpcConfig, ServiceMode};

/// RSS growth allowed under the SEEK flood (bytes).
const RSS_BOUND: u64 = 64 << 20;
const KEYS: u64 = 20_000;
const ATTACKERS: usize = 16;
const SEEKS: u64 = 40;

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// Samples RSS until stopped; the peak seen.
struct Sampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl Sampler {
    fn start() -> Sampler {
        let (stop, peak) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Sampler { stop, peak, thread }
    }

    fn peak(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.peak.load(Ordering::Relaxed).max(rss())
    }
}

fn key(i: u64) -> Vec<u8> {
    let mut k = [0u8; KEY_LEN];
    db::key_of(i, &mut k);
    k.to_vec()
}

fn frame(id: u64, service_ns: u32, op: DbOp, key: &[u8], arg: u32, out: &mut Vec<u8>) {
    let mut payload = Vec::new();
    db::encode_request(op, key, arg, b"", &mut payload);
    let mut h = Header::request(id, service_ns, 0);
    h.payload_len = payload.len() as u32;
    h.encode(out);
    out.extend_from_slice(&payload);
}

/// Reads one reply: (header, payload).
fn read_reply(s: &mut TcpStream) -> (Header, Vec<u8>) {
    let mut head = [0u8; HEADER_LEN];
    s.read_exact(&mut head).unwrap();
    let len = u32::from_le_bytes(head[0..4].try_into().unwrap()) as usize;
    let mut whole = head.to_vec();
    whole.resize(len, 0);
    s.read_exact(&mut whole[HEADER_LEN..]).unwrap();
    let h = wire::decode_reply(&whole).unwrap().expect("a whole reply");
    (h, whole.split_off(HEADER_LEN))
}

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

#[test]
fn unread_seek_floods_hold_bounded_memory_and_refusals_keep_the_connection() {
    let dir = Scratch(std::env::temp_dir().join(format!("skq-db-hostile-{}", std::process::id())));
    skq_db::preload(&dir.0, KEYS, 5, |_| {}).unwrap();
    let rdb = Arc::new(skq_db::open(&dir.0).unwrap());
    let mut flood = Vec::new();
    for id in 0..SEEKS {
        frame(id, 0, DbOp::Seek, &key(0), MAX_SCAN, &mut flood);
    }
    for mode in [
        "hybrid",
        "epoll-1to1",
        "epoll-shared",
        "tokio",
        "tokio-spawn-blocking",
    ] {
        let cfg = RpcConfig::new(ServerSpec::new(mode.parse().unwrap(), 2));
        let proto =
            DbProtocol::new(rdb.clone(), ServiceMode::Spin, 0.0).with_max_service_ns(1_000_000);
        let server = Server::start(&cfg.server_config(), Arc::new(proto)).unwrap();
        let addr = server.local_addr();
        let mut good = connect(addr);
        // Warm: the first SEEK reply, the reference for all the others.
        let mut one = Vec::new();
        frame(0, 0, DbOp::Seek, &key(0), MAX_SCAN, &mut one);
        good.write_all(&one).unwrap();
        let (_, first) = read_reply(&mut good);
        let reply = db::decode_reply(&first, true).unwrap();
        assert_eq!(reply.entries.len(), MAX_SCAN as usize);
        assert!(
            matches!(reply.status, Status::Ok | Status::Partial) && first.len() > 256 << 10,
            "each reply is above the output ceiling"
        );
        assert_eq!(reply.entries[0].0, key(0));
        assert!(reply.entries.windows(2).all(|w| w[0].0 < w[1].0));

        let before = rss();
        let sampler = Sampler::start();
        let mut attackers: Vec<TcpStream> = (0..ATTACKERS).map(|_| connect(addr)).collect();
        let writers: Vec<_> = attackers
            .iter()
            .map(|s| {
                let (mut w, bytes) = (s.try_clone().unwrap(), flood.clone());
                std::thread::spawn(move || w.write_all(&bytes))
            })
            .collect();
        // The good client meanwhile: GETs equal RocksDB's own answers, and a
        // refusal keeps its connection.
        for i in 0..200u64 {
            let mut req = Vec::new();
            frame(i, 0, DbOp::Get, &key(i * 97 % KEYS), 0, &mut req);
            good.write_all(&req).unwrap();
            let (h, payload) = read_reply(&mut good);
            assert_eq!((h.id, h.refused), (i, false), "{mode}");
            let got = db::decode_reply(&payload, false).unwrap();
            assert_eq!(
                got.value,
                rdb.get(key(i * 97 % KEYS)).unwrap().unwrap(),
                "{mode}"
            );
        }
        let mut req = Vec::new();
        frame(7, 1_000_001, DbOp::Get, &key(1), 0, &mut req);
        frame(8, 1_000_000, DbOp::Get, &key(1), 0, &mut req);
        good.write_all(&req).unwrap();
        let (h, payload) = read_reply(&mut good);
        assert!(
            h.refused && h.id == 7 && payload.is_empty(),
            "{mode}: refused"
        );
        let (h, _) = read_reply(&mut good);
        assert!(!h.refused && h.id == 8, "{mode}: at the limit, served");
        std::thread::sleep(Duration::from_millis(200));
        let growth = sampler.peak().saturating_sub(before);
        eprintln!(
            "{mode}: RSS growth {:.1} MiB under {ATTACKERS} unread SEEK floods",
            growth as f64 / 1048576.0
        );
        assert!(growth < RSS_BOUND, "{mode}: RSS grew {} MiB", growth >> 20);
        // Now the attackers read: every reply, in order, the same answer.
        for s in &mut attackers {
            for id in 0..SEEKS {
                let (h, payload) = read_reply(s);
                assert_eq!(h.id, id, "{mode}");
                assert!(payload == first, "{mode}: reply {id} differs");
            }
        }
        for w in writers {
            w.join().unwrap().unwrap();
        }
        let stats = server.shutdown();
        assert_eq!(stats.protocol_errors, 0, "{mode}");
        assert_eq!(
            stats.requests,
            1 + 200 + 2 + ATTACKERS as u64 * SEEKS,
            "{mode}"
        );
    }
}
