//! A receiver thread of the simple client: `poll(2)` over its connections,
//! `recvmsg` until each would block, every reply timed by its read's kernel
//! receive stamp and matched against its connection's FIFO. With
//! cooperation it reads only while its senders lend it the CPU: it checks
//! their windows before `poll` and before every `recvmsg`, and when they
//! close it leaves the rest unread and parks (`lend.rs`); a `poll` waits no
//! longer than the window stays open. Invariants: only
//! this thread removes entries from the FIFOs of its connections, so the
//! front it parsed against is still the front when it pops it (the sender
//! takes back only an entry it pushed itself and wrote nothing of); with a
//! closed window it never calls `poll`, so unread data cannot make it spin.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Duration;

use skq_sys::poll::PollSet;
use skq_sys::{cpu, net};

use super::lend::{Lend, Lending};
use super::{Conn, Part, Shared};
use crate::protocol::{Answers, Codec, Parsed};

/// How long one `poll` or one park waits at most, so the end of the run
/// is noticed.
const PARK: Duration = Duration::from_millis(10);

/// How far [`read_all`] got with one connection.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drained {
    /// Reading would block: everything that had arrived was taken.
    Empty,
    /// The senders' window closed first: data may be left unread.
    Yielded,
    /// Closed, failed or unparsable.
    Gone,
}

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
    // A `poll` bounded by the lend window must not overrun it by the
    // default 50 µs of timer slack (real-time threads have none anyway).
    let _ = cpu::set_timer_slack(1);
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
    let lending = sh.lending.as_ref().map(|l| {
        l.register(r);
        (l, r)
    });
    let mut chunk = vec![0u8; 64 * 1024];
    // Where the next round starts, so that a window closing mid-round does
    // not always leave the same connections for last.
    let mut first = 0;
    loop {
        if let Some((l, r)) = lending {
            if l.wait(r, PARK, &cpu::realtime_ns) == Lend::Closed {
                if finished(sh, &set, &rx) {
                    break;
                }
                continue;
            }
        }
        // While lent, `poll` waits no longer than the lend: a receiver
        // still blocked in `poll` when the window closes would be woken by
        // the next reply (the one to the send just made, as often as not)
        // and, being SCHED_FIFO, take the CPU from the sender in the
        // middle of its send only to park again.
        let limit = match lending {
            Some((l, r)) => {
                let left = l.open_for(r, cpu::realtime_ns());
                if left == 0 {
                    continue;
                }
                Duration::from_nanos(left).min(PARK)
            }
            None => PARK,
        };
        if set.wait_for(limit).is_err() {
            // Only EFAULT/EINVAL/ENOMEM: nothing more can be read.
            part.errors.connection_failures += set.live() as u64;
            break;
        }
        let n = rx.len();
        let mut next = (first + 1) % n;
        for k in (first..n).chain(0..first) {
            let ready = set.ready(k);
            if !(ready.readable || ready.failed) {
                continue;
            }
            let x = &mut rx[k];
            match read_all(sh, x, codec.as_ref(), &mut chunk, &mut part, lending) {
                Drained::Empty => {}
                Drained::Yielded => {
                    // `poll` reports the rest again once the window reopens.
                    part.recv_yields += 1;
                    next = k;
                    break;
                }
                Drained::Gone => {
                    x.open = false;
                    set.remove(k);
                    sh.conns[x.conn].dead.store(true, Ordering::Relaxed);
                    part.errors.connection_failures += 1;
                }
            }
        }
        first = next;
        if finished(sh, &set, &rx) {
            break;
        }
    }
    for x in &rx {
        sh.conns[x.conn].dead.store(true, Ordering::Relaxed);
    }
    part.cpu = cpu::thread_cpu_ns();
    part
}

/// Whether the receiver is done: nothing left to watch, or the last sender
/// is done and the drain time is over or every open FIFO is empty.
fn finished(sh: &Shared, set: &PollSet, rx: &[Rx]) -> bool {
    let deadline = sh.drain_deadline.load(Ordering::Acquire);
    set.live() == 0
        || (deadline != 0
            && (cpu::realtime_ns() >= deadline
                || rx.iter().filter(|x| x.open).all(|x| {
                    let c = &sh.conns[x.conn];
                    c.pending.lock().expect("no thread panicked").is_empty()
                })))
}

/// Reads connection `x` until it would block, or until the window of
/// `lending`'s receiver closes, and matches what came.
fn read_all(
    sh: &Shared,
    x: &mut Rx,
    codec: &dyn Codec,
    chunk: &mut [u8],
    part: &mut Part,
    lending: Option<(&Lending, usize)>,
) -> Drained {
    let conn = &sh.conns[x.conn];
    loop {
        if let Some((l, r)) = lending {
            if l.open(r, cpu::realtime_ns()) == Lend::Closed {
                return Drained::Yielded;
            }
        }
        match net::recv_timestamped_nowait(conn.stream.as_raw_fd(), chunk) {
            Ok((0, _)) => return Drained::Gone,
            Ok((n, stamp)) => {
                let now = cpu::realtime_ns();
                x.buf.extend_from_slice(&chunk[..n]);
                let t = ReadTime {
                    stamp: stamp.unwrap_or(now),
                    kernel: stamp.is_some(),
                    now,
                };
                if !take_replies(sh, conn, codec, x, t, part) {
                    return Drained::Gone;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Drained::Empty,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Drained::Gone,
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
