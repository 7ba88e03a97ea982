//! One connection's buffers and the readiness state machine every fd-based
//! driver runs.
//!
//! A [`Conn`] owns the bytes received but not yet served, the replies
//! encoded but not yet written, and the protocol's session. [`Conn::on_ready`]
//! handles one readiness event over any non-blocking `Read + Write` stream
//! (a socket in the drivers, an in-memory mock in the tests):
//! flush pending replies, read until `EAGAIN` (or the protocol's read limit),
//! serve up to [`REQUESTS_PER_EVENT`] requests in order, write replies.
//!
//! Invariants:
//! * requests are served strictly in arrival order, one `serve` call each;
//! * output that cannot be written (the peer does not read) stops serving
//!   ([`Outcome::Blocked`]) instead of growing without bound: no request is
//!   served while [`Limits::max_output`] bytes or more are pending, and the
//!   socket's next writable edge resumes it;
//! * a reply the protocol produces in pieces ([`Cx::resume_later`]) gets
//!   its next piece only while less than [`Limits::low_water`] bytes are
//!   pending, and no other request is served until it is complete; pieces
//!   count against the per-event budget like requests;
//! * with timeouts on, the connection knows which state it waits in and
//!   since when ([`Conn::expired`]); a sweep marks an expired connection
//!   ([`Conn::mark_timed_out`]) and its next event closes it as
//!   [`Close::Timeout`];
//! * buffers are allocated when bytes arrive and leave the connection when
//!   they empty if they grew beyond [`KEEP_CAPACITY`]: an idle connection
//!   holds at most two buffers of that size, whatever the largest request
//!   or reply was. Drivers read into a per-worker scratch buffer and keep
//!   only the bytes read;
//! * a buffer that leaves goes to the thread's pool of spare buffers
//!   ([`crate::bufpool`]: at most 8 of at most 128 KiB each per thread),
//!   and a connection that needs more than [`KEEP_CAPACITY`] takes one from
//!   there first (input: when the bytes read do not fit; output: before
//!   serving, when the previous reply did not fit). So requests and replies
//!   larger than [`KEEP_CAPACITY`] cost no allocation in steady state;
//! * a reply may end with a file region ([`Cx::send_file`]): it is sent
//!   after the reply's buffered bytes, and no other request is served until
//!   it is. On a socket ([`Transport::sendfile_fd`]) it goes out with
//!   `sendfile(2)` straight from the page cache, at most [`SENDFILE_MAX`]
//!   bytes a call and only while the socket has room (a full socket blocks
//!   the connection on its writable edge like pending output), so a slow
//!   reader costs no memory at all; on any other stream it is read into the
//!   emptied output buffer [`FILE_PIECE`] bytes at a time. Every
//!   [`FILE_PIECE`] bytes sent count as one request against
//!   [`REQUESTS_PER_EVENT`], so one event sends at most 1 MiB of a file
//!   before the connection yields its worker ([`Outcome::More`]). A file
//!   shorter than its region is an I/O error: the connection closes.
//! * a reply may reference shared bytes in place ([`Cx::send_shared`]: a
//!   store's value, say): the connection keeps them beside its buffer, each
//!   at the byte of the buffer it precedes, and writes buffer pieces and
//!   shared bytes in order with one `writev` of up to 32 pieces
//!   ([`Conn::pending_slices`]), so they are never copied into user memory.
//!   They count against the output ceiling with the charge the protocol
//!   gave them ([`Conn::pending_charge`]) until written.

use std::collections::VecDeque;
use std::io::{self, IoSlice};

use crate::bufpool;
use crate::classify::{Class, ClassTracker};
use crate::config::{ServerConfig, Timeouts, DEFAULT_MAX_OUTPUT};
use crate::protocol::{Close, Cx, FileRegion, Protocol, Resume, Served, SharedRegion};

mod file;
pub use file::{Transport, FILE_PIECE, SENDFILE_MAX};

