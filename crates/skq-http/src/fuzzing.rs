//! The fuzz body shared by the `cargo fuzz` target (`fuzz/fuzz_targets/http_parser.rs`)
//! and the seeded randomized test (`tests/fuzz_random.rs`, what CI runs).
//!
//! [`check`] feeds arbitrary bytes to the real connection state machine
//! (`skq_net::conn::Conn`, as every driver runs it) over an in-memory stream
//! serving a small document root (with a symlink pointing out of it), once
//! in one piece and once cut into chunks chosen by the input itself, then
//! ends the input, and asserts:
//! 1. nothing panics;
//! 2. the bytes written back are identical however the input was split
//!    (requests are framed from the bytes, never from read boundaries);
//! 3. the connection ends for the same reason both ways;
//! 4. everything written is a sequence of `HTTP/1.1` status lines and
//!    heads (no stray bytes between replies), possibly ended by one bare
//!    HTTP/0.9 reply (a file of the root, or an error's text line).

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::OnceLock;

use skq_net::conn::{Conn, Outcome, Transport};
use skq_net::stats::WorkerCounters;
use skq_net::{Close, Cx, Protocol};

use crate::docroot::DocRoot;
use crate::iovar::IoVariance;
use crate::protocol::{AccessLog, HttpProtocol};

/// A fixed clock, so `Date` headers do not differ between the two runs.
fn fixed_clock() -> u64 {
    1_700_000_000
}

fn protocol() -> &'static HttpProtocol {
    static P: OnceLock<HttpProtocol> = OnceLock::new();
    P.get_or_init(|| {
        let base: PathBuf =
            std::env::temp_dir().join(format!("skq-http-fuzz-{}", std::process::id()));
        let root = base.join("www");
        let _ = std::fs::create_dir_all(root.join("sub"));
        let _ = std::fs::write(base.join("secret.txt"), b"outside the root\n");
        let _ = std::fs::write(root.join("index.html"), b"<p>index</p>\n");
        let _ = std::fs::write(root.join("a.css"), b"p{color:red}\n");
        let _ = std::fs::write(root.join("sub/b.txt"), vec![b'b'; 3000]);
        let _ = std::os::unix::fs::symlink("../secret.txt", root.join("out"));
        let root = DocRoot::open(&root).expect("the fuzz document root opens");
        HttpProtocol::new(root, IoVariance::None, AccessLog::Off).with_clock(fixed_clock)
    })
}

/// An in-memory socket: reads yield the pending chunk, then "would block"
/// (or end of stream once `eof` is set); writes are collected.
struct Mock<'a> {
    chunk: &'a [u8],
    eof: bool,
    written: Vec<u8>,
}

impl Read for Mock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.chunk.is_empty() {
            return if self.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = self.chunk.len().min(buf.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        self.chunk = &self.chunk[n..];
        Ok(n)
    }
}

impl Transport for Mock<'_> {}
impl Write for Mock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `input` through a connection, cut at `cuts` (offsets), then ends it.
/// Returns what was written and how the connection ended.
pub fn drive(input: &[u8], cuts: &[usize]) -> (Vec<u8>, Option<Close>) {
    let proto = protocol();
    let counters = WorkerCounters::default();
    let mut conn = Conn::new(proto.open(0));
    let mut scratch = vec![0u8; 16 * 1024];
    let mut mock = Mock {
        chunk: &[],
        eof: false,
        written: Vec::new(),
    };
    let mut start = 0;
    let ends = cuts.iter().copied().chain([input.len(), usize::MAX]);
    let mut closed = None;
    'feed: for end in ends {
        if end == usize::MAX {
            mock.eof = true;
        } else {
            let end = end.clamp(start, input.len());
            mock.chunk = &input[start..end];
            start = end;
        }
        loop {
            let mut cx = Cx::new(0, &counters);
            match conn.on_ready(proto, &mut mock, &mut scratch, &mut cx, false) {
                Outcome::More => continue,
                Outcome::Idle | Outcome::Blocked => break,
                Outcome::Close(why) => {
                    closed = Some(why);
                    break 'feed;
                }
            }
        }
    }
    let written = mock.written;
    let session = conn.session;
    proto.close(session, 0);
    (written, closed)
}

/// Checks that `out` is a sequence of replies: each begins with an
/// `HTTP/1.1 ` status line, has a head ending in an empty line and a body
/// of its `Content-Length` (absent on 304 and bodiless HEAD replies, where
/// the next reply must follow the head directly).
fn assert_replies(mut out: &[u8]) {
    while !out.is_empty() {
        if !out.starts_with(b"HTTP/1.1 ") && is_http09_reply(out) {
            return;
        }
        assert!(
            out.starts_with(b"HTTP/1.1 "),
            "stray bytes: {:?}",
            String::from_utf8_lossy(&out[..out.len().min(80)])
        );
        let end = out
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a reply head ends with an empty line")
            + 4;
        let head = std::str::from_utf8(&out[..end]).expect("reply heads are text");
        let code: u16 = head[9..12].parse().expect("a status code");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map_or(0, |v| v.trim().parse().expect("a length"));
        out = &out[end..];
        // A HEAD reply carries the length without the body: skip the body
        // only when something other than the next reply follows (no file
        // of the fuzz root begins with a status line). A last bare HTTP/0.9
        // reply after a HEAD reply's head is the next reply, not a body
        // (unless the body itself is exactly that long).
        let body = if code == 304
            || out.is_empty()
            || out.starts_with(b"HTTP/1.1 ")
            || (out.len() != len && is_http09_reply(out))
        {
            0
        } else {
            len
        };
        assert!(out.len() >= body, "a reply's body is cut short");
        out = &out[body..];
    }
}

/// Whether `out` is exactly one bare HTTP/0.9 reply from the fuzz root: a
/// file's contents or a status text line such as `404 Not Found\n`.
fn is_http09_reply(out: &[u8]) -> bool {
    let files: [&[u8]; 3] = [b"<p>index</p>\n", b"p{color:red}\n", &[b'b'; 3000]];
    let text = |code: u16| format!("{code} {}\n", crate::protocol::reason(code));
    files.contains(&out)
        || [301, 400, 403, 404, 500]
            .into_iter()
            .any(|c| out == text(c).as_bytes())
}

/// The fuzz body: see the module docs for what it asserts. The first two
/// bytes choose the chunk size (so the fuzzer explores read boundaries); the
/// rest is the connection's input.
pub fn check(data: &[u8]) {
    let (step, input) = match data {
        [a, b, rest @ ..] => ((usize::from(*a) << 8 | usize::from(*b)) % 97 + 1, rest),
        _ => (1, data),
    };
    let whole = drive(input, &[]);
    let cuts: Vec<usize> = (1..input.len().div_ceil(step)).map(|i| i * step).collect();
    let chunked = drive(input, &cuts);
    assert_eq!(
        whole,
        chunked,
        "replies depend on read boundaries (chunk {step}) for input {:?}",
        String::from_utf8_lossy(input)
    );
    assert_replies(&whole.0);
}
