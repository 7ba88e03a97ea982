//! The connection state machine's unit tests (in-memory streams).

use super::*;
use crate::stats::WorkerCounters;
use std::io::{Read, Write};
use std::time::Duration;

/// Lines in, lines out: echoes each line.
pub(crate) struct Lines;
impl Protocol for Lines {
    type Session = ();
    fn open(&self, _: usize) {}
    fn serve(&self, _: &mut (), input: &[u8], out: &mut Vec<u8>, _: &mut Cx<'_>) -> Served {
        match input.iter().position(|&b| b == b'\n') {
            Some(i) => {
                out.extend_from_slice(&input[..=i]);
                Served::Request { consumed: i + 1 }
            }
            None => Served::NeedInput { consumed: 0 },
        }
    }
}

/// Reads `input` once, then would block; writes up to `room` bytes.
struct Stream {
    input: Vec<u8>,
    room: usize,
    written: Vec<u8>,
}
impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.input.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.input.len().min(buf.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input.drain(..n);
        Ok(n)
    }
}
impl Transport for Stream {}
impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(self.room);
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.room -= n;
        self.written.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn event(c: &mut Conn<()>, s: &mut Stream, now: u64) -> Outcome {
    let counters = WorkerCounters::default();
    let mut cx = Cx::new(0, &counters);
    let o = c.serve_ready(&Lines, s, &mut [0u8; 64], &mut cx, false);
    c.note_wait(now);
    o
}

#[test]
fn the_state_clock_follows_requests_not_trickled_bytes() {
    let t = Timeouts {
        idle: Some(Duration::from_nanos(100)),
        request: Some(Duration::from_nanos(50)),
        send: Some(Duration::from_nanos(30)),
    };
    let mut c = Conn::with_limits((), Limits::new(DEFAULT_MAX_OUTPUT, true));
    c.since = 0;
    let mut s = Stream {
        input: b"ab".to_vec(),
        room: usize::MAX,
        written: Vec::new(),
    };
    assert_eq!(event(&mut c, &mut s, 10), Outcome::Idle);
    assert_eq!(c.waiting(), (Wait::Request, 10));
    // More bytes of the same request do not restart its clock.
    s.input = b"c".to_vec();
    let _ = event(&mut c, &mut s, 40);
    assert_eq!(c.waiting(), (Wait::Request, 10));
    assert!(!c.expired(59, &t) && c.expired(60, &t));
    // A request served restarts it: idle now.
    s.input = b"\n".to_vec();
    let _ = event(&mut c, &mut s, 55);
    assert_eq!(c.waiting(), (Wait::Idle, 55));
    assert_eq!(s.written, b"abc\n");
    assert_eq!(c.time_left(100, &t), Some(55));
    // Replies that cannot be written: send state, restarted by progress.
    s.room = 2;
    s.input = b"xyz\n".to_vec();
    assert_eq!(event(&mut c, &mut s, 70), Outcome::Blocked);
    assert_eq!(c.waiting(), (Wait::Send, 70));
    let _ = event(&mut c, &mut s, 90);
    assert_eq!(c.waiting(), (Wait::Send, 70), "no progress");
    assert!(c.expired(100, &t));
    c.mark_timed_out();
    assert!(!c.expired(100, &t), "marked once");
}

#[test]
fn nothing_is_served_while_output_is_at_the_ceiling() {
    let mut c = Conn::with_limits((), Limits::new(MIN, false));
    const MIN: usize = 4096;
    let line = [b'a'; 1023];
    let mut input = Vec::new();
    for _ in 0..64 {
        input.extend_from_slice(&line);
        input.push(b'\n');
    }
    let mut s = Stream {
        input,
        room: 0,
        written: Vec::new(),
    };
    // flush_each: the first reply blocks at once; nothing more is served.
    assert_eq!(event(&mut c, &mut s, 0), Outcome::Blocked);
    assert_eq!(c.pending_output().len(), 1024);
    s.room = usize::MAX;
    while event(&mut c, &mut s, 0) != Outcome::Idle {}
    assert_eq!(s.written.len(), 64 * 1024);
}

