//! Replies and requests larger than `conn::KEEP_CAPACITY` cost no
//! allocation per request in steady state (the thread's buffer pool), and
//! an idle connection still holds at most two kept buffers.
//!
//! A counting global allocator ([`skq_testkit::Counting`]) counts this
//! thread's allocations (and reallocations) while a `Conn` serves
//! thousands of requests over an in-memory stream.

use std::io::{self, Read, Write};

use skq_net::bufpool::{self, POOL_BUFFERS, POOL_MAX_CAPACITY};
use skq_net::conn::{Conn, Outcome, Transport, KEEP_CAPACITY};
use skq_net::stats::WorkerCounters;
use skq_net::{Cx, Protocol, Served};
use skq_testkit::Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// This thread's allocations so far.
fn allocs() -> u64 {
    skq_testkit::thread_allocs()
}

const REPLY: usize = 2048;

/// Each line gets a 2 KiB reply: the line itself, then filler.
struct Big;
impl Protocol for Big {
    type Session = ();
    fn open(&self, _: usize) {}
    fn serve(&self, _: &mut (), input: &[u8], out: &mut Vec<u8>, _: &mut Cx<'_>) -> Served {
        match input.iter().position(|&b| b == b'\n') {
            Some(i) => {
                let start = out.len();
                out.extend_from_slice(&input[..i]);
                out.resize(start + REPLY.max(i + 1) - 1, b'.');
                out.push(b'\n');
                Served::Request { consumed: i + 1 }
            }
            None => Served::NeedInput { consumed: 0 },
        }
    }
}

/// Hands out `data[at..end]` (then would block); counts and checks bytes
/// written without storing them.
struct Mock<'a> {
    data: &'a [u8],
    at: usize,
    end: usize,
    written: usize,
    lines: usize,
}
impl Read for Mock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at == self.end {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = (self.end - self.at).min(buf.len());
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
impl Transport for Mock<'_> {}
impl Write for Mock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written += buf.len();
        self.lines += buf.iter().filter(|&&b| b == b'\n').count();
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Serves `rounds` events over `conns` connections, each event delivering
/// `per_event` requests of `line` bytes; returns this thread's allocations
/// after the first `warmup` rounds.
fn run(line: usize, per_event: usize, conns: usize, rounds: usize, warmup: usize) -> u64 {
    let mut one = vec![b'r'; line - 1];
    one.push(b'\n');
    let data = one.repeat(per_event);
    let counters = WorkerCounters::default();
    let mut scratch = vec![0u8; 16 * 1024];
    let mut cs: Vec<Conn<()>> = (0..conns).map(|_| Conn::new(())).collect();
    let mut before = 0;
    let mut lines = 0;
    for round in 0..rounds {
        if round == warmup {
            before = allocs();
        }
        for c in cs.iter_mut() {
            let mut m = Mock {
                data: &data,
                at: 0,
                end: data.len(),
                written: 0,
                lines: 0,
            };
            let mut cx = Cx::new(0, &counters);
            assert_eq!(
                c.on_ready(&Big, &mut m, &mut scratch, &mut cx, false),
                Outcome::Idle
            );
            assert_eq!(m.written, per_event * REPLY.max(line));
            lines += m.lines;
            // Idle again: at most two kept buffers.
            assert!(
                c.buffer_capacity() <= 2 * KEEP_CAPACITY,
                "idle holds {}",
                c.buffer_capacity()
            );
        }
    }
    let steady = allocs() - before;
    assert_eq!(lines, rounds * conns * per_event);
    assert!(bufpool::pooled_bytes() <= POOL_BUFFERS * POOL_MAX_CAPACITY);
    steady
}

#[test]
fn large_replies_and_requests_allocate_nothing_in_steady_state() {
    // Small requests, 2 KiB replies, one at a time (a cache's `get`).
    assert_eq!(run(32, 1, 1, 5_000, 10), 0, "2 KiB replies");
    // Pipelined: three 2 KiB replies written per event.
    assert_eq!(run(32, 3, 1, 2_000, 10), 0, "pipelined replies");
    // 2 KiB requests too (a cache's `set`), interleaved over 4 connections.
    assert_eq!(run(REPLY, 1, 4, 2_000, 10), 0, "2 KiB requests");
    // Pool stays within its bound after all of it.
    assert!(bufpool::pooled_bytes() <= POOL_BUFFERS * POOL_MAX_CAPACITY);
}

#[test]
fn the_counter_sees_a_fresh_threads_first_large_reply() {
    // The counter sees the connection's own buffers: a fresh connection's
    // first large reply allocates (nothing pooled yet on this thread).
    let first = std::thread::spawn(|| {
        let a = allocs();
        let mut c: Conn<()> = Conn::new(());
        let counters = WorkerCounters::default();
        let data = b"x\n";
        let mut m = Mock {
            data,
            at: 0,
            end: data.len(),
            written: 0,
            lines: 0,
        };
        let mut scratch = [0u8; 64];
        let mut cx = Cx::new(0, &counters);
        let _ = c.on_ready(&Big, &mut m, &mut scratch, &mut cx, false);
        assert_eq!(m.written, REPLY);
        allocs() - a
    })
    .join()
    .expect("thread");
    assert!(first > 0, "the counting allocator counts");
}
