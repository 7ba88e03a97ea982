//! Parser unit tests: every command, every error string, incremental feeding.
use super::*;

fn p() -> Parser {
    Parser::new(Limits {
        max_item_size: 100,
        ..Limits::default()
    })
}

/// Parses one step from a complete buffer.
fn one(input: &[u8]) -> (usize, Step) {
    p().parse(input)
}

fn cmd(input: &[u8]) -> Command {
    match one(input) {
        (n, Step::Command(c)) => {
            assert_eq!(n, input.len(), "whole input consumed for {input:?}");
            c
        }
        other => panic!("{input:?}: expected a command, got {other:?}"),
    }
}

fn reply(input: &[u8]) -> &'static [u8] {
    match one(input) {
        (_, Step::Reply(r)) => r,
        other => panic!("{input:?}: expected an error reply, got {other:?}"),
    }
}

fn k(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[test]
fn retrievals() {
    assert_eq!(
        cmd(b"get a\r\n"),
        Command::Get {
            keys: vec![k("a")],
            cas: false,
            touch: None
        }
    );
    assert_eq!(
        cmd(b"gets a  b c\r\n"),
        Command::Get {
            keys: vec![k("a"), k("b"), k("c")],
            cas: true,
            touch: None
        }
    );
    assert_eq!(
        cmd(b"gat 10 a b\r\n"),
        Command::Get {
            keys: vec![k("a"), k("b")],
            cas: false,
            touch: Some(10)
        }
    );
    assert_eq!(
        cmd(b"gats -1 a\n"),
        Command::Get {
            keys: vec![k("a")],
            cas: true,
            touch: Some(-1)
        }
    );
    assert_eq!(reply(b"get\r\n"), b"ERROR\r\n");
    assert_eq!(reply(b"gat 10\r\n"), b"ERROR\r\n");
    assert_eq!(
        reply(b"gat x a\r\n"),
        b"CLIENT_ERROR invalid exptime argument\r\n"
    );
    let long = format!("get {}\r\n", "x".repeat(251));
    assert_eq!(
        reply(long.as_bytes()),
        b"CLIENT_ERROR bad command line format\r\n"
    );
    let ok = format!("get {}\r\n", "x".repeat(250));
    assert!(matches!(cmd(ok.as_bytes()), Command::Get { .. }));
}

#[test]
fn storage_commands() {
    let set = cmd(b"set k 5 100 3\r\nabc\r\n");
    assert_eq!(
        set,
        Command::Store {
            mode: StoreMode::Set,
            key: k("k"),
            flags: 5,
            exptime: 100,
            data: k("abc"),
            noreply: false
        }
    );
    for (name, mode) in [
        ("add", StoreMode::Add),
        ("replace", StoreMode::Replace),
        ("append", StoreMode::Append),
        ("prepend", StoreMode::Prepend),
    ] {
        let line = format!("{name} k 0 0 2 noreply\r\nhi\r\n");
        assert_eq!(
            cmd(line.as_bytes()),
            Command::Store {
                mode,
                key: k("k"),
                flags: 0,
                exptime: 0,
                data: k("hi"),
                noreply: true
            }
        );
    }
    assert_eq!(
        cmd(b"cas k 1 -1 0 42\r\n\r\n"),
        Command::Store {
            mode: StoreMode::Cas(42),
            key: k("k"),
            flags: 1,
            exptime: -1,
            data: vec![],
            noreply: false
        }
    );
    // The data block may contain anything, including \r\n and control bytes.
    assert!(
        matches!(cmd(b"set k 0 0 4\r\n\r\n\x00\x01\r\n"), Command::Store { data, .. } if data == b"\r\n\x00\x01")
    );
    // Flags are 32-bit unsigned.
    assert!(matches!(
        cmd(b"set k 4294967295 0 1\r\nx\r\n"),
        Command::Store {
            flags: u32::MAX,
            ..
        }
    ));
}

#[test]
fn storage_errors() {
    assert_eq!(reply(b"set k 0 0\r\n"), b"ERROR\r\n");
    assert_eq!(reply(b"set k 0 0 1 noreply extra\r\n"), b"ERROR\r\n");
    assert_eq!(reply(b"cas k 0 0 1\r\n"), b"ERROR\r\n");
    assert_eq!(
        reply(b"set k 0 0 -1\r\n"),
        b"CLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(
        reply(b"set k 0 0 x\r\n"),
        b"CLIENT_ERROR bad command line format\r\n"
    );
    // Flags keep their low 32 bits, as memcached 1.6.18 stores them.
    assert!(matches!(
        cmd(b"set k 4294967297 0 1\r\nx\r\n"),
        Command::Store { flags: 1, .. }
    ));
    // As in memcached, the data block of a rejected line is read as the next command.
    let mut parser = p();
    let input = b"set k 18446744073709551616 0 1\r\nx\r\nget a\r\n";
    let (n, step) = parser.parse(input);
    assert_eq!(
        step,
        Step::Reply(b"CLIENT_ERROR bad command line format\r\n")
    );
    let (m, step) = parser.parse(&input[n..]);
    assert_eq!((m, step), (3, Step::Reply(b"ERROR\r\n")));
    assert!(matches!(
        parser.parse(&input[n + m..]).1,
        Step::Command(Command::Get { .. })
    ));
    let long_key = format!("set {} 0 0 1\r\nx\r\n", "k".repeat(251));
    assert_eq!(
        reply(long_key.as_bytes()),
        b"CLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(
        reply(b"cas k 0 0 1 x\r\nx\r\n"),
        b"CLIENT_ERROR bad command line format\r\n"
    );
}

#[test]
fn too_large_is_swallowed_without_buffering() {
    let mut parser = p();
    let (n, step) = parser.parse(b"add big 0 0 1000\r\n");
    assert_eq!(
        (n, step),
        (
            18,
            Step::Reply(b"SERVER_ERROR object too large for cache\r\n")
        )
    );
    // The 1002 bytes (data + \r\n) arrive in pieces and are dropped as they come.
    let mut left = 1002;
    while left > 0 {
        let chunk = vec![b'z'; left.min(300)];
        let (m, step) = parser.parse(&chunk);
        assert_eq!((m, step), (chunk.len(), Step::Skip));
        left -= m;
    }
    assert_eq!(
        parser.parse(b"version\r\n").1,
        Step::Command(Command::Version)
    );
    // With noreply the error is suppressed, as memcached does.
    let mut parser = p();
    assert_eq!(
        parser.parse(b"append big 0 0 101 noreply\r\n").1,
        Step::Skip
    );
    // A refused set also unlinks the old item: it becomes a command (noreply or not).
    let mut parser = p();
    assert_eq!(
        parser.parse(b"set big 0 0 101 noreply\r\n").1,
        Step::Command(Command::TooLarge {
            key: k("big"),
            noreply: true
        })
    );
    assert_eq!(parser.parse(&[b'z'; 103]), (103, Step::Skip));
    assert_eq!(parser.parse(b"quit\r\n").1, Step::Command(Command::Quit));
}

/// The limit counts the whole item as memcached does: with `max_item_size` 100, a 1-byte
/// key and flags 0 leave 100 - 60 = 40 value bytes; non-zero flags take 4 more.
#[test]
fn item_size_limit_counts_header_key_and_flags() {
    assert_eq!(
        item_size(1, 0, 1_048_516),
        1 << 20,
        "memcached 1.6.18 -I 1m boundary"
    );
    assert_eq!(item_size(1, 7, 1_048_512), 1 << 20);
    assert_eq!(item_size(250, 0, 1_048_267), 1 << 20);
    let stored = |line: &str| {
        let (_, step) = p().parse(line.as_bytes());
        matches!(step, Step::Command(Command::Store { .. }) | Step::NeedMore)
    };
    assert!(stored("set k 0 0 40\r\n"));
    assert!(!stored("set k 0 0 41\r\n"));
    assert!(stored("set k 1 0 36\r\n"));
    assert!(!stored("set k 1 0 37\r\n"));
    assert!(stored("set kk 0 0 39\r\n"));
    assert!(!stored("set kk 0 0 40\r\n"));
}

/// memcached 1.6.18 (checked against the real server): a data block not followed by
/// `\r\n` where its length says is answered `CLIENT_ERROR bad data chunk` after consuming
/// exactly line + length + 2 bytes; parsing goes on from there and the connection stays.
#[test]
fn bad_data_chunk_is_reported_and_parsing_resumes() {
    let input = b"set k 0 0 3\r\nabcd\r\nget k\r\n";
    let mut parser = p();
    let (n, step) = parser.parse(input);
    assert_eq!(
        (n, step),
        (18, Step::Reply(b"CLIENT_ERROR bad data chunk\r\n"))
    );
    // What is left is "\nget k\r\n": an empty line (ERROR), then the get.
    assert_eq!(parser.parse(&input[n..]), (1, Step::Reply(b"ERROR\r\n")));
    assert!(matches!(
        parser.parse(&input[n + 1..]),
        (7, Step::Command(Command::Get { .. }))
    ));
    // Too much data: the surplus is read as a command line.
    assert_eq!(
        one(b"set k 0 0 2\r\nabcdefgh\r\n"),
        (17, Step::Reply(b"CLIENT_ERROR bad data chunk\r\n"))
    );
    // Every storage command, cas included.
    for line in ["add", "replace", "append", "prepend"] {
        let input = format!("{line} k 0 0 1\r\nxyz\r\n");
        assert_eq!(reply(input.as_bytes()), b"CLIENT_ERROR bad data chunk\r\n");
    }
    assert_eq!(
        reply(b"cas k 0 0 1 5\r\nxyz\r\n"),
        b"CLIENT_ERROR bad data chunk\r\n"
    );
    // noreply suppresses the error (memcached prints only the ERROR for the leftover `\n`).
    assert_eq!(one(b"set k 0 0 2 noreply\r\nabc\r\n"), (25, Step::Skip));
    // Not all of the block yet: wait, even if the bytes so far cannot end well.
    assert_eq!(one(b"set k 0 0 2\r\nabc"), (0, Step::NeedMore));
}

#[test]
fn incremental_feeding_gives_the_same_command() {
    let input = b"set key 3 0 10\r\n0123456789\r\n";
    for cut in 0..input.len() {
        let mut parser = p();
        assert_eq!(
            parser.parse(&input[..cut]),
            (0, Step::NeedMore),
            "cut at {cut}"
        );
        assert!(
            matches!(parser.parse(input), (n, Step::Command(Command::Store { .. })) if n == input.len())
        );
    }
}

#[test]
fn delete_incr_touch() {
    assert_eq!(
        cmd(b"delete k\r\n"),
        Command::Delete {
            key: k("k"),
            noreply: false
        }
    );
    assert_eq!(
        cmd(b"delete k 0\r\n"),
        Command::Delete {
            key: k("k"),
            noreply: false
        }
    );
    assert_eq!(
        cmd(b"delete k noreply\r\n"),
        Command::Delete {
            key: k("k"),
            noreply: true
        }
    );
    assert_eq!(
        cmd(b"delete k 0 noreply\r\n"),
        Command::Delete {
            key: k("k"),
            noreply: true
        }
    );
    assert_eq!(
        reply(b"delete k 5\r\n"),
        b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
    );
    assert_eq!(reply(b"delete\r\n"), b"ERROR\r\n");
    assert_eq!(
        cmd(b"incr n 5\r\n"),
        Command::Arith {
            key: k("n"),
            incr: true,
            delta: 5,
            noreply: false
        }
    );
    assert_eq!(
        cmd(b"decr n 18446744073709551615 noreply\r\n"),
        Command::Arith {
            key: k("n"),
            incr: false,
            delta: u64::MAX,
            noreply: true
        }
    );
    assert_eq!(
        reply(b"incr n -1\r\n"),
        b"CLIENT_ERROR invalid numeric delta argument\r\n"
    );
    assert_eq!(
        reply(b"incr n 18446744073709551616\r\n"),
        b"CLIENT_ERROR invalid numeric delta argument\r\n"
    );
    assert_eq!(reply(b"incr n\r\n"), b"ERROR\r\n");
    assert_eq!(
        cmd(b"touch k 10\r\n"),
        Command::Touch {
            key: k("k"),
            exptime: 10,
            noreply: false
        }
    );
    assert_eq!(
        reply(b"touch k ten\r\n"),
        b"CLIENT_ERROR invalid exptime argument\r\n"
    );
}

#[test]
fn keyless_commands() {
    assert_eq!(
        cmd(b"flush_all\r\n"),
        Command::FlushAll {
            delay: 0,
            noreply: false
        }
    );
    assert_eq!(
        cmd(b"flush_all 30\r\n"),
        Command::FlushAll {
            delay: 30,
            noreply: false
        }
    );
    assert_eq!(
        cmd(b"flush_all noreply\r\n"),
        Command::FlushAll {
            delay: 0,
            noreply: true
        }
    );
    assert_eq!(
        cmd(b"flush_all 5 noreply\r\n"),
        Command::FlushAll {
            delay: 5,
            noreply: true
        }
    );
    assert_eq!(
        reply(b"flush_all soon\r\n"),
        b"CLIENT_ERROR invalid exptime argument\r\n"
    );
    assert_eq!(cmd(b"version\r\n"), Command::Version);
    assert_eq!(cmd(b"quit\r\n"), Command::Quit);
    assert_eq!(cmd(b"stats\r\n"), Command::Stats { group: None });
    assert_eq!(
        cmd(b"stats settings\r\n"),
        Command::Stats {
            group: Some(k("settings"))
        }
    );
    assert_eq!(
        cmd(b"verbosity 1\r\n"),
        Command::Verbosity { noreply: false }
    );
    assert_eq!(
        cmd(b"verbosity 1 noreply\r\n"),
        Command::Verbosity { noreply: true }
    );
    assert_eq!(reply(b"verbosity\r\n"), b"ERROR\r\n");
    assert_eq!(reply(b"bogus\r\n"), b"ERROR\r\n");
    assert_eq!(reply(b"\r\n"), b"ERROR\r\n");
}

#[test]
fn fatal_input_closes() {
    assert_eq!(
        one(&[0x80, 0x00, 0x00, 0x05]).1,
        Step::Close(CloseReason::Garbage)
    );
    assert_eq!(one(b"get a\x00b\r\n").1, Step::Close(CloseReason::Garbage));
    assert_eq!(
        one(b"ge\x01").1,
        Step::Close(CloseReason::Garbage),
        "garbage is caught before the newline"
    );
    let max = Limits::default().max_line;
    assert_eq!(max, 16 << 10);
    let long = vec![b'a'; max + 1];
    assert_eq!(one(&long).1, Step::Close(CloseReason::LineTooLong));
    assert_eq!(one(&long[..max]).1, Step::NeedMore);
    // A complete line of 3,000 bytes is answered (memcached: `ERROR`, connection kept).
    let mut complete = vec![b'a'; 3000];
    complete.extend_from_slice(b"\r\nversion\r\n");
    assert_eq!(one(&complete), (3002, Step::Reply(b"ERROR\r\n")));
    // Multi-key retrievals may be longer.
    let mut multi = b"get".to_vec();
    for i in 0..500 {
        multi.extend_from_slice(format!(" key{i}").as_bytes());
    }
    assert_eq!(p().parse(&multi).1, Step::NeedMore);
    multi.extend_from_slice(b"\r\n");
    assert!(matches!(cmd(&multi), Command::Get { keys, .. } if keys.len() == 500));
}

#[test]
fn numbers_are_strict() {
    assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse_u64(b"18446744073709551616"), None);
    // `strtoull` takes a leading `+`, so memcached does.
    assert_eq!(parse_u64(b"+1"), Some(1));
    assert_eq!(parse_u64(b"++1"), None);
    assert_eq!(parse_u64(b"-1"), None);
    assert_eq!(parse_i64(b"+5"), Some(5));
    assert_eq!(parse_i64(b"-+5"), None);
    assert_eq!(parse_u64(b""), None);
    assert_eq!(parse_i64(b"-2147483648"), Some(-2147483648));
    assert_eq!(parse_i64(b"2147483648"), None);
    assert_eq!(parse_i64(b"-"), None);
}