/// Most requests served per readiness event before the connection yields
/// its worker (and asks for redelivery).
pub const REQUESTS_PER_EVENT: usize = 32;
/// Most pieces one gathered write of buffered bytes and shared regions takes.
const GATHER: usize = 32;
/// The default output ceiling ([`Limits::max_output`]): replies are written
/// out once this many bytes are pending, even when the protocol batches its
/// flushes, and nothing more is served until they are.
pub const OUT_HIGH: usize = DEFAULT_MAX_OUTPUT;
/// A buffer larger than this leaves the connection when it empties (to the
/// thread's [`crate::bufpool`], or freed); smaller ones are kept to spare
/// an allocation per request.
pub const KEEP_CAPACITY: usize = 512;

/// What the driver should do after [`Conn::on_ready`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Outcome {
    /// Everything readable was read and served: wait for the next edge.
    Idle,
    /// Stopped early (request budget): ask for redelivery.
    More,
    /// Replies are waiting for socket space: wait for the writable edge.
    Blocked,
    /// Deregister and close the connection.
    Close(Close),
}

/// How far [`Conn::flush_within`] got.
enum Flushed {
    /// Everything pending was written.
    Done,
    /// The socket is full.
    Full,
    /// The event's budget is spent with a file region left.
    Spent,
}

/// Per-connection limits a driver applies (from its [`ServerConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Ceiling of pending output: nothing is served while this much waits.
    pub max_output: usize,
    /// A resumed reply gets its next piece only below this much pending.
    pub low_water: usize,
    /// Whether the connection keeps the clock of its waiting state.
    pub timers: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits::new(DEFAULT_MAX_OUTPUT, false)
    }
}

impl Limits {
    /// Limits with ceiling `max_output` (low watermark a quarter of it).
    pub fn new(max_output: usize, timers: bool) -> Limits {
        Limits {
            max_output,
            low_water: (max_output / 4).max(1),
            timers,
        }
    }

    /// The limits `cfg` sets.
    pub fn of(cfg: &ServerConfig) -> Limits {
        Limits::new(cfg.max_output, cfg.timeouts.any())
    }
}

/// The state a connection waits in, for its timeouts (see [`Timeouts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Accepted; no request yet.
    Fresh,
    /// Between requests.
    Idle,
    /// Part of a request buffered.
    Request,
    /// Replies pending.
    Send,
}

/// Buffers and protocol state of one connection.
#[derive(Debug)]
pub struct Conn<S> {
    input: Vec<u8>,
    in_start: usize,
    output: Vec<u8>,
    out_start: usize,
    /// The output outgrew [`KEEP_CAPACITY`] last time: take a pooled
    /// buffer before serving the next request.
    big_out: bool,
    /// The file region that ends the last reply, not yet sent.
    file: Option<FileRegion>,
    /// Shared regions ([`Cx::send_shared`]) not yet written, in order; each
    /// goes before `output[at]`, `at >= out_start`, and none is empty
    /// ([`Cx::send_shared`] drops empty ones), so a fully written front
    /// region is popped at once.
    shared: VecDeque<SharedRegion>,
    /// Bytes of the front shared region already written.
    shared_sent: usize,
    /// Sum of the pending shared regions' charges.
    shared_charge: usize,
    eof: bool,
    limits: Limits,
    /// A reply is being produced in pieces ([`Protocol::resume`]).
    resuming: bool,
    /// The state waited in, and since when (monotonic ns; timers only).
    wait: Wait,
    since: u64,
    /// Bytes written or a request served since the state was last noted.
    progress: bool,
    timed_out: bool,
    /// Classification of the request at the front (allocated at the first
    /// bytes when the protocol has a classifier).
    class: Option<Box<ClassTracker>>,
    /// The protocol's per-connection state.
    pub session: S,
}

impl<S> Conn<S> {
    /// A fresh connection (allocates nothing until bytes arrive) with the
    /// default limits and no timers.
    pub fn new(session: S) -> Self {
        Conn::with_limits(session, Limits::default())
    }

