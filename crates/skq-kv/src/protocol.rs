//! Sans-I/O parser for the memcached text protocol.
//!
//! [`Parser::parse`] takes the bytes received so far on one connection and returns how many
//! it consumed plus one [`Step`]. It never touches a socket or a clock, so both server
//! architectures, the unit tests and the fuzz target drive exactly the same code.
//!
//! Decisions (the wording of every error string follows memcached 1.6):
//! - unknown command or wrong argument count → `ERROR` (memcached dispatches on the token
//!   count, so `set k 0 0` is an unknown command to it too);
//! - malformed numbers or a key over 250 bytes → `CLIENT_ERROR bad command line format`
//!   (incr/decr delta: `CLIENT_ERROR invalid numeric delta argument`, touch/gat exptime:
//!   `CLIENT_ERROR invalid exptime argument`); like memcached, a rejected storage line does
//!   not skip its data block, which is then read as a command line (usually `ERROR`) —
//!   tests/clients.rs checks these replies against memcached byte for byte;
//! - an item over the size limit (see [`Limits::max_item_size`]) →
//!   `SERVER_ERROR object too large for cache` and the data block is swallowed without
//!   buffering it; `set` and `ms` also unlink the key's old item ([`Command::TooLarge`]),
//!   other storage commands leave it (memcached does the same);
//! - meta commands (`mg`, `ms`, `md`, `mn`) are parsed by [`crate::meta`];
//! - a data block whose announced length is not followed by `\r\n` →
//!   `CLIENT_ERROR bad data chunk` (suppressed by `noreply`, never by a meta `q`), nothing
//!   stored and the old item kept; like memcached 1.6.18, exactly the announced length plus
//!   two bytes are consumed and parsing resumes after them, so `set x 0 0 2\r\nabc\r\n`
//!   answers `CLIENT_ERROR bad data chunk\r\nERROR\r\n` (the lone `\n` left over is an
//!   empty command line) and the connection stays open;
//! - fatal, the connection must be closed ([`Step::Close`]): a line longer than
//!   [`Limits::max_line`] (retrieval lines may reach [`Limits::max_get_line`]), control
//!   bytes in a command line, the binary protocol's magic byte 0x80, or an HTTP request
//!   line (an unknown command ending in `HTTP/…`, closed without a reply, as memcached does).

pub use crate::command::{
    parse_i64, parse_u64, CloseReason, Command, Step, StoreMode, MAX_KEY_LEN,
};
use crate::meta;
use crate::recycle;

/// Relative exptimes up to this many seconds are offsets; larger ones are unix times.
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// Default of [`Limits::max_conn_output`]: 2 MiB, two of the largest items.
pub const DEFAULT_MAX_CONN_OUTPUT: usize = 2 << 20;

/// Size limits the parser enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest item accepted by storage commands (memcached's `-I`, default 1 MiB),
    /// counted as memcached 1.6 counts it ([`item_size`]): 56 bytes of header and CAS, the
    /// key plus one, 4 bytes of client flags unless they are 0, and the value plus 2. With
    /// the default 1 MiB and a 1-byte key, the largest value is 1 048 516 bytes (1 048 512
    /// with non-zero flags) — the boundary measured against memcached 1.6.18 `-I 1m`, and
    /// at `-I 512k` (tests/clients.rs `item_size_limit_matches_memcached`).
    pub max_item_size: usize,
    /// Longest command line without a newline before the connection is closed.
    pub max_line: usize,
    /// Longest `get`/`gets`/`gat`/`gats` line (multi-key retrievals).
    pub max_get_line: usize,
    /// Ceiling of one connection's pending output (`--max-conn-output`): unsent reply
    /// bytes, reply parts waiting for an earlier one, and the room promised to replies
    /// other workers compute. Above it the connection's input is not parsed and a
    /// multi-key retrieval pauses between keys until the socket drains. One reply
    /// (one VALUE block) may exceed it when nothing else is pending.
    pub max_conn_output: usize,
}

