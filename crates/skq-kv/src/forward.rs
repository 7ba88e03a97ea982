//! Thread-per-core request handling: what one worker does with a command (run it on its
//! own partition, or forward it to the key's owner over a ring) and with a message from
//! another worker.
//!
//! **Bounded output.** Every reply a connection waits for counts against its ceiling
//! ([`crate::protocol::Limits::max_conn_output`], see [`crate::session`]): a forwarded
//! command carries a *budget*, the output room its reply may take, promised by the
//! connection when it is sent. The owner answers the keys of a retrieval (or an `mg` with
//! `v`) while their replies fit in the budget and sends back the rest as a *retry* with
//! the bytes the next reply needs; the connection keeps it in the same reply slot and
//! re-sends it once that much room is free — or when the slot is the front one and
//! everything before it is written, since then nothing but its own output can free room. Local keys of a retrieval are answered while they
//! fit in the room left; the remaining keys are deferred until output drains. The only
//! reply allowed past the ceiling is one when nothing else of the connection is pending
//! (or the front slot's), so a connection holds at most the ceiling plus one item.

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::exec::{apply, flush_delay, get_one_within, get_reply_bound};
use crate::protocol::Command;
use crate::reply::Reply;
use crate::session::{Dispatch, Handler, Session};
use crate::store::Partition;
use crate::tpc::{owner, Shared};

/// The budget of a forwarded retrieval when the room allows it: enough for the VALUE
/// blocks of many small items or a few 64 KiB ones in one round trip.
pub const CHUNK: usize = 64 << 10;
/// Least room worth promising to a forwarded retrieval (less defers it).
const MIN_ROOM: usize = 4 << 10;
/// The budget of a forwarded command whose reply carries no value (the longest such
/// reply, an `ms` echoing a base64 key, an opaque and a CAS, is under 512 bytes).
pub const SMALL_REPLY: usize = 1 << 10;
/// An upper bound of an `mg` reply's bytes besides its value: the return flags, with the
/// key twice at most (`k` in base64).
const MG_OVERHEAD: usize = 512;

/// A message between workers. `conn` is the requesting connection's token on `from`.
#[derive(Debug)]
pub(crate) enum Msg {
    /// Retrieve `keys` (all owned by the receiver); reply with their VALUE blocks, within
    /// `budget` bytes (the rest comes back as a retry).
    Get {
        from: usize,
        conn: u64,
        seq: u64,
        keys: Vec<Vec<u8>>,
        cas: bool,
        touch: Option<i64>,
        budget: usize,
    },
    /// A single-key command; reply unless `seq` is `None` (noreply). An `mg` with `v`
    /// whose reply would not fit in `budget` comes back unrun as a retry.
    Cmd {
        from: usize,
        conn: u64,
        seq: Option<u64>,
        cmd: Command,
        budget: usize,
    },
    /// flush_all on the receiver's partition; acknowledge with an empty reply.
    Flush {
        from: usize,
        conn: u64,
        seq: Option<u64>,
        delay: u32,
    },
    /// Reply bytes for slot `seq` of connection `conn`, and what is still to run for it.
    Reply {
        conn: u64,
        seq: u64,
        data: Reply,
        retry: Option<(Command, usize)>,
    },
}

/// A reply for a connection of this worker: `(conn, seq, data, retry)`.
pub(crate) type Completion = (u64, u64, Reply, Option<(Command, usize)>);

/// The room to promise a forwarded reply needing `need` bytes (0: unknown, a
/// retrieval), or `None` if it must wait for output to drain. `first` lets it run
/// whatever the room (the connection's front slot, or nothing pending at all).
fn budget(s: &Session, need: usize, first: bool) -> Option<usize> {
    let want = need.max(CHUNK);
    if first || s.pending_bytes() == 0 {
        return Some(want);
    }
    let room = s.room();
    (room >= need.max(MIN_ROOM)).then(|| room.min(want))
}

/// The budget of a forwarded single-key command, `None` if it must wait.
fn cmd_budget(s: &Session, cmd: &Command) -> Option<usize> {
    match cmd {
        Command::MetaGet { flags, .. } if flags.value => budget(s, 0, false),
        _ if s.pending_bytes() == 0 || s.room() >= SMALL_REPLY => Some(SMALL_REPLY),
        _ => None,
    }
}

