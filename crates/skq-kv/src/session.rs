//! Per-connection protocol state shared by both architectures: read buffer, parser, reply
//! ordering, backpressure. No socket here except in [`Session::fill`] / [`Session::flush`],
//! which take any `Read`/`Write`, so tests drive sessions from memory.
//!
//! Reply order: replies leave in request order. A reply is either written at once into the
//! output buffer or, when another worker computes it (thread-per-core), reserved as a
//! pending *part* with a sequence number; everything after a pending part queues behind it
//! and is released when [`Session::complete`] fills it.
//!
//! Backpressure: the session stops parsing while its pending output
//! ([`Session::pending_bytes`]: unsent bytes, bytes held in reply parts, and the room
//! promised to parts other workers fill) is over [`Limits::max_conn_output`], while
//! [`MAX_PARTS`] parts are queued, or while a command is stalled (the handler could not
//! forward it, or deferred it until output drains); the driver then stops reading the
//! socket. A handler keeps each reply within the room left
//! ([`Session::room`]), except one reply when nothing at all is pending, so a
//! connection's output memory stays under the ceiling plus one item whatever the client
//! asks. A part may be filled in several pieces ([`Session::complete`] with a retry): the
//! bytes of the front part go out as they arrive.
//!
//! Zero-copy values: output and parts are [`Reply`]s, so a `get` reply references values
//! of [`crate::reply::ZERO_COPY_MIN`] bytes or more in the store's segments instead of
//! copying them, and [`Session::flush`] gathers them into one `writev`. A referenced value
//! counts against the ceiling as [`crate::reply::value_charge`] says (at least an eighth
//! of the segment it keeps alive), until the whole output holding it is written.
//!
//! Memory: an idle session holds no buffer. A driver lends it the worker's read buffer
//! for one readiness event ([`Session::borrow_read_buffer`]) and takes it back when every
//! byte read has been parsed ([`Session::settle`]); only a session left holding part of a
//! request keeps a buffer, sized for that part, until the request completes. Output and
//! reply-part buffers larger than [`KEEP_OUTPUT`] are freed once written.

use std::collections::VecDeque;
use std::io::{self, Read, Write};

use crate::protocol::{CloseReason, Command, Limits, Parser, Step};
use crate::reply::Reply;

/// Stop parsing while this many reply parts are queued.
pub const MAX_PARTS: usize = 4096;
const READ_CHUNK: usize = 64 << 10;
/// Output buffers up to this size are kept for the next reply once written; larger ones
/// are freed, so an idle connection never holds what one big reply needed.
pub const KEEP_OUTPUT: usize = 1024;

/// What a handler did with a command.
#[must_use]
#[derive(Debug)]
pub enum Dispatch {
    /// Handled (reply written or reserved).
    Done,
    /// Could not be forwarded now (ring full): retry later, parse nothing else meanwhile.
    Stalled(Command),
    /// Not run now because its reply would not fit the room left: retry once output
    /// drains (a write or a completed part), parse nothing else meanwhile.
    Deferred(Command),
}

/// Executes commands for a session (one implementation per architecture).
pub trait Handler {
    /// Handles one command (never `Quit`, which the session handles).
    fn handle(&mut self, s: &mut Session, cmd: Command) -> Dispatch;
}

struct Part {
    data: Reply,
    ready: bool,
    /// Output room promised to whoever fills this part (counted in `promised`).
    reserved: usize,
    /// What is still to run for this part, and the bytes its next reply needs.
    retry: Option<(Command, usize)>,
}

impl Part {
    fn ready(data: Reply) -> Part {
        Part {
            data,
            ready: true,
            reserved: 0,
            retry: None,
        }
    }
}

/// Protocol state of one connection.
pub struct Session {
    /// Receive buffer; `rbuf[rpos..rend]` is unparsed input, the rest is initialized spare
    /// room (zeroed once when the buffer grows, not on every read).
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    parser: Parser,
    /// Output; `written` of its bytes are sent.
    out: Reply,
    written: usize,
    parts: VecDeque<Part>,
    /// Sequence number of `parts.front()`.
    base_seq: u64,
    /// Bytes held in `parts` (their data).
    held: usize,
    /// Sum of the parts' `reserved`.
    promised: usize,
    stalled: Option<Command>,
    /// Whether `stalled` waits for ring space (rather than for output to drain).
    on_ring: bool,
    closing: bool,
    eof: bool,
    /// Set when the connection is closed for a protocol violation.
    pub violation: Option<CloseReason>,
    /// See [`Session::commands`].
    commands: u64,
}