/// The size memcached 1.6 charges an item against its `-I` limit (its `item_make_header`
/// plus the CAS): a 48-byte item header, an 8-byte CAS, the key and its NUL, 4 bytes of
/// client flags when they are non-zero, and the value with its trailing `\r\n`.
pub fn item_size(key_len: usize, flags: u32, value_len: usize) -> usize {
    let flag_bytes = if flags == 0 { 0 } else { 4 };
    48 + 8 + key_len + 1 + flag_bytes + value_len + 2
}

impl Limits {
    /// Whether an item with this key length, client flags and value length fits.
    pub fn fits(&self, key_len: usize, flags: u32, value_len: usize) -> bool {
        item_size(key_len, flags, value_len) <= self.max_item_size
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_item_size: 1 << 20,
            // memcached 1.6's read buffer: it answers a complete line of up to 16 KiB
            // (a 3,000-byte unknown command is `ERROR`, the connection kept).
            max_line: 16 << 10,
            max_get_line: 256 << 10,
            max_conn_output: DEFAULT_MAX_CONN_OUTPUT,
        }
    }
}

const ERROR: &[u8] = b"ERROR\r\n";

/// Tokens of a command line parsed without allocating.
const STACK_TOKENS: usize = 24;

const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const BAD_DELETE: &[u8] =
    b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n";
const BAD_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta argument\r\n";
const BAD_EXPTIME: &[u8] = b"CLIENT_ERROR invalid exptime argument\r\n";
const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
const BAD_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";

/// Incremental parser state for one connection.
#[derive(Debug)]
pub struct Parser {
    limits: Limits,
    /// Bytes of a rejected data block still to discard.
    swallow: usize,
}

