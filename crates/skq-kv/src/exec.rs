//! Applies key commands to a [`Partition`] and writes memcached replies.
//!
//! Both architectures call these functions: the shared one under the partition's lock, the
//! thread-per-core one on the worker that owns the key.

use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;

use crate::protocol::{Command, StoreMode};
use crate::stats::Counters;
use crate::store::{exp_at, ArithOutcome, Partition, StoreOutcome};

/// Clock facts a command needs.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    /// Server-relative second (≥ 1).
    pub rel: u32,
    /// Unix second at which `rel` was 1.
    pub started_unix: i64,
}

/// Writes the `VALUE` block for one key of a get/gets/gat/gats (nothing on a miss).
pub fn get_one(
    part: &mut Partition,
    key: &[u8],
    cas: bool,
    touch: Option<i64>,
    now: Now,
    c: &Counters,
    out: &mut Vec<u8>,
) {
    c.cmd_get.fetch_add(1, Relaxed);
    let rec = match touch {
        Some(e) => {
            c.cmd_touch.fetch_add(1, Relaxed);
            part.get_and_touch(key, exp_at(e, now.rel, now.started_unix), now.rel)
        }
        None => part.get(key, now.rel),
    };
    let Some(r) = rec else {
        c.get_misses.fetch_add(1, Relaxed);
        if touch.is_some() {
            c.touch_misses.fetch_add(1, Relaxed);
        }
        return;
    };
    c.get_hits.fetch_add(1, Relaxed);
    if touch.is_some() {
        c.touch_hits.fetch_add(1, Relaxed);
    }
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let _ = write!(out, " {} {}", r.meta.flags, r.value.len());
    if cas {
        let _ = write!(out, " {}", r.meta.cas);
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(r.value);
    out.extend_from_slice(b"\r\n");
}

/// Applies a single-key command (store, delete, incr/decr, touch) and writes its reply
/// unless `noreply`. Other commands are the caller's; passing one is a bug.
pub fn apply(part: &mut Partition, cmd: &Command, now: Now, c: &Counters, out: &mut Vec<u8>) {
    let (reply, noreply): (Vec<u8>, bool) = match cmd {
        Command::Store {
            mode,
            key,
            flags,
            exptime,
            data,
            noreply,
        } => {
            c.cmd_set.fetch_add(1, Relaxed);
            let exp = exp_at(*exptime, now.rel, now.started_unix);
            let outcome = part.store(*mode, key, *flags, exp, data, now.rel);
            if let StoreMode::Cas(_) = mode {
                match outcome {
                    StoreOutcome::Stored => &c.cas_hits,
                    StoreOutcome::Exists => &c.cas_badval,
                    _ => &c.cas_misses,
                }
                .fetch_add(1, Relaxed);
            }
            if outcome == StoreOutcome::TooLarge {
                c.store_too_large.fetch_add(1, Relaxed);
            }
            (outcome.reply().to_vec(), *noreply)
        }
        Command::Delete { key, noreply } => {
            let hit = part.delete(key, now.rel);
            if hit {
                &c.delete_hits
            } else {
                &c.delete_misses
            }
            .fetch_add(1, Relaxed);
            (
                (if hit {
                    &b"DELETED\r\n"[..]
                } else {
                    b"NOT_FOUND\r\n"
                })
                .to_vec(),
                *noreply,
            )
        }
        Command::Arith {
            key,
            incr,
            delta,
            noreply,
        } => {
            let outcome = part.arith(key, *incr, *delta, now.rel);
            let (hits, misses) = if *incr {
                (&c.incr_hits, &c.incr_misses)
            } else {
                (&c.decr_hits, &c.decr_misses)
            };
            let reply = match outcome {
                ArithOutcome::Value(v) => {
                    hits.fetch_add(1, Relaxed);
                    format!("{v}\r\n").into_bytes()
                }
                ArithOutcome::NotFound => {
                    misses.fetch_add(1, Relaxed);
                    b"NOT_FOUND\r\n".to_vec()
                }
                ArithOutcome::NonNumeric => {
                    b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n".to_vec()
                }
            };
            (reply, *noreply)
        }
        Command::Touch {
            key,
            exptime,
            noreply,
        } => {
            c.cmd_touch.fetch_add(1, Relaxed);
            let hit = part.touch(key, exp_at(*exptime, now.rel, now.started_unix), now.rel);
            if hit { &c.touch_hits } else { &c.touch_misses }.fetch_add(1, Relaxed);
            (
                (if hit {
                    &b"TOUCHED\r\n"[..]
                } else {
                    b"NOT_FOUND\r\n"
                })
                .to_vec(),
                *noreply,
            )
        }
        other => unreachable!("not a single-key command: {other:?}"),
    };
    if !noreply {
        out.extend_from_slice(&reply);
    }
}
