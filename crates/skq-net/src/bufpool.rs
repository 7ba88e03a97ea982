//! Each thread's small pool of spare connection buffers.
//!
//! A [`crate::conn::Conn`] frees a buffer that grew beyond
//! [`crate::conn::KEEP_CAPACITY`] as soon as it empties, so an idle
//! connection holds little memory. Without a pool, a server whose replies
//! (or requests) exceed that size would pay an allocation, a reallocation
//! and a free per request. Instead the emptied buffer goes to the pool of
//! the thread that emptied it, and the next connection that needs a large
//! buffer on that thread takes it back: in steady state no request
//! allocates.
//!
//! The pool is a thread-local rather than a value the drivers pass: every
//! driver runs a `Conn` only on its own threads (skq and epoll workers,
//! tokio's worker and blocking-pool threads), buffers are emptied deep
//! inside the write paths of each (including tokio's `write_out`), and a
//! thread-local reaches them all with no change to the connection API.
//!
//! **Invariants (the memory bound).** A pool keeps at most [`POOL_BUFFERS`]
//! buffers, each of capacity at most [`POOL_MAX_CAPACITY`]; a buffer given
//! beyond either bound is freed. So the pools add at most
//! `POOL_BUFFERS × POOL_MAX_CAPACITY` = 1 MiB per thread that serves
//! connections, whatever the number of connections; an idle connection
//! still holds at most `2 × KEEP_CAPACITY` bytes of buffers. Buffers in the
//! pool are empty (`len() == 0`).

use std::cell::RefCell;

/// Most spare buffers a thread's pool keeps.
pub const POOL_BUFFERS: usize = 8;
/// Largest capacity of a buffer the pool keeps (larger ones are freed).
pub const POOL_MAX_CAPACITY: usize = 128 * 1024;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A spare buffer from this thread's pool (empty), if it has one.
pub fn take() -> Option<Vec<u8>> {
    POOL.try_with(|p| p.try_borrow_mut().ok()?.pop())
        .ok()
        .flatten()
}

/// Gives an emptied buffer back to this thread's pool; it is freed when
/// its capacity exceeds [`POOL_MAX_CAPACITY`] or the pool is full.
pub fn give(mut buf: Vec<u8>) {
    if buf.capacity() > POOL_MAX_CAPACITY {
        return;
    }
    buf.clear();
    let _ = POOL.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.len() < POOL_BUFFERS {
                if p.capacity() == 0 {
                    // Once per thread: the pool's own slots.
                    p.reserve_exact(POOL_BUFFERS);
                }
                p.push(buf);
            }
        }
    });
}

/// Bytes of buffer capacity this thread's pool holds now.
pub fn pooled_bytes() -> usize {
    POOL.try_with(|p| p.borrow().iter().map(Vec::capacity).sum())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_keeps_few_bounded_buffers() {
        for _ in 0..2 * POOL_BUFFERS {
            give(Vec::with_capacity(4096));
        }
        give(Vec::with_capacity(POOL_MAX_CAPACITY + 1));
        assert!(pooled_bytes() >= POOL_BUFFERS * 4096);
        assert!(pooled_bytes() <= POOL_BUFFERS * POOL_MAX_CAPACITY);
        let mut n = 0;
        while let Some(b) = take() {
            assert!(b.is_empty() && b.capacity() <= POOL_MAX_CAPACITY);
            n += 1;
        }
        assert_eq!(n, POOL_BUFFERS);
        assert_eq!(pooled_bytes(), 0);
    }
}