/// `f` lines get a head and a file region of the whole file; other lines
/// are echoed.
struct Files(std::path::PathBuf, u64);
impl Protocol for Files {
    type Session = ();
    fn open(&self, _: usize) {}
    fn serve(&self, _: &mut (), input: &[u8], out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Served {
        match input.iter().position(|&b| b == b'\n') {
            Some(i) if &input[..i] == b"f" => {
                out.extend_from_slice(b"HEAD\n");
                let f = std::fs::File::open(&self.0).expect("test file");
                cx.send_file(f, 0, self.1);
                Served::Request { consumed: i + 1 }
            }
            Some(i) => {
                out.extend_from_slice(&input[..=i]);
                Served::Request { consumed: i + 1 }
            }
            None => Served::NeedInput { consumed: 0 },
        }
    }
    fn flush_each(&self) -> bool {
        false
    }
}

fn temp_file(tag: &str, len: usize) -> (std::path::PathBuf, Vec<u8>) {
    use rand::{RngCore, SeedableRng};
    let mut data = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(len as u64).fill_bytes(&mut data);
    let p = std::env::temp_dir().join(format!("skq-net-{tag}-{}", std::process::id()));
    std::fs::write(&p, &data).expect("temp file");
    (p, data)
}

fn on(c: &mut Conn<()>, p: &Files, s: &mut impl Transport) -> Outcome {
    let counters = WorkerCounters::default();
    let mut cx = Cx::new(0, &counters);
    c.on_ready(p, s, &mut [0u8; 64], &mut cx, false)
}

#[test]
fn a_file_region_without_a_descriptor_goes_out_in_bounded_pieces_in_order() {
    let (path, data) = temp_file("pieces", 300_000);
    let proto = Files(path.clone(), data.len() as u64);
    let mut c = Conn::new(());
    let mut s = Stream {
        input: b"a\nf\nb\n".to_vec(),
        room: 10_000,
        written: Vec::new(),
    };
    let mut events = 0;
    loop {
        let o = on(&mut c, &proto, &mut s);
        assert!(c.pending_output().len() <= FILE_PIECE);
        if o == Outcome::Idle {
            break;
        }
        assert!(matches!(o, Outcome::Blocked | Outcome::More), "{o:?}");
        assert!(
            s.written.len() < 2 + 5 + data.len() + 2,
            "b waits for the file"
        );
        s.room = 10_000;
        events += 1;
        assert!(events < 1_000);
    }
    let mut want = b"a\nHEAD\n".to_vec();
    want.extend_from_slice(&data);
    want.extend_from_slice(b"b\n");
    assert!(s.written == want, "bytes differ");
    assert!(!c.sending_file() && c.buffer_capacity() <= 2 * KEEP_CAPACITY);
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_file_region_on_a_socket_is_never_buffered() {
    use std::os::unix::net::UnixStream;
    let (path, data) = temp_file("socket", 3 << 20);
    let proto = Files(path.clone(), data.len() as u64);
    let (mut server, mut client) = UnixStream::pair().expect("pair");
    server.set_nonblocking(true).expect("nonblocking");
    client.write_all(b"f\nz\n").expect("request");
    let mut c = Conn::new(());
    // The peer reads nothing: the socket fills, the file stays unread.
    assert_eq!(on(&mut c, &proto, &mut server), Outcome::Blocked);
    assert!(c.sending_file() && c.file_left() > 0);
    assert!(c.pending_output().is_empty(), "no file byte in user memory");
    assert!(c.buffer_capacity() <= 2 * KEEP_CAPACITY);
    // The peer reads; each writable edge sends more.
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    client.set_nonblocking(true).expect("nonblocking");
    let want = 5 + data.len() + 2;
    while got.len() < want {
        match client.read(&mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let _ = on(&mut c, &proto, &mut server);
                assert!(c.pending_output().len() <= 2);
            }
            Err(e) => panic!("read: {e}"),
        }
    }
    assert_eq!(&got[..5], b"HEAD\n");
    assert!(got[5..5 + data.len()] == data[..], "file bytes differ");
    assert_eq!(&got[5 + data.len()..], b"z\n");
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_file_shorter_than_its_region_closes_the_connection() {
    let (path, data) = temp_file("short", 100_000);
    let proto = Files(path.clone(), data.len() as u64 + 1);
    let mut c = Conn::new(());
    let mut s = Stream {
        input: b"f\n".to_vec(),
        room: usize::MAX,
        written: Vec::new(),
    };
    assert_eq!(on(&mut c, &proto, &mut s), Outcome::Close(Close::Aborted));
    assert_eq!(s.written.len(), 5 + data.len());
    let (mut server, _client) = std::os::unix::net::UnixStream::pair().expect("pair");
    server.set_nonblocking(true).expect("nonblocking");
    let mut c = Conn::new(());
    // Over a socket too (the peer's buffer takes the whole file).
    let proto = Files(path.clone(), 4);
    std::fs::write(&path, b"ab").expect("shrink");
    let mut s = Sock(&mut server, b"f\n".to_vec());
    assert_eq!(on(&mut c, &proto, &mut s), Outcome::Close(Close::Aborted));
    let _ = std::fs::remove_file(path);
}

/// A socket whose reads come from memory (so the request needs no peer).
struct Sock<'a>(&'a mut std::os::unix::net::UnixStream, Vec<u8>);
impl Read for Sock<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.1.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.1.len().min(buf.len());
        buf[..n].copy_from_slice(&self.1[..n]);
        self.1.drain(..n);
        Ok(n)
    }
}
impl Write for Sock<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
impl Transport for Sock<'_> {
    fn sendfile_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(self.0.as_fd())
    }
}

