//! The per-connection protocol state machine, shared by both runtimes.
//!
//! A [`Conn`] owns the bytes received but not yet served and the replies
//! encoded but not yet written. It does no I/O itself except in
//! [`Conn::on_ready`], which drives one readiness event over any non-blocking
//! `Read + Write` stream (a real socket in the skq runtime, an in-memory mock in
//! the unit tests). The tokio runtime uses the same buffers and decoding through
//! the smaller methods, with tokio's own async I/O.
//!
//! Invariants:
//! * requests are served strictly in arrival order, one reply each, and a reply
//!   is queued for output before the next request is served;
//! * the first invalid frame header ends the connection ([`Close::Protocol`]);
//!   nothing after it is served;
//! * output that cannot be written (the peer does not read) stops the serving
//!   of further requests ([`Outcome::Blocked`]) instead of growing without
//!   bound; the socket's next writable edge resumes it.

use std::io::{self, Read, Write};

use skq_proto::wire::{self, Header, ProtoError};

use crate::service::ServiceMode;
use crate::stats::WorkerCounters;

/// Most requests served per readiness event before the connection yields
/// the worker (and asks for redelivery).
pub const REQUESTS_PER_EVENT: usize = 32;
/// Stop reading once this many unserved bytes are buffered (unless no whole
/// frame is buffered yet, so a large frame can always complete).
pub const READ_LIMIT: usize = 256 * 1024;
/// A buffer larger than this is freed rather than kept when it empties, so
/// idle connections hold little memory.
const KEEP_CAPACITY: usize = 64 * 1024;

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// The peer closed after its last complete request; every reply was written.
    Eof,
    /// The peer sent an invalid frame.
    Protocol(ProtoError),
    /// The peer vanished mid-frame, or the socket failed (reset, broken pipe).
    Aborted,
}

/// What the runtime should do after [`Conn::on_ready`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Outcome {
    /// Everything readable was read and served: wait for the next edge.
    Idle,
    /// Stopped early (request budget or read limit): ask for redelivery.
    More,
    /// Replies are waiting for socket space: wait for the writable edge.
    Blocked,
    /// Deregister and close the connection.
    Close(Close),
}

/// Buffers and protocol state of one connection.
#[derive(Debug, Default)]
pub struct Conn {
    input: Vec<u8>,
    in_start: usize,
    output: Vec<u8>,
    out_start: usize,
    eof: bool,
    high_seen: bool,
}

impl Conn {
    /// A fresh connection (allocates nothing until bytes arrive).
    pub fn new() -> Self {
        Conn::default()
    }

    /// Appends received bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// The input buffer, for runtimes that read straight into spare capacity
    /// (tokio's `try_read_buf`). Unserved bytes start at an internal offset;
    /// only append to it.
    pub fn input_buf(&mut self) -> &mut Vec<u8> {
        &mut self.input
    }

    /// Records that the peer will send nothing more.
    pub fn set_eof(&mut self) {
        self.eof = true;
    }

    /// Whether any request so far carried the high-priority class (1); a
    /// runtime with priorities may then re-flag the connection.
    pub fn high_priority_seen(&self) -> bool {
        self.high_seen
    }

    /// Whether the peer has finished sending.
    pub fn is_eof(&self) -> bool {
        self.eof
    }

    /// Bytes received and not yet served.
    pub fn buffered(&self) -> &[u8] {
        &self.input[self.in_start..]
    }

    /// Whether the buffered bytes hold a whole frame or an invalid header,
    /// i.e. whether [`Self::next_request`] would return something other than `Ok(None)`.
    pub fn frame_ready(&self) -> bool {
        !matches!(wire::decode_request(self.buffered()), Ok(None))
    }

    /// Takes the next complete request off the input, or `Ok(None)` when no
    /// whole frame is buffered. The payload is skipped (the synthetic service
    /// does not look at it).
    pub fn next_request(&mut self) -> Result<Option<Header>, ProtoError> {
        let h = wire::decode_request(self.buffered())?;
        if let Some(h) = h {
            self.in_start += h.frame_len();
            if self.in_start == self.input.len() {
                self.input.clear();
                self.in_start = 0;
                if self.input.capacity() > KEEP_CAPACITY {
                    self.input = Vec::new();
                }
            }
        }
        Ok(h)
    }

    /// Moves unserved bytes to the front of the buffer when that frees much room.
    pub fn compact(&mut self) {
        if self.in_start > 0 && self.in_start * 2 >= self.input.len() {
            self.input.drain(..self.in_start);
            self.in_start = 0;
        }
    }

