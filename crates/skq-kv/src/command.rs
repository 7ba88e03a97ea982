//! What the request parsers produce: a parsed [`Command`] (with its meta flags) and the
//! parser's [`Step`], plus the token syntax both parsers share (key length, decimal
//! numbers).
//!
//! This module sits below both parsers so that each reads bottom-up: [`crate::meta`]
//! (meta command flags) uses only this module, and [`crate::protocol`] (the text protocol
//! parser) uses this module and `meta`. `protocol` re-exports the command types and `meta`
//! the flag types, so their paths stay where users look for them.

/// Longest key memcached accepts.
pub const MAX_KEY_LEN: usize = 250;

/// How a storage command combines with an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreMode {
    /// Store unconditionally.
    Set,
    /// Store only if absent.
    Add,
    /// Store only if present.
    Replace,
    /// Append data to an existing item.
    Append,
    /// Prepend data to an existing item.
    Prepend,
    /// Store only if the item's CAS unique still equals this value.
    Cas(u64),
}

/// One parsed request. Keys and values are owned so a command can travel to another thread.
/// Field meanings: `key`/`keys` as sent (≤ 250 bytes each); `exptime` as sent (see
/// [`crate::store::exp_at`]); `noreply` suppresses the success reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `get`/`gets` (`cas` = true for gets), `gat`/`gats` (`touch` = the new exptime).
    Get {
        /// Keys in request order.
        keys: Vec<Vec<u8>>,
        /// Include CAS uniques (gets, gats).
        cas: bool,
        /// New exptime (gat, gats).
        touch: Option<i64>,
    },
    /// `set`, `add`, `replace`, `append`, `prepend`, `cas`.
    Store {
        /// Which storage command.
        mode: StoreMode,
        /// The key.
        key: Vec<u8>,
        /// Opaque client flags.
        flags: u32,
        /// Expiry as sent.
        exptime: i64,
        /// The value.
        data: Vec<u8>,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `delete <key> [0] [noreply]`.
    Delete {
        /// The key.
        key: Vec<u8>,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `incr`/`decr`.
    Arith {
        /// The key.
        key: Vec<u8>,
        /// incr (true) or decr.
        incr: bool,
        /// The amount.
        delta: u64,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `touch <key> <exptime> [noreply]`.
    Touch {
        /// The key.
        key: Vec<u8>,
        /// New expiry as sent.
        exptime: i64,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `flush_all [delay] [noreply]`.
    FlushAll {
        /// Seconds until the flush takes effect (0 = now).
        delay: i64,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `stats [group]`.
    Stats {
        /// The group asked for (`settings`, `cachedump 1 100`, ...: words joined by one
        /// space), if any.
        group: Option<Vec<u8>>,
    },
    /// `version`.
    Version,
    /// `verbosity <n> [noreply]` (accepted and ignored).
    Verbosity {
        /// Suppress the reply.
        noreply: bool,
    },
    /// `quit`: close the connection.
    Quit,
    /// A `set` or `ms` refused because the item is over the size limit: like memcached,
    /// unlink the key's old item, then reply `SERVER_ERROR object too large for cache`
    /// unless `noreply` (meta commands always show errors).
    TooLarge {
        /// The key.
        key: Vec<u8>,
        /// Suppress the reply (`set ... noreply`).
        noreply: bool,
    },
    /// `mg <key> <flags>*`: meta get.
    MetaGet {
        /// The key (decoded when sent with `b`).
        key: Vec<u8>,
        /// Its flags.
        flags: MetaFlags,
    },
    /// `ms <key> <datalen> <flags>*` and a data block: meta set.
    MetaSet {
        /// The key (decoded when sent with `b`).
        key: Vec<u8>,
        /// The storage mode (`M`, upgraded to [`StoreMode::Cas`] by `C` for set and replace).
        mode: StoreMode,
        /// The value.
        data: Vec<u8>,
        /// Its flags.
        flags: MetaFlags,
    },
    /// `md <key> <flags>*`: meta delete.
    MetaDelete {
        /// The key (decoded when sent with `b`).
        key: Vec<u8>,
        /// Its flags.
        flags: MetaFlags,
    },
    /// `ma <key> <flags>*`: meta arithmetic (incr/decr, with optional creation on a miss).
    MetaArith {
        /// The key (decoded when sent with `b`).
        key: Vec<u8>,
        /// Its flags (`T`, `C`, `q`, `v` and the returned `t`, `c`, `k`, `O`).
        flags: MetaFlags,
        /// `M`: increment (`I`, `+`, the default) or decrement (`D`, `-`).
        incr: bool,
        /// `D<delta>`, default 1.
        delta: u64,
        /// `J<initial>`: the value created on a miss with `N`, default 0.
        initial: u64,
        /// `N<ttl>`: create the item on a miss, with this exptime.
        vivify: Option<i64>,
    },
    /// `mn`: meta no-op, replies `MN` (marks the end of a pipeline of quiet commands).
    MetaNoop,
}

impl Command {
    /// The key a single-key command addresses (`None` for multi-key and keyless commands).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Command::Store { key, .. }
            | Command::Delete { key, .. }
            | Command::Arith { key, .. }
            | Command::Touch { key, .. }
            | Command::TooLarge { key, .. }
            | Command::MetaGet { key, .. }
            | Command::MetaSet { key, .. }
            | Command::MetaDelete { key, .. }
            | Command::MetaArith { key, .. } => Some(key),
            _ => None,
        }
    }

    /// Whether the command never produces a reply (classic `noreply`). Quiet meta commands
    /// may still reply (errors, misses for ms/md), so they are never silent.
    pub fn silent(&self) -> bool {
        matches!(
            self,
            Command::Store { noreply: true, .. }
                | Command::Delete { noreply: true, .. }
                | Command::Arith { noreply: true, .. }
                | Command::Touch { noreply: true, .. }
                | Command::TooLarge { noreply: true, .. }
        )
    }
}

/// Why a connection must be closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// No newline within the line limit.
    LineTooLong,
    /// Control bytes in a command line, or the binary protocol's magic byte.
    Garbage,
    /// An HTTP request line (`GET / HTTP/1.0`): closed without a reply, like memcached.
    Http,
}

impl CloseReason {
    /// The line sent to the client before closing.
    pub fn message(self) -> &'static [u8] {
        match self {
            CloseReason::LineTooLong => b"CLIENT_ERROR line too long\r\n",
            CloseReason::Garbage => b"CLIENT_ERROR binary data in command line\r\n",
            CloseReason::Http => b"",
        }
    }
}

