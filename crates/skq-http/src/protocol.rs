//! HTTP/1.1 as an skq-net [`Protocol`]: one request per `serve` call.
//!
//! **Framing.** `httparse` parses the head from at most [`MAX_HEAD`] bytes
//! of buffered input. The answer depends only on those bytes, never on how
//! they were split across reads (the fuzz body checks it), so:
//! * an incomplete head shorter than [`MAX_HEAD`] waits for more input;
//! * an incomplete head of [`MAX_HEAD`] bytes is refused: 414 when its
//!   request line is not finished within [`MAX_LINE`], else 431;
//! * a complete head whose request line exceeds [`MAX_LINE`] is 414; more
//!   than [`MAX_HEADERS`] fields (100, as many as nginx serves with its
//!   default buffers) is 431; an HTTP version other than 1.0 or 1.1 is
//!   505; anything else malformed is 400;
//! * an HTTP/0.9 request (`GET /path` and a line end, no version) is
//!   answered as nginx answers it: the body alone (a file, or the error's
//!   text), no status line or fields, then the connection closes.
//!
//! **Bodies are sent from the page cache.** A file of at most [`CHUNK`]
//! bytes is read into the reply (one write for head and body, batched with
//! pipelined replies); a longer one ends the reply as a file region
//! ([`Cx::send_file`]): skq-net sends it after the head with `sendfile(2)`
//! on every driver's sockets, only as the socket drains, so no byte of it
//! is copied into user memory and a slow reader costs none (streams
//! without a descriptor, the tests' in-memory mocks, get it in bounded
//! pieces read into the output buffer). So a connection holds at most its
//! head and [`CHUNK`] of reply whatever the file's size and however slowly
//! the client reads. A file that shrinks while it is sent cannot be framed
//! any more: the connection is closed (aborted).
//!
//! A request body is allowed only with `Content-Length` up to [`MAX_BODY`]
//! (it is read and discarded); a larger one is 413 and `Transfer-Encoding`
//! is 501 (this server has no use for request bodies, so it does not decode
//! chunked ones). HTTP/1.1 requires exactly one `Host` (else 400).
//!
//! **Which errors close.** A refusal whose framing is unknown or hostile
//! (400, 413, 414, 431, 501, 505, 500) is written with `Connection: close`
//! and closes that connection only ([`Served::Close`] with
//! [`Close::Protocol`]). Replies with sound framing (200, 301, 304, 403,
//! 404, 405) keep the connection alive unless the client asked to close
//! (`Connection: close`, or HTTP/1.0 without `keep-alive`); then the reply
//! is counted as a request and the next call closes in order ([`Close::Eof`]).
//!
//! **Pipelining.** Requests are answered strictly in arrival order (the
//! connection state machine calls `serve` once per request). With no IO
//! variance replies are written once per batch; with it, each as soon as it
//! is ready, so a slow read does not hold back an earlier reply.

use std::fs::File;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use skq_net::{Close, Cx, Protocol, Served};
use skq_sys::cpu;

use crate::date::{self, DateCache};
use crate::docroot::{DocRoot, Lookup};
use crate::iovar::{draw, Draw, IoVariance, Rng};
use crate::mime::content_type;
use crate::target::{self, Refused};

/// Most bytes of a request head (request line and fields).
pub const MAX_HEAD: usize = 8192;
/// Most bytes of a request line.
pub const MAX_LINE: usize = 4096;
/// Most header fields.
pub const MAX_HEADERS: usize = 100;
/// Largest file read into a reply; a larger one is sent as a file region.
pub const CHUNK: usize = 32 * 1024;
/// Largest request body accepted (and discarded).
pub const MAX_BODY: usize = 64 * 1024;

/// Where served requests are recorded (off by default: the hot path).
#[derive(Debug, Default)]
pub enum AccessLog {
    /// Nothing is recorded.
    #[default]
    Off,
    /// `METHOD PATH STATUS` lines kept in memory (tests read them).
    Memory(Mutex<Vec<String>>),
    /// `METHOD PATH STATUS` lines written to standard error.
    Stderr,
}

/// The static-file protocol: one value shared by every worker.
#[derive(Debug)]
pub struct HttpProtocol {
    root: DocRoot,
    io: IoVariance,
    log: AccessLog,
    sessions: AtomicU64,
    misses: AtomicU64,
    miss_wait_ns: AtomicU64,
    clock: fn() -> u64,
    rules: Option<crate::priority::Rules>,
}

