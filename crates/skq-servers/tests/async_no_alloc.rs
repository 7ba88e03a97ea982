//! The async RPC handler (`--mode async-MODE` on skq-async, `async-tokio`;
//! `async_rpc`) allocates nothing per request in steady state when
//! requests are larger than skq-net's `conn::KEEP_CAPACITY` (issues
//! 22/23): its buffers (skq-net's `async_driver::Bufs`) come from, and go
//! back to, the serving thread's `bufpool`.
//!
//! A counting global allocator ([`skq_testkit::Counting`]) counts every
//! thread's allocations (server workers, accept loop and this client) while
//! two loopback connections are served in turn with 8 KiB request
//! payloads. The client itself allocates nothing in the measured window
//! (fixed buffers, replies checked in place), and this file holds one test
//! so no other test runs in the process meanwhile. skq-net's
//! `tests/async_no_alloc.rs` checks the generic protocol loop (what `skq
//! serve http --mode async-*` runs) the same way.
//!
//! Before the pool, every such request cost at least one allocation (the
//! input grown past its kept size), so the allowance of one allocation per
//! [`PER_ALLOWED`] requests (room for a runtime's occasional bookkeeping)
//! fails without the pool.

use std::io::{Read, Write};
use std::net::TcpStream;

use skq_proto::wire::{self, Header, HEADER_LEN};
use skq_servers::{RpcConfig, RpcServer, ServerSpec};
use skq_testkit::{allocs_over_requests, client, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

const MODES: [&str; 2] = ["async-hybrid", "async-tokio"];
/// Bytes of an RPC request's payload.
const PAYLOAD: usize = 8 * 1024;
/// Requests per connection before counting (the pool fills).
const WARMUP: usize = 64;
/// Requests counted (over both connections).
const MEASURED: usize = 2_000;
/// At most one allocation per this many measured requests.
const PER_ALLOWED: usize = 20;

/// The RPC handler: requests with 8 KiB payloads (replies are headers).
fn rpc_loop(mode: &str) -> u64 {
    let spec = ServerSpec::new(mode.parse().expect("mode"), 2);
    let server = RpcServer::start(RpcConfig::new(spec)).expect("start");
    let mut conns = [client(server.local_addr()), client(server.local_addr())];
    let mut req = vec![0u8; HEADER_LEN + PAYLOAD];
    let mut got = [0u8; HEADER_LEN];
    let mut one = |s: &mut TcpStream, i: usize| {
        let mut h = Header::request(i as u64, 0, 0);
        h.payload_len = PAYLOAD as u32;
        let head: &mut [u8; HEADER_LEN] = (&mut req[..HEADER_LEN]).try_into().expect("header");
        h.write_to(head);
        s.write_all(&req).expect("send");
        s.read_exact(&mut got).expect("reply");
        let r = wire::decode_reply(&got).expect("valid").expect("whole");
        assert_eq!((r.id, r.refused), (i as u64, false), "{mode}");
    };
    allocs_over_requests(&mut conns, 2 * WARMUP, &mut one);
    let allocs = allocs_over_requests(&mut conns, MEASURED, &mut one);
    drop(conns);
    let stats = server.shutdown();
    assert_eq!(stats.requests, (2 * WARMUP + MEASURED) as u64, "{mode}");
    allocs
}

#[test]
fn large_requests_allocate_nothing_per_request_in_steady_state() {
    let allowed = (MEASURED / PER_ALLOWED) as u64;
    for mode in MODES {
        let r = rpc_loop(mode);
        println!("{mode}: {r} allocations (RPC) per {MEASURED} requests");
        assert!(
            r <= allowed,
            "{mode}: RPC made {r} allocations in {MEASURED} requests"
        );
    }
}