/// Result of [`Session::fill`].
#[derive(Debug, PartialEq, Eq)]
pub enum Fill {
    /// Read this many bytes, then the socket would block.
    Read(usize),
    /// Read this many bytes and stopped because the buffer is full: the socket may hold
    /// more (an edge-triggered driver must ask to be called again).
    Full(usize),
    /// The peer closed its side.
    Eof,
}

impl Session {
    /// A fresh session enforcing `limits`.
    pub fn new(limits: Limits) -> Session {
        Session {
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            parser: Parser::new(limits),
            out: Reply::new(),
            written: 0,
            parts: VecDeque::new(),
            base_seq: 0,
            held: 0,
            promised: 0,
            stalled: None,
            on_ring: false,
            closing: false,
            eof: false,
            violation: None,
            commands: 0,
        }
    }

    /// Appends a reply (behind any pending part).
    pub fn reply(&mut self, bytes: &[u8]) {
        self.reply_buf().extend_from_slice(bytes);
    }

    /// Gives direct access to the output buffer when nothing is pending (the common case),
    /// so replies can be built in place; otherwise to the last part if ready, or a new
    /// ready part.
    pub fn reply_buf(&mut self) -> &mut Vec<u8> {
        self.reply_out().bytes_mut()
    }

    /// [`Self::reply_buf`] as a [`Reply`], for replies that reference store values.
    pub fn reply_out(&mut self) -> &mut Reply {
        if self.parts.is_empty() {
            return &mut self.out;
        }
        if !self.parts.back().is_some_and(|p| p.ready) {
            self.parts.push_back(Part::ready(Reply::new()));
        }
        &mut self.parts.back_mut().expect("just ensured").data
    }

    /// Bytes in the last part when it is ready (written through [`Self::reply_buf`],
    /// so not counted in `held`).
    fn tail_len(&self) -> usize {
        self.parts
            .back()
            .filter(|p| p.ready)
            .map_or(0, |p| p.data.charge())
    }

    /// Reserves a reply slot filled later by [`complete`](Self::complete), promising it
    /// `room` bytes of output; returns its sequence.
    pub fn reserve(&mut self, room: usize) -> u64 {
        // The ready tail stops being the tail: count its bytes.
        self.held += self.tail_len();
        self.parts.push_back(Part {
            data: Reply::new(),
            ready: false,
            reserved: room,
            retry: None,
        });
        self.promised += room;
        self.base_seq + self.parts.len() as u64 - 1
    }

    /// Fills (part of) a reserved slot: appends `data` and releases its promised room.
    /// With `retry` the slot stays open: the command still to run and the bytes its next
    /// reply needs wait in it until [`take_retry`](Self::take_retry) hands them out.
    /// Unknown sequence numbers are ignored.
    pub fn complete(&mut self, seq: u64, mut data: Reply, retry: Option<(Command, usize)>) {
        let Some(idx) = seq.checked_sub(self.base_seq) else {
            return;
        };
        let last = self.parts.len().saturating_sub(1);
        let Some(p) = self.parts.get_mut(idx as usize) else {
            return;
        };
        if p.ready {
            return;
        }
        self.promised -= std::mem::take(&mut p.reserved);
        self.held += data.charge();
        p.data.append(&mut data);
        p.ready = retry.is_none();
        p.retry = retry;
        if p.ready && idx as usize == last {
            // It became the ready tail, whose bytes `held` does not count.
            self.held -= p.data.charge();
        }
        self.release();
    }

    /// Moves the front parts' bytes to the output buffer: whole ready parts, and what
    /// the first open part holds so far.
    fn release(&mut self) {
        while let Some(front_ready) = self.parts.front().map(|p| p.ready) {
            let is_tail = front_ready && self.parts.len() == 1;
            let p = self.parts.front_mut().expect("front exists");
            if !is_tail {
                self.held -= p.data.charge();
            }
            if self.out.len() == self.written {
                self.out.clear();
                self.written = 0;
            }
            self.out.append(&mut p.data);
            if !p.ready {
                break;
            }
            self.parts.pop_front();
            self.base_seq += 1;
        }
    }