/// Per-connection state.
#[derive(Debug)]
pub struct Session {
    date: DateCache,
    rng: Rng,
    closing: bool,
    misses: u64,
    miss_wait_ns: u64,
}

/// The reason phrase of a status code this server sends.
pub fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        301 => "Moved Permanently",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// The fields of a request head this server acts on.
#[derive(Default)]
struct Fields<'a> {
    content_length: Option<u64>,
    transfer_encoding: bool,
    hosts: usize,
    close: bool,
    keep_alive: bool,
    if_none_match: Option<&'a [u8]>,
    if_modified_since: Option<&'a [u8]>,
}

/// A well-framed GET or HEAD to serve.
struct Get<'a> {
    path: &'a str,
    head_only: bool,
    keep: bool,
    fields: Fields<'a>,
}

/// Reads the fields; `Err(())` for a malformed or conflicting `Content-Length`.
fn fields<'a>(headers: &[httparse::Header<'a>]) -> Result<Fields<'a>, ()> {
    let mut f = Fields::default();
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| ())?.trim();
            if v.is_empty() || v.len() > 18 || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(());
            }
            let n: u64 = v.parse().map_err(|_| ())?;
            if f.content_length.is_some_and(|old| old != n) {
                return Err(());
            }
            f.content_length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            f.transfer_encoding = true;
        } else if name.eq_ignore_ascii_case("host") {
            f.hosts += 1;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let t = token.trim_ascii();
                f.close |= t.eq_ignore_ascii_case(b"close");
                f.keep_alive |= t.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("if-none-match") {
            f.if_none_match = Some(h.value);
        } else if name.eq_ignore_ascii_case("if-modified-since") {
            f.if_modified_since = Some(h.value);
        }
    }
    Ok(f)
}

/// Whether an `If-None-Match` value matches `etag` (weak comparison, RFC 7232 §3.2).
fn etag_matches(list: &[u8], etag: &[u8]) -> bool {
    list.split(|&b| b == b',').any(|t| {
        let t = t.trim_ascii();
        t == b"*" || t.strip_prefix(b"W/").unwrap_or(t) == etag
    })
}

fn unix_secs(t: std::io::Result<SystemTime>) -> u64 {
    t.ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs())
}

/// One reply being built.
struct Reply<'o> {
    out: &'o mut Vec<u8>,
}

impl<'o> Reply<'o> {
    fn status(out: &'o mut Vec<u8>, code: u16, date: &[u8]) -> Reply<'o> {
        let _ = write!(
            out,
            "HTTP/1.1 {code} {}\r\nServer: skq\r\nDate: ",
            reason(code)
        );
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n");
        Reply { out }
    }

    fn field(&mut self, name: &str, value: &[u8]) -> &mut Self {
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b": ");
        self.out.extend_from_slice(value);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// Ends the head with `Content-Length: len` (when given) and the connection field.
    fn end(&mut self, len: Option<u64>, keep: bool) {
        if let Some(len) = len {
            let _ = write!(self.out, "Content-Length: {len}\r\n");
        }
        if !keep {
            self.out.extend_from_slice(b"Connection: close\r\n");
        }
        self.out.extend_from_slice(b"\r\n");
    }
}

impl HttpProtocol {
    /// A protocol serving `root` with IO variance `io`.
    pub fn new(root: DocRoot, io: IoVariance, log: AccessLog) -> HttpProtocol {
        HttpProtocol {
            root,
            io,
            log,
            sessions: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            miss_wait_ns: AtomicU64::new(0),
            clock: now_secs,
            rules: None,
        }
    }

    /// Classifies requests by `rules` (`--priority`), through skq-net's
    /// classifier callback; an empty set classifies nothing.
    pub fn with_rules(mut self, rules: crate::priority::Rules) -> HttpProtocol {
        self.rules = (!rules.is_empty()).then_some(rules);
        self
    }

    /// Replaces the wall clock (seconds since the epoch) that `Date`
    /// headers come from: fuzzing and tests compare replies byte for byte.
    pub fn with_clock(mut self, clock: fn() -> u64) -> HttpProtocol {
        self.clock = clock;
        self
    }

    /// The IO variance in force.
    pub fn io(&self) -> &IoVariance {
        &self.io
    }