    /// A fresh connection with `limits` (its clock starts now when timers
    /// are on).
    pub fn with_limits(session: S, limits: Limits) -> Self {
        Conn {
            input: Vec::new(),
            in_start: 0,
            output: Vec::new(),
            out_start: 0,
            big_out: false,
            file: None,
            shared: VecDeque::new(),
            shared_sent: 0,
            shared_charge: 0,
            eof: false,
            limits,
            resuming: false,
            wait: Wait::Fresh,
            since: if limits.timers {
                skq_sys::cpu::monotonic_ns()
            } else {
                0
            },
            progress: false,
            timed_out: false,
            class: None,
            session,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether a reply is being produced in pieces.
    pub fn is_resuming(&self) -> bool {
        self.resuming
    }

    /// The state the connection waits in and since when (monotonic ns;
    /// kept only with timers on).
    pub fn waiting(&self) -> (Wait, u64) {
        (self.wait, self.since)
    }

    /// Notes the state the connection waits in after an event at `now`
    /// (monotonic ns): the clock restarts when the state changes, when
    /// bytes were written, and when a request was served.
    pub fn note_wait(&mut self, now: u64) {
        let w = if self.wants_write() || self.resuming {
            Wait::Send
        } else if !self.buffered().is_empty() {
            Wait::Request
        } else if self.wait == Wait::Fresh && !self.progress {
            Wait::Fresh
        } else {
            Wait::Idle
        };
        if w != self.wait || self.progress {
            self.wait = w;
            self.since = now;
        }
        self.progress = false;
    }

    /// How long the connection may still wait in its state under `t`
    /// at `now` (ns); `None`: no limit applies. Zero: expired.
    pub fn time_left(&self, now: u64, t: &Timeouts) -> Option<u64> {
        let limit = match self.wait {
            Wait::Send => t.send,
            Wait::Request => t.request,
            Wait::Idle => t.idle,
            Wait::Fresh => t.request.or(t.idle),
        }?;
        let limit = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX);
        Some(limit.saturating_sub(now.saturating_sub(self.since)))
    }

    /// Whether the connection has waited in its state longer than `t` allows.
    pub fn expired(&self, now: u64, t: &Timeouts) -> bool {
        self.limits.timers && !self.timed_out && self.time_left(now, t) == Some(0)
    }

    /// Marks the connection as timed out: its next event closes it as
    /// [`Close::Timeout`] (the sweep then shuts the socket down, which
    /// raises that event on whichever worker owns the connection).
    pub fn mark_timed_out(&mut self) {
        self.timed_out = true;
    }

    /// The connection's priority level: the class of its latest classified
    /// request (regular without a classifier; see [`crate::classify`]).
    pub fn level(&self) -> Class {
        self.class.as_ref().map_or(Class::Regular, |t| t.level())
    }

    /// Shows the protocol's classifier the unserved bytes it has not seen;
    /// returns the front request's class if decided.
    pub fn classify<P: Protocol<Session = S>>(&mut self, proto: &P) -> Option<Class> {
        let c = proto.classifier()?;
        if self.in_start == self.input.len() {
            return None;
        }
        let t = self.class.get_or_insert_with(Default::default);
        t.feed(c, &self.input[self.in_start..])
    }

    /// Bytes received and not yet served.
    pub fn buffered(&self) -> &[u8] {
        &self.input[self.in_start..]
    }

    /// The input buffer, for drivers that read straight into spare capacity
    /// (tokio's `try_read_buf`). Only append to it.
    pub fn input_buf(&mut self) -> &mut Vec<u8> {
        self.compact();
        &mut self.input
    }

    /// Appends bytes read to the input (taking a pooled buffer when they do
    /// not fit the one held).
    pub fn push_input(&mut self, bytes: &[u8]) {
        self.compact();
        let need = self.input.len() - self.in_start + bytes.len();
        if need > self.input.capacity() && need > KEEP_CAPACITY {
            if let Some(mut spare) = bufpool::take() {
                spare.extend_from_slice(&self.input[self.in_start..]);
                let old = std::mem::replace(&mut self.input, spare);
                self.in_start = 0;
                release(old);
            }
        }
        self.input.extend_from_slice(bytes);
    }

    /// Before a reply is produced: when the last one outgrew the kept
    /// buffer and none is pending, start from a pooled buffer.
    fn prepare_output(&mut self) {
        if self.big_out && self.output.is_empty() && self.output.capacity() <= KEEP_CAPACITY {
            if let Some(spare) = bufpool::take() {
                release(std::mem::replace(&mut self.output, spare));
            }
        }
    }

    /// After a `serve` or `resume` call: notes whether the next reply
    /// should start from a pooled buffer, and gives back one taken for a
    /// call that produced nothing (an idle connection holds none).
    fn note_output(&mut self) {
        if !self.output.is_empty() {
            self.big_out = self.output.capacity() > KEEP_CAPACITY;
        } else if self.output.capacity() > KEEP_CAPACITY {
            bufpool::give(std::mem::take(&mut self.output));
        }
    }

    /// Records that the peer will send nothing more.
    pub fn set_eof(&mut self) {
        self.eof = true;
    }

    /// Whether the peer has finished sending.
    pub fn is_eof(&self) -> bool {
        self.eof
    }

    /// Encoded replies not yet written, up to the first shared region
    /// ([`Self::pending_slices`] gives them all).
    pub fn pending_output(&self) -> &[u8] {
        let end = self.shared.front().map_or(self.output.len(), |r| r.at);
        &self.output[self.out_start..end]
    }

    /// Whether buffered bytes or shared regions wait to be written (a file
    /// region, which goes after them, aside).
    pub fn has_pending_bytes(&self) -> bool {
        self.out_start < self.output.len() || !self.shared.is_empty()
    }

    /// What the pending output counts against the output ceiling: its
    /// buffered bytes and the shared regions' charges.
    pub fn pending_charge(&self) -> usize {
        self.output.len() - self.out_start + self.shared_charge
    }

    /// The pending output in order, buffered bytes and shared regions, as
    /// up to `iov.len()` slices for one gathered write; returns how many.
    pub fn pending_slices<'a>(&'a self, iov: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        let mut from = self.out_start;
        let mut skip = self.shared_sent;
        for r in &self.shared {
            if n + 2 > iov.len() {
                return n;
            }
            if r.at > from {
                iov[n] = IoSlice::new(&self.output[from..r.at]);
                n += 1;
            }
            if r.bytes.len() > skip {
                iov[n] = IoSlice::new(&r.bytes[skip..]);
                n += 1;
            }
            skip = 0;
            from = r.at;
        }
        if from < self.output.len() && n < iov.len() {
            iov[n] = IoSlice::new(&self.output[from..]);
            n += 1;
        }
        n
    }

