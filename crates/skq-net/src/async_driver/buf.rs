//! A connection's buffers in the async loops (any protocol's,
//! [`super::ProtocolHandler`], and an application's own handler, such as
//! skq-servers' async RPC handler), held to this layer's rule for `Conn`
//! (see [`crate::bufpool`]).
//!
//! **Invariants (the memory bound).**
//! * Reads go through the serving thread's scratch buffer ([`SCRATCH`]
//!   bytes, one per runtime thread) inside a single poll, and only the
//!   bytes read are kept: no task holds a read buffer across an await.
//! * A buffer that grew beyond [`KEEP_CAPACITY`] leaves the connection
//!   once it is empty (all input served; all output written at the end of
//!   a batch) and goes to the thread's [`bufpool`]; smaller ones are kept
//!   to spare an allocation per request. So an idle connection (waiting
//!   for its next request) holds at most `2 × KEEP_CAPACITY` bytes of
//!   buffers, as a `Conn` does, whatever the largest request or reply was.
//! * A buffer about to outgrow [`KEEP_CAPACITY`] starts from a pooled one
//!   (input: when the bytes read do not fit; output: before a reply when
//!   the previous one did not fit, and before a file piece). So requests
//!   and replies larger than [`KEEP_CAPACITY`] cost no allocation in
//!   steady state. A connection that ends gives its buffers back too.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::Poll;

use tokio::io::{AsyncRead, ReadBuf};

use crate::bufpool;
use crate::conn::KEEP_CAPACITY;

/// Bytes of each runtime thread's read scratch buffer (the most one read
/// returns).
pub const SCRATCH: usize = 16 * 1024;

thread_local! {
    /// This thread's read buffer, lent for the length of one poll.
    static SCRATCH_BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0; SCRATCH].into_boxed_slice());
}

/// A connection's input and output buffers.
#[derive(Default)]
pub struct Bufs {
    /// Bytes read and not yet dropped by [`Bufs::compact`].
    pub input: Vec<u8>,
    /// Replies not yet written.
    pub out: Vec<u8>,
    /// The last batch's replies outgrew [`KEEP_CAPACITY`].
    big_out: bool,
}

impl Bufs {
    /// Reads what the stream has (at most [`SCRATCH`] bytes) and appends
    /// it to the input; `Ok(0)` at end of stream.
    pub async fn read<S: AsyncRead + Unpin>(&mut self, stream: &mut S) -> io::Result<usize> {
        let input = &mut self.input;
        poll_fn(|cx| {
            let polled = SCRATCH_BUF.try_with(|scratch| {
                let Ok(mut scratch) = scratch.try_borrow_mut() else {
                    return Poll::Ready(Err(io::Error::other("read scratch buffer in use")));
                };
                let mut rb = ReadBuf::new(&mut scratch[..]);
                match Pin::new(&mut *stream).poll_read(cx, &mut rb) {
                    Poll::Ready(Ok(())) => {
                        let got = rb.filled();
                        append(input, got);
                        Poll::Ready(Ok(got.len()))
                    }
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            });
            polled.unwrap_or_else(|_| Poll::Ready(Err(io::Error::other("thread is exiting"))))
        })
        .await
    }

    /// Drops the first `served` bytes of the input (requests answered),
    /// keeping the unserved rest; an emptied buffer grown beyond
    /// [`KEEP_CAPACITY`] goes to the thread's pool.
    pub fn compact(&mut self, served: usize) {
        if served >= self.input.len() {
            self.input.clear();
            release(&mut self.input);
        } else if served > 0 {
            self.input.drain(..served);
        }
    }

    /// Before a reply is produced: when the last batch's replies outgrew
    /// [`KEEP_CAPACITY`] and none is pending, start from a pooled buffer.
    pub fn prepare_output(&mut self) {
        if self.big_out && self.out.is_empty() {
            reserve_pooled(&mut self.out, KEEP_CAPACITY + 1);
        }
    }

    /// Once a batch's replies are written (the output is empty): notes
    /// whether they outgrew [`KEEP_CAPACITY`] and gives such a buffer back.
    pub fn settle_output(&mut self) {
        debug_assert!(self.out.is_empty());
        self.big_out = self.out.capacity() > KEEP_CAPACITY;
        release(&mut self.out);
    }
}

impl Drop for Bufs {
    fn drop(&mut self) {
        release(&mut self.input);
        release(&mut self.out);
    }
}

/// Makes room for `need` bytes in `buf`: when that outgrows both its
/// capacity and [`KEEP_CAPACITY`], moves its bytes into a pooled buffer
/// (if the pool has one) and releases the old one.
pub(crate) fn reserve_pooled(buf: &mut Vec<u8>, need: usize) {
    if need > buf.capacity() && need > KEEP_CAPACITY {
        if let Some(mut spare) = bufpool::take() {
            spare.extend_from_slice(buf);
            let mut old = std::mem::replace(buf, spare);
            release(&mut old);
        }
    }
}

/// Appends `bytes` to `input`, growing into a pooled buffer first.
fn append(input: &mut Vec<u8>, bytes: &[u8]) {
    reserve_pooled(input, input.len() + bytes.len());
    input.extend_from_slice(bytes);
}

/// Takes `buf` from its holder when it grew beyond [`KEEP_CAPACITY`]: to
/// the thread's pool (which frees it when over its bounds).
fn release(buf: &mut Vec<u8>) {
    if buf.capacity() > KEEP_CAPACITY {
        bufpool::give(std::mem::take(buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain_pool() {
        while bufpool::take().is_some() {}
    }

    #[test]
    fn an_idle_connection_holds_at_most_two_kept_buffers() {
        drain_pool();
        let mut b = Bufs::default();
        // A 6 KiB request, served, then a 9 KiB reply, written.
        append(&mut b.input, &[7; 6 * 1024]);
        b.compact(6 * 1024);
        b.prepare_output();
        b.out.resize(9 * 1024, 1);
        b.out.clear();
        b.settle_output();
        let held = b.input.capacity() + b.out.capacity();
        assert!(held <= 2 * KEEP_CAPACITY, "idle holds {held}");
        assert!(bufpool::pooled_bytes() >= 15 * 1024);
        // A partial request is kept, moved to the front.
        append(&mut b.input, b"abcdef");
        b.compact(2);
        assert_eq!(b.input, b"cdef");
        drain_pool();
    }

    #[test]
    fn large_buffers_come_from_the_pool_and_go_back() {
        drain_pool();
        bufpool::give(Vec::with_capacity(32 * 1024));
        bufpool::give(Vec::with_capacity(32 * 1024));
        let mut b = Bufs::default();
        append(&mut b.input, b"head");
        append(&mut b.input, &[1; 8 * 1024]);
        // The pooled buffer holds both pieces, in order.
        assert_eq!(b.input.capacity(), 32 * 1024);
        assert_eq!(&b.input[..4], b"head");
        assert_eq!(b.input.len(), 4 + 8 * 1024);
        // The next reply after a large one starts from the pool.
        b.big_out = true;
        b.prepare_output();
        assert_eq!(b.out.capacity(), 32 * 1024);
        assert_eq!(bufpool::pooled_bytes(), 0);
        // A closed connection gives both back.
        drop(b);
        assert_eq!(bufpool::pooled_bytes(), 64 * 1024);
        drain_pool();
    }
}