impl Parser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> Parser {
        Parser { limits, swallow: 0 }
    }

    /// The limits this parser enforces.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Parses the front of `buf`. Returns the number of bytes consumed and what to do.
    /// The caller drops the consumed bytes and calls again until [`Step::NeedMore`].
    pub fn parse(&mut self, buf: &[u8]) -> (usize, Step) {
        if self.swallow > 0 {
            let n = self.swallow.min(buf.len());
            self.swallow -= n;
            return if n == 0 {
                (0, Step::NeedMore)
            } else {
                (n, Step::Skip)
            };
        }
        if buf.is_empty() {
            return (0, Step::NeedMore);
        }
        if buf[0] == 0x80 {
            return (0, Step::Close(CloseReason::Garbage));
        }
        let limit = if is_retrieval(buf) {
            self.limits.max_get_line
        } else {
            self.limits.max_line
        };
        let window = &buf[..buf.len().min(limit + 1)];
        let Some(nl) = memchr::memchr(b'\n', window) else {
            if has_garbage(window, false) {
                return (0, Step::Close(CloseReason::Garbage));
            }
            return if buf.len() > limit {
                (0, Step::Close(CloseReason::LineTooLong))
            } else {
                (0, Step::NeedMore)
            };
        };
        let mut line = &buf[..nl];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if has_garbage(line, true) {
            return (0, Step::Close(CloseReason::Garbage));
        }
        let line_len = nl + 1;
        // Tokens on the stack; only a line of more than `STACK_TOKENS` (a long multi-key
        // retrieval) spills them into a `Vec`.
        let mut stack: [&[u8]; STACK_TOKENS] = [&[]; STACK_TOKENS];
        let mut spilled: Vec<&[u8]> = Vec::new();
        let mut count = 0;
        for t in tokens_of(line) {
            if count < STACK_TOKENS {
                stack[count] = t;
            } else {
                if spilled.is_empty() {
                    spilled.extend_from_slice(&stack);
                }
                spilled.push(t);
            }
            count += 1;
        }
        let tokens: &[&[u8]] = if spilled.is_empty() {
            &stack[..count]
        } else {
            &spilled
        };
        let Some((&name, args)) = tokens.split_first() else {
            return (line_len, Step::Reply(ERROR));
        };
        match name {
            b"get" | b"gets" => retrieval(line_len, args, name == b"gets", None),
            b"gat" | b"gats" => match args.split_first() {
                None => (line_len, Step::Reply(ERROR)),
                Some((exp, keys)) => match parse_i64(exp) {
                    None => (line_len, Step::Reply(BAD_EXPTIME)),
                    Some(e) => retrieval(line_len, keys, name == b"gats", Some(e)),
                },
            },
            b"set" => self.storage(buf, line_len, args, StoreMode::Set),
            b"add" => self.storage(buf, line_len, args, StoreMode::Add),
            b"replace" => self.storage(buf, line_len, args, StoreMode::Replace),
            b"append" => self.storage(buf, line_len, args, StoreMode::Append),
            b"prepend" => self.storage(buf, line_len, args, StoreMode::Prepend),
            b"cas" => self.storage(buf, line_len, args, StoreMode::Cas(0)),
            b"delete" => (line_len, quiet_if_noreply(args, delete(args))),
            b"incr" | b"decr" => (
                line_len,
                quiet_if_noreply(args, arith(args, name == b"incr")),
            ),
            b"touch" => (line_len, quiet_if_noreply(args, touch(args))),
            b"flush_all" => (line_len, quiet_if_noreply(args, flush_all(args))),
            b"mg" => (line_len, meta::parse_get(args)),
            b"md" => (line_len, meta::parse_delete(args)),
            b"ms" => self.meta_set(buf, line_len, args),
            b"ma" => (line_len, meta::parse_arith(args)),
            b"mn" => (line_len, Step::Command(Command::MetaNoop)),
            b"version" if args.is_empty() => (line_len, Step::Command(Command::Version)),
            b"quit" if args.is_empty() => (line_len, Step::Command(Command::Quit)),
            // memcached without `-A` (which this server never enables).
            b"shutdown" => (line_len, Step::Reply(b"ERROR: shutdown not enabled\r\n")),
            b"stats" => {
                // Multi-word groups (`cachedump 1 100`, `detail dump`) keep their words,
                // joined by one space.
                let group = (!args.is_empty()).then(|| args.join(&b' '));
                (line_len, Step::Command(Command::Stats { group }))
            }
            b"verbosity" if (1..=2).contains(&args.len()) => {
                let noreply = args.len() == 2 && args[1] == b"noreply";
                let step = match parse_u64(args[0]).and_then(|l| u32::try_from(l).ok()) {
                    Some(_) => Step::Command(Command::Verbosity { noreply }),
                    None => Step::Reply(BAD_FORMAT),
                };
                (line_len, quiet_if_noreply(args, step))
            }
            // memcached hangs up, silently, on an unknown command whose last token starts
            // with `HTTP/` (an HTTP request sent to the cache port).
            _ if args.last().is_some_and(|t| t.starts_with(b"HTTP/")) => {
                (0, Step::Close(CloseReason::Http))
            }
            _ => (line_len, Step::Reply(ERROR)),
        }
    }

    /// `<cmd> <key> <flags> <exptime> <bytes> [cas] [noreply]` followed by the data block.
    fn storage(
        &mut self,
        buf: &[u8],
        line_len: usize,
        args: &[&[u8]],
        mode: StoreMode,
    ) -> (usize, Step) {
        let (n, step) = self.storage_inner(buf, line_len, args, mode);
        (n, quiet_if_noreply(args, step))
    }

    fn storage_inner(
        &mut self,
        buf: &[u8],
        line_len: usize,
        args: &[&[u8]],
        mode: StoreMode,
    ) -> (usize, Step) {
        let fixed = if matches!(mode, StoreMode::Cas(_)) {
            5
        } else {
            4
        };
        if args.len() != fixed && args.len() != fixed + 1 {
            return (line_len, Step::Reply(ERROR));
        }
        let noreply = args.len() == fixed + 1 && args[fixed] == b"noreply";
        let Some(bytes) = parse_u64(args[3])
            .and_then(|b| usize::try_from(b).ok())
            .filter(|&b| b < i32::MAX as usize)
        else {
            return (line_len, Step::Reply(BAD_FORMAT));
        };
        let key = args[0];
        // memcached 1.6.18 keeps the low 32 bits of larger flags (`4294967297` is 1).
        let flags = parse_u64(args[1]).map(|f| f as u32);
        let exptime = parse_i64(args[2]);
        let cas = if fixed == 5 {
            parse_u64(args[4])
        } else {
            Some(0)
        };
        let (Some(flags), Some(exptime), Some(cas)) = (flags, exptime, cas) else {
            return (line_len, Step::Reply(BAD_FORMAT));
        };
        if key.len() > MAX_KEY_LEN {
            return (line_len, Step::Reply(BAD_FORMAT));
        }
        if !self.limits.fits(key.len(), flags, bytes) {
            // Swallow the data block without buffering it; noreply suppresses the error.
            // Like memcached, a refused `set` also unlinks the old item.
            let step = match (mode, noreply) {
                (StoreMode::Set, _) => Step::Command(Command::TooLarge {
                    key: recycle::key_bytes(key),
                    noreply,
                }),
                (_, true) => Step::Skip,
                (_, false) => Step::Reply(TOO_LARGE),
            };
            return (line_len, self.swallow_block(bytes, step));
        }
        let (need, data) = match read_block(buf, line_len, bytes) {
            Block::Data(need, data) => (need, data),
            Block::Incomplete => return (0, Step::NeedMore),
            Block::Bad(need) if noreply => return (need, Step::Skip),
            Block::Bad(need) => return (need, Step::Reply(BAD_CHUNK)),
        };
        let mode = if let StoreMode::Cas(_) = mode {
            StoreMode::Cas(cas)
        } else {
            mode
        };
        (
            need,
            Step::Command(Command::Store {
                mode,
                key: recycle::key_bytes(key),
                flags,
                exptime,
                data,
                noreply,
            }),
        )
    }

    /// Discards the next `bytes` data bytes and their `\r\n`; returns `step`.
    fn swallow_block(&mut self, bytes: usize, step: Step) -> Step {
        self.swallow = bytes + 2;
        step
    }

    /// `ms <key> <datalen> <flags>*` followed by the data block.
    fn meta_set(&mut self, buf: &[u8], line_len: usize, args: &[&[u8]]) -> (usize, Step) {
        let Some((key, rest)) = args.split_first() else {
            return (line_len, Step::Reply(ERROR));
        };
        if key.len() > MAX_KEY_LEN {
            return (line_len, Step::Reply(BAD_FORMAT));
        }
        let Some((len, toks)) = rest.split_first() else {
            return (line_len, Step::Reply(BAD_FORMAT));
        };
        let Some(bytes) = parse_i64(len)
            .filter(|&b| (0..=i64::from(i32::MAX) - 2).contains(&b))
            .map(|b| b as usize)
        else {
            return (line_len, Step::Reply(BAD_FORMAT));
        };
        let (key, flags) = match meta::parse_flags(key, toks) {
            Ok(parsed) => parsed,
            Err(msg) => return (line_len, self.swallow_block(bytes, Step::Reply(msg))),
        };
        let mut error = meta::long_opaque(&flags).then_some(meta::OPAQUE_TOO_LONG);
        let mode = match flags.mode {
            None | Some(b'S') => StoreMode::Set,
            Some(b'E') => StoreMode::Add,
            Some(b'A') => StoreMode::Append,
            Some(b'P') => StoreMode::Prepend,
            Some(b'R') => StoreMode::Replace,
            Some(_) => {
                error = Some(meta::BAD_MODE);
                StoreMode::Set
            }
        };
        if let Some(msg) = error {
            return (line_len, self.swallow_block(bytes, Step::Reply(msg)));
        }
        // A compare value turns set and replace into cas (memcached's NREAD_CAS); add ignores
        // it; append/prepend check it themselves (see exec).
        let mode = match (mode, flags.cas) {
            (StoreMode::Set | StoreMode::Replace, Some(c)) => StoreMode::Cas(c),
            (m, _) => m,
        };
        if !self.limits.fits(key.len(), flags.client_flags, bytes) {
            let step = Step::Command(Command::TooLarge {
                key,
                noreply: false,
            });
            return (line_len, self.swallow_block(bytes, step));
        }
        // memcached reports a bad chunk to `ms` even in quiet mode (its `mset_res`).
        let (need, data) = match read_block(buf, line_len, bytes) {
            Block::Data(need, data) => (need, data),
            Block::Incomplete => return (0, Step::NeedMore),
            Block::Bad(need) => return (need, Step::Reply(BAD_CHUNK)),
        };
        (
            need,
            Step::Command(Command::MetaSet {
                key,
                mode,
                data,
                flags,
            }),
        )
    }
}