    /// Bytes of buffer memory the connection holds now (input and output).
    pub fn buffer_capacity(&self) -> usize {
        self.input.capacity() + self.output.capacity()
    }

    /// Whether replies wait to be written (buffered bytes, shared regions or
    /// a file region).
    pub fn wants_write(&self) -> bool {
        self.out_start < self.output.len() || !self.shared.is_empty() || self.file.is_some()
    }

    /// Whether a reply's file region waits to be sent.
    pub fn sending_file(&self) -> bool {
        self.file.is_some()
    }

    /// Bytes of the file region still to send.
    pub fn file_left(&self) -> u64 {
        self.file.as_ref().map_or(0, |f| f.len)
    }

    /// Marks `n` bytes of the pending output ([`Self::pending_slices`], in
    /// order) as written.
    pub fn consume_output(&mut self, mut n: usize) {
        self.progress |= n > 0;
        while n > 0 {
            match self.shared.front() {
                Some(r) if r.at == self.out_start => {
                    let take = n.min(r.bytes.len() - self.shared_sent);
                    self.shared_sent += take;
                    n -= take;
                    if self.shared_sent == r.bytes.len() {
                        self.shared_charge -= r.charge;
                        self.shared.pop_front();
                        self.shared_sent = 0;
                    }
                }
                front => {
                    let end = front.map_or(self.output.len(), |r| r.at);
                    let take = n.min(end - self.out_start);
                    debug_assert!(take > 0, "consumed more than was pending");
                    if take == 0 {
                        break;
                    }
                    self.out_start += take;
                    n -= take;
                }
            }
        }
        debug_assert!(self.out_start <= self.output.len());
        if self.out_start == self.output.len() && self.shared.is_empty() {
            self.output.clear();
            self.out_start = 0;
            if self.output.capacity() > KEEP_CAPACITY {
                bufpool::give(std::mem::take(&mut self.output));
            }
        }
    }