    /// Hands out the first open part's pending retry: its sequence, the command, the bytes
    /// its reply needs, and whether it is the front part with every byte before it
    /// written (then nothing but its own output can free room, so it may run whatever the
    /// room). Give it back with [`Self::put_retry`] if it cannot run now.
    pub fn take_retry(&mut self) -> Option<(u64, Command, usize, bool)> {
        let (i, p) = self
            .parts
            .iter_mut()
            .enumerate()
            .find(|(_, p)| p.retry.is_some())?;
        let (cmd, need) = p.retry.take().expect("found");
        let first = i == 0 && self.written == self.out.len();
        Some((self.base_seq + i as u64, cmd, need, first))
    }

    /// Puts back a retry taken by [`Self::take_retry`].
    pub fn put_retry(&mut self, seq: u64, cmd: Command, need: usize) {
        if let Some(p) = seq
            .checked_sub(self.base_seq)
            .and_then(|i| self.parts.get_mut(i as usize))
        {
            p.retry = Some((cmd, need));
        }
    }

    /// Promises `room` more bytes to the open part `seq` (before re-sending its retry).
    pub fn promise(&mut self, seq: u64, room: usize) {
        if let Some(p) = seq
            .checked_sub(self.base_seq)
            .and_then(|i| self.parts.get_mut(i as usize))
        {
            p.reserved += room;
            self.promised += room;
        }
    }

    /// This connection's pending output: unsent bytes, bytes held in parts, and room
    /// promised to open parts.
    /// Values referenced in the store count as [`crate::reply::value_charge`] says, and
    /// until the whole output they are part of is written.
    pub fn pending_bytes(&self) -> usize {
        self.out.charge() - self.written + self.held + self.tail_len() + self.promised
    }

    /// Output room left under the connection's ceiling.
    pub fn room(&self) -> usize {
        self.parser
            .limits()
            .max_conn_output
            .saturating_sub(self.pending_bytes())
    }

    /// Whether output is waiting to be written.
    pub fn wants_write(&self) -> bool {
        self.written < self.out.len()
    }

    /// Whether a command is parked waiting for ring space.
    pub fn is_parked(&self) -> bool {
        self.stalled.is_some() && self.on_ring
    }

    /// Whether the connection owes the client nothing: no unsent or pending reply, no
    /// stalled command, not closing. Unparsed input (part of a command) does not count:
    /// `--idle-timeout` closes a quiet connection whose last command ([`Self::commands`])
    /// is older than the timeout, as memcached does with a partial command line.
    pub fn is_quiet(&self) -> bool {
        !self.wants_write() && self.parts.is_empty() && self.stalled.is_none() && !self.closing
    }

    /// Commands (and protocol errors) parsed so far, wrapping: a change means the client
    /// sent a whole command since it was last read.
    pub fn commands(&self) -> u64 {
        self.commands
    }

    /// Whether the session wants more input (not blocked, not closing).
    pub fn wants_read(&self) -> bool {
        !self.closing && !self.eof && !self.blocked()
    }

    fn blocked(&self) -> bool {
        self.stalled.is_some() || self.blocked_for_output()
    }

    /// Whether the connection should be closed now: it is closing (quit, violation) or the
    /// peer hung up, and every reply that can still be written has been.
    pub fn finished(&self) -> bool {
        (self.closing || self.eof)
            && !self.wants_write()
            && (self.parts.is_empty() || self.violation.is_some())
    }

