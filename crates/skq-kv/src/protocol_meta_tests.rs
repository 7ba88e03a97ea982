//! Parser unit tests for the meta commands (mg, ms, md, mn): parsed forms, every error
//! string and whether it swallows the data block, and split input.
use super::*;
use crate::command::{MetaFlags, MetaTok};

fn p() -> Parser {
    Parser::new(Limits {
        max_item_size: 100,
        ..Limits::default()
    })
}

fn k(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// Every step of `input` parsed from one buffer, ending at the first `NeedMore`.
fn steps_whole(input: &[u8]) -> Vec<(usize, Step)> {
    let mut parser = p();
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let (n, step) = parser.parse(&input[pos..]);
        pos += n;
        if step == Step::NeedMore {
            return out;
        }
        let close = matches!(step, Step::Close(_));
        out.push((n, step));
        if close {
            return out;
        }
    }
}

/// The same, with the input arriving `chunk` bytes at a time (a connection's buffer:
/// unconsumed bytes stay, new ones are appended).
fn steps_split(input: &[u8], chunk: usize) -> Vec<(usize, Step)> {
    let mut parser = p();
    let mut out = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    for piece in input.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            let (n, step) = parser.parse(&buf);
            buf.drain(..n);
            if step == Step::NeedMore {
                break;
            }
            let close = matches!(step, Step::Close(_));
            out.push((n, step));
            if close {
                return out;
            }
        }
    }
    out
}

/// The only step of a complete one-command input.
fn only(input: &[u8]) -> Step {
    let mut steps = steps_whole(input);
    assert_eq!(
        steps.len(),
        1,
        "{:?}: {steps:?}",
        String::from_utf8_lossy(input)
    );
    let (n, step) = steps.pop().unwrap();
    assert_eq!(n, input.len(), "whole input consumed");
    step
}

fn get_flags(input: &[u8]) -> (Vec<u8>, MetaFlags) {
    match only(input) {
        Step::Command(Command::MetaGet { key, flags }) => (key, flags),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    }
}

#[test]
fn meta_get_forms() {
    let (key, f) = get_flags(b"mg a v k f c t s q Oxy T30\r\n");
    assert_eq!(key, k("a"));
    assert!(f.value && f.quiet && !f.base64);
    assert_eq!(f.ttl, Some(30));
    use MetaTok::*;
    assert_eq!(
        f.toks,
        vec![Key, Flags, Cas, Ttl, Size, Opaque(k("Oxy")), Touch]
    );
    let (key, f) = get_flags(b"mg YWJj b k\r\n");
    assert_eq!((key, f.base64), (k("abc"), true));
    // Flags of other commands are accepted and ignored, as memcached does.
    let (_, f) = get_flags(b"mg a F7 C9 MS J1 D2 u P L\r\n");
    assert_eq!((f.client_flags, f.cas), (7, Some(9)));
    // Extra spaces do not matter.
    assert_eq!(get_flags(b"mg a  v   k\r\n").1.toks, vec![Key]);
    assert_eq!(get_flags(b"mg a\n").1, MetaFlags::default());
}