/// Stores partition `w`'s figures for `stats` (read by every worker).
fn publish(shared: &Shared, w: usize, part: &Partition) {
    let s = part.stats();
    let p = &shared.published[w];
    p.curr_items.store(s.curr_items, Relaxed);
    p.total_items.store(s.total_items, Relaxed);
    p.bytes.store(s.bytes, Relaxed);
    p.evictions.store(s.evictions, Relaxed);
    p.allocated.store(s.allocated, Relaxed);
    p.overhead_bits
        .store(part.overhead_per_item().to_bits(), Relaxed);
}

/// The part of a worker command handling needs (split from the connection table so a
/// session and the partition can be borrowed together).
pub(crate) struct Core {
    pub(crate) me: usize,
    pub(crate) n: usize,
    pub(crate) shared: Arc<Shared>,
    /// This worker's partition, held while it is awake ([`crate::tpc`], "Borrowing").
    pub(crate) part: crate::tpc::Owned,
    /// Replies that found their ring full, per destination.
    pub(crate) overflow: Vec<VecDeque<Msg>>,
    /// Token of the connection being handled.
    pub(crate) token: u64,
}

impl Core {
    fn send(&mut self, dst: usize, msg: Msg) {
        let q = self.shared.rings.queue(self.me, dst);
        let msg = if self.overflow[dst].is_empty() {
            q.push(msg).err()
        } else {
            Some(msg)
        };
        match msg {
            None => {
                self.shared.bells[dst].ring_after_push();
            }
            Some(m) => self.overflow[dst].push_back(m),
        }
    }

    /// Room for one more request towards `dst`, counting overflowed replies ahead of it.
    pub(crate) fn room(&self, dst: usize) -> usize {
        self.shared
            .rings
            .free(self.me, dst)
            .saturating_sub(self.overflow[dst].len())
    }

    pub(crate) fn flush_overflow(&mut self) -> bool {
        let mut moved = false;
        for dst in 0..self.n {
            let mut pushed = false;
            while let Some(m) = self.overflow[dst].pop_front() {
                if let Err(m) = self.shared.rings.queue(self.me, dst).push(m) {
                    self.overflow[dst].push_front(m);
                    break;
                }
                pushed = true;
            }
            if pushed {
                self.shared.bells[dst].ring_after_push();
                moved = true;
            }
        }
        moved
    }

    pub(crate) fn publish(&self) {
        publish(&self.shared, self.me, &self.part);
    }

    /// Partition `o` (not this worker's) for one command run here, if its owner sleeps
    /// and nothing this worker sent it is still waiting in the ring or the overflow
    /// queue towards it (so what came earlier has run). `None`: forward as usual.
    fn borrow<'a>(
        shared: &'a Shared,
        me: usize,
        overflow: &[VecDeque<Msg>],
        o: usize,
    ) -> Option<parking_lot::MutexGuard<'a, Partition>> {
        if shared.strict || !overflow[o].is_empty() || !shared.rings.queue(me, o).is_empty() {
            return None;
        }
        shared.parts[o].try_lock()
    }

    /// Executes a request from another worker and sends the reply back; a reply for one
    /// of this worker's connections comes back to the caller.
    pub(crate) fn serve_remote(&mut self, msg: Msg) -> Option<Completion> {
        let ctx = self.shared.ctx.clone();
        let c = &ctx.counters[self.me];
        let now = ctx.now();
        match msg {
            Msg::Get {
                from,
                conn,
                seq,
                mut keys,
                cas,
                touch,
                budget,
            } => {
                let mut out = Reply::new();
                let mut retry = None;
                for i in 0..keys.len() {
                    let k = &keys[i];
                    let fit = get_one_within(
                        &mut self.part,
                        k,
                        cas,
                        touch,
                        now,
                        c,
                        &mut out,
                        budget,
                        false,
                    );
                    if let Err(need) = fit {
                        let rest = keys.split_off(i);
                        retry = Some((
                            Command::Get {
                                keys: rest,
                                cas,
                                touch,
                            },
                            need,
                        ));
                        break;
                    }
                }
                let data = out;
                self.send(
                    from,
                    Msg::Reply {
                        conn,
                        seq,
                        data,
                        retry,
                    },
                );
            }
            Msg::Cmd {
                from,
                conn,
                seq,
                cmd,
                budget,
            } => {
                if let (Command::MetaGet { key, flags }, Some(seq)) = (&cmd, seq) {
                    let need = match get_reply_bound(&mut self.part, key, now) {
                        0 => 0,
                        n => n + MG_OVERHEAD,
                    };
                    if flags.value && need > budget {
                        let retry = Some((cmd, need));
                        let data = Reply::new();
                        self.send(
                            from,
                            Msg::Reply {
                                conn,
                                seq,
                                data,
                                retry,
                            },
                        );
                        return None;
                    }
                }
                let mut out = Vec::new();
                apply(&mut self.part, &cmd, now, c, &mut out);
                crate::recycle::give(cmd);
                if let Some(seq) = seq {
                    let (data, retry) = (Reply::from_bytes(out), None);
                    self.send(
                        from,
                        Msg::Reply {
                            conn,
                            seq,
                            data,
                            retry,
                        },
                    );
                }
            }
            Msg::Flush {
                from,
                conn,
                seq,
                delay,
            } => {
                self.part.flush_all(delay, now.rel);
                if let Some(seq) = seq {
                    let (data, retry) = (Reply::new(), None);
                    self.send(
                        from,
                        Msg::Reply {
                            conn,
                            seq,
                            data,
                            retry,
                        },
                    );
                }
            }
            Msg::Reply {
                conn,
                seq,
                data,
                retry,
            } => return Some((conn, seq, data, retry)),
        }
        None
    }

    /// Re-sends the open reply slots' retries of the connection being handled while
    /// their replies fit (the front slot's always). Returns false when one waits for
    /// ring space (the connection must be polled), true otherwise.
    pub(crate) fn resume(&mut self, s: &mut Session) -> bool {
        while let Some((seq, cmd, need, front)) = s.take_retry() {
            let Some(b) = budget(s, need, front) else {
                s.put_retry(seq, cmd, need);
                return true;
            };
            let o = match &cmd {
                Command::Get { keys, .. } => owner(&keys[0], self.n),
                other => owner(other.key().expect("a retry carries a key"), self.n),
            };
            if self.room(o) == 0 {
                s.put_retry(seq, cmd, need);
                return false;
            }
            s.promise(seq, b);
            let (from, conn) = (self.me, self.token);
            let msg = match cmd {
                Command::Get { keys, cas, touch } => Msg::Get {
                    from,
                    conn,
                    seq,
                    keys,
                    cas,
                    touch,
                    budget: b,
                },
                cmd => Msg::Cmd {
                    from,
                    conn,
                    seq: Some(seq),
                    cmd,
                    budget: b,
                },
            };
            self.send(o, msg);
        }
        true
    }
}

