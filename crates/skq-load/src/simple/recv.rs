//! A receiver thread of the simple client: `poll(2)` over its connections,
//! `recvmsg` until each would block, every reply timed by its read's kernel
//! receive stamp and matched against its connection's FIFO. Invariant: only
//! this thread removes entries from the FIFOs of its connections, so the
//! front it parsed against is still the front when it pops it.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use skq_sys::poll::PollSet;
use skq_sys::{cpu, net};

use super::{Conn, Part, Shared};
use crate::protocol::{Answers, Codec, Parsed};

/// How long one `poll` waits at most, so the end of the run is noticed.
const POLL_MS: i32 = 10;

/// Per-connection receive state.
struct Rx {
    conn: usize,
    buf: Vec<u8>,
    /// Highest RPC id answered so far on this connection.
    newest: Option<u64>,
    open: bool,
}

/// The time one read gives the replies it completes.
#[derive(Clone, Copy)]
struct ReadTime {
    /// Kernel receive stamp, or the user-space read time if there was none.
    stamp: u64,
    kernel: bool,
    /// User-space time right after the read.
    now: u64,
}

/// Receiver `r` of connections `mine`.
pub(super) fn receive(
    sh: &Shared,
    r: usize,
    mine: Vec<usize>,
    codec: Box<dyn Codec>,
    pin: Option<u32>,
    rt_priority: Option<i32>,
) -> Part {
    let mut part = Part::new(format!("recv-{r}"));
    if let Some(c) = pin {
        let _ = cpu::pin_current_thread(c);
    }
    part.realtime = rt_priority.is_some_and(|p| cpu::set_realtime(p).is_ok());
    let mut set = PollSet::new();
    let mut rx: Vec<Rx> = mine
        .iter()
        .map(|&c| {
            set.add(sh.conns[c].stream.as_raw_fd());
            Rx {
                conn: c,
                buf: Vec::new(),
                newest: None,
                open: true,
            }
        })
        .collect();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        if set.wait(POLL_MS).is_err() {
            // Only EFAULT/EINVAL/ENOMEM: nothing more can be read.
            part.errors.connection_failures += set.live() as u64;
            break;
        }
        for (k, x) in rx.iter_mut().enumerate() {
            let ready = set.ready(k);
            if !(ready.readable || ready.failed) {
                continue;
            }
            if !read_all(sh, x, codec.as_ref(), &mut chunk, &mut part) {
                x.open = false;
                set.remove(k);
                sh.conns[x.conn].dead.store(true, Ordering::Relaxed);
                part.errors.connection_failures += 1;
            }
        }
        let deadline = sh.drain_deadline.load(Ordering::Acquire);
        if set.live() == 0
            || (deadline != 0
                && (cpu::realtime_ns() >= deadline
                    || rx.iter().filter(|x| x.open).all(|x| {
                        let c = &sh.conns[x.conn];
                        c.pending.lock().expect("no thread panicked").is_empty()
                    })))
        {
            break;
        }
    }
    for x in &rx {
        sh.conns[x.conn].dead.store(true, Ordering::Relaxed);
    }
    part.cpu = cpu::thread_cpu_ns();
    part
}

/// Reads connection `x` until it would block and matches what came;
/// `false` when it is closed, failed or unparsable.
fn read_all(sh: &Shared, x: &mut Rx, codec: &dyn Codec, chunk: &mut [u8], part: &mut Part) -> bool {
    let conn = &sh.conns[x.conn];
    loop {
        match net::recv_timestamped_nowait(conn.stream.as_raw_fd(), chunk) {
            Ok((0, _)) => return false,
            Ok((n, stamp)) => {
                let now = cpu::realtime_ns();
                x.buf.extend_from_slice(&chunk[..n]);
                let t = ReadTime {
                    stamp: stamp.unwrap_or(now),
                    kernel: stamp.is_some(),
                    now,
                };
                if !take_replies(sh, conn, codec, x, t, part) {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Matches every whole reply at the front of `x.buf`, each timed by `t`;
/// `false` when the stream cannot be parsed any further.
fn take_replies(
    sh: &Shared,
    conn: &Conn,
    codec: &dyn Codec,
    x: &mut Rx,
    t: ReadTime,
    part: &mut Part,
) -> bool {
    let mut pos = 0;
    // Replies this read completed, and how many of them were measured.
    let (mut completed, mut measured) = (0u64, 0u64);
    let ok = loop {
        // Only this thread removes entries, so the front stays the front
        // while the lock is released for parsing.
        let head = conn
            .pending
            .lock()
            .expect("no thread panicked")
            .front()
            .map(|s| s.req);
        let (len, answers) = match codec.parse(&x.buf[pos..], head.as_ref()) {
            Parsed::Incomplete => break true,
            Parsed::Fatal(_) => {
                part.errors.bad_reply += 1;
                break false;
            }
            Parsed::Reply { len, answers, .. } => (len, answers),
        };
        pos += len;
        let mut pending = conn.pending.lock().expect("no thread panicked");
        let found = match answers {
            Answers::Id(id) => match pending.iter().position(|s| s.req.seq == id) {
                Some(i) => {
                    part.errors.out_of_order += x.newest.is_some_and(|n| id < n) as u64;
                    x.newest = Some(x.newest.map_or(id, |n| n.max(id)));
                    pending.remove(i)
                }
                None => None,
            },
            Answers::Head(true) => pending.pop_front(),
            Answers::Head(false) => {
                pending.pop_front();
                None
            }
        };
        drop(pending);
        let Some(s) = found else {
            part.errors.bad_reply += 1;
            continue;
        };
        part.received_total += 1;
        completed += 1;
        if s.scheduled < sh.measure_from {
            continue;
        }
        part.received += 1;
        measured += 1;
        part.latency
            .saturating_record(t.stamp.saturating_sub(s.scheduled).max(1));
        part.raw
            .saturating_record(t.stamp.saturating_sub(s.sent).max(1));
        part.stamps.before_send += (t.stamp < s.sent) as u64;
        if t.kernel {
            part.stamps.kernel += 1;
            part.recv_delay
                .saturating_record(t.now.saturating_sub(t.stamp).max(1));
        } else {
            part.stamps.user += 1;
        }
    };
    if completed > 1 {
        part.stamps.shared += measured;
    }
    x.buf.drain(..pos);
    ok
}