/// memcached reads `noreply` from the last token before validating a line, so the
/// CLIENT_ERROR of a malformed line ending in `noreply` is never sent (checked against
/// memcached 1.6.18; its t/issue_3.t relies on `delete k 10 noreply` answering nothing).
/// A wrong token count is still `ERROR`.
#[test]
fn noreply_silences_client_errors_of_malformed_lines() {
    for line in [
        &b"delete k 10 noreply\r\n"[..],
        b"incr k abc noreply\r\n",
        b"touch k abc noreply\r\n",
        b"flush_all soon noreply\r\n",
        b"set k x 0 1 noreply\r\n",
        b"verbosity x noreply\r\n",
    ] {
        assert_eq!(one(line), (line.len(), Step::Skip), "{line:?}");
    }
    let long = format!("set {} 0 0 1 noreply\r\n", "k".repeat(251));
    assert_eq!(one(long.as_bytes()), (long.len(), Step::Skip));
    assert_eq!(reply(b"delete k 10 20 noreply\r\n"), b"ERROR\r\n");
    // Without noreply the errors stay.
    assert_eq!(
        reply(b"delete k 10\r\n"),
        b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
    );
    assert_eq!(
        reply(b"verbosity -1\r\n"),
        b"CLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(
        cmd(b"verbosity 1\r\n"),
        Command::Verbosity { noreply: false }
    );
    // A negative flush_all delay is "now", as in memcached.
    assert_eq!(
        cmd(b"flush_all -1\r\n"),
        Command::FlushAll {
            delay: 0,
            noreply: false
        }
    );
}

