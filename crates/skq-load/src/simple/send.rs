//! The sender thread of the simple client: its connections' Poisson
//! schedules merged in time order, an absolute-time sleep and a short spin
//! before each send, one non-blocking write. While it sleeps and spins it
//! lends the CPU to its receivers (`lend.rs`), and takes it back before it
//! sends. Invariants: a request's `Sent` entry is in its connection's FIFO
//! before its first byte is written; an entry whose request wrote no byte
//! is taken back (the sender alone pushes, so it is still the back unless
//! a stray reply consumed it).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use skq_sys::cpu;

use super::lend;
use super::{codec, Part, RpcService, Sent, Shared, SimpleConfig, SimpleProtocol};
use crate::protocol::Request;
use crate::schedule::{ConnSchedule, ScheduleKind};

/// Sender `t`: sends the schedules of connections `t, t+T, …` from `start`
/// (realtime ns) until a send would be due at or after `end`.
pub(super) fn send(
    sh: &Shared,
    cfg: &SimpleConfig,
    t: usize,
    start: u64,
    end: u64,
    pin: Option<u32>,
) -> Part {
    let mut part = Part::new(format!("send-{t}"));
    if let Some(c) = pin {
        let _ = cpu::pin_current_thread(c);
    }
    let _ = cpu::set_timer_slack(1);
    let mine: Vec<usize> = (t..cfg.connections).step_by(cfg.threads).collect();
    // Connection i's arrivals are those `skq load --seed` gives its load
    // connection i (`engine.rs`: seed + (Role::Load = 0) << 40).
    let mut schedules: Vec<ConnSchedule> = mine
        .iter()
        .map(|&i| {
            ConnSchedule::new(
                &ScheduleKind::Poisson,
                None,
                cfg.rate,
                i,
                cfg.connections,
                cfg.seed,
            )
        })
        .collect();
    // (offset from start in ns, index into `mine`), earliest first.
    let mut due: BinaryHeap<Reverse<(u64, usize)>> = schedules
        .iter_mut()
        .enumerate()
        .map(|(k, s)| Reverse((s.next(None), k)))
        .collect();
    let mut next_seq = vec![0u64; mine.len()];
    // Request contents (service times, keys) from a stream of their own.
    let mut rng = SmallRng::seed_from_u64(cfg.seed ^ 0x5E9D_0000 ^ t as u64);
    let codec = codec(&cfg.protocol, cfg.addr);
    let spin = cfg.spin.as_nanos() as u64;
    let service = match cfg.protocol {
        SimpleProtocol::Rpc(RpcService::Exponential(mean)) => {
            Some(Exp::new(1.0 / mean.max(1) as f64).expect("positive rate"))
        }
        _ => None,
    };
    let lending = sh.lending.as_ref();
    let mut out = Vec::new();
    // When this sender's last send call returned (realtime ns).
    let mut prev_done = 0u64;
    while let Some(Reverse((offset, k))) = due.pop() {
        let scheduled = start + offset;
        if scheduled >= end {
            break; // the heap's minimum: every later send is past the end too
        }
        due.push(Reverse((schedules[k].next(Some(offset)), k)));
        let mut req = Request::new(next_seq[k]);
        match &cfg.protocol {
            SimpleProtocol::Rpc(RpcService::Fixed(ns)) => req.service_ns = *ns,
            SimpleProtocol::Rpc(RpcService::Exponential(_)) => {
                let e = service.as_ref().expect("built above");
                req.service_ns = e.sample(&mut rng).min(u32::MAX as f64) as u32;
            }
            SimpleProtocol::Memcached(spec) => spec.draw(&mut rng, &mut req),
            SimpleProtocol::Http(_) => {}
        }
        out.clear();
        codec.encode(&req, &mut out);
        let conn = &sh.conns[mine[k]];
        // The request is built: nothing is left to do before `scheduled`.
        if let Some(l) = lending {
            l.lend(t, scheduled, &cpu::realtime_ns);
        }
        cpu::sleep_then_spin_until_realtime(scheduled, spin);
        if let Some(l) = lending {
            l.take(t);
        }
        if conn.dead.load(Ordering::Relaxed) {
            continue;
        }
        let sent = cpu::realtime_ns();
        conn.pending
            .lock()
            .expect("no thread panicked")
            .push_back(Sent {
                req,
                scheduled,
                sent,
            });
        match write_now(&conn.stream, &out) {
            Written::Whole => {}
            Written::Full => {
                // Not sent: take the entry back; the id goes to the next request.
                let mut pending = conn.pending.lock().expect("no thread panicked");
                if pending
                    .back()
                    .is_some_and(|s| s.req.seq == req.seq && s.scheduled == scheduled)
                {
                    pending.pop_back();
                }
                part.errors.send_full += 1;
                part.errors.missing += 1;
                continue;
            }
            w @ (Written::Partial | Written::Failed) => {
                // A part-written request cannot be finished without
                // blocking, and the stream is unusable after it.
                part.errors.send_full += (w == Written::Partial) as u64;
                conn.dead.store(true, Ordering::Relaxed);
                part.errors.connection_failures += 1;
                continue;
            }
        }
        let done = cpu::realtime_ns();
        next_seq[k] += 1;
        part.sent_total += 1;
        if scheduled >= sh.measure_from {
            part.sent += 1;
            let late = sent.saturating_sub(scheduled);
            part.lateness.saturating_record(late.max(1));
            if late > super::LATE_NS {
                part.late_sends.late += 1;
                part.late_sends.behind_previous_send += u64::from(prev_done > scheduled);
            }
            part.send_call
                .saturating_record(done.saturating_sub(sent).max(1));
        }
        prev_done = done;
    }
    if let Some(l) = lending {
        l.lend(t, lend::DONE, &cpu::realtime_ns);
    }
    if sh.senders_left.fetch_sub(1, Ordering::AcqRel) == 1 {
        let deadline = cpu::realtime_ns() + cfg.drain.as_nanos() as u64;
        sh.drain_deadline.store(deadline, Ordering::Release);
    }
    part.cpu = cpu::thread_cpu_ns();
    part
}

/// How far one non-blocking write of a request got.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    /// All of it.
    Whole,
    /// Nothing: the socket was full.
    Full,
    /// Some of it, then the socket was full.
    Partial,
    /// The connection failed.
    Failed,
}

/// Writes `buf` on the non-blocking `stream` as far as it goes without
/// waiting.
fn write_now(mut stream: &TcpStream, buf: &[u8]) -> Written {
    let mut done = 0;
    while done < buf.len() {
        match stream.write(&buf[done..]) {
            Ok(0) => return Written::Failed,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return if done == 0 {
                    Written::Full
                } else {
                    Written::Partial
                };
            }
            Err(_) => return Written::Failed,
        }
    }
    Written::Whole
}