/// Answers the keys of one run of a retrieval from `part` while their replies fit in
/// the connection's room (the first one whatever the room when nothing is pending);
/// returns how many were answered.
fn run_here(
    part: &mut Partition,
    s: &mut Session,
    ks: &[Vec<u8>],
    cas: bool,
    touch: Option<i64>,
    now: crate::exec::Now,
    c: &crate::stats::Counters,
) -> usize {
    let room = s.room();
    let mut force = s.pending_bytes() == 0;
    let out = s.reply_out();
    let limit = out.charge() + room;
    for (i, k) in ks.iter().enumerate() {
        if get_one_within(part, k, cas, touch, now, c, out, limit, force).is_err() {
            return i;
        }
        force = false;
    }
    ks.len()
}

impl Core {
    /// A retrieval: runs of consecutive keys with the same owner, local ones answered
    /// here while they fit, the others forwarded with a budget. When a run can go no
    /// further (no room, or a full ring) the remaining keys come back to the session,
    /// which parses nothing else meanwhile: the resumed remainder's replies land right
    /// after the slots reserved now, and `END` is written once, after the last run.
    fn get(
        &mut self,
        s: &mut Session,
        keys: Vec<Vec<u8>>,
        cas: bool,
        touch: Option<i64>,
    ) -> Dispatch {
        let ctx = self.shared.ctx.clone();
        let c = &ctx.counters[self.me];
        let now = ctx.now();
        if keys.iter().all(|k| owner(k, self.n) == self.me) {
            // Every key is local (always so with one worker): one run, answered without
            // splitting the list, whose buffers are then recycled.
            let room = s.room();
            let mut force = s.pending_bytes() == 0;
            let out = s.reply_out();
            let limit = out.charge() + room;
            for (i, k) in keys.iter().enumerate() {
                if get_one_within(&mut self.part, k, cas, touch, now, c, out, limit, force).is_err()
                {
                    let mut keys = keys;
                    let rest = keys.split_off(i);
                    crate::recycle::give_keys(keys);
                    return Dispatch::Deferred(Command::Get {
                        keys: rest,
                        cas,
                        touch,
                    });
                }
                force = false;
            }
            crate::recycle::give_keys(keys);
            s.reply(b"END\r\n");
            return Dispatch::Done;
        }
        let mut runs: Vec<(usize, Vec<Vec<u8>>)> = Vec::new();
        for k in keys {
            let o = owner(&k, self.n);
            match runs.last_mut() {
                Some((ro, ks)) if *ro == o => ks.push(k),
                _ => runs.push((o, vec![k])),
            }
        }
        let mut runs = runs.into_iter();
        let rest =
            |ks: Vec<Vec<u8>>, runs: std::vec::IntoIter<(usize, Vec<Vec<u8>>)>| Command::Get {
                keys: ks.into_iter().chain(runs.flat_map(|(_, ks)| ks)).collect(),
                cas,
                touch,
            };
        let shared = self.shared.clone();
        while let Some((o, mut ks)) = runs.next() {
            let done = if o == self.me {
                Some(run_here(&mut self.part, s, &ks, cas, touch, now, c))
            } else if let Some(mut p) = Self::borrow(&shared, self.me, &self.overflow, o) {
                c.skq_borrowed.fetch_add(1, Relaxed);
                Some(run_here(&mut p, s, &ks, cas, touch, now, c))
            } else {
                None
            };
            if let Some(done) = done {
                if done < ks.len() {
                    return Dispatch::Deferred(rest(ks.split_off(done), runs));
                }
            } else if self.room(o) == 0 {
                c.skq_ring_full.fetch_add(1, Relaxed);
                return Dispatch::Stalled(rest(ks, runs));
            } else if let Some(b) = budget(s, 0, false) {
                c.skq_forwarded.fetch_add(1, Relaxed);
                let seq = s.reserve(b);
                self.send(
                    o,
                    Msg::Get {
                        from: self.me,
                        conn: self.token,
                        seq,
                        keys: ks,
                        cas,
                        touch,
                        budget: b,
                    },
                );
            } else {
                return Dispatch::Deferred(rest(ks, runs));
            }
        }
        s.reply(b"END\r\n");
        Dispatch::Done
    }
}