/// What [`read_block`] found after a storage command line.
enum Block {
    /// The block is complete: bytes consumed (line included) and the value.
    Data(usize, Vec<u8>),
    /// Not all of it has arrived.
    Incomplete,
    /// The announced length was not followed by `\r\n`; consume this many bytes (line,
    /// length and two more, as memcached does) and report the bad chunk.
    Bad(usize),
}

/// The `bytes`-long data block after a `line_len`-byte command line.
fn read_block(buf: &[u8], line_len: usize, bytes: usize) -> Block {
    let need = line_len + bytes + 2;
    if buf.len() < need {
        return Block::Incomplete;
    }
    if &buf[line_len + bytes..need] != b"\r\n" {
        return Block::Bad(need);
    }
    Block::Data(need, recycle::bytes_from(&buf[line_len..line_len + bytes]))
}

/// Whether the (possibly incomplete) line starts a multi-key retrieval command.
fn is_retrieval(buf: &[u8]) -> bool {
    let start = buf.iter().position(|&b| b != b' ').unwrap_or(buf.len());
    let head = &buf[start..];
    [&b"get "[..], b"gets ", b"gat ", b"gats "]
        .iter()
        .any(|p| head.starts_with(p))
}

/// Control bytes (anything below 0x20 but the line's own terminator, and DEL).
fn has_garbage(line: &[u8], complete: bool) -> bool {
    let body = if complete {
        line
    } else {
        line.strip_suffix(b"\r").unwrap_or(line)
    };
    has_control(body)
}