    /// Reads what the socket has (until it would block, or the buffer is large enough).
    ///
    /// Without `peer_hup` (the readiness event did not report the peer's
    /// close), a read shorter than the room offered also ends it: it took
    /// everything the socket held, and whatever arrives later (bytes or a
    /// FIN) raises a new edge, so the read that would only return `EAGAIN`
    /// is saved (one system call per request). With `peer_hup` a FIN may be
    /// queued behind the data with no edge to come, so reading goes on until
    /// it is seen.
    pub fn fill(&mut self, r: &mut impl Read, peer_hup: bool) -> io::Result<Fill> {
        let cap =
            self.parser.limits().max_item_size + self.parser.limits().max_get_line + READ_CHUNK;
        let mut total = 0;
        while self.rend - self.rpos < cap {
            if self.rbuf.len() - self.rend < READ_CHUNK / 4 {
                self.make_room();
            }
            let room = self.rbuf.len() - self.rend;
            match r.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(if total == 0 {
                        Fill::Eof
                    } else {
                        Fill::Read(total)
                    });
                }
                Ok(n) => {
                    self.rend += n;
                    total += n;
                    if !peer_hup && n < room {
                        return Ok(Fill::Read(total));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Fill::Read(total)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(Fill::Full(total))
    }

    /// Moves unparsed input to the front, growing the buffer if that is not enough.
    fn make_room(&mut self) {
        self.rbuf.copy_within(self.rpos..self.rend, 0);
        self.rend -= self.rpos;
        self.rpos = 0;
        if self.rbuf.len() - self.rend < READ_CHUNK / 4 {
            self.rbuf.resize(self.rend + READ_CHUNK, 0);
        }
    }

    /// Writes pending output; returns the bytes written.
    pub fn flush(&mut self, w: &mut impl Write) -> io::Result<usize> {
        let mut total = 0;
        while self.written < self.out.len() {
            match self.out.write_from(w, self.written) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
            if self.out.capacity() > KEEP_OUTPUT {
                self.out = Reply::new();
            }
        }
        Ok(total)
    }

    /// Lends the session `pool` (the worker's read buffer) when it holds no buffer of its
    /// own, so reading costs no allocation and an idle session none at all. Call before
    /// [`fill`](Self::fill); [`settle`](Self::settle) gives it back.
    pub fn borrow_read_buffer(&mut self, pool: &mut Vec<u8>) {
        if self.rbuf.capacity() == 0 {
            std::mem::swap(&mut self.rbuf, pool);
            self.rpos = 0;
            self.rend = 0;
        }
    }

    /// After a readiness event: returns the read buffer to `pool` (when the pool is
    /// empty) or frees it, if every byte read has been parsed; a session holding part of
    /// a request keeps only that part. Also frees an emptied queue of reply parts.
    pub fn settle(&mut self, pool: &mut Vec<u8>) {
        if self.rpos == self.rend {
            if pool.capacity() == 0 && self.rbuf.len() <= 4 * READ_CHUNK {
                std::mem::swap(&mut self.rbuf, pool);
            }
            self.rbuf = Vec::new();
            self.rpos = 0;
            self.rend = 0;
        } else if self.rbuf.len() > 2 * (self.rend - self.rpos) + 1024 {
            // Keep only the unparsed tail, in a buffer of its own size; the next fill
            // grows it as far as the rest of the request needs.
            let tail = self.rbuf[self.rpos..self.rend].to_vec();
            if pool.capacity() == 0 && self.rbuf.len() <= 4 * READ_CHUNK {
                std::mem::swap(&mut self.rbuf, pool);
            }
            self.rend = tail.len();
            self.rpos = 0;
            self.rbuf = tail;
        }
        if self.parts.is_empty() && self.parts.capacity() > 0 {
            self.parts = VecDeque::new();
        }
    }

    /// Takes everything written so far (tests and in-memory drivers).
    pub fn take_output(&mut self) -> Vec<u8> {
        let out = self.out.to_vec_from(self.written);
        self.out.clear();
        self.written = 0;
        out
    }

    /// Processes, writes, and repeats while writing unblocked parsing (a session that
    /// stopped parsing because of unsent output may hold complete commands that no new
    /// socket readiness would ever trigger). Returns the bytes written.
    pub fn pump(&mut self, h: &mut impl Handler, w: &mut impl Write) -> io::Result<usize> {
        let mut total = 0;
        loop {
            self.process(h);
            let stopped_for_output = self.blocked_for_output();
            let wrote = self.flush(w)?;
            total += wrote;
            // A command deferred for room may fit now; nothing else would wake it when
            // the output just emptied (no write interest, no read interest).
            let deferred = wrote > 0 && self.stalled.is_some() && !self.on_ring;
            let unblocked =
                stopped_for_output && !self.blocked_for_output() && self.rpos < self.rend;
            if !(deferred || unblocked) {
                return Ok(total);
            }
        }
    }

    /// Parses and dispatches buffered commands until input runs out or the session blocks.
    pub fn process(&mut self, h: &mut impl Handler) {
        while !self.closing && !self.blocked_for_output() {
            if let Some(cmd) = self.stalled.take() {
                if !self.dispatch(h, cmd) {
                    break;
                }
                continue;
            }
            let (n, step) = self.parser.parse(&self.rbuf[self.rpos..self.rend]);
            self.rpos += n;
            if !matches!(step, Step::NeedMore) {
                self.commands = self.commands.wrapping_add(1);
            }
            match step {
                Step::NeedMore => break,
                Step::Skip => {}
                Step::Reply(msg) => self.reply(msg),
                Step::Close(reason) => {
                    self.reply(reason.message());
                    self.violation = Some(reason);
                    self.closing = true;
                }
                Step::Command(Command::Quit) => self.closing = true,
                Step::Command(cmd) => {
                    if !self.dispatch(h, cmd) {
                        break;
                    }
                }
            }
        }
        if self.rpos == self.rend {
            self.rpos = 0;
            self.rend = 0;
            if self.rbuf.len() > 4 * READ_CHUNK {
                // Release what a large value needed once.
                self.rbuf = Vec::new();
            }
        }
    }

    /// Runs one command; false when it stalled or was deferred (kept for a retry).
    fn dispatch(&mut self, h: &mut impl Handler, cmd: Command) -> bool {
        let (c, on_ring) = match h.handle(self, cmd) {
            Dispatch::Done => return true,
            Dispatch::Stalled(c) => (c, true),
            Dispatch::Deferred(c) => (c, false),
        };
        self.stalled = Some(c);
        self.on_ring = on_ring;
        false
    }

    fn blocked_for_output(&self) -> bool {
        self.pending_bytes() > self.parser.limits().max_conn_output || self.parts.len() >= MAX_PARTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket stand-in: hands out `chunks` one read at a time, then
    /// `EAGAIN` (or end of stream once `fin` is set and the chunks are gone).
    struct Script {
        chunks: VecDeque<Vec<u8>>,
        fin: bool,
        reads: usize,
    }

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            match self.chunks.pop_front() {
                Some(c) => {
                    buf[..c.len()].copy_from_slice(&c);
                    Ok(c.len())
                }
                None if self.fin => Ok(0),
                None => Err(io::ErrorKind::WouldBlock.into()),
            }
        }
    }

    fn session() -> Session {
        Session::new(Limits {
            max_item_size: 4096,
            max_line: 2048,
            max_get_line: 8192,
            max_conn_output: crate::protocol::DEFAULT_MAX_CONN_OUTPUT,
        })
    }

    fn script(chunks: &[&[u8]], fin: bool) -> Script {
        Script {
            chunks: chunks.iter().map(|c| c.to_vec()).collect(),
            fin,
            reads: 0,
        }
    }

    #[test]
    fn a_short_read_ends_the_fill_unless_the_peer_hung_up() {
        // No hang-up reported: the first (short) read took what the socket
        // held; the read that would only say EAGAIN is not made.
        let mut s = session();
        let mut sock = script(&[b"get a\r\n", b"get b\r\n"], false);
        assert_eq!(s.fill(&mut sock, false).unwrap(), Fill::Read(7));
        assert_eq!(sock.reads, 1);
        // The next edge reads the rest, then the socket is empty.
        assert_eq!(s.fill(&mut sock, false).unwrap(), Fill::Read(7));
        assert_eq!(sock.reads, 2);
        assert!(s.wants_read());

        // Hang-up reported: reading goes on past the data until the FIN.
        let mut s = session();
        let mut sock = script(&[b"get a\r\n", b"get b\r\n"], true);
        assert_eq!(s.fill(&mut sock, true).unwrap(), Fill::Read(14));
        assert_eq!(sock.reads, 3);
        assert!(!s.wants_read(), "the end of stream was seen");
    }
}