impl Handler for Core {
    fn handle(&mut self, s: &mut Session, cmd: Command) -> Dispatch {
        let ctx = self.shared.ctx.clone();
        let c = &ctx.counters[self.me];
        let now = ctx.now();
        match cmd {
            Command::Get { keys, cas, touch } => return self.get(s, keys, cas, touch),
            Command::FlushAll { delay, noreply } => {
                if (0..self.n).any(|d| d != self.me && self.room(d) == 0) {
                    c.skq_ring_full.fetch_add(1, Relaxed);
                    return Dispatch::Stalled(Command::FlushAll { delay, noreply });
                }
                c.cmd_flush.fetch_add(1, Relaxed);
                let delay = flush_delay(delay, now);
                self.part.flush_all(delay, now.rel);
                let me = self.me;
                for d in (0..self.n).filter(|&d| d != me) {
                    let seq = (!noreply).then(|| s.reserve(0));
                    self.send(
                        d,
                        Msg::Flush {
                            from: self.me,
                            conn: self.token,
                            seq,
                            delay,
                        },
                    );
                }
                if !noreply {
                    s.reply(b"OK\r\n");
                }
            }
            cmd => {
                let shared = self.shared.clone();
                if ctx.keyless(s.reply_buf(), &cmd, || shared.stats()) {
                    return Dispatch::Done;
                }
                let o = owner(cmd.key().expect("remaining commands carry one key"), self.n);
                if o == self.me {
                    apply(&mut self.part, &cmd, now, c, s.reply_buf());
                    crate::recycle::give(cmd);
                } else if let Some(mut p) = Self::borrow(&shared, self.me, &self.overflow, o) {
                    c.skq_borrowed.fetch_add(1, Relaxed);
                    apply(&mut p, &cmd, now, c, s.reply_buf());
                    publish(&shared, o, &p);
                    drop(p);
                    crate::recycle::give(cmd);
                } else if self.room(o) == 0 {
                    c.skq_ring_full.fetch_add(1, Relaxed);
                    return Dispatch::Stalled(cmd);
                } else {
                    let silent = cmd.silent();
                    let Some(b) = (if silent { Some(0) } else { cmd_budget(s, &cmd) }) else {
                        return Dispatch::Deferred(cmd);
                    };
                    c.skq_forwarded.fetch_add(1, Relaxed);
                    let seq = (!silent).then(|| s.reserve(b));
                    self.send(
                        o,
                        Msg::Cmd {
                            from: self.me,
                            conn: self.token,
                            seq,
                            cmd,
                            budget: b,
                        },
                    );
                }
            }
        }
        Dispatch::Done
    }
}
