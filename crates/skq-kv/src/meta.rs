//! memcached's meta commands, parsing side: `mg` (get), `ms` (set), `md` (delete), `ma`
//! (arithmetic), `mn` (no-op). [`crate::exec`] executes them.
//!
//! Every flag is one token: a letter, optionally followed by an argument (`T30`, `Oabc`).
//! Parsing follows memcached 1.6.18, checked byte for byte in tests/clients.rs:
//! - all three commands accept every flag memcached's common flag parser knows, and ignore
//!   the ones that do not apply to them (`ms k 1 s` stores and replies `HD`); a flag seen
//!   twice → `CLIENT_ERROR duplicate flag`, an unknown letter → `CLIENT_ERROR invalid flag`
//!   (`md` words both `CLIENT_ERROR invalid or duplicate flag`), a bad argument → the
//!   message of the last bad numeric flag (`CLIENT_ERROR bad token in command line format`
//!   for T/C, `CLIENT_ERROR incorrect length for M token`, ...; a bad `F` alone gives
//!   `CLIENT_ERROR bad command line format`);
//! - `O` opaques longer than 32 bytes (letter included) → `CLIENT_ERROR opaque token too long`;
//! - `ms` errors after a valid data length swallow the data block; a missing or bad length
//!   does not (the block is then read as a command line, as memcached does).
//!
//! Not implemented for mg/ms/md (replied `CLIENT_ERROR invalid flag`, where memcached
//! accepts them): `N` (vivify on miss; `ma` has it), `R` (recache), `h` (hit before), `l` (last access) and `I`
//! (invalidate) — they need per-item state the arena does not keep (win/stale tokens, access
//! times). `u` (no LRU bump) is accepted and trivially honoured: eviction is FIFO by segment.
//! `b` (base64 key) is implemented, but the `k` flag re-encodes the key when *this request*
//! had `b`, whereas memcached remembers per item whether it was stored with `b`.

use crate::command::{parse_i64, parse_u64, Command, Step, MAX_KEY_LEN};
pub use crate::command::{MetaFlags, MetaTok};
use crate::recycle;

pub(crate) const DUPLICATE: &[u8] = b"CLIENT_ERROR duplicate flag\r\n";
pub(crate) const INVALID: &[u8] = b"CLIENT_ERROR invalid flag\r\n";
pub(crate) const MD_INVALID: &[u8] = b"CLIENT_ERROR invalid or duplicate flag\r\n";
pub(crate) const BAD_TOKEN: &[u8] = b"CLIENT_ERROR bad token in command line format\r\n";
pub(crate) const OPAQUE_TOO_LONG: &[u8] = b"CLIENT_ERROR opaque token too long\r\n";
pub(crate) const BAD_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ms M token\r\n";
const M_LENGTH: &[u8] = b"CLIENT_ERROR incorrect length for M token\r\n";
const BAD_INITIAL: &[u8] = b"CLIENT_ERROR invalid numeric initial value\r\n";
const BAD_DELTA: &[u8] = b"CLIENT_ERROR invalid numeric delta value\r\n";
const BAD_KEY: &[u8] = b"CLIENT_ERROR error decoding key\r\n";
const BAD_FORMAT: &[u8] = b"CLIENT_ERROR bad command line format\r\n";
const ERROR: &[u8] = b"ERROR\r\n";
const MAX_OPAQUE: usize = 32;

/// `mg <key> <flags>*`.
pub(crate) fn parse_get(args: &[&[u8]]) -> Step {
    let Some((key, toks)) = args.split_first() else {
        return Step::Reply(ERROR);
    };
    if key.len() > MAX_KEY_LEN {
        return Step::Reply(BAD_FORMAT);
    }
    match parse_flags(key, toks) {
        Err(msg) => Step::Reply(msg),
        Ok((_, flags)) if long_opaque(&flags) => Step::Reply(OPAQUE_TOO_LONG),
        Ok((key, flags)) => Step::Command(Command::MetaGet { key, flags }),
    }
}

/// `md <key> <flags>*`.
pub(crate) fn parse_delete(args: &[&[u8]]) -> Step {
    let Some((key, toks)) = args.split_first() else {
        return Step::Reply(ERROR);
    };
    if key.len() > MAX_KEY_LEN {
        return Step::Reply(BAD_FORMAT);
    }
    match parse_flags(key, toks) {
        Err(_) => Step::Reply(MD_INVALID),
        Ok((_, flags)) if long_opaque(&flags) => Step::Reply(OPAQUE_TOO_LONG),
        Ok((key, flags)) => Step::Command(Command::MetaDelete { key, flags }),
    }
}

