//! The protocol side of the server layer: what an application writes.
//!
//! A [`Protocol`] turns bytes into replies and does no I/O: it never sees a
//! socket, a clock or a thread. The drivers own sockets, buffers, readiness
//! and worker threads, and call [`Protocol::serve`] with the unserved bytes of
//! one connection. So a protocol is written once and runs on every driver,
//! and its unit tests feed it bytes from memory.

use std::fs::File;

use crate::stats::WorkerCounters;

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// The peer closed after its last whole request, or the protocol ended
    /// the conversation in order (e.g. memcached's `quit`).
    Eof,
    /// The peer sent something the protocol refuses (any error reply is
    /// written first).
    Protocol,
    /// The peer vanished in the middle of a request, or the socket failed.
    Aborted,
    /// The connection waited longer than a configured timeout allows
    /// ([`crate::config::Timeouts`]: idle, request or send).
    Timeout,
}

/// What one [`Protocol::resume`] call did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// A piece was appended; more of the reply remains.
    More,
    /// The reply is complete: the connection's next request may be served.
    Done,
    /// The reply cannot be finished (its framing is already sent): close
    /// once what was appended has been written.
    Close(Close),
}

/// What one [`Protocol::serve`] call did. `consumed` bytes at the front of
/// the input are used up in every case.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// One request was served; its reply, if it has one, is in `out`.
    Request {
        /// Input bytes used.
        consumed: usize,
    },
    /// No whole request is buffered: more input is needed. `consumed` may be
    /// non-zero (a discarded data block, a silent error).
    NeedInput {
        /// Input bytes used.
        consumed: usize,
    },
    /// Close the connection once `out` has been written.
    Close {
        /// Input bytes used.
        consumed: usize,
        /// Why.
        why: Close,
    },
}

/// A region of a file that ends a reply ([`Cx::send_file`]).
#[derive(Debug)]
pub struct FileRegion {
    /// The file (the connection owns it until the region is sent).
    pub file: File,
    /// Where the bytes still to send begin.
    pub offset: u64,
    /// Bytes still to send.
    pub len: u64,
}

/// Shared bytes sent inside a reply without a copy ([`Cx::send_shared`]).
#[derive(Debug)]
pub struct SharedRegion {
    /// Where in the output buffer the bytes go (before the byte at `at`).
    pub at: usize,
    /// The bytes.
    pub bytes: bytes::Bytes,
    /// What they count against the output ceiling.
    pub charge: usize,
}

/// What a driver tells the protocol about the call, and what the protocol
/// may ask of the driver.
pub struct Cx<'a> {
    worker: usize,
    counters: &'a WorkerCounters,
    class: crate::classify::Class,
    refuse_batch: bool,
    resume: bool,
    file: Option<FileRegion>,
    shared: Vec<SharedRegion>,
    /// Charge of the connection's pending shared regions, these included.
    shared_charge: usize,
}

impl<'a> Cx<'a> {
    /// A context for worker `worker`, recording into its counters.
    pub fn new(worker: usize, counters: &'a WorkerCounters) -> Cx<'a> {
        Cx {
            worker,
            counters,
            class: crate::classify::Class::Regular,
            refuse_batch: false,
            resume: false,
            file: None,
            shared: Vec::new(),
            shared_charge: 0,
        }
    }

    /// The worker serving the call (indexes per-worker state).
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// Adds `ns` of delivered service to the worker's busy time (the figure
    /// the imbalance statistic compares across workers).
    pub fn record_service(&mut self, ns: u64) {
        self.counters.record_service(ns);
    }

    pub(crate) fn count_request(&self) {
        self.counters.record_request();
    }

    /// The class of the request being served, as the protocol's classifier
    /// decided it (regular without a classifier).
    pub fn class(&self) -> crate::classify::Class {
        self.class
    }

    /// Marks the serving worker as reserved for latency-critical work
    /// (priority diffusion): a batch-class request at the front of a
    /// connection is not served here; the connection is handed back to the
    /// scheduler, which places it on a batch worker.
    pub fn refuse_batch(&mut self) {
        self.refuse_batch = true;
    }

    /// Whether [`Cx::refuse_batch`] was called.
    pub fn refuses_batch(&self) -> bool {
        self.refuse_batch
    }

    /// Says, from [`Protocol::serve`], that the reply just begun is not
    /// complete: the driver calls [`Protocol::resume`] for the rest, one
    /// bounded piece at a time as the socket drains, and serves nothing
    /// else on the connection until it returns [`Resume::Done`]. So one
    /// request cannot make the server buffer a long reply whole. Ignored
    /// when `serve` returns anything but [`Served::Request`].
    pub fn resume_later(&mut self) {
        self.resume = true;
    }

    /// Says, from [`Protocol::serve`], that the reply just appended to `out`
    /// ends with `len` bytes of `file` from `offset`. The connection sends
    /// them after the reply's buffered bytes, with `sendfile(2)` where the
    /// stream is a socket (no file byte enters user memory), else by
    /// bounded reads into its output buffer; nothing else is served on the
    /// connection until they are sent. A file that turns out shorter
    /// closes the connection ([`Close::Aborted`]). Ignored when `serve`
    /// returns [`Served::NeedInput`].
    pub fn send_file(&mut self, file: File, offset: u64, len: u64) {
        self.file = Some(FileRegion { file, offset, len });
    }

    /// Says, from [`Protocol::serve`] or [`Protocol::resume`], that `bytes`
    /// belong in the reply at byte `at` of `out` (pass `out.len()`: after
    /// what the reply has so far; the protocol goes on appending to `out`
    /// behind them). The connection writes them from where they are, with
    /// the buffered bytes around them in one `writev`, instead of copying
    /// them into its buffer; a store can hand out its values this way
    /// (`bytes::Bytes::from_owner`). They count against the output ceiling
    /// as `charge` bytes (at least their length) until written: a protocol
    /// whose bytes keep a larger block alive says so here.
    pub fn send_shared(&mut self, at: usize, bytes: bytes::Bytes, charge: usize) {
        if bytes.is_empty() {
            return;
        }
        let charge = charge.max(bytes.len());
        self.shared_charge += charge;
        self.shared.push(SharedRegion { at, bytes, charge });
    }

    /// The charge of the connection's shared regions not yet written,
    /// those of this call included: with `out.len()`, what the connection
    /// holds against its output ceiling.
    pub fn shared_charge(&self) -> usize {
        self.shared_charge
    }

    /// Sets [`Cx::shared_charge`] before a call (the connection layer does).
    pub fn set_shared_charge(&mut self, charge: usize) {
        self.shared_charge = charge;
    }

    /// Takes the [`Cx::send_shared`] regions (the connection layer does).
    pub fn take_shared(&mut self) -> std::vec::Drain<'_, SharedRegion> {
        self.shared.drain(..)
    }

