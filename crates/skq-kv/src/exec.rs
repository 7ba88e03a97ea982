//! Applies key commands (classic and meta: mg/ms/md) to a [`Partition`] and writes
//! memcached replies.
//!
//! Both architectures call these functions: the shared one under the partition's lock, the
//! thread-per-core one on the worker that owns the key.

use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;

use crate::meta::{base64_encode, MetaFlags, MetaTok};
use crate::protocol::{Command, StoreMode};
use crate::reply::ValueSink;
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

/// The delay of `flush_all <time>` in seconds from `now`, read as memcached 1.6.18 reads
/// it: up to 30 days an offset; more, a unix time — one after the server started flushes
/// then (at once if it has passed), one before the server started flushes nothing and
/// cancels a pending flush (memcached's `realtime()` maps it to 1, so its flush mark becomes
/// 0, "none"): that is a delay no server lives to see. `time` is non-negative.
pub fn flush_delay(time: i64, now: Now) -> u32 {
    if time <= crate::protocol::REALTIME_MAXDELTA {
        return u32::try_from(time.max(0)).unwrap_or(u32::MAX);
    }
    if time <= now.started_unix {
        return u32::MAX;
    }
    exp_at(time, now.rel, now.started_unix).saturating_sub(now.rel)
}

/// Writes the `VALUE` block for one key of a get/gets/gat/gats (nothing on a miss). A
/// value of [`ZERO_COPY_MIN`](crate::reply::ZERO_COPY_MIN) bytes or more is referenced in
/// the store, not copied, when `out` is a [`crate::reply::Reply`].
pub fn get_one(
    part: &mut Partition,
    key: &[u8],
    cas: bool,
    touch: Option<i64>,
    now: Now,
    c: &Counters,
    out: &mut impl ValueSink,
) {
    c.cmd_get.fetch_add(1, Relaxed);
    let touch_at = touch.map(|e| {
        c.cmd_touch.fetch_add(1, Relaxed);
        exp_at(e, now.rel, now.started_unix)
    });
    let Some(loc) = part.locate(key, touch_at, now.rel) else {
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
    let r = part.record(loc);
    let referenced = out.references(r.value.len());
    let b = out.bytes_mut();
    b.extend_from_slice(b"VALUE ");
    b.extend_from_slice(key);
    push_number(b, u64::from(r.meta.flags));
    push_number(b, r.value.len() as u64);
    if cas {
        push_number(b, r.meta.cas);
    }
    b.extend_from_slice(b"\r\n");
    if referenced {
        out.push_value(part.value_ref(loc));
    } else {
        b.extend_from_slice(r.value);
    }
    out.bytes_mut().extend_from_slice(b"\r\n");
}

/// Appends a space and `n` in decimal. The VALUE line's numbers went through
/// `write!` before: its formatting machinery was about 530 instructions of a
/// get's 7,250 (`scripts/bench/kv-callgrind.sh`), `itoa` a tenth of that.
fn push_number(b: &mut Vec<u8>, n: u64) {
    b.push(b' ');
    b.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Most bytes of a VALUE line besides its key: `VALUE `, the flags, the length and the
/// CAS (up to 20 digits each), the spaces and both `\r\n`.
pub const VALUE_LINE_OVERHEAD: usize = 80;

/// An upper bound of the bytes [`get_one`] writes for `key` into a byte buffer (0 on a
/// miss). Reads nothing but the index entry and the record's length; touches and counts
/// nothing.
pub fn get_reply_bound(part: &mut Partition, key: &[u8], now: Now) -> usize {
    get_charge_bound(part, key, now, &Vec::new())
}

/// [`get_reply_bound`] for a sink: what answering `key` adds to `out`'s charge at most.
fn get_charge_bound(part: &mut Partition, key: &[u8], now: Now, out: &impl ValueSink) -> usize {
    part.get(key, now.rel).map_or(0, |r| {
        key.len() + out.value_charge(r.value.len()) + VALUE_LINE_OVERHEAD
    })
}

/// [`get_one`] if its VALUE block fits: when `out`'s [`ValueSink::charge`] would grow past
/// `limit` bytes (and `force` is false) nothing is written, touched or counted and the
/// bytes the block needs come back as the error, so the caller can answer this key
/// later. `force` answers the key whatever its size (a caller's guarantee of progress).
#[allow(clippy::too_many_arguments)]
pub fn get_one_within(
    part: &mut Partition,
    key: &[u8],
    cas: bool,
    touch: Option<i64>,
    now: Now,
    c: &Counters,
    out: &mut impl ValueSink,
    limit: usize,
    force: bool,
) -> Result<(), usize> {
    if !force {
        let need = get_charge_bound(part, key, now, out);
        if out.charge() + need > limit {
            return Err(need);
        }
    }
    get_one(part, key, cas, touch, now, c, out);
    Ok(())
}

/// Applies a single-key command (store, delete, incr/decr, touch, a refused `set`, the
/// meta commands mg/ms/md) and writes its reply unless `noreply`. Other commands are the
/// caller's; passing one is a bug.
pub fn apply(part: &mut Partition, cmd: &Command, now: Now, c: &Counters, out: &mut Vec<u8>) {
    match cmd {
        Command::MetaGet { key, flags } => return meta_get(part, key, flags, now, c, out),
        Command::MetaSet {
            key,
            mode,
            data,
            flags,
        } => return meta_set(part, key, *mode, data, flags, now, c, out),
        Command::MetaDelete { key, flags } => return meta_delete(part, key, flags, now, c, out),
        Command::MetaArith { .. } => return meta_arith(part, cmd, now, c, out),
        Command::TooLarge { key, noreply } => {
            // memcached unlinks the old item so that a failed set leaves no stale value.
            part.delete(key, now.rel);
            c.store_too_large.fetch_add(1, Relaxed);
            if !noreply {
                out.extend_from_slice(StoreOutcome::TooLarge.reply());
            }
            return;
        }
        _ => {}
    }
    // Replies are written straight into `out` (no reply buffer per request).
    match cmd {
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
            count_cas(c, *mode, outcome);
            if outcome == StoreOutcome::TooLarge {
                c.store_too_large.fetch_add(1, Relaxed);
            }
            if !noreply {
                out.extend_from_slice(outcome.reply());
            }
        }
        Command::Delete { key, noreply } => {
            let hit = part.delete(key, now.rel);
            if hit {
                &c.delete_hits
            } else {
                &c.delete_misses
            }
            .fetch_add(1, Relaxed);
            if !noreply {
                out.extend_from_slice(if hit {
                    &b"DELETED\r\n"[..]
                } else {
                    b"NOT_FOUND\r\n"
                });
            }
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
            match outcome {
                ArithOutcome::Value(_) => hits.fetch_add(1, Relaxed),
                ArithOutcome::NotFound => misses.fetch_add(1, Relaxed),
                ArithOutcome::NonNumeric => 0,
            };
            if !noreply {
                match outcome {
                    ArithOutcome::Value(v) => {
                        let _ = write!(out, "{v}\r\n");
                    }
                    ArithOutcome::NotFound => out.extend_from_slice(b"NOT_FOUND\r\n"),
                    ArithOutcome::NonNumeric => out.extend_from_slice(
                        b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
                    ),
                }
            }
        }
        Command::Touch {
            key,
            exptime,
            noreply,
        } => {
            c.cmd_touch.fetch_add(1, Relaxed);
            let hit = part.touch(key, exp_at(*exptime, now.rel, now.started_unix), now.rel);
            if hit { &c.touch_hits } else { &c.touch_misses }.fetch_add(1, Relaxed);
            if !noreply {
                out.extend_from_slice(if hit {
                    &b"TOUCHED\r\n"[..]
                } else {
                    b"NOT_FOUND\r\n"
                });
            }
        }
        other => unreachable!("not a single-key command: {other:?}"),
    }
}

/// ` k<key>`, base64-encoded and followed by ` b` when the request sent it that way.
fn push_key(out: &mut Vec<u8>, key: &[u8], base64: bool) {
    out.extend_from_slice(b" k");
    if base64 {
        base64_encode(key, out);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// Echoes the `O` and `k` flags (and `c` with `cas`, for ms) in request order, then ends
/// the line.
fn echo_line(out: &mut Vec<u8>, f: &MetaFlags, key: &[u8], cas: Option<u64>) {
    for t in &f.toks {
        match t {
            MetaTok::Opaque(o) => {
                out.push(b' ');
                out.extend_from_slice(o);
            }
            MetaTok::Key => push_key(out, key, f.base64),
            MetaTok::Cas => {
                if let Some(cas) = cas {
                    let _ = write!(out, " c{cas}");
                }
            }
            _ => {}
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// `mg`: `VA <size> <flags>*` + value (with `v`) or `HD <flags>*` on a hit, `EN` on a miss
/// (nothing with `q`). Return flags appear in request order; `T` touches where it stands.
fn meta_get(
    part: &mut Partition,
    key: &[u8],
    f: &MetaFlags,
    now: Now,
    c: &Counters,
    out: &mut Vec<u8>,
) {
    let mut exp_before = None;
    let rec = match f.ttl {
        None => part.get(key, now.rel),
        Some(t) => {
            exp_before = part.get(key, now.rel).map(|r| r.meta.exp_at);
            let at = exp_at(t, now.rel, now.started_unix);
            part.get_and_touch(key, at, now.rel)
        }
    };
    let Some(r) = rec else {
        c.cmd_get.fetch_add(1, Relaxed);
        c.get_misses.fetch_add(1, Relaxed);
        if !f.quiet {
            out.extend_from_slice(b"EN");
            echo_line(out, f, key, None);
        }
        return;
    };
    if f.ttl.is_some() {
        c.cmd_touch.fetch_add(1, Relaxed);
        c.touch_hits.fetch_add(1, Relaxed);
    } else {
        c.cmd_get.fetch_add(1, Relaxed);
        c.get_hits.fetch_add(1, Relaxed);
    }
    if f.value {
        let _ = write!(out, "VA {}", r.value.len());
    } else {
        out.extend_from_slice(b"HD");
    }
    // The expiry a `t` reports: the old one until the `T` token, the new one after it.
    let mut exp = exp_before.unwrap_or(r.meta.exp_at);
    for t in &f.toks {
        match t {
            MetaTok::Touch => exp = r.meta.exp_at,
            MetaTok::Size => {
                let _ = write!(out, " s{}", r.value.len());
            }
            // memcached prints `exptime - now` as an unsigned 32-bit number.
            MetaTok::Ttl if exp == 0 => out.extend_from_slice(b" t-1"),
            MetaTok::Ttl => {
                let _ = write!(out, " t{}", exp.wrapping_sub(now.rel));
            }
            MetaTok::Cas => {
                let _ = write!(out, " c{}", r.meta.cas);
            }
            MetaTok::Flags => {
                let _ = write!(out, " f{}", r.meta.flags);
            }
            MetaTok::Key => push_key(out, key, f.base64),
            MetaTok::Opaque(o) => {
                out.push(b' ');
                out.extend_from_slice(o);
            }
        }
    }
    out.extend_from_slice(b"\r\n");
    if f.value {
        out.extend_from_slice(r.value);
        out.extend_from_slice(b"\r\n");
    }
}

/// `ma`: as memcached 1.6.18 — `HD` or, with `v`, `VA <len>` and the new value (nothing
/// with `q`, unless the item was created); `NF` on a miss without `N`; `EX` when `C` does not match; `NS` if
/// creating with `N` lost a race (cannot happen here: the partition is held). With `N` a
/// miss creates the item with value `J` (0) and exptime `N`, applied before the return
/// flags (memcached applies it where the `N` token stands, which only changes what a `t`
/// placed before `N` shows). `T` touches where it stands; `t` and `c` show the item.
fn meta_arith(part: &mut Partition, cmd: &Command, now: Now, c: &Counters, out: &mut Vec<u8>) {
    let Command::MetaArith {
        key,
        flags: f,
        incr,
        delta,
        initial,
        vivify,
    } = cmd
    else {
        unreachable!("meta_arith takes ma only");
    };
    let (hits, misses) = if *incr {
        (&c.incr_hits, &c.incr_misses)
    } else {
        (&c.decr_hits, &c.decr_misses)
    };
    let have = part.get(key, now.rel).map(|r| r.meta.cas);
    if let (Some(want), Some(have)) = (f.cas, have) {
        if want != have {
            out.extend_from_slice(b"EX");
            return echo_line(out, f, key, None);
        }
    }
    let mut created = false;
    let value = match part.arith(key, *incr, *delta, now.rel) {
        ArithOutcome::Value(v) => {
            hits.fetch_add(1, Relaxed);
            v
        }
        ArithOutcome::NonNumeric => {
            out.extend_from_slice(
                b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            );
            return;
        }
        ArithOutcome::NotFound => {
            let Some(ttl) = vivify else {
                misses.fetch_add(1, Relaxed);
                out.extend_from_slice(b"NF");
                return echo_line(out, f, key, None);
            };
            let exp = exp_at(*ttl, now.rel, now.started_unix);
            let text = initial.to_string();
            if part.store(StoreMode::Add, key, 0, exp, text.as_bytes(), now.rel)
                != StoreOutcome::Stored
            {
                out.extend_from_slice(b"NS");
                return echo_line(out, f, key, None);
            }
            created = true;
            *initial
        }
    };
    let text = value.to_string();
    let mut line = Vec::new();
    if f.value {
        let _ = write!(line, "VA {}", text.len());
    } else {
        line.extend_from_slice(b"HD");
    }
    for t in &f.toks {
        match t {
            MetaTok::Touch => {
                let ttl = f.ttl.expect("a T token carries its ttl");
                part.touch(key, exp_at(ttl, now.rel, now.started_unix), now.rel);
            }
            MetaTok::Ttl => match part.get(key, now.rel).map(|r| r.meta.exp_at) {
                Some(0) | None => line.extend_from_slice(b" t-1"),
                Some(at) => {
                    let _ = write!(line, " t{}", at.wrapping_sub(now.rel));
                }
            },
            MetaTok::Cas => {
                let cas = part.get(key, now.rel).map_or(0, |r| r.meta.cas);
                let _ = write!(line, " c{cas}");
            }
            MetaTok::Key => push_key(&mut line, key, f.base64),
            MetaTok::Opaque(o) => {
                line.push(b' ');
                line.extend_from_slice(o);
            }
            MetaTok::Size | MetaTok::Flags => {}
        }
    }
    // `q` hides a successful incr/decr; memcached still answers a creation.
    if f.quiet && !created {
        return;
    }
    out.extend_from_slice(&line);
    out.extend_from_slice(b"\r\n");
    if f.value {
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// `ms`: `HD` (nothing with `q`), `NS`, `EX` or `NF`, echoing `O`, `k` and `c` (the new
/// CAS unique; 0 when nothing was stored, as memcached prints it).
#[allow(clippy::too_many_arguments)]
fn meta_set(
    part: &mut Partition,
    key: &[u8],
    mode: StoreMode,
    data: &[u8],
    f: &MetaFlags,
    now: Now,
    c: &Counters,
    out: &mut Vec<u8>,
) {
    c.cmd_set.fetch_add(1, Relaxed);
    let exp = exp_at(f.ttl.unwrap_or(0), now.rel, now.started_unix);
    let outcome = match (mode, f.cas) {
        // memcached checks a compare value on append/prepend too (a miss is NS there).
        (StoreMode::Append | StoreMode::Prepend, Some(want)) => {
            match part.get(key, now.rel).map(|r| r.meta.cas) {
                None => StoreOutcome::NotStored,
                Some(have) if have != want => StoreOutcome::Exists,
                Some(_) => part.store(mode, key, f.client_flags, exp, data, now.rel),
            }
        }
        _ => part.store(mode, key, f.client_flags, exp, data, now.rel),
    };
    count_cas(c, mode, outcome);
    let code: &[u8] = match outcome {
        StoreOutcome::Stored if f.quiet => return,
        StoreOutcome::Stored => b"HD",
        StoreOutcome::NotStored => b"NS",
        StoreOutcome::Exists => b"EX",
        StoreOutcome::NotFound => b"NF",
        StoreOutcome::TooLarge => {
            c.store_too_large.fetch_add(1, Relaxed);
            out.extend_from_slice(outcome.reply());
            return;
        }
    };
    let cas = if outcome == StoreOutcome::Stored {
        part.last_cas()
    } else {
        0
    };
    out.extend_from_slice(code);
    echo_line(out, f, key, Some(cas));
}

/// `md`: `HD` (nothing with `q`), `NF`, or `EX` when `C` does not match; echoes `O`, `k`.
fn meta_delete(
    part: &mut Partition,
    key: &[u8],
    f: &MetaFlags,
    now: Now,
    c: &Counters,
    out: &mut Vec<u8>,
) {
    let code: &[u8] = match part.get(key, now.rel).map(|r| r.meta.cas) {
        None => {
            c.delete_misses.fetch_add(1, Relaxed);
            b"NF"
        }
        Some(have) if f.cas.is_some_and(|want| want != have) => {
            c.delete_misses.fetch_add(1, Relaxed);
            b"EX"
        }
        Some(_) => {
            part.delete(key, now.rel);
            c.delete_hits.fetch_add(1, Relaxed);
            if f.quiet {
                return;
            }
            b"HD"
        }
    };
    out.extend_from_slice(code);
    echo_line(out, f, key, None);
}

/// Counts a cas command's outcome in memcached's `cas_*` stats (other store
/// modes count nothing here).
fn count_cas(c: &Counters, mode: StoreMode, outcome: StoreOutcome) {
    if let StoreMode::Cas(_) = mode {
        match outcome {
            StoreOutcome::Stored => &c.cas_hits,
            StoreOutcome::Exists => &c.cas_badval,
            _ => &c.cas_misses,
        }
        .fetch_add(1, Relaxed);
    }
}