/// memcached closes, without a reply, a connection whose unknown command ends in an
/// `HTTP/` token (t/malicious-commands.t); other unknown commands are `ERROR`.
#[test]
fn http_request_lines_close_silently() {
    for line in [
        &b"GET / HTTP/1.0\r\n"[..],
        b"PUT /asdf/asd/fasdfasdf/sadf HTTP/1.1\r\n",
        b"DELETE HTTP/1.1\r\n",
    ] {
        assert_eq!(one(line), (0, Step::Close(CloseReason::Http)), "{line:?}");
    }
    assert_eq!(CloseReason::Http.message(), b"");
    assert_eq!(reply(b"GET / HTTP\r\n"), b"ERROR\r\n");
}

/// `stats` groups of several words reach the server whole, so it can answer them rather
/// than leave a client waiting for an `END` (memcached's t/stats.t asks for
/// `stats cachedump 1 100`, t/stats-detail.t for `stats detail dump`).
#[test]
fn multi_word_stats_groups_are_kept() {
    assert_eq!(
        cmd(b"stats cachedump 1  100\r\n"),
        Command::Stats {
            group: Some(k("cachedump 1 100"))
        }
    );
    assert_eq!(
        cmd(b"stats detail dump\r\n"),
        Command::Stats {
            group: Some(k("detail dump"))
        }
    );
}