    /// The document root.
    pub fn root(&self) -> &DocRoot {
        &self.root
    }

    /// Lines recorded by an in-memory access log (empty otherwise).
    pub fn access_log(&self) -> Vec<String> {
        match &self.log {
            AccessLog::Memory(m) => m.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            _ => Vec::new(),
        }
    }

    /// Emulated misses of closed connections, and the wait they actually got (ns).
    pub fn emulated_misses(&self) -> (u64, u64) {
        (
            self.misses.load(Ordering::Relaxed),
            self.miss_wait_ns.load(Ordering::Relaxed),
        )
    }

    fn record(&self, method: &str, path: &str, code: u16) {
        match &self.log {
            AccessLog::Off => {}
            AccessLog::Memory(m) => m
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(format!("{method} {path} {code}")),
            AccessLog::Stderr => eprintln!("{method} {path} {code}"),
        }
    }

    /// Writes a refusal that closes the connection.
    fn refuse(&self, s: &mut Session, out: &mut Vec<u8>, code: u16, consumed: usize) -> Served {
        let body = format!("{code} {}\n", reason(code));
        let mut r = Reply::status(out, code, s.date.get((self.clock)()));
        r.field("Content-Type", b"text/plain; charset=utf-8");
        r.end(Some(body.len() as u64), false);
        out.extend_from_slice(body.as_bytes());
        self.record("-", "-", code);
        Served::Close {
            consumed,
            why: Close::Protocol,
        }
    }

    /// A small error reply with sound framing (the connection may stay open).
    fn error(&self, s: &mut Session, out: &mut Vec<u8>, code: u16, head_only: bool, keep: bool) {
        let body = format!("{code} {}\n", reason(code));
        let mut r = Reply::status(out, code, s.date.get((self.clock)()));
        if code == 405 {
            r.field("Allow", b"GET, HEAD");
        }
        r.field("Content-Type", b"text/plain; charset=utf-8");
        r.end(Some(body.len() as u64), keep);
        if !head_only {
            out.extend_from_slice(body.as_bytes());
        }
    }

    /// Serves a complete, well-framed GET or HEAD; returns the status sent
    /// (`Err` for a failure that must close the connection).
    fn get(
        &self,
        s: &mut Session,
        out: &mut Vec<u8>,
        cx: &mut Cx<'_>,
        req: &Get<'_>,
    ) -> Result<u16, u16> {
        let (head_only, keep, f) = (req.head_only, req.keep, &req.fields);
        let t = match target::parse(req.path) {
            Ok(t) => t,
            Err(Refused::Malformed | Refused::Traversal) => return Err(400),
        };
        let mut rel = t.rel.clone();
        let (file, meta) = match self.root.lookup(&rel) {
            Lookup::File(file, meta) => (file, meta),
            Lookup::Dir if !t.trailing_slash => {
                let body = b"301 Moved Permanently\n";
                let mut r = Reply::status(out, 301, s.date.get((self.clock)()));
                let mut loc = t.raw_path.clone().into_bytes();
                loc.push(b'/');
                r.field("Location", &loc)
                    .field("Content-Type", b"text/plain; charset=utf-8");
                r.end(Some(body.len() as u64), keep);
                if !head_only {
                    out.extend_from_slice(body);
                }
                return Ok(301);
            }
            Lookup::Dir => {
                rel.push("index.html");
                match self.root.lookup(&rel) {
                    Lookup::File(file, meta) => (file, meta),
                    Lookup::NotFound => return Ok(self.reply_error(s, out, 404, head_only, keep)),
                    _ => return Ok(self.reply_error(s, out, 403, head_only, keep)),
                }
            }
            Lookup::NotFound => return Ok(self.reply_error(s, out, 404, head_only, keep)),
            Lookup::Forbidden => return Ok(self.reply_error(s, out, 403, head_only, keep)),
        };
        let size = meta.len();
        let mtime = unix_secs(meta.modified());
        let mut etag = Vec::with_capacity(32);
        let _ = write!(etag, "\"{mtime:x}-{size:x}\"");
        let last_modified = date::format(mtime);
        // RFC 7232 §6: If-None-Match decides when present; else If-Modified-Since.
        let not_modified = match (f.if_none_match, f.if_modified_since) {
            (Some(list), _) => etag_matches(list, &etag),
            (None, Some(ims)) => date::parse(ims).is_some_and(|since| mtime <= since),
            (None, None) => false,
        };
        let code = if not_modified { 304 } else { 200 };
        let start = out.len();
        let mut r = Reply::status(out, code, s.date.get((self.clock)()));
        if code == 200 {
            r.field("Content-Type", content_type(&rel).as_bytes());
        }
        r.field("Last-Modified", &last_modified)
            .field("ETag", &etag);
        r.end((code == 200).then_some(size), keep);
        if code == 304 || head_only {
            return Ok(code);
        }
        let fate = draw(&self.io, &mut s.rng);
        if fate == Draw::DropCache {
            let _ = skq_sys::fs::drop_page_cache(&file);
            s.misses += 1;
        }
        if size > CHUNK as u64 {
            cx.send_file(file, 0, size);
        } else if !read_body(&file, size, out) {
            out.truncate(start);
            return Err(500);
        }
        if let Draw::Wait(ns) = fate {
            let t0 = cpu::monotonic_ns();
            cpu::sleep_until(t0 + ns);
            let waited = cpu::monotonic_ns() - t0;
            s.misses += 1;
            s.miss_wait_ns += waited;
            cx.record_service(waited);
        }
        Ok(200)
    }