    fn consume_input(&mut self, n: usize) {
        self.in_start += n;
        debug_assert!(self.in_start <= self.input.len());
        if self.in_start == self.input.len() {
            self.input.clear();
            self.in_start = 0;
            if self.input.capacity() > KEEP_CAPACITY {
                bufpool::give(std::mem::take(&mut self.input));
            }
        }
    }

    /// Moves pending output to the front of its buffer, so a reply produced
    /// in pieces reuses the room its written pieces held.
    fn compact_output(&mut self) {
        if self.out_start > 0 {
            self.output.drain(..self.out_start);
            for r in &mut self.shared {
                r.at -= self.out_start;
            }
            self.out_start = 0;
        }
    }

    /// Before a `serve` or `resume` call: tells the protocol what the
    /// pending shared regions count.
    fn before_call(&self, cx: &mut Cx<'_>) {
        cx.set_shared_charge(self.shared_charge);
    }

    /// After a `serve` or `resume` call: queues the shared regions it
    /// produced.
    fn after_call(&mut self, cx: &mut Cx<'_>) {
        for r in cx.take_shared() {
            debug_assert!(r.at >= self.out_start && r.at <= self.output.len());
            self.shared_charge += r.charge;
            self.shared.push_back(r);
        }
    }

    /// Moves unserved bytes to the front of the buffer when that frees much room.
    fn compact(&mut self) {
        if self.in_start > 0 && self.in_start * 2 >= self.input.len() {
            self.input.drain(..self.in_start);
            self.in_start = 0;
        }
    }

    /// Serves one request with `proto` (see [`Protocol::serve`]), consuming
    /// its bytes; the reply is appended to the pending output.
    pub fn serve_one<P: Protocol<Session = S>>(&mut self, proto: &P, cx: &mut Cx<'_>) -> Served {
        cx.set_class(self.classify(proto).unwrap_or(Class::Regular));
        self.prepare_output();
        self.before_call(cx);
        let served = proto.serve(
            &mut self.session,
            &self.input[self.in_start..],
            &mut self.output,
            cx,
        );
        self.after_call(cx);
        self.note_output();
        let (Served::Request { consumed }
        | Served::NeedInput { consumed }
        | Served::Close { consumed, .. }) = served;
        let file = cx.take_file();
        if !matches!(served, Served::NeedInput { .. }) {
            debug_assert!(self.file.is_none(), "served while a file region is pending");
            self.file = file.filter(|f| f.len > 0);
        }
        self.resuming = cx.take_resume() && matches!(served, Served::Request { .. });
        self.consume_input(consumed);
        if consumed > 0 {
            if let Some(t) = self.class.as_mut() {
                t.request_done();
            }
            // The next request's first bytes, if already here: the level
            // rises (or falls) as soon as it is known.
            let _ = self.classify(proto);
        }
        if matches!(served, Served::Request { .. }) {
            self.progress = true;
            cx.count_request();
        }
        served
    }