    /// Queues the reply to `req`, reporting `delivered_ns` of service.
    pub fn push_reply(&mut self, req: &Header, delivered_ns: u32) {
        req.reply(delivered_ns).encode(&mut self.output);
    }

    /// Encoded replies not yet written.
    pub fn pending_output(&self) -> &[u8] {
        &self.output[self.out_start..]
    }

    /// Marks `n` bytes of [`Self::pending_output`] as written.
    pub fn consume_output(&mut self, n: usize) {
        self.out_start += n;
        debug_assert!(self.out_start <= self.output.len());
        if self.out_start == self.output.len() {
            self.output.clear();
            self.out_start = 0;
            if self.output.capacity() > KEEP_CAPACITY {
                self.output = Vec::new();
            }
        }
    }

    /// Serves one request: delivers its service time on this thread and queues
    /// the reply. Returns `Ok(false)` when no whole request is buffered.
    pub fn serve_next(
        &mut self,
        service: ServiceMode,
        counters: &WorkerCounters,
    ) -> Result<bool, ProtoError> {
        match self.next_request()? {
            None => Ok(false),
            Some(req) => {
                self.high_seen |= req.class == 1;
                let delivered = service.serve(req.service_ns);
                self.push_reply(&req, delivered);
                counters.record_request(delivered);
                Ok(true)
            }
        }
    }