/// Whether `bytes` holds a byte below 0x20 or DEL (0x7f), eight bytes at a
/// time: every request line passes through here, and a byte loop was about a
/// quarter of the parser's instructions (`scripts/bench/kv-callgrind.sh`).
fn has_control(bytes: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let x = u64::from_ne_bytes(w.try_into().expect("eight bytes"));
        // Some byte below 0x20: subtracting 0x20 from each byte borrows into
        // a high bit only where a byte was below it (ASCII bytes; those with
        // the high bit set are masked by `!x`). The boolean is exact though
        // the bits marked beyond the first such byte may not be.
        let below = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        // Some byte equal to 0x7f: a zero byte of `x ^ 0x7f…`, the same way.
        let d = x ^ (ONES * 0x7f);
        let del = d.wrapping_sub(ONES) & !d & HIGH;
        if (below | del) != 0 {
            return true;
        }
    }
    words.remainder().iter().any(|&b| b < 0x20 || b == 0x7f)
}

/// The space-separated tokens of a command line, empty ones skipped (as
/// `line.split(' ')` with the empty pieces filtered out, with `memchr`
/// finding each token's end).
fn tokens_of(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = line;
    std::iter::from_fn(move || {
        while let [b' ', tail @ ..] = rest {
            rest = tail;
        }
        if rest.is_empty() {
            return None;
        }
        let end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
        let (t, tail) = rest.split_at(end);
        rest = tail;
        Some(t)
    })
}