    /// Appends the next piece of a reply being produced in pieces
    /// ([`Protocol::resume`]); `None` when none is.
    pub fn resume_one<P: Protocol<Session = S>>(
        &mut self,
        proto: &P,
        cx: &mut Cx<'_>,
    ) -> Option<Resume> {
        if !self.resuming {
            return None;
        }
        self.compact_output();
        self.prepare_output();
        self.before_call(cx);
        let r = proto.resume(&mut self.session, &mut self.output, cx);
        self.after_call(cx);
        self.note_output();
        if let Some(f) = cx.take_file() {
            debug_assert!(
                self.file.is_none(),
                "resumed while a file region is pending"
            );
            self.file = (f.len > 0).then_some(f);
        }
        if r != Resume::More {
            self.resuming = false;
        }
        Some(r)
    }

    /// Produces a resumed reply's pieces while the output is below the low
    /// watermark, writing between pieces; `Some(outcome)` when the event
    /// must end (socket full, budget spent, close), `None` once the reply is
    /// complete (or none was in progress).
    fn pump<P, T>(
        &mut self,
        proto: &P,
        stream: &mut T,
        cx: &mut Cx<'_>,
        served: &mut usize,
    ) -> Option<Outcome>
    where
        P: Protocol<Session = S>,
        T: Transport,
    {
        while self.resuming {
            if self.pending_charge() >= self.limits.low_water || self.file.is_some() {
                if let Some(outcome) = self.flush_event(stream, served) {
                    return Some(outcome);
                }
            }
            if *served >= REQUESTS_PER_EVENT {
                return Some(self.flush_event(stream, served).unwrap_or(Outcome::More));
            }
            *served += 1;
            match self.resume_one(proto, cx) {
                Some(Resume::Close(why)) => {
                    let _ = self.flush(stream);
                    return Some(Outcome::Close(why));
                }
                Some(Resume::More | Resume::Done) | None => {}
            }
        }
        None
    }

    /// Writes pending output, then the file region if any, until done or
    /// the socket is full. Returns `Ok(true)` when everything was written,
    /// `Ok(false)` on `EAGAIN`.
    pub fn flush<T: Transport>(&mut self, stream: &mut T) -> io::Result<bool> {
        loop {
            let mut spent = 0;
            match self.flush_within(stream, &mut spent)? {
                Flushed::Done => return Ok(true),
                Flushed::Full => return Ok(false),
                Flushed::Spent => {}
            }
        }
    }

    /// [`Self::flush`] within the event's budget: each [`FILE_PIECE`]
    /// bytes of a file region sent counts as one request served, so one
    /// long file does not hold the worker (as pieces of a resumed reply).
    fn flush_within<T: Transport>(
        &mut self,
        stream: &mut T,
        served: &mut usize,
    ) -> io::Result<Flushed> {
        loop {
            while self.out_start < self.output.len() || !self.shared.is_empty() {
                let wrote = if self.shared.is_empty() {
                    stream.write(self.pending_output())
                } else {
                    let mut iov = [IoSlice::new(&[]); GATHER];
                    let n = self.pending_slices(&mut iov);
                    stream.write_vectored(&iov[..n])
                };
                match wrote {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => self.consume_output(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Flushed::Full),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if self.file.is_none() {
                return Ok(Flushed::Done);
            }
            if *served >= REQUESTS_PER_EVENT {
                return Ok(Flushed::Spent);
            }
            let sent = match stream.sendfile_fd() {
                Some(sock) => match self.send_file_once(sock) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Flushed::Full),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                    Err(e) => return Err(e),
                },
                None => {
                    self.stage_file()?;
                    self.pending_output().len()
                }
            };
            *served += (sent / FILE_PIECE).max(1);
        }
    }

    /// Flushes within the event's budget: `None` once everything is
    /// written, else how the event ends.
    fn flush_event<T: Transport>(&mut self, stream: &mut T, served: &mut usize) -> Option<Outcome> {
        match self.flush_within(stream, served) {
            Ok(Flushed::Done) => None,
            Ok(Flushed::Full) => Some(Outcome::Blocked),
            Ok(Flushed::Spent) => Some(Outcome::More),
            Err(_) => Some(Outcome::Close(Close::Aborted)),
        }
    }

