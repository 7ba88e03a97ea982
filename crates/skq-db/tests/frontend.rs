//! The RocksDB front end over loopback: answers equal RocksDB's own (read
//! in-process from a twin database) on every driver, bad requests close only
//! their own connection and write nothing, and scans racing with writes are
//! never torn or reordered.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rocksdb::{Direction, IteratorMode, DB};
use skq_db::DbProtocol;
use skq_net::{Server, ServerHandle, ServerSpec};
use skq_proto::db::{self, DbOp, DbReply, Status, KEY_LEN};
use skq_proto::wire::{self, Header, HEADER_LEN};
use skq_servers::{RpcConfig, ServiceMode};

/// A scratch database directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        Scratch(base.join(format!("skq-db-test-{}-{name}", std::process::id())))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const KEYS: u64 = 3_000;

fn preloaded(name: &str) -> (Scratch, Arc<DB>) {
    let s = Scratch::new(name);
    skq_db::preload(&s.0, KEYS, 3, |_| {}).unwrap();
    let db = Arc::new(skq_db::open(&s.0).unwrap());
    (s, db)
}

fn start(db: Arc<DB>, mode: &str, workers: usize) -> ServerHandle {
    let cfg = RpcConfig::new(ServerSpec::new(mode.parse().unwrap(), workers));
    let proto = Arc::new(DbProtocol::new(db, ServiceMode::Spin, 0.0));
    Server::start(&cfg.server_config(), proto).unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

fn key(i: u64) -> Vec<u8> {
    let mut k = [0u8; KEY_LEN];
    db::key_of(i, &mut k);
    k.to_vec()
}

/// One request frame.
fn frame(id: u64, op: DbOp, key: &[u8], arg: u32, value: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    db::encode_request(op, key, arg, value, &mut payload);
    let mut h = Header::request(id, 0, 0);
    h.payload_len = payload.len() as u32;
    let mut out = Vec::new();
    h.encode(&mut out);
    out.extend_from_slice(&payload);
    out
}

/// Reads one reply frame: (id, payload), or None at EOF.
fn read_reply(s: &mut TcpStream) -> Option<(u64, Vec<u8>)> {
    let mut head = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match s.read(&mut head[got..]) {
            Ok(0) => {
                assert_eq!(got, 0, "EOF inside a reply header");
                return None;
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
            Err(e) => panic!("read: {e}"),
        }
    }
    wire::decode_reply(&head).expect("a valid reply header");
    let len = u32::from_le_bytes(head[0..4].try_into().unwrap()) as usize;
    let mut payload = vec![0u8; len - HEADER_LEN];
    s.read_exact(&mut payload).unwrap();
    let id = u64::from_le_bytes(head[8..16].try_into().unwrap());
    Some((id, payload))
}

/// What RocksDB itself answers, read straight from the twin database.
fn reference(db: &DB, op: DbOp, k: &[u8], arg: u32, value: &[u8]) -> DbReply {
    let mut r = DbReply {
        status: Status::Ok,
        entries: Vec::new(),
        value: Vec::new(),
    };
    match op {
        DbOp::Get => match db.get(k).unwrap() {
            Some(v) => r.value = v,
            None => r.status = Status::NotFound,
        },
        DbOp::Put => db.put(k, value).unwrap(),
        DbOp::Seek => {
            for item in db
                .iterator(IteratorMode::From(k, Direction::Forward))
                .take(arg as usize)
            {
                let (k, v) = item.unwrap();
                r.entries.push((k.to_vec(), v.to_vec()));
            }
        }
    }
    r
}

#[test]
fn answers_equal_rocksdb_on_every_driver() {
    for mode in [
        "hybrid+steal",
        "vanilla",
        "epoll-1to1",
        "epoll-shared",
        "tokio",
        "tokio-spawn-blocking",
    ] {
        let (_a, served) = preloaded(&format!("served-{mode}"));
        let (_b, twin) = preloaded(&format!("twin-{mode}"));
        let server = start(served, mode, 3);
        let mut c = connect(server.local_addr());
        let mut rng = SmallRng::seed_from_u64(17);
        // Batches of pipelined requests; every reply checked against the twin
        // after the same operations in the same order.
        let mut id = 0u64;
        for _ in 0..12 {
            let mut ops = Vec::new();
            let mut bytes = Vec::new();
            for _ in 0..25 {
                // Keys inside, at the edge of and beyond the preloaded range;
                // a short foreign key sorts before all of them.
                let k = match rng.gen_range(0..10) {
                    0 => b"a-short-key".to_vec(),
                    _ => key(rng.gen_range(0..KEYS + 50)),
                };
                let (op, arg, value) = match rng.gen_range(0..10) {
                    0..=4 => (DbOp::Get, 0, Vec::new()),
                    5..=7 => {
                        let v: Vec<u8> = (0..rng.gen_range(0..300)).map(|_| rng.gen()).collect();
                        (DbOp::Put, v.len() as u32, v)
                    }
                    _ => (DbOp::Seek, rng.gen_range(1..120), Vec::new()),
                };
                bytes.extend(frame(id, op, &k, arg, &value));
                ops.push((id, op, k, arg, value));
                id += 1;
            }
            c.write_all(&bytes).unwrap();
            for (want_id, op, k, arg, value) in ops {
                let (got_id, payload) = read_reply(&mut c).expect("a reply per request");
                assert_eq!(got_id, want_id, "{mode}: replies in request order");
                let got = db::decode_reply(&payload, op == DbOp::Seek).unwrap();
                let want = reference(&twin, op, &k, arg, &value);
                if op == DbOp::Seek {
                    assert_eq!(got.entries, want.entries, "{mode}: SEEK {id}");
                } else {
                    assert_eq!(
                        (got.status, &got.value),
                        (want.status, &want.value),
                        "{mode}: {op:?}"
                    );
                }
            }
        }
        drop(c);
        let stats = server.shutdown();
        assert_eq!(stats.requests, id, "{mode}");
        assert_eq!(stats.protocol_errors, 0, "{mode}");
    }
}

#[test]
fn bad_requests_close_only_their_connection_and_write_nothing() {
    for mode in ["hybrid", "epoll-1to1", "tokio", "tokio-spawn-blocking"] {
        let (_s, served) = preloaded(&format!("bad-{mode}"));
        let server = start(served.clone(), mode, 2);
        let addr = server.local_addr();
        let mut good = connect(addr);
        let fresh = key(KEYS + 7); // absent: a refused PUT must not create it
        let mut bad_frames: Vec<Vec<u8>> = Vec::new();
        // Unknown operation.
        let mut f = frame(1, DbOp::Put, &fresh, 3, b"abc");
        f[HEADER_LEN] = 9;
        bad_frames.push(f);
        // Oversized key (the frame itself is well-formed).
        bad_frames.push(frame(1, DbOp::Put, &vec![b'k'; db::MAX_KEY + 1], 1, b"x"));
        // Oversized value.
        let big = vec![0u8; db::MAX_VALUE + 1];
        bad_frames.push(frame(1, DbOp::Put, &fresh, big.len() as u32, &big));
        // A PUT whose frame holds fewer value bytes than it declares.
        let mut f = frame(1, DbOp::Put, &fresh, 3, b"abc");
        f[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&100u32.to_le_bytes());
        bad_frames.push(f);
        // A SEEK of 0 entries.
        bad_frames.push(frame(1, DbOp::Seek, &fresh, 0, b""));
        for (i, f) in bad_frames.iter().enumerate() {
            let mut b = connect(addr);
            // A valid request first: it is answered before the bad one.
            let mut bytes = frame(0, DbOp::Get, &key(5), 0, b"");
            bytes.extend_from_slice(f);
            b.write_all(&bytes).unwrap();
            let (id, p) = read_reply(&mut b).unwrap();
            assert_eq!((id, p[0]), (0, Status::Ok as u8), "{mode} bad #{i}");
            let (id, p) = read_reply(&mut b).unwrap();
            assert_eq!((id, p[0]), (1, Status::BadRequest as u8), "{mode} bad #{i}");
            assert!(read_reply(&mut b).is_none(), "{mode} bad #{i}: then closed");
            // The well-behaved connection is still served.
            good.write_all(&frame(i as u64, DbOp::Get, &key(i as u64), 0, b""))
                .unwrap();
            let (id, p) = read_reply(&mut good).unwrap();
            assert_eq!((id, p[0]), (i as u64, Status::Ok as u8));
        }
        // A broken RPC header closes without a reply; a truncated frame
        // followed by EOF is an aborted connection.
        let mut b = connect(addr);
        let mut f = frame(1, DbOp::Get, &key(1), 0, b"");
        f[6] = 1; // reserved flags
        b.write_all(&f).unwrap();
        assert!(read_reply(&mut b).is_none());
        let mut b = connect(addr);
        let f = frame(1, DbOp::Put, &fresh, 3, b"abc");
        b.write_all(&f[..f.len() - 2]).unwrap();
        b.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(read_reply(&mut b).is_none());
        drop(b);
        good.write_all(&frame(99, DbOp::Get, &key(9), 0, b""))
            .unwrap();
        assert_eq!(read_reply(&mut good).unwrap().0, 99);
        assert_eq!(
            served.get(&fresh).unwrap(),
            None,
            "{mode}: a refused PUT wrote"
        );
        drop(good);
        std::thread::sleep(Duration::from_millis(100));
        let stats = server.shutdown();
        assert_eq!(stats.protocol_errors, bad_frames.len() as u64 + 1, "{mode}");
        assert_eq!(stats.aborted, 1, "{mode}");
    }
}

/// The value a racing writer stores: its key index, its generation, and a
/// checksum of both, padded; anything torn fails [`parse_value`].
fn value(k: u64, gen: u64) -> Vec<u8> {
    let mut v = format!("{k:010}:{gen:010}:{:020}", k.wrapping_mul(31) ^ gen).into_bytes();
    v.resize(64 + (k % 50) as usize, b'.');
    v
}

fn parse_value(v: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(v).ok()?;
    let mut parts = s.splitn(3, ':');
    let k: u64 = parts.next()?.parse().ok()?;
    let g: u64 = parts.next()?.parse().ok()?;
    let sum: u64 = parts.next()?.get(..20)?.parse().ok()?;
    (sum == k.wrapping_mul(31) ^ g && v.len() == 64 + (k % 50) as usize).then_some((k, g))
}

#[test]
fn scans_racing_with_writes_are_never_torn_or_reordered() {
    const LO: u64 = 1_000;
    const N: u64 = 150;
    let (_s, served) = preloaded("race");
    for k in LO..LO + N {
        served.put(key(k), value(k, 0)).unwrap();
    }
    let server = start(served, "hybrid+steal", 4);
    let addr = server.local_addr();
    let mut threads = Vec::new();
    // Two writers, each owning alternate keys, write generations 1..=ROUNDS;
    // after each round a writer scans and must see its own latest writes.
    const ROUNDS: u64 = 15;
    for w in 0..2u64 {
        threads.push(std::thread::spawn(move || {
            let mut c = connect(addr);
            let mut id = 0;
            for g in 1..=ROUNDS {
                let mut bytes = Vec::new();
                let mut n = 0;
                for k in (LO + w..LO + N).step_by(2) {
                    bytes.extend(frame(
                        id,
                        DbOp::Put,
                        &key(k),
                        value(k, g).len() as u32,
                        &value(k, g),
                    ));
                    id += 1;
                    n += 1;
                }
                bytes.extend(frame(id, DbOp::Seek, &key(LO), N as u32, b""));
                id += 1;
                c.write_all(&bytes).unwrap();
                for _ in 0..n {
                    assert_eq!(read_reply(&mut c).unwrap().1[0], Status::Ok as u8);
                }
                let (_, p) = read_reply(&mut c).unwrap();
                let r = db::decode_reply(&p, true).unwrap();
                assert_eq!(r.entries.len() as u64, N);
                for (i, (k, v)) in r.entries.iter().enumerate() {
                    let want = LO + i as u64;
                    assert_eq!(k, &key(want), "scan in key order, none missing");
                    let (vk, vg) = parse_value(v).expect("an intact value");
                    assert_eq!(vk, want);
                    if want % 2 == w {
                        assert_eq!(vg, g, "the writer's own writes precede its scan");
                    }
                }
            }
        }));
    }
    // Two scanners: each key's generation never goes back between one scan
    // and the connection's next.
    for _ in 0..2 {
        threads.push(std::thread::spawn(move || {
            let mut c = connect(addr);
            let mut last = vec![0u64; N as usize];
            for id in 0..60 {
                c.write_all(&frame(id, DbOp::Seek, &key(LO), N as u32, b""))
                    .unwrap();
                let (got, p) = read_reply(&mut c).unwrap();
                assert_eq!(got, id);
                let r = db::decode_reply(&p, true).unwrap();
                assert_eq!(r.entries.len() as u64, N);
                let mut prev: Option<&Vec<u8>> = None;
                for (i, (k, v)) in r.entries.iter().enumerate() {
                    if let Some(p) = prev {
                        assert!(p < k, "ascending keys");
                    }
                    prev = Some(k);
                    let (vk, vg) = parse_value(v).expect("an intact value");
                    assert_eq!(vk, LO + i as u64);
                    assert!(vg >= last[i], "generation went back");
                    last[i] = vg;
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let stats = server.shutdown();
    assert_eq!(stats.protocol_errors, 0);
}