/// Outcome of one [`Parser::parse`](crate::protocol::Parser::parse) call.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// A complete command.
    Command(Command),
    /// Send this error line and keep reading.
    Reply(&'static [u8]),
    /// Bytes were consumed (a swallowed data block, a suppressed `noreply` error); go on.
    Skip,
    /// Not enough bytes for a complete command; read more.
    NeedMore,
    /// Send [`CloseReason::message`] and close the connection.
    Close(CloseReason),
}

/// A flag whose position in the request matters: the reply echoes these in request order,
/// and `T` takes effect where it stands (`mg k t T30` shows the old TTL, `mg k T30 t` the new).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaTok {
    /// `s`: value size.
    Size,
    /// `t`: remaining TTL in seconds, -1 for none.
    Ttl,
    /// `c`: CAS unique.
    Cas,
    /// `f`: client flags.
    Flags,
    /// `k`: the key (base64 followed by ` b` when the request had `b`).
    Key,
    /// `O<opaque>`: echoed as sent, letter included.
    Opaque(Vec<u8>),
    /// `T<ttl>`: touch, at this position.
    Touch,
}

/// The flags of one meta command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetaFlags {
    /// Positional flags in request order.
    pub toks: Vec<MetaTok>,
    /// `v`: return the value.
    pub value: bool,
    /// `q`: quiet — suppress the nominal reply (`EN` for mg, `HD` for ms/md).
    pub quiet: bool,
    /// `b`: the key was sent base64-encoded (the command carries it decoded).
    pub base64: bool,
    /// `T<ttl>`: new exptime as sent.
    pub ttl: Option<i64>,
    /// `F<flags>`: client flags for ms (memcached keeps the low 32 bits of the number).
    pub client_flags: u32,
    /// `C<cas>`: compare-and-swap value (ms, md).
    pub cas: Option<u64>,
    /// `M<mode>`: ms mode letter as sent.
    pub mode: Option<u8>,
}

/// Unsigned decimal with an optional leading `+` (no other sign, no spaces), as
/// memcached's `safe_strtoull` reads it (`strtoull` takes the `+`).
pub fn parse_u64(t: &[u8]) -> Option<u64> {
    let t = t.strip_prefix(b"+").unwrap_or(t);
    if t.is_empty() || t.len() > 20 || !t.iter().all(u8::is_ascii_digit) {
        return None;
    }
    t.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Strict signed decimal fitting an `i32` (memcached stores exptimes in 32 bits).
pub fn parse_i64(t: &[u8]) -> Option<i64> {
    let (neg, digits) = match t.split_first() {
        Some((b'-', rest)) if !rest.starts_with(b"+") => (true, rest),
        _ => (false, t),
    };
    let v = i64::try_from(parse_u64(digits)?).ok()?;
    let v = if neg { -v } else { v };
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&v)
        .then_some(v)
}
