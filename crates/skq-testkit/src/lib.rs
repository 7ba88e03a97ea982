//! Test-only helpers shared by the workspace's tests (a dev-dependency
//! only; never published).
//!
//! [`Counting`] is the counting global allocator of the no-allocation
//! tests (`crates/skq-net/tests/no_alloc.rs` and `async_no_alloc.rs`,
//! `crates/skq-kv/tests/no_alloc.rs`,
//! `crates/skq-servers/tests/async_no_alloc.rs`). A test binary installs it
//! with
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: skq_testkit::Counting = skq_testkit::Counting;
//! ```
//!
//! and reads [`thread_allocs`] (allocations made by the calling thread) or
//! [`total_allocs`] (by every thread of the process). The loopback
//! no-allocation tests (the async loops of skq-net and skq-servers) connect
//! with [`client`] and count a window of requests with
//! [`allocs_over_requests`].
//!
//! **Invariants.** Every call is forwarded unchanged to the system
//! allocator. Allocations, zeroed allocations and reallocations count one
//! each; frees count nothing. Counting itself never allocates: the
//! per-thread counter is a const-initialised thread-local `Cell` (no lazy
//! initialisation, no destructor) and the process-wide one an atomic, so
//! the allocator cannot recurse into itself. A thread whose thread-locals
//! are already destroyed still counts in [`total_allocs`].
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The counting global allocator (see the crate docs).
pub struct Counting;

thread_local! {
    static THREAD_ALLOCS: Cell<u64> = const { Cell::new(0) };
}

static TOTAL_ALLOCS: AtomicU64 = AtomicU64::new(0);

fn count() {
    let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
    TOTAL_ALLOCS.fetch_add(1, Ordering::Relaxed);
}

/// Allocations (and reallocations) the calling thread has made so far.
pub fn thread_allocs() -> u64 {
    THREAD_ALLOCS.try_with(Cell::get).unwrap_or(0)
}

/// Allocations (and reallocations) every thread of the process has made
/// so far.
pub fn total_allocs() -> u64 {
    TOTAL_ALLOCS.load(Ordering::Relaxed)
}

/// A loopback client connection for the no-allocation tests: no Nagle
/// delay, a 30 s read timeout (a lost reply fails the test, not hangs it).
pub fn client(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    s
}

/// Serves `n` requests in turn over `conns` with `one` (which sends
/// request `i` on a connection and checks its reply) and returns the
/// allocations every thread made meanwhile ([`total_allocs`]).
pub fn allocs_over_requests<F: FnMut(&mut TcpStream, usize)>(
    conns: &mut [TcpStream],
    n: usize,
    mut one: F,
) -> u64 {
    let before = total_allocs();
    for i in 0..n {
        let k = i % conns.len();
        one(&mut conns[k], i);
    }
    total_allocs() - before
}

// SAFETY: every method forwards its arguments unchanged to the system
// allocator, so `System`'s guarantees are ours; counting touches only a
// const-initialised thread-local `Cell` and an atomic, neither of which
// allocates, so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(p, l) }
    }
}
