//! The shared architecture serves `get` (one key and four), `mg` and `set` without
//! allocating per request in steady state (issue 22: no per-request allocation on the
//! hot path).
//!
//! A counting global allocator ([`skq_testkit::Counting`]) counts this thread's allocations
//! (and reallocations) while an `skq_net` `Conn` serves the cache's protocol ([`KvProtocol`]) over an
//! in-memory stream, the same path a socket event takes in every `--mode`. Every reply
//! is checked byte for byte against what memcached answers, without storing it.
//!
//! `set` is held to the store's design: the arena is append-only, so each overwrite
//! appends a record, and once per 2 MiB segment the store either allocates the next
//! segment (while it grows to its limit) or evicts the oldest one (the index entries to
//! drop are gathered in a list; overwriting one key leaves at most one such entry, so one
//! allocation). Between those turnovers a `set` allocates nothing; the test allows
//! [`PER_TURNOVER`] allocations per segment turned over and none otherwise.
//!
//! The thread-per-core architecture is not driven here: its sessions are served only by
//! its crate-private worker (`Worker` in `tpc.rs`, with `forward::Core` as the command
//! handler), which owns a listener, an epoll set, rings and doorbells, so it cannot be
//! driven in memory without threads. It parses and executes through the same
//! parser, recycling ([`skq_kv::recycle`]) and `exec::apply` as the shared architecture.

use std::io::{self, Read, Write};
use std::sync::Arc;

use skq_kv::arena::{record_len, SEGMENT_SIZE};
use skq_kv::config::{KvMode, ServerConfig, MIN_SHARD_BYTES};
use skq_kv::ctx::Ctx;
use skq_kv::protocol::Limits;
use skq_kv::recycle;
use skq_kv::shared::{KvProtocol, KvSession, SharedStore};
use skq_net::conn::{Conn, Outcome, Transport};
use skq_net::stats::WorkerCounters;
use skq_net::{Cx, Protocol};
use skq_testkit::Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// This thread's allocations so far.
fn allocs() -> u64 {
    skq_testkit::thread_allocs()
}

/// Allocations allowed per arena segment turned over by `set` (see the module docs).
const PER_TURNOVER: u64 = 2;
const VALUE_LEN: usize = 200;

/// Hands out one request (then would block) and checks what is written against the
/// expected reply as it arrives, storing nothing.
struct Mock<'a> {
    request: &'a [u8],
    at: usize,
    expect: &'a [u8],
    written: usize,
}