#[test]
fn a_long_file_region_yields_the_worker_after_the_event_budget() {
    let (path, data) = temp_file("budget", 4 << 20);
    let proto = Files(path.clone(), data.len() as u64);
    let mut c = Conn::new(());
    let mut s = Stream {
        input: b"f\n".to_vec(),
        room: usize::MAX,
        written: Vec::new(),
    };
    // The reader takes everything, yet one event sends at most the
    // budget's worth (32 pieces of FILE_PIECE) before asking redelivery.
    assert_eq!(on(&mut c, &proto, &mut s), Outcome::More);
    assert!(s.written.len() <= 5 + REQUESTS_PER_EVENT * FILE_PIECE);
    let mut events = 1;
    while on(&mut c, &proto, &mut s) == Outcome::More {
        events += 1;
    }
    assert!(events >= 4, "{events} events for 4 MiB");
    assert!(s.written[5..] == data[..], "file bytes differ");
    let _ = std::fs::remove_file(path);
}

/// `s N` lines get `<` + N shared bytes + `>`, and with `r N` the reply
/// goes on in 3 resumed pieces of the same shape; other lines are echoed.
struct Shares;
#[derive(Default)]
struct ShareSession {
    pieces_left: usize,
    len: usize,
}
fn shared_bytes(len: usize, tag: u8) -> bytes::Bytes {
    bytes::Bytes::from((0..len).map(|i| tag ^ (i % 251) as u8).collect::<Vec<u8>>())
}
fn share_piece(out: &mut Vec<u8>, cx: &mut Cx<'_>, len: usize, tag: u8) {
    out.push(b'<');
    cx.send_shared(out.len(), shared_bytes(len, tag), len);
    out.push(b'>');
}
impl Protocol for Shares {
    type Session = ShareSession;
    fn open(&self, _: usize) -> ShareSession {
        ShareSession::default()
    }
    fn serve(
        &self,
        s: &mut ShareSession,
        input: &[u8],
        out: &mut Vec<u8>,
        cx: &mut Cx<'_>,
    ) -> Served {
        let Some(i) = input.iter().position(|&b| b == b'\n') else {
            return Served::NeedInput { consumed: 0 };
        };
        let line = std::str::from_utf8(&input[..i]).unwrap();
        match line.split_once(' ') {
            Some((kind @ ("s" | "r"), n)) => {
                let len: usize = n.parse().unwrap();
                share_piece(out, cx, len, 0);
                if kind == "r" {
                    s.pieces_left = 3;
                    s.len = len;
                    cx.resume_later();
                }
            }
            _ => out.extend_from_slice(&input[..=i]),
        }
        Served::Request { consumed: i + 1 }
    }
    /// Replies are written in batches, so the ceiling decides when.
    fn flush_each(&self) -> bool {
        false
    }
    fn resume(&self, s: &mut ShareSession, out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Resume {
        share_piece(out, cx, s.len, s.pieces_left as u8);
        s.pieces_left -= 1;
        if s.pieces_left == 0 {
            Resume::Done
        } else {
            Resume::More
        }
    }
}

/// A stream taking at most `per_write` bytes per (gathered) write and
/// `room` in all before it would block.
struct Gather {
    inner: Stream,
    per_write: usize,
    writes: usize,
}
impl Read for Gather {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }
}
impl Transport for Gather {}
impl Write for Gather {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writes += 1;
        let mut budget = self.per_write.min(self.inner.room);
        if budget == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut n = 0;
        for b in bufs {
            let take = b.len().min(budget);
            self.inner.written.extend_from_slice(&b[..take]);
            budget -= take;
            n += take;
            if budget == 0 {
                break;
            }
        }
        self.inner.room -= n;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn expected_shares(input: &str) -> Vec<u8> {
    let mut want = Vec::new();
    for line in input.lines() {
        match line.split_once(' ') {
            Some((kind @ ("s" | "r"), n)) => {
                let len: usize = n.parse().unwrap();
                let pieces = if kind == "r" { 4 } else { 1 };
                for p in 0..pieces {
                    let tag = if p == 0 { 0 } else { (4 - p) as u8 };
                    want.push(b'<');
                    want.extend_from_slice(&shared_bytes(len, tag));
                    want.push(b'>');
                }
            }
            _ => {
                want.extend_from_slice(line.as_bytes());
                want.push(b'\n');
            }
        }
    }
    want
}

#[test]
fn shared_regions_go_out_in_place_whatever_the_write_sizes() {
    let input = "a\ns 5000\ns 0\nb\nr 3000\nc\ns 70000\n";
    let want = expected_shares(input);
    for per_write in [1, 3, 1000, 4999, 5002, 65536, usize::MAX] {
        for room in [usize::MAX, 7000] {
            let mut c = Conn::with_limits(ShareSession::default(), Limits::new(8192, false));
            let mut s = Gather {
                inner: Stream {
                    input: input.as_bytes().to_vec(),
                    room,
                    written: Vec::new(),
                },
                per_write,
                writes: 0,
            };
            let counters = WorkerCounters::default();
            let mut rounds = 0;
            loop {
                let mut cx = Cx::new(0, &counters);
                match c.serve_ready(&Shares, &mut s, &mut [0u8; 64], &mut cx, false) {
                    Outcome::Idle if !c.wants_write() => break,
                    Outcome::Close(why) => panic!("closed: {why:?}"),
                    _ => {}
                }
                // A blocked socket drains between events.
                s.inner.room = room;
                rounds += 1;
                assert!(rounds < 100_000, "no progress");
            }
            assert!(
                s.inner.written == want,
                "per_write {per_write} room {room}: {} of {} bytes",
                s.inner.written.len(),
                want.len()
            );
            assert_eq!(c.pending_charge(), 0);
            assert!(!c.has_pending_bytes());
        }
    }
}

#[test]
fn shared_regions_count_against_the_ceiling() {
    // Every reply is 2 bytes plus 3,000 shared: with a 4,096-byte ceiling
    // and a socket that takes nothing, the second reply reaches it and
    // nothing more is served.
    let mut c = Conn::with_limits(ShareSession::default(), Limits::new(4096, false));
    let mut s = Gather {
        inner: Stream {
            input: "s 3000\n".repeat(10).into_bytes(),
            room: 0,
            written: Vec::new(),
        },
        per_write: usize::MAX,
        writes: 0,
    };
    let counters = WorkerCounters::default();
    let mut cx = Cx::new(0, &counters);
    assert_eq!(
        c.serve_ready(&Shares, &mut s, &mut [0u8; 128], &mut cx, false),
        Outcome::Blocked
    );
    assert_eq!(c.pending_charge(), 2 * 3002);
    assert_eq!(
        c.pending_output(),
        b"<",
        "buffered bytes end at the first region"
    );
    let mut iov = [IoSlice::new(&[]); 8];
    assert_eq!(c.pending_slices(&mut iov), 5, "<, shared, ><, shared, >");
    s.inner.room = usize::MAX;
    while c.serve_ready(&Shares, &mut s, &mut [0u8; 128], &mut cx, false) != Outcome::Idle {}
    assert_eq!(s.inner.written, expected_shares(&"s 3000\n".repeat(10)));
}