/// The word-at-a-time control-byte check answers as the byte loop it replaced, for
/// every byte value at every position of lines of every length to 40 (both the
/// eight-byte words and the tail), and for random lines mixing ASCII, high bytes and
/// the bytes on either side of both bounds (0x1f/0x20, 0x7e/0x7f/0x80).
#[test]
fn the_control_byte_check_matches_the_byte_definition() {
    use rand::{Rng, SeedableRng};
    let naive = |b: &[u8]| b.iter().any(|&c| c < 0x20 || c == 0x7f);
    for len in 1..=40 {
        for pos in 0..len {
            for v in 0..=255u8 {
                let mut line = vec![b'a'; len];
                line[pos] = v;
                assert_eq!(
                    has_control(&line),
                    naive(&line),
                    "byte {v:#x} at {pos} of {len}"
                );
            }
        }
    }
    let edges = [
        0x00, 0x1f, 0x20, 0x21, 0x7e, 0x7f, 0x80, 0x9f, 0xa0, 0xff, b' ', b'k',
    ];
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut found = 0;
    for _ in 0..20_000 {
        let len = rng.gen_range(0..48);
        let line: Vec<u8> = (0..len)
            .map(|_| {
                if rng.gen_bool(0.9) {
                    rng.gen_range(0x20..0x7f)
                } else {
                    edges[rng.gen_range(0..edges.len())]
                }
            })
            .collect();
        let want = naive(&line);
        found += usize::from(want);
        assert_eq!(has_control(&line), want, "{line:?}");
    }
    assert!(
        found > 1000,
        "the random lines exercise both answers ({found} with a control byte)"
    );
}

/// Tokens are the pieces between spaces, runs of spaces and leading or trailing ones
/// giving no empty token, as `split(' ')` with the empty pieces left out.
#[test]
fn tokens_are_the_non_empty_pieces_between_spaces() {
    for line in [
        &b""[..],
        b" ",
        b"get",
        b"get k",
        b"  get   k1 k2  ",
        b"set k 0 0 5 noreply",
        b" a  b   c    d ",
        b"\xffkey \x80x",
    ] {
        let want: Vec<&[u8]> = line
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(tokens_of(line).collect::<Vec<_>>(), want, "{line:?}");
    }
}