    /// Handles one edge-triggered readiness event on a non-blocking stream.
    /// `scratch` is the worker's read buffer. `peer_hup` says the event
    /// reported that the peer closed its side (`EPOLLRDHUP`/`EPOLLHUP`).
    ///
    /// Reading stops at `EAGAIN`, or at a read shorter than `scratch` when
    /// `peer_hup` is false: a short read took everything the socket held,
    /// and bytes (or a FIN) arriving later raise a new edge, because Linux
    /// wakes epoll on every arrival. That saves the read that would only
    /// return `EAGAIN`, as nginx does. With `peer_hup` the FIN may already be
    /// queued behind the data, with no edge to come, so reading goes on
    /// until it is seen.
    pub fn on_ready<P, T>(
        &mut self,
        proto: &P,
        stream: &mut T,
        scratch: &mut [u8],
        cx: &mut Cx<'_>,
        peer_hup: bool,
    ) -> Outcome
    where
        P: Protocol<Session = S>,
        T: Transport,
    {
        if self.timed_out {
            return Outcome::Close(Close::Timeout);
        }
        let outcome = self.serve_ready(proto, stream, scratch, cx, peer_hup);
        if self.limits.timers && !matches!(outcome, Outcome::Close(_)) {
            self.note_wait(skq_sys::cpu::monotonic_ns());
        }
        outcome
    }

    fn serve_ready<P, T>(
        &mut self,
        proto: &P,
        stream: &mut T,
        scratch: &mut [u8],
        cx: &mut Cx<'_>,
        peer_hup: bool,
    ) -> Outcome
    where
        P: Protocol<Session = S>,
        T: Transport,
    {
        let mut served = 0;
        if let Some(outcome) = self.flush_event(stream, &mut served) {
            return outcome;
        }
        // A reply in progress comes before anything else.
        if let Some(outcome) = self.pump(proto, stream, cx, &mut served) {
            return outcome;
        }
        let limit = proto.read_limit();
        let flush_each = proto.flush_each();
        let mut drained = self.eof;
        loop {
            while !drained && self.buffered().len() < limit {
                match stream.read(scratch) {
                    Ok(0) => {
                        self.eof = true;
                        drained = true;
                    }
                    Ok(n) => {
                        self.push_input(&scratch[..n]);
                        drained = !peer_hup && n < scratch.len();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => drained = true,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Outcome::Close(Close::Aborted),
                }
            }
            let need_input = loop {
                if served >= REQUESTS_PER_EVENT {
                    break false;
                }
                if cx.refuses_batch() && self.classify(proto) == Some(Class::Batch) {
                    // Diffusion: not on this worker. Yield; the connection's
                    // level is now batch, so it is redelivered to a batch
                    // worker.
                    break false;
                }
                match self.serve_one(proto, cx) {
                    Served::Request { .. } => {
                        served += 1;
                        if let Some(outcome) = self.pump(proto, stream, cx, &mut served) {
                            return outcome;
                        }
                        if flush_each
                            || self.file.is_some()
                            || self.pending_charge() >= self.limits.max_output
                        {
                            if let Some(outcome) = self.flush_event(stream, &mut served) {
                                return outcome;
                            }
                        }
                    }
                    Served::NeedInput { .. } => break true,
                    Served::Close { why, .. } => {
                        let _ = self.flush(stream);
                        return Outcome::Close(why);
                    }
                }
            };
            if let Some(outcome) = self.flush_event(stream, &mut served) {
                return outcome;
            }
            if !need_input {
                return Outcome::More;
            }
            if drained {
                break;
            }
            if self.buffered().len() >= limit {
                // A request larger than the protocol allows to buffer.
                return Outcome::Close(Close::Protocol);
            }
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

/// Drops a buffer a connection no longer holds: to the thread's pool when
/// it outgrew [`KEEP_CAPACITY`], else freed.
fn release(buf: Vec<u8>) {
    if buf.capacity() > KEEP_CAPACITY {
        bufpool::give(buf);
    }
}

#[cfg(test)]
pub(crate) mod tests;