    /// Copies the [`Cx::send_shared`] regions into `out` at their places,
    /// for a driver that writes one buffer (the async loops).
    pub fn inline_shared(&mut self, out: &mut Vec<u8>) {
        for r in self.shared.drain(..).rev() {
            out.splice(r.at..r.at, r.bytes.iter().copied());
        }
        self.shared_charge = 0;
    }

    /// Takes the [`Cx::send_file`] region (the connection layer does).
    pub fn take_file(&mut self) -> Option<FileRegion> {
        self.file.take()
    }

    /// Takes the [`Cx::resume_later`] mark (the connection layer does).
    pub fn take_resume(&mut self) -> bool {
        std::mem::take(&mut self.resume)
    }

    /// Sets the class [`Cx::class`] reports (the connection layer does).
    pub fn set_class(&mut self, class: crate::classify::Class) {
        self.class = class;
    }
}

/// A request/reply protocol, sans I/O. One value serves every connection
/// and every worker (`&self` everywhere: state shared across connections,
/// such as a cache's store, lives inside it behind its own locks).
pub trait Protocol: Send + Sync + 'static {
    /// Per-connection state (parser state, flags). Created at accept,
    /// dropped through [`Protocol::close`].
    type Session: Send + 'static;

    /// A new connection accepted by `worker`.
    fn open(&self, worker: usize) -> Self::Session;

    /// Serves at most one request from the front of `input` (everything the
    /// connection received and was not consumed yet), appending its reply to
    /// `out`. Called again as long as it returns [`Served::Request`] and the
    /// driver's per-event budget lasts.
    fn serve(
        &self,
        session: &mut Self::Session,
        input: &[u8],
        out: &mut Vec<u8>,
        cx: &mut Cx<'_>,
    ) -> Served;

    /// Appends the next piece of a reply that [`Protocol::serve`] began and
    /// marked with [`Cx::resume_later`]. Called when the connection's
    /// pending output has drained below the low watermark (a quarter of
    /// [`crate::ServerConfig::max_output`]); a piece should be bounded (tens
    /// of KiB). The default never runs: a protocol that never calls
    /// `resume_later` need not write it.
    fn resume(&self, session: &mut Self::Session, out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Resume {
        let _ = (session, out, cx);
        Resume::Done
    }

    /// A connection ended (after its socket was deregistered).
    fn close(&self, session: Self::Session, worker: usize) {
        let _ = (session, worker);
    }

    /// A connection is being closed because it waited longer than a
    /// configured timeout allows ([`Close::Timeout`]); called on the
    /// connection's worker just before [`Protocol::close`], so a protocol
    /// can count it under its own name (e.g. memcached's `idle_kicks`).
    fn timed_out(&self, worker: usize) {
        let _ = worker;
    }

    /// A connection was refused because the server holds `--max-conns`.
    fn rejected(&self, worker: usize) {
        let _ = worker;
    }

    /// A connection was refused because the process ran out of file
    /// descriptors (by default counted as [`Protocol::rejected`]).
    fn rejected_fd_limit(&self, worker: usize) {
        self.rejected(worker);
    }

    /// Bytes written to a refused connection before it is closed.
    fn busy_message(&self) -> &'static [u8] {
        b""
    }

    /// Write each reply as soon as it is ready (`true`, for requests that
    /// take long: a reply must not wait for the next request's service), or
    /// once per batch of pipelined requests (`false`, for cheap requests).
    fn flush_each(&self) -> bool {
        true
    }

    /// Most unserved input bytes buffered per connection; must hold the
    /// largest request. A connection that needs more is closed as
    /// [`Close::Protocol`].
    fn read_limit(&self) -> usize {
        256 * 1024
    }

    /// The classifier that decides each request's priority class from its
    /// first bytes (see [`crate::classify`]); `None` (the default): every
    /// request is regular and no bytes are inspected.
    fn classifier(&self) -> Option<&dyn crate::classify::Classifier> {
        None
    }

    /// Called once on every worker thread before it serves (e.g. timer slack).
    fn prepare_worker(&self, worker: usize) {
        let _ = worker;
    }
}