#[test]
fn meta_errors_use_memcached_wording() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"mg\r\n", b"ERROR\r\n"),
        (b"md\r\n", b"ERROR\r\n"),
        (b"ms\r\n", b"ERROR\r\n"),
        (b"mg a x\r\n", b"CLIENT_ERROR invalid flag\r\n"),
        (b"mg a v v\r\n", b"CLIENT_ERROR duplicate flag\r\n"),
        (b"mg a \x80\r\n", b"CLIENT_ERROR duplicate flag\r\n"),
        (
            b"mg a T\r\n",
            b"CLIENT_ERROR bad token in command line format\r\n",
        ),
        (b"mg a Fx\r\n", b"CLIENT_ERROR bad command line format\r\n"),
        (
            b"mg a Mxx\r\n",
            b"CLIENT_ERROR incorrect length for M token\r\n",
        ),
        (b"mg YWJ b\r\n", b"CLIENT_ERROR error decoding key\r\n"),
        (b"md a x\r\n", b"CLIENT_ERROR invalid or duplicate flag\r\n"),
        (
            b"md a q q\r\n",
            b"CLIENT_ERROR invalid or duplicate flag\r\n",
        ),
        (b"ms a\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    ];
    for (input, want) in cases {
        assert_eq!(
            only(input),
            Step::Reply(want),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    let opaque = format!("O{}", "x".repeat(32));
    for cmd in ["mg", "md"] {
        let line = format!("{cmd} a {opaque}\r\n");
        assert_eq!(
            only(line.as_bytes()),
            Step::Reply(b"CLIENT_ERROR opaque token too long\r\n")
        );
    }
    let long = format!("mg {} v\r\n", "k".repeat(251));
    assert_eq!(
        only(long.as_bytes()),
        Step::Reply(b"CLIENT_ERROR bad command line format\r\n")
    );
    assert_eq!(only(b"mn\r\n"), Step::Command(Command::MetaNoop));
    assert_eq!(only(b"mn extra\r\n"), Step::Command(Command::MetaNoop));
}

#[test]
fn meta_set_forms_and_modes() {
    let set = |input: &[u8]| match only(input) {
        Step::Command(Command::MetaSet {
            key,
            mode,
            data,
            flags,
        }) => (key, mode, data, flags),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
    };
    let (key, mode, data, f) = set(b"ms a 3 F5 T60 c k q Oz\r\nabc\r\n");
    assert_eq!((key, mode, data), (k("a"), StoreMode::Set, k("abc")));
    assert_eq!((f.client_flags, f.ttl, f.quiet), (5, Some(60), true));
    for (m, mode) in [
        ("E", StoreMode::Add),
        ("A", StoreMode::Append),
        ("P", StoreMode::Prepend),
        ("R", StoreMode::Replace),
        ("S", StoreMode::Set),
    ] {
        assert_eq!(set(format!("ms a 1 M{m}\r\nx\r\n").as_bytes()).1, mode);
    }
    // C upgrades set and replace to cas; add ignores it; append/prepend keep it aside.
    assert_eq!(set(b"ms a 1 C7\r\nx\r\n").1, StoreMode::Cas(7));
    assert_eq!(set(b"ms a 1 C7 MR\r\nx\r\n").1, StoreMode::Cas(7));
    assert_eq!(set(b"ms a 1 C7 ME\r\nx\r\n").1, StoreMode::Add);
    let (_, mode, _, f) = set(b"ms a 1 C7 MA\r\nx\r\n");
    assert_eq!((mode, f.cas), (StoreMode::Append, Some(7)));
    // F keeps the low 32 bits, as memcached's strtoul into a 32-bit field does.
    assert_eq!(set(b"ms a 1 F4294967297\r\nx\r\n").3.client_flags, 1);
    let (key, _, _, f) = set(b"ms YWJj 2 b k\r\nhi\r\n");
    assert_eq!((key, f.base64), (k("abc"), true));
    assert_eq!(set(b"ms a 0\r\n\r\n").2, k(""));
}

#[test]
fn meta_set_errors_swallow_the_block_only_after_a_valid_length() {
    // (input, first reply, whether the data line "SS" is then read as a command)
    let cases: &[(&[u8], &[u8], bool)] = &[
        (
            b"ms b 2 x\r\nSS\r\n",
            b"CLIENT_ERROR invalid flag\r\n",
            false,
        ),
        (
            b"ms b 2 c c\r\nSS\r\n",
            b"CLIENT_ERROR duplicate flag\r\n",
            false,
        ),
        (
            b"ms b 2 Me\r\nSS\r\n",
            b"CLIENT_ERROR invalid mode for ms M token\r\n",
            false,
        ),
        (
            b"ms b 2 M\r\nSS\r\n",
            b"CLIENT_ERROR incorrect length for M token\r\n",
            false,
        ),
        (
            b"ms b 2 Fx\r\nSS\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
            false,
        ),
        (
            b"ms b 2 Cx\r\nSS\r\n",
            b"CLIENT_ERROR bad token in command line format\r\n",
            false,
        ),
        (
            b"ms b x\r\nSS\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
            true,
        ),
        (
            b"ms b -1\r\nSS\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
            true,
        ),
        (
            b"ms b S1 T0\r\nSS\r\n",
            b"CLIENT_ERROR bad command line format\r\n",
            true,
        ),
    ];
    for (input, want, read_as_command) in cases {
        let steps = steps_whole(input);
        let name = String::from_utf8_lossy(input);
        assert_eq!(steps[0].1, Step::Reply(want), "{name}");
        if *read_as_command {
            assert_eq!(steps[1].1, Step::Reply(b"ERROR\r\n"), "{name}");
        } else {
            assert!(steps[1..].iter().all(|(_, s)| *s == Step::Skip), "{name}");
        }
    }
    let line = format!("ms a 1 O{}\r\nz\r\n", "x".repeat(32));
    let steps = steps_whole(line.as_bytes());
    assert_eq!(
        steps[0].1,
        Step::Reply(b"CLIENT_ERROR opaque token too long\r\n")
    );
    assert!(steps[1..].iter().all(|(_, s)| *s == Step::Skip));
    // Too large (limit 100: 40 value bytes for a 1-byte key): unlink + error, even with q.
    let big = format!("ms a 41 q\r\n{}\r\nmn\r\n", "v".repeat(41));
    let steps = steps_whole(big.as_bytes());
    assert_eq!(
        steps[0].1,
        Step::Command(Command::TooLarge {
            key: k("a"),
            noreply: false
        })
    );
    assert_eq!(steps.last().unwrap().1, Step::Command(Command::MetaNoop));
    assert!(matches!(
        only(format!("ms a 40\r\n{}\r\n", "v".repeat(40)).as_bytes()),
        Step::Command(Command::MetaSet { .. })
    ));
    // A bad chunk is reported even in quiet mode (memcached 1.6.18 answers
    // `CLIENT_ERROR bad data chunk\r\nERROR\r\nMN\r\n` here) and parsing goes on.
    assert_eq!(
        steps_whole(b"ms a 1 q\r\nzz\r\nmn\r\n"),
        vec![
            (13, Step::Reply(b"CLIENT_ERROR bad data chunk\r\n")),
            (1, Step::Reply(b"ERROR\r\n")),
            (4, Step::Command(Command::MetaNoop)),
        ]
    );
}

#[test]
fn meta_split_input_gives_the_same_steps() {
    let big = "v".repeat(60);
    let input = format!(
        "ms a 3 T0 F5 c\r\nabc\r\nmg a v k f s q Oo1\r\nmg nope v q\r\nmd a q\r\n\
         ms YWJj 2 b k MA C9\r\nhi\r\nms b 2 x\r\nSS\r\nms big {} q\r\n{big}\r\n\
         mg a Tx\r\nmg  a  t T30 t\r\nmd nope Oz k\r\nmn\r\nms c 1\r\nzz\r\n",
        big.len()
    );
    let whole = steps_whole(input.as_bytes());
    assert!(whole.len() > 12, "{whole:?}");
    assert_eq!(
        whole[whole.len() - 2].1,
        Step::Reply(b"CLIENT_ERROR bad data chunk\r\n")
    );
    // Swallowed bytes may be skipped in different pieces; compare everything else.
    let norm = |v: Vec<(usize, Step)>| -> Vec<Step> {
        v.into_iter()
            .map(|(_, s)| s)
            .filter(|s| *s != Step::Skip)
            .collect()
    };
    let whole = norm(whole);
    for chunk in 1..=9 {
        assert_eq!(
            norm(steps_split(input.as_bytes(), chunk)),
            whole,
            "chunk {chunk}"
        );
    }
}

#[test]
fn meta_arith_forms() {
    assert_eq!(
        only(b"ma k\r\n"),
        Step::Command(Command::MetaArith {
            key: k("k"),
            flags: MetaFlags::default(),
            incr: true,
            delta: 1,
            initial: 0,
            vivify: None
        })
    );
    match only(b"ma k N30 J13 D5 MD v t q\r\n") {
        Step::Command(Command::MetaArith {
            incr,
            delta,
            initial,
            vivify,
            flags,
            ..
        }) => {
            assert_eq!((incr, delta, initial, vivify), (false, 5, 13, Some(30)));
            assert!(flags.value && flags.quiet);
            assert_eq!(flags.toks, vec![MetaTok::Ttl]);
        }
        other => panic!("ma with flags: {other:?}"),
    }
    assert_eq!(
        only(b"ma k MX\r\n"),
        Step::Reply(b"CLIENT_ERROR invalid mode for ma M token\r\n")
    );
    for bad in [
        &b"ma k Dx\r\n"[..],
        b"ma k J-1\r\n",
        b"ma k N1 N2\r\n",
        b"ma k v v\r\n",
    ] {
        assert_eq!(
            only(bad),
            Step::Reply(b"CLIENT_ERROR invalid or duplicate flag\r\n"),
            "{bad:?}"
        );
    }
    assert_eq!(only(b"ma\r\n"), Step::Reply(b"ERROR\r\n"));
}
