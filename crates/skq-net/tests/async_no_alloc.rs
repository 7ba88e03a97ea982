//! The async protocol loop (`--mode async-MODE` on skq-async,
//! `async-tokio`; [`skq_net::async_driver::start`], what `skq serve http
//! --mode async-*` runs) allocates nothing per request in steady state
//! when requests and replies are larger than `conn::KEEP_CAPACITY`
//! (issues 22/23): its buffers come from, and go back to, the serving
//! thread's `bufpool`.
//!
//! A counting global allocator ([`skq_testkit::Counting`]) counts every
//! thread's allocations (server workers, accept loop and this client) while
//! two loopback connections are served in turn with 4 KiB requests and
//! 6 KiB replies. The client itself allocates nothing in the measured
//! window (fixed buffers, replies checked in place), and this file holds
//! one test so no other test runs in the process meanwhile. skq-servers'
//! `tests/async_no_alloc.rs` checks the async RPC handler the same way.
//!
//! Before the pool, every such request cost at least one allocation (the
//! input grown past its kept size, and the reply buffer too), so the
//! allowance of one allocation per [`PER_ALLOWED`] requests (room for a
//! runtime's occasional bookkeeping) fails without the pool.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use skq_net::{Cx, Mode, Protocol, Served, ServerConfig};
use skq_testkit::{allocs_over_requests, client, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

const MODES: [&str; 2] = ["async-hybrid", "async-tokio"];
/// Bytes of a protocol-loop request (one line, `\n` included).
const REQUEST: usize = 4096;
/// Bytes of a protocol-loop reply.
const REPLY: usize = 6 * 1024;
/// Requests per connection before counting (the pool fills).
const WARMUP: usize = 64;
/// Requests counted (over both connections).
const MEASURED: usize = 2_000;
/// At most one allocation per this many measured requests.
const PER_ALLOWED: usize = 20;

/// Each line gets a [`REPLY`]-byte reply: its first 16 bytes, then filler.
struct Big;

impl Protocol for Big {
    type Session = ();
    fn open(&self, _: usize) {}
    fn serve(&self, _: &mut (), input: &[u8], out: &mut Vec<u8>, _: &mut Cx<'_>) -> Served {
        match input.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let start = out.len();
                out.extend_from_slice(&input[..16.min(i)]);
                out.resize(start + REPLY - 1, b'.');
                out.push(b'\n');
                Served::Request { consumed: i + 1 }
            }
            None => Served::NeedInput { consumed: 0 },
        }
    }
    fn read_limit(&self) -> usize {
        64 * 1024
    }
}

/// Writes `i` as 16 hex digits into `b` (no allocation).
fn stamp(b: &mut [u8], i: usize) {
    for (k, d) in b[..16].iter_mut().enumerate() {
        *d = b"0123456789abcdef"[(i >> (4 * (15 - k))) & 15];
    }
}

/// The generic protocol loop: 4 KiB requests, 6 KiB replies.
fn protocol_loop(mode: &str) -> u64 {
    let cfg = ServerConfig::with_mode(mode.parse::<Mode>().expect("mode"), 2);
    let h = skq_net::async_driver::start(&cfg, Arc::new(Big)).expect("start");
    let mut conns = [client(h.local_addr()), client(h.local_addr())];
    let mut req = vec![b'r'; REQUEST];
    req[REQUEST - 1] = b'\n';
    let mut expect = vec![b'.'; REPLY];
    expect[REPLY - 1] = b'\n';
    let mut got = vec![0u8; REPLY];
    let mut one = |s: &mut TcpStream, i: usize| {
        stamp(&mut req, i);
        stamp(&mut expect, i);
        s.write_all(&req).expect("send");
        s.read_exact(&mut got).expect("reply");
        assert!(got == expect, "{mode}: reply {i} differs");
    };
    allocs_over_requests(&mut conns, 2 * WARMUP, &mut one);
    let allocs = allocs_over_requests(&mut conns, MEASURED, &mut one);
    drop(conns);
    let stats = h.shutdown();
    assert_eq!(stats.requests, (2 * WARMUP + MEASURED) as u64, "{mode}");
    allocs
}

#[test]
fn large_requests_and_replies_allocate_nothing_per_request_in_steady_state() {
    let allowed = (MEASURED / PER_ALLOWED) as u64;
    for mode in MODES {
        let p = protocol_loop(mode);
        println!("{mode}: {p} allocations (protocol loop) per {MEASURED} requests");
        assert!(
            p <= allowed,
            "{mode}: protocol loop made {p} allocations in {MEASURED} requests"
        );
    }
}