const BAD_MA_MODE: &[u8] = b"CLIENT_ERROR invalid mode for ma M token\r\n";

/// `ma <key> <flags>*`. Its own flags (`N<ttl>`, `J<initial>`, `D<delta>`, `M<mode>`) are
/// read here, the common ones by [`parse_flags`]; any flag error is memcached's
/// `CLIENT_ERROR invalid or duplicate flag`.
pub(crate) fn parse_arith(args: &[&[u8]]) -> Step {
    let Some((key, toks)) = args.split_first() else {
        return Step::Reply(ERROR);
    };
    if key.len() > MAX_KEY_LEN {
        return Step::Reply(BAD_FORMAT);
    }
    let (mut incr, mut delta, mut initial, mut vivify) = (true, 1, 0, None);
    let mut common: Vec<&[u8]> = Vec::with_capacity(toks.len());
    let mut mode = None;
    for t in toks {
        let arg = &t[1..];
        match t[0] {
            b'N' => match parse_i64(arg) {
                Some(v) if vivify.is_none() => vivify = Some(v),
                _ => return Step::Reply(MD_INVALID),
            },
            b'J' => match parse_u64(arg) {
                Some(v) => initial = v,
                None => return Step::Reply(MD_INVALID),
            },
            b'D' => match parse_u64(arg) {
                Some(v) => delta = v,
                None => return Step::Reply(MD_INVALID),
            },
            b'M' if t.len() == 2 => mode = Some(t[1]),
            _ => common.push(t),
        }
    }
    match mode {
        None | Some(b'I' | b'+') => {}
        Some(b'D' | b'-') => incr = false,
        Some(_) => return Step::Reply(BAD_MA_MODE),
    }
    match parse_flags(key, &common) {
        Err(_) => Step::Reply(MD_INVALID),
        Ok((_, flags)) if long_opaque(&flags) => Step::Reply(OPAQUE_TOO_LONG),
        Ok((key, flags)) => Step::Command(Command::MetaArith {
            key,
            flags,
            incr,
            delta,
            initial,
            vivify,
        }),
    }
}

/// Parses the flag tokens of a meta command whose key token is `key`. Returns the key to
/// use (decoded when `b` is present) and the flags, or the error line to reply.
pub fn parse_flags(key: &[u8], toks: &[&[u8]]) -> Result<(Vec<u8>, MetaFlags), &'static [u8]> {
    let mut seen = [false; 127];
    let mut f = MetaFlags {
        toks: recycle::meta_toks(),
        ..MetaFlags::default()
    };
    let mut key = recycle::key_bytes(key);
    // Like memcached, a bad argument does not stop the scan: a later unknown or duplicate
    // flag still wins, and the message is the last one a bad argument set.
    let mut failed: Option<&'static [u8]> = None;
    for t in toks {
        let o = usize::from(t[0]);
        if o >= seen.len() || seen[o] {
            return Err(DUPLICATE);
        }
        seen[o] = true;
        let arg = &t[1..];
        let mut bad = |msg: Option<&'static [u8]>| {
            failed = Some(msg.or(failed).unwrap_or(BAD_FORMAT));
        };
        match t[0] {
            b'b' => match base64_decode(&key) {
                Some(k) => {
                    key = k;
                    f.base64 = true;
                }
                None => bad(Some(BAD_KEY)),
            },
            b'T' => match parse_i64(arg) {
                Some(v) => {
                    f.ttl = Some(v);
                    f.toks.push(MetaTok::Touch);
                }
                None => bad(Some(BAD_TOKEN)),
            },
            b'F' => match parse_u64(arg) {
                Some(v) => f.client_flags = v as u32,
                None => bad(None),
            },
            b'C' => match parse_u64(arg) {
                Some(v) => f.cas = Some(v),
                None => bad(Some(BAD_TOKEN)),
            },
            b'M' => match t.len() {
                2 => f.mode = Some(t[1]),
                _ => bad(Some(M_LENGTH)),
            },
            b'J' if parse_u64(arg).is_none() => bad(Some(BAD_INITIAL)),
            b'D' if parse_u64(arg).is_none() => bad(Some(BAD_DELTA)),
            b'O' => f.toks.push(MetaTok::Opaque(recycle::key_bytes(t))),
            b'k' => f.toks.push(MetaTok::Key),
            b's' => f.toks.push(MetaTok::Size),
            b't' => f.toks.push(MetaTok::Ttl),
            b'c' => f.toks.push(MetaTok::Cas),
            b'f' => f.toks.push(MetaTok::Flags),
            b'v' => f.value = true,
            b'q' => f.quiet = true,
            b'u' | b'P' | b'L' | b'J' | b'D' => {}
            _ => return Err(INVALID),
        }
    }
    match failed {
        Some(msg) => Err(msg),
        None => Ok((key, f)),
    }
}