    /// Serves an HTTP/0.9 `GET` (see the module docs): the reply without
    /// its head, then the connection closes.
    fn serve_http09(
        &self,
        s: &mut Session,
        out: &mut Vec<u8>,
        cx: &mut Cx<'_>,
        path: &str,
        consumed: usize,
    ) -> Served {
        let at = out.len();
        let get = Get {
            path,
            head_only: false,
            keep: false,
            fields: Fields::default(),
        };
        let code = self.get(s, out, cx, &get).unwrap_or_else(|code| {
            self.error(s, out, code, false, false);
            code
        });
        if let Some(end) = out[at..].windows(4).position(|w| w == b"\r\n\r\n") {
            out.drain(at..at + end + 4);
        }
        self.record("GET", path, code);
        s.closing = true;
        Served::Request { consumed }
    }

    fn reply_error(
        &self,
        s: &mut Session,
        out: &mut Vec<u8>,
        code: u16,
        head_only: bool,
        keep: bool,
    ) -> u16 {
        self.error(s, out, code, head_only, keep);
        code
    }
}

/// Appends exactly `size` bytes of `file` to `out`; false if it could not.
fn read_body(mut file: &File, size: u64, out: &mut Vec<u8>) -> bool {
    let before = out.len();
    out.reserve(size as usize);
    match Read::by_ref(&mut file).take(size).read_to_end(out) {
        Ok(n) => n as u64 == size && out.len() - before == size as usize,
        Err(_) => false,
    }
}

/// An HTTP/0.9 request at the front of `input`: `GET`, one space, a path
/// starting with `/` and a line end, with no version; returns the path and
/// the bytes the request takes.
fn http09(input: &[u8]) -> Option<(&str, usize)> {
    let skip = input.iter().position(|&b| b != b'\r' && b != b'\n')?;
    let len = input[skip..].iter().position(|&b| b == b'\n')?;
    let line = &input[skip..skip + len];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let path = line.strip_prefix(b"GET ")?;
    if !path.starts_with(b"/") || path.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return None;
    }
    Some((std::str::from_utf8(path).ok()?, skip + len + 1))
}

/// Whether `input` may be the start of an HTTP/0.9 request whose line has
/// not ended: a prefix of `GET /`, or `GET /` and no space or line end
/// after it yet. (A prefix counts too: after a stray CR, httparse refuses
/// `GE` at once, so without it the answer would depend on read splits.)
fn http09_pending(input: &[u8]) -> bool {
    let skip = input
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(input.len());
    let rest = &input[skip..];
    b"GET /".starts_with(rest)
        || rest
            .strip_prefix(b"GET /")
            .is_some_and(|p| !p.iter().any(|&b| b == b' ' || b == b'\n'))
}

fn now_secs() -> u64 {
    unix_secs(Ok(SystemTime::now()))
}

/// Bytes of the request line (after any empty lines a client may send
/// before it), up to the first LF, if one is present.
fn request_line_len(input: &[u8]) -> Option<usize> {
    let skip = input
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(input.len());
    input[skip..].iter().position(|&b| b == b'\n')
}