impl Read for Mock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.request.len() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = (self.request.len() - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.request[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Write for Mock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let end = self.written + buf.len();
        assert!(end <= self.expect.len(), "reply longer than expected");
        assert_eq!(buf, &self.expect[self.written..end], "reply differs");
        self.written = end;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for Mock<'_> {}

/// A 30-byte key (the Sphinx workloads' size).
fn key(i: usize) -> Vec<u8> {
    format!("key:{i:026}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    vec![b'a' + (i % 26) as u8; VALUE_LEN]
}

fn value_block(i: usize) -> Vec<u8> {
    let mut b = format!(
        "VALUE {} 0 {VALUE_LEN}\r\n",
        String::from_utf8_lossy(&key(i))
    )
    .into_bytes();
    b.extend_from_slice(&value(i));
    b.extend_from_slice(b"\r\n");
    b
}

fn get_request(i: usize) -> Vec<u8> {
    let mut r = b"get ".to_vec();
    r.extend_from_slice(&key(i));
    r.extend_from_slice(b"\r\n");
    r
}

fn set_request(i: usize) -> Vec<u8> {
    let mut r = format!(
        "set {} 0 0 {VALUE_LEN}\r\n",
        String::from_utf8_lossy(&key(i))
    )
    .into_bytes();
    r.extend_from_slice(&value(i));
    r.extend_from_slice(b"\r\n");
    r
}

struct Rig {
    proto: KvProtocol,
    conn: Conn<KvSession>,
    counters: WorkerCounters,
    scratch: Vec<u8>,
}

impl Rig {
    fn new() -> Rig {
        let limits = Limits::default();
        let cfg = ServerConfig {
            addr: "127.0.0.1:0".parse().expect("address"),
            workers: 1,
            mode: KvMode::Shared("vanilla".parse().expect("a mode")),
            // One lock shard of two segments: `set` reaches the limit and evicts.
            limit_bytes: MIN_SHARD_BYTES,
            limits,
            max_conns: 16,
            pin: false,
            priority: Default::default(),
            batch_workers: Vec::new(),
            sched: Default::default(),
            idle_timeout: None,
            idle_tick: None,
        };
        let proto = KvProtocol {
            store: SharedStore::new(cfg.limit_bytes, limits.max_item_size),
            ctx: Arc::new(Ctx::new(cfg)),
            rules: None,
        };
        assert_eq!(proto.store.shard_count(), 1);
        let conn = Conn::new(proto.open(0));
        Rig {
            proto,
            conn,
            counters: WorkerCounters::default(),
            scratch: vec![0u8; 16 * 1024],
        }
    }

    /// Serves `request` as one readiness event and checks the reply is `expect`.
    fn serve(&mut self, request: &[u8], expect: &[u8]) {
        let mut m = Mock {
            request,
            at: 0,
            expect,
            written: 0,
        };
        let mut cx = Cx::new(0, &self.counters);
        let outcome = self
            .conn
            .on_ready(&self.proto, &mut m, &mut self.scratch, &mut cx, false);
        assert_eq!(outcome, Outcome::Idle);
        assert_eq!(m.at, request.len(), "request read whole");
        assert_eq!(m.written, expect.len(), "reply complete");
    }

    /// Allocations of `rounds` requests after `warmup` of them.
    fn count(&mut self, request: &[u8], expect: &[u8], warmup: usize, rounds: usize) -> u64 {
        for _ in 0..warmup {
            self.serve(request, expect);
        }
        let before = allocs();
        for _ in 0..rounds {
            self.serve(request, expect);
        }
        allocs() - before
    }
}

#[test]
fn gets_mg_and_set_allocate_nothing_per_request_in_steady_state() {
    let mut rig = Rig::new();
    for i in 0..4 {
        rig.serve(&set_request(i), b"STORED\r\n");
    }

    // `get` of one key.
    let mut expect = value_block(0);
    expect.extend_from_slice(b"END\r\n");
    let n = rig.count(&get_request(0), &expect, 50, 5_000);
    assert_eq!(n, 0, "allocations over 5,000 single-key gets");

    // `get` of four keys (and a miss among them costs nothing either).
    let mut request = b"get".to_vec();
    let mut expect = Vec::new();
    for i in 0..4 {
        request.push(b' ');
        request.extend_from_slice(&key(i));
        expect.extend_from_slice(&value_block(i));
    }
    request.extend_from_slice(b" key:missing\r\n");
    expect.extend_from_slice(b"END\r\n");
    let n = rig.count(&request, &expect, 50, 5_000);
    assert_eq!(n, 0, "allocations over 5,000 four-key gets");

    // `mg` with value, size, flags, TTL, key and opaque (returned in request order).
    let k = String::from_utf8_lossy(&key(1)).into_owned();
    let request = format!("mg {k} s v f t k Oab12\r\n").into_bytes();
    let mut expect = format!("VA {VALUE_LEN} s{VALUE_LEN} f0 t-1 k{k} Oab12\r\n").into_bytes();
    expect.extend_from_slice(&value(1));
    expect.extend_from_slice(b"\r\n");
    let n = rig.count(&request, &expect, 50, 5_000);
    assert_eq!(n, 0, "allocations over 5,000 mg");

    // `mg` miss, quiet noop pipeline: `EN` and `MN`.
    let n = rig.count(b"mg key:gone v\r\nmn\r\n", b"EN\r\nMN\r\n", 50, 5_000);
    assert_eq!(n, 0, "allocations over 5,000 mg misses");

    // `set` of a 200-byte value over an existing key of the same size.
    let sets = 40_000;
    let request = set_request(2);
    let n = rig.count(&request, b"STORED\r\n", 50, sets);
    let record = record_len(key(2).len(), VALUE_LEN);
    let turnovers = (sets * record / SEGMENT_SIZE) as u64 + 1;
    assert!(
        n <= PER_TURNOVER * turnovers,
        "{n} allocations over {sets} sets ({turnovers} segment turnovers)"
    );
    // Still served correctly after the evictions.
    let mut expect = value_block(2);
    expect.extend_from_slice(b"END\r\n");
    rig.serve(&get_request(2), &expect);

    // The thread's spares stay within their documented bound.
    let bound = recycle::MAX_KEYS * recycle::KEY_CAPACITY
        + recycle::MAX_VALUES * recycle::VALUE_CAPACITY
        + 2 * recycle::MAX_LISTS * recycle::LIST_CAPACITY * 32;
    assert!(recycle::spare_bytes() <= bound);
}

#[test]
fn the_counter_sees_the_first_requests() {
    // A fresh thread (no spares yet) allocates for its first `set` and `get`: the
    // counter is live, so the zeros above are real.
    let first = std::thread::spawn(|| {
        let mut rig = Rig::new();
        let a = allocs();
        rig.serve(&set_request(0), b"STORED\r\n");
        let mut expect = value_block(0);
        expect.extend_from_slice(b"END\r\n");
        rig.serve(&get_request(0), &expect);
        allocs() - a
    })
    .join()
    .expect("thread");
    assert!(first > 0, "the counting allocator counts");
}