    /// Writes pending output until done or the socket is full.
    /// Returns `Ok(true)` when everything was written, `Ok(false)` on `EAGAIN`.
    pub fn flush<S: Write>(&mut self, stream: &mut S) -> io::Result<bool> {
        while !self.pending_output().is_empty() {
            match stream.write(self.pending_output()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.consume_output(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Handles one edge-triggered readiness event on a non-blocking stream:
    /// flush pending replies, read until `EAGAIN` (or [`READ_LIMIT`]), serve up
    /// to [`REQUESTS_PER_EVENT`] buffered requests in order, writing each reply
    /// as soon as it is ready. `scratch` is the worker's read buffer.
    pub fn on_ready<S: Read + Write>(
        &mut self,
        stream: &mut S,
        service: ServiceMode,
        scratch: &mut [u8],
        counters: &WorkerCounters,
    ) -> Outcome {
        match self.flush(stream) {
            Ok(true) => {}
            Ok(false) => return Outcome::Blocked,
            Err(_) => return Outcome::Close(Close::Aborted),
        }
        let mut drained = self.eof;
        while !drained && (self.buffered().len() < READ_LIMIT || !self.frame_ready()) {
            match stream.read(scratch) {
                Ok(0) => {
                    self.eof = true;
                    drained = true;
                }
                Ok(n) => {
                    self.compact();
                    self.feed(&scratch[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => drained = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Outcome::Close(Close::Aborted),
            }
        }
        for _ in 0..REQUESTS_PER_EVENT {
            match self.serve_next(service, counters) {
                Err(e) => return Outcome::Close(Close::Protocol(e)),
                Ok(false) => break,
                Ok(true) => match self.flush(stream) {
                    Ok(true) => {}
                    Ok(false) => return Outcome::Blocked,
                    Err(_) => return Outcome::Close(Close::Aborted),
                },
            }
        }
        if self.frame_ready() || !drained {
            return Outcome::More;
        }
        if self.eof {
            return Outcome::Close(if self.buffered().is_empty() {
                Close::Eof
            } else {
                Close::Aborted
            });
        }
        Outcome::Idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A non-blocking in-memory stream: reads come from scripted chunks
    /// (`None` = EAGAIN, empty = EOF), writes accept up to `write_room` bytes.
    #[derive(Default)]
    struct Mock {
        chunks: VecDeque<Option<Vec<u8>>>,
        written: Vec<u8>,
        write_room: usize,
    }

    impl Read for Mock {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.chunks.front_mut() {
                None | Some(None) => {
                    self.chunks.pop_front();
                    Err(io::ErrorKind::WouldBlock.into())
                }
                Some(Some(c)) => {
                    let n = c.len().min(buf.len());
                    buf[..n].copy_from_slice(&c[..n]);
                    c.drain(..n);
                    if n == 0 || c.is_empty() {
                        self.chunks.pop_front();
                    }
                    Ok(n)
                }
            }
        }
    }

    impl Write for Mock {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.write_room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.write_room);
            self.write_room -= n;
            self.written.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn requests(ids: std::ops::Range<u64>) -> Vec<u8> {
        let mut b = Vec::new();
        for id in ids {
            Header::request(id, 0, 0).encode(&mut b);
        }
        b
    }

    fn reply_ids(bytes: &[u8]) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut rest = bytes;
        while let Some(h) = wire::decode_reply(rest).unwrap() {
            ids.push(h.id);
            rest = &rest[h.frame_len()..];
        }
        assert!(rest.is_empty(), "trailing partial reply");
        ids
    }

    fn drive(conn: &mut Conn, s: &mut Mock) -> Outcome {
        let mut scratch = [0u8; 7]; // tiny: frames always span reads
        conn.on_ready(
            s,
            ServiceMode::Spin,
            &mut scratch,
            &WorkerCounters::default(),
        )
    }

    #[test]
    fn serves_in_order_across_split_reads_and_respects_budget() {
        let mut all = requests(0..40);
        // A frame with a payload, split oddly.
        let mut big = Header::request(40, 0, 0);
        big.payload_len = 5;
        big.encode(&mut all);
        all.extend_from_slice(b"hello");
        let mut s = Mock {
            write_room: usize::MAX,
            ..Mock::default()
        };
        for c in all.chunks(13) {
            s.chunks.push_back(Some(c.to_vec()));
        }
        s.chunks.push_back(None);
        let mut c = Conn::new();
        assert_eq!(drive(&mut c, &mut s), Outcome::More, "budget of 32 reached");
        assert_eq!(reply_ids(&s.written), (0..32).collect::<Vec<_>>());
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert_eq!(reply_ids(&s.written), (0..41).collect::<Vec<_>>());
    }

    #[test]
    fn blocked_output_stops_serving_until_space() {
        let mut s = Mock {
            write_room: 30,
            ..Mock::default()
        };
        s.chunks.push_back(Some(requests(0..5)));
        s.chunks.push_back(None);
        let mut c = Conn::new();
        assert_eq!(drive(&mut c, &mut s), Outcome::Blocked);
        assert_eq!(s.written.len(), 30);
        s.write_room = usize::MAX;
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert_eq!(reply_ids(&s.written), (0..5).collect::<Vec<_>>());
    }

    #[test]
    fn eof_after_whole_requests_is_orderly_and_mid_frame_is_aborted() {
        let mut s = Mock {
            write_room: usize::MAX,
            ..Mock::default()
        };
        s.chunks.push_back(Some(requests(0..3)));
        s.chunks.push_back(Some(Vec::new()));
        let mut c = Conn::new();
        assert_eq!(drive(&mut c, &mut s), Outcome::Close(Close::Eof));
        assert_eq!(reply_ids(&s.written), vec![0, 1, 2]);

        let mut s = Mock {
            write_room: usize::MAX,
            ..Mock::default()
        };
        let mut bytes = requests(0..2);
        bytes.truncate(30); // one whole frame and half of the next
        s.chunks.push_back(Some(bytes));
        s.chunks.push_back(Some(Vec::new()));
        let mut c = Conn::new();
        assert_eq!(drive(&mut c, &mut s), Outcome::Close(Close::Aborted));
        assert_eq!(reply_ids(&s.written), vec![0]);
    }

    #[test]
    fn bad_header_closes_after_serving_what_came_before() {
        let mut s = Mock {
            write_room: usize::MAX,
            ..Mock::default()
        };
        let mut bytes = requests(0..2);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes()); // absurd length
        s.chunks.push_back(Some(bytes));
        let mut c = Conn::new();
        assert_eq!(
            drive(&mut c, &mut s),
            Outcome::Close(Close::Protocol(ProtoError::BadLength(u32::MAX)))
        );
        assert_eq!(reply_ids(&s.written), vec![0, 1]);

        // A reply frame sent to the server is a protocol error too.
        let mut s = Mock {
            write_room: usize::MAX,
            ..Mock::default()
        };
        let mut bytes = Vec::new();
        Header::request(7, 0, 0).reply(0).encode(&mut bytes);
        s.chunks.push_back(Some(bytes));
        let mut c = Conn::new();
        assert!(matches!(
            drive(&mut c, &mut s),
            Outcome::Close(Close::Protocol(_))
        ));
        assert!(s.written.is_empty());
    }

    #[test]
    fn notices_high_priority_class() {
        let mut s = Mock {
            write_room: usize::MAX,
            ..Mock::default()
        };
        let mut bytes = requests(0..2);
        Header::request(2, 0, 1).encode(&mut bytes);
        s.chunks.push_back(Some(bytes));
        let mut c = Conn::new();
        assert!(!c.high_priority_seen());
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert!(c.high_priority_seen());
    }

    #[test]
    fn idle_connection_allocates_nothing() {
        let mut s = Mock::default();
        let mut c = Conn::new();
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert_eq!(c.input.capacity(), 0);
        assert_eq!(c.output.capacity(), 0);
    }
}