/// Whether an `O` flag is longer than memcached accepts.
pub fn long_opaque(f: &MetaFlags) -> bool {
    f.toks
        .iter()
        .any(|t| matches!(t, MetaTok::Opaque(o) if o.len() > MAX_OPAQUE))
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn sextet(c: u8) -> Option<u32> {
    ALPHABET.iter().position(|&a| a == c).map(|p| p as u32)
}

/// Strict standard base64 (RFC 4648 alphabet, `=` padding, length a multiple of 4).
/// Returns `None` for anything else or an empty result.
pub fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    if s.is_empty() || !s.len().is_multiple_of(4) {
        return None;
    }
    let pad = s.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return None;
    }
    let body = &s[..s.len() - pad];
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for chunk in body.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= sextet(c)? << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    (!out.is_empty()).then_some(out)
}

/// Standard base64 with padding.
pub fn base64_encode(data: &[u8], out: &mut Vec<u8>) {
    for chunk in data.chunks(3) {
        let mut n = 0u32;
        for (i, &b) in chunk.iter().enumerate() {
            n |= u32::from(b) << (16 - 8 * i);
        }
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_roundtrip_and_strictness() {
        for data in [&b"a"[..], b"ab", b"abc", b"abcd", b" ", b"\x00\xff\x10\r\n"] {
            let mut enc = Vec::new();
            base64_encode(data, &mut enc);
            assert_eq!(base64_decode(&enc).as_deref(), Some(data), "{enc:?}");
        }
        let mut enc = Vec::new();
        base64_encode(b"abc", &mut enc);
        assert_eq!(enc, b"YWJj");
        for bad in [
            &b""[..],
            b"YWJ",
            b"YWJjZA",
            b"!!!!",
            b"Y===",
            b"YW=j",
            b"====",
        ] {
            assert_eq!(
                base64_decode(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn flag_errors_follow_memcached_precedence() {
        let parse = |line: &str| {
            let toks: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            parse_flags(b"k", &toks).map(|(_, f)| f)
        };
        assert_eq!(parse("v v"), Err(DUPLICATE));
        assert_eq!(parse("x v"), Err(INVALID));
        assert_eq!(
            parse("Tx x"),
            Err(INVALID),
            "an unknown flag wins over a bad value"
        );
        assert_eq!(parse("Tx v v"), Err(DUPLICATE));
        assert_eq!(parse("Fx"), Err(BAD_FORMAT));
        assert_eq!(
            parse("Tx Fx"),
            Err(BAD_TOKEN),
            "F keeps the earlier message"
        );
        assert_eq!(parse("Mxx Cx"), Err(BAD_TOKEN), "the last message wins");
        assert_eq!(parse("Cx Mxx"), Err(M_LENGTH));
        assert_eq!(parse("Jx Dx"), Err(BAD_DELTA));
        assert_eq!(parse("N30"), Err(INVALID), "vivify is not implemented");
        let f = parse("v t T30 Oab k q F4294967297 C7 MS u").unwrap();
        assert_eq!(
            f.toks,
            vec![
                MetaTok::Ttl,
                MetaTok::Touch,
                MetaTok::Opaque(b"Oab".to_vec()),
                MetaTok::Key
            ]
        );
        assert!(f.value && f.quiet && !f.base64);
        assert_eq!(
            (f.ttl, f.client_flags, f.cas, f.mode),
            (Some(30), 1, Some(7), Some(b'S'))
        );
        let (key, f) = parse_flags(b"YWJj", &[b"b"]).unwrap();
        assert_eq!((key.as_slice(), f.base64), (&b"abc"[..], true));
        assert_eq!(parse_flags(b"YWJ", &[b"b"]), Err(BAD_KEY));
        assert!(long_opaque(
            &parse(&format!("O{}", "x".repeat(32))).unwrap()
        ));
        assert!(!long_opaque(
            &parse(&format!("O{}", "x".repeat(31))).unwrap()
        ));
    }
}