fn retrieval(line_len: usize, keys: &[&[u8]], cas: bool, touch: Option<i64>) -> (usize, Step) {
    if keys.is_empty() {
        return (line_len, Step::Reply(ERROR));
    }
    if keys.iter().any(|k| k.len() > MAX_KEY_LEN) {
        return (line_len, Step::Reply(BAD_FORMAT));
    }
    let mut list = recycle::key_list();
    list.extend(keys.iter().map(|k| recycle::key_bytes(k)));
    let keys = list;
    (line_len, Step::Command(Command::Get { keys, cas, touch }))
}

/// memcached marks a command `noreply` from its last token before validating the rest
/// (`set_noreply_maybe`), so a `CLIENT_ERROR` about a malformed set, delete, incr/decr,
/// touch, flush_all or verbosity line is suppressed when that line ends in `noreply`
/// (`delete k 10 noreply` answers nothing). A wrong token count (`ERROR`) still answers.
fn quiet_if_noreply(args: &[&[u8]], step: Step) -> Step {
    match step {
        Step::Reply(msg)
            if msg.starts_with(b"CLIENT_ERROR") && args.last() == Some(&&b"noreply"[..]) =>
        {
            Step::Skip
        }
        other => other,
    }
}

fn delete(args: &[&[u8]]) -> Step {
    let Some((key, rest)) = args.split_first() else {
        return Step::Reply(ERROR);
    };
    let valid = match rest {
        [] => true,
        [a] => *a == b"0" || *a == b"noreply",
        [a, b] => *a == b"0" && *b == b"noreply",
        _ => return Step::Reply(ERROR),
    };
    if !valid {
        return Step::Reply(BAD_DELETE);
    }
    if key.len() > MAX_KEY_LEN {
        return Step::Reply(BAD_FORMAT);
    }
    let noreply = rest.last() == Some(&&b"noreply"[..]);
    Step::Command(Command::Delete {
        key: recycle::key_bytes(key),
        noreply,
    })
}

fn arith(args: &[&[u8]], incr: bool) -> Step {
    if args.len() != 2 && args.len() != 3 {
        return Step::Reply(ERROR);
    }
    if args[0].len() > MAX_KEY_LEN {
        return Step::Reply(BAD_FORMAT);
    }
    let Some(delta) = parse_u64(args[1]) else {
        return Step::Reply(BAD_DELTA);
    };
    let noreply = args.len() == 3 && args[2] == b"noreply";
    Step::Command(Command::Arith {
        key: recycle::key_bytes(args[0]),
        incr,
        delta,
        noreply,
    })
}

fn touch(args: &[&[u8]]) -> Step {
    if args.len() != 2 && args.len() != 3 {
        return Step::Reply(ERROR);
    }
    if args[0].len() > MAX_KEY_LEN {
        return Step::Reply(BAD_FORMAT);
    }
    let Some(exptime) = parse_i64(args[1]) else {
        return Step::Reply(BAD_EXPTIME);
    };
    let noreply = args.len() == 3 && args[2] == b"noreply";
    Step::Command(Command::Touch {
        key: recycle::key_bytes(args[0]),
        exptime,
        noreply,
    })
}

fn flush_all(args: &[&[u8]]) -> Step {
    let (delay, noreply) = match args {
        [] => (Some(0), false),
        [a] if *a == b"noreply" => (Some(0), true),
        [a] => (parse_i64(a), false),
        [a, b] if *b == b"noreply" => (parse_i64(a), true),
        _ => return Step::Reply(ERROR),
    };
    // A negative delay flushes at once, as in memcached (which treats it as 0).
    match delay {
        Some(delay) => Step::Command(Command::FlushAll {
            delay: delay.max(0),
            noreply,
        }),
        None => Step::Reply(BAD_EXPTIME),
    }
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "protocol_meta_tests.rs"]
mod meta_tests;