impl Protocol for HttpProtocol {
    type Session = Session;

    fn open(&self, worker: usize) -> Session {
        let n = self.sessions.fetch_add(1, Ordering::Relaxed);
        Session {
            date: DateCache::default(),
            rng: Rng::new(n ^ ((worker as u64) << 48)),
            closing: false,
            misses: 0,
            miss_wait_ns: 0,
        }
    }

    fn serve(&self, s: &mut Session, input: &[u8], out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Served {
        if s.closing {
            return Served::Close {
                consumed: input.len(),
                why: Close::Eof,
            };
        }
        if input.is_empty() {
            return Served::NeedInput { consumed: 0 };
        }
        let view = &input[..input.len().min(MAX_HEAD)];
        if let Some((path, consumed)) = http09(view) {
            return self.serve_http09(s, out, cx, path, consumed);
        }
        if view.len() < MAX_HEAD && http09_pending(view) {
            // Maybe an HTTP/0.9 line still arriving: decide once it ends,
            // so the answer never depends on where reads split it.
            return Served::NeedInput { consumed: 0 };
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        let head_len = match req.parse(view) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if view.len() < MAX_HEAD {
                    return Served::NeedInput { consumed: 0 };
                }
                let line_done = request_line_len(view).is_some_and(|n| n <= MAX_LINE);
                let code = if line_done { 431 } else { 414 };
                return self.refuse(s, out, code, input.len());
            }
            Err(httparse::Error::TooManyHeaders) => return self.refuse(s, out, 431, input.len()),
            Err(httparse::Error::Version) => return self.refuse(s, out, 505, input.len()),
            Err(_) => return self.refuse(s, out, 400, input.len()),
        };
        if request_line_len(view).map_or(true, |n| n > MAX_LINE) {
            return self.refuse(s, out, 414, input.len());
        }
        let t0 = cpu::monotonic_ns();
        let (method, path, version) = match (req.method, req.path, req.version) {
            (Some(m), Some(p), Some(v)) => (m, p, v),
            _ => return self.refuse(s, out, 400, input.len()),
        };
        let Ok(f) = fields(req.headers) else {
            return self.refuse(s, out, 400, input.len());
        };
        if f.transfer_encoding {
            let code = if f.content_length.is_some() { 400 } else { 501 };
            return self.refuse(s, out, code, input.len());
        }
        if version == 1 && f.hosts != 1 {
            return self.refuse(s, out, 400, input.len());
        }
        let body = f.content_length.unwrap_or(0);
        if body > MAX_BODY as u64 {
            return self.refuse(s, out, 413, input.len());
        }
        let consumed = head_len + body as usize;
        if input.len() < consumed {
            return Served::NeedInput { consumed: 0 };
        }
        let keep = !f.close && (version == 1 || f.keep_alive);
        let code = match method {
            "GET" | "HEAD" => {
                let get = Get {
                    path,
                    head_only: method == "HEAD",
                    keep,
                    fields: f,
                };
                match self.get(s, out, cx, &get) {
                    Ok(code) => code,
                    Err(code) => return self.refuse(s, out, code, input.len()),
                }
            }
            _ => self.reply_error(s, out, 405, false, keep),
        };
        self.record(method, path, code);
        if !self.io.is_emulated() {
            cx.record_service(cpu::monotonic_ns().saturating_sub(t0));
        }
        if !keep {
            s.closing = true;
        }
        Served::Request { consumed }
    }

    fn close(&self, s: Session, _worker: usize) {
        if s.misses > 0 {
            self.misses.fetch_add(s.misses, Ordering::Relaxed);
            self.miss_wait_ns
                .fetch_add(s.miss_wait_ns, Ordering::Relaxed);
        }
    }

    fn classifier(&self) -> Option<&dyn skq_net::classify::Classifier> {
        self.rules
            .as_ref()
            .map(|r| r as &dyn skq_net::classify::Classifier)
    }

    fn flush_each(&self) -> bool {
        !matches!(self.io, IoVariance::None)
    }

    fn read_limit(&self) -> usize {
        MAX_HEAD + MAX_BODY + 4096
    }

    fn prepare_worker(&self, _worker: usize) {
        if self.io.is_emulated() {
            let _ = cpu::set_timer_slack(1);
        }
    }
}
