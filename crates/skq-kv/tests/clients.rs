//! Real memcached clients against both architectures: the libmemcached tools (Debian names
//! them memccp, memccat, ...) and pymemcache, plus a differential check of reply wording
//! against memcached itself. These tests FAIL when the tools are missing: CI runs
//! `scripts/setup.sh` first, which installs them (scripts/setup.d/20-kv.sh).

mod common;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{config, start, Client};
use skq_kv::protocol::Limits;
use skq_kv::server::{Arch, KvMode, ServerConfig};

/// Finds a libmemcached tool under its upstream name or Debian's `memc*` name.
fn tool(name: &str) -> String {
    let debian = format!("memc{}", &name[3..]);
    for cand in [name.to_string(), debian] {
        let found = Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {cand}"))
            .output()
            .is_ok_and(|o| o.status.success());
        if found {
            return cand;
        }
    }
    panic!(
        "{name} (package libmemcached-tools) is not installed: run `bash scripts/setup.sh` first"
    );
}

/// Runs a command with a time limit (coreutils `timeout`), returning (status ok, stdout, stderr).
fn run(cmd: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("timeout")
        .arg("60")
        .arg(cmd)
        .args(args)
        .output()
        .expect("spawn timeout(1)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn each_arch(f: impl Fn(Arch, SocketAddr)) {
    for arch in [Arch::Shared, Arch::Tpc] {
        let srv = start(arch, 2);
        f(arch, srv.addr);
        srv.stop();
    }
}

#[test]
fn libmemcached_tools() {
    let (cp, cat, rm, stat, slap) = (
        tool("memcp"),
        tool("memcat"),
        tool("memrm"),
        tool("memstat"),
        tool("memslap"),
    );
    each_arch(|arch, addr| {
        let servers = format!("--servers={addr}");
        let dir = std::env::temp_dir().join(format!(
            "skq-kv-tools-{}-{}",
            std::process::id(),
            arch.name()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("greeting.txt");
        std::fs::write(&file, "hello from memcp\n").unwrap();
        let (ok, _, err) = run(&cp, &[&servers, file.to_str().unwrap()]);
        assert!(ok, "{arch:?}: memcp failed: {err}");
        let (ok, out, err) = run(&cat, &[&servers, "greeting.txt"]);
        assert!(
            ok && out.trim_end() == "hello from memcp",
            "{arch:?}: memcat got {out:?} ({err})"
        );
        let (ok, _, err) = run(&rm, &[&servers, "greeting.txt"]);
        assert!(ok, "{arch:?}: memrm failed: {err}");
        let (ok, _, _) = run(&cat, &[&servers, "greeting.txt"]);
        assert!(!ok, "{arch:?}: memcat must fail after memrm");
        let (ok, out, err) = run(&stat, &[&servers]);
        assert!(
            ok && out.contains("curr_connections") && out.contains("pid"),
            "{arch:?}: memstat: {out} {err}"
        );
        for test in ["set", "get", "mget"] {
            let (ok, out, err) = run(
                &slap,
                &[
                    &servers,
                    "--concurrency=2",
                    "--execute-number=300",
                    &format!("--test={test}"),
                ],
            );
            assert!(ok, "{arch:?}: memslap --test={test} failed: {out} {err}");
            assert!(
                !out.contains("fail") && !err.contains("fail"),
                "{arch:?}: memslap --test={test}: {out} {err}"
            );
        }
        let mut c = Client::connect(addr);
        assert!(c.stat("cmd_set") >= 600, "{arch:?}: memslap's sets arrived");
        assert!(c.stat("get_hits") >= 600, "{arch:?}: memslap's gets hit");
        let _ = std::fs::remove_dir_all(&dir);
    });
}

const PYMEMCACHE_SCRIPT: &str = r#"
import sys
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheServerError
c = Client(("127.0.0.1", int(sys.argv[1])), default_noreply=False, connect_timeout=10, timeout=20)
assert c.set("a", b"1", expire=100, flags=7)
assert c.get("a") == b"1"
assert c.get_many(["a", "nope", "b"]) == {"a": b"1"}
assert c.add("a", b"2") is False
assert c.replace("a", b"3") is True
assert c.append("a", b"4") and c.prepend("a", b"0")
assert c.get("a") == b"034"
v, cas = c.gets("a")
assert v == b"034"
assert c.cas("a", b"new", int(cas) + 1000) is False
assert c.cas("a", b"new", cas) is True
"#;

const PYMEMCACHE_SCRIPT_2: &str = r#"
assert c.set("n", b"41")
assert c.incr("n", 1) == 42
assert c.decr("n", 100) == 0
assert c.incr("missing", 1) is None
assert c.touch("n", 100) is True
assert c.touch("missing", 100) is False
assert c.get("n") == b"0 "  # memcached keeps the length, space-padded; pymemcache 4 has no gat; gat is covered by replies_match_memcached
assert c.delete("n") is True
assert c.delete("n") is False
assert c.set_many({"k%d" % i: b"v%d" % i for i in range(100)}) == []
assert c.get_many(["k%d" % i for i in range(100)]) == {"k%d" % i: b"v%d" % i for i in range(100)}
try:
    c.set("big", b"x" * (2 << 20))
    raise SystemExit("too-large value accepted")
except MemcacheServerError as e:
    assert b"object too large" in str(e).encode(), e
assert c.get("a") == b"new"
st = c.stats()
assert st[b"curr_items"] >= 101, st
assert c.version().startswith(b"1.6")
assert c.flush_all() is True
assert c.get("a") is None
c.quit()
print("pymemcache ok")
"#;

#[test]
fn pymemcache_client() {
    let probe = Command::new("python3")
        .args(["-c", "import pymemcache"])
        .output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "python3 with pymemcache is not installed: run `bash scripts/setup.sh` first"
    );
    let script = format!("{PYMEMCACHE_SCRIPT}\n{PYMEMCACHE_SCRIPT_2}");
    each_arch(|arch, addr| {
        let port = addr.port().to_string();
        let (ok, out, err) = run("python3", &["-c", &script, &port]);
        assert!(
            ok && out.contains("pymemcache ok"),
            "{arch:?}: pymemcache script failed:\n{out}\n{err}"
        );
    });
}

/// A free loopback port for memcached.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Memcached(Child);

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// memcached 1.6 on `port` with extra arguments (e.g. `-I 512k`).
fn memcached_with(port: u16, extra: &[&str]) -> Memcached {
    let child = Command::new("memcached")
        .args([
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-l",
            "127.0.0.1",
            "-t",
            "2",
            "-m",
            "64",
        ])
        .args(extra)
        .arg("-u")
        .arg("root")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("memcached is not installed ({e}): run `bash scripts/setup.sh` first")
        });
    let m = Memcached(child);
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return m;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("memcached did not start on port {port}");
}

/// The same byte script sent to memcached 1.6 and to both architectures must get the same
/// replies (the script avoids values that legitimately differ: CAS uniques, versions).
/// A storage line and a get with a 251-byte key (one over memcached's limit).
const LONG_SET: &[u8] = concat!("set ", include_str!("long_key.txt"), " 0 0 1\r\nz\r\n").as_bytes();
const LONG_GET: &[u8] = concat!("get ", include_str!("long_key.txt"), "\r\n").as_bytes();

#[test]
fn replies_match_memcached() {
    assert_eq!(include_str!("long_key.txt").len(), 251);
    let classic: &[&[u8]] = &[
        b"set a 5 0 3\r\nabc\r\n",
        b"get a b\r\n",
        b"add a 0 0 1\r\nx\r\n",
        b"replace zz 0 0 1\r\nx\r\n",
        b"append a 0 0 2\r\nde\r\n",
        b"prepend zz 0 0 2\r\nde\r\n",
        b"cas zz 0 0 1 5\r\nx\r\n",
        b"incr a 1\r\n",
        b"set n 0 0 20\r\n18446744073709551615\r\n",
        b"incr n 2\r\n",
        b"decr n 10\r\n",
        b"incr n -1\r\n",
        b"incr nope 1\r\n",
        b"touch a 100\r\n",
        b"touch nope 100\r\n",
        b"gat 0 a nope\r\n",
        b"gat x a\r\n",
        b"delete a 5\r\n",
        b"delete a noreply\r\n",
        b"delete a\r\n",
        b"set k 0 0 x\r\n",
        b"set k 0 0\r\n",
        b"set k abc 0 1\r\nz\r\n",
        LONG_SET,
        LONG_GET,
        b"cas k 0 0 1 abc\r\nz\r\n",
        b"touch k x\r\n",
        b"flush_all x\r\n",
        b"stats bogus\r\n",
        b"set k 0 0 1 noreply\r\nz\r\n",
        b"get k\r\n",
        b"bogus command\r\n",
        b"\r\n",
        b"get\r\n",
        b"verbosity 1\r\n",
        b"set e 0 -1 1\r\nx\r\n",
        b"get e\r\n",
        b"flush_all noreply\r\n",
        b"get n\r\n",
        b"flush_all\r\n",
        b"set q 0 0 1 noreply\r\nz\r\n",
        b"get q\r\n",
    ];
    let steps: Vec<Vec<u8>> = classic.iter().map(|s| s.to_vec()).collect();
    differential(&steps, &[], Limits::default());
}

/// Sends `steps` one at a time to a fresh memcached 1.6 (started with `mc_args`) and to both
/// architectures (configured with `limits`), and asserts byte-identical replies.
fn differential(steps: &[Vec<u8>], mc_args: &[&str], limits: Limits) {
    let mc_port = free_port();
    let _mc = memcached_with(mc_port, mc_args);
    let mut reference = Vec::new();
    let mut c = Client::connect(SocketAddr::from(([127, 0, 0, 1], mc_port)));
    for s in steps {
        reference.push(exchange(&mut c, s));
    }
    for (arch, strict) in [(Arch::Shared, false), (Arch::Tpc, false), (Arch::Tpc, true)] {
        let mut cfg = ServerConfig {
            limits,
            ..config(arch, 2)
        };
        if strict {
            cfg.mode = KvMode::TpcStrict;
        }
        let srv = skq_kv::server::start(cfg).expect("server starts");
        let mut c = Client::connect(srv.addr);
        for (s, want) in steps.iter().zip(&reference) {
            let got = exchange(&mut c, s);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(want),
                "{arch:?} (strict {strict}): reply to {:?} differs from memcached's",
                String::from_utf8_lossy(&s[..s.len().min(120)])
            );
        }
        srv.stop();
    }
}

/// Sends one step followed by a `version` marker and returns everything before the marker's
/// reply (so steps with no reply, like noreply, are handled without timing).
fn exchange(c: &mut Client, step: &[u8]) -> Vec<u8> {
    let mut req = step.to_vec();
    req.extend_from_slice(b"mn\r\nversion\r\n");
    c.send(&req);
    let all = c.read_until(b"\r\n");
    let mut all = all;
    while !String::from_utf8_lossy(&all).contains("VERSION ") {
        all.extend(c.read_until(b"\r\n"));
    }
    let text = String::from_utf8_lossy(&all).into_owned();
    let cut = text.find("VERSION ").unwrap();
    // Drop the reply to the `mn` marker; a step must not swallow it.
    let before = text[..cut]
        .strip_suffix("MN\r\n")
        .unwrap_or_else(|| panic!("no MN before VERSION in {text:?}"));
    before.as_bytes().to_vec()
}

/// Meta commands (mg, ms, md, mn) against memcached 1.6.18, byte for byte: every flag with a
/// deterministic reply (no CAS values, which number differently; TTLs only within one
/// command), quiet mode, modes, compare values, base64 keys, and every error.
#[test]
fn meta_replies_match_memcached() {
    let opaque33 = format!("O{}", "x".repeat(32));
    let long_key = "k".repeat(251);
    let lines: Vec<String> = vec![
        "mn\r\n".into(),
        "mn extra\r\n".into(),
        "ms m1 3\r\nabc\r\n".into(),
        "mg m1\r\n".into(),
        "mg m1 v\r\n".into(),
        "ms m1 3 F5 T0 k Oab\r\nxyz\r\n".into(),
        "mg m1 v k f s t Oq1\r\n".into(),
        "mg m1 s v T100 t\r\n".into(),
        "mg m1 T0 t k\r\n".into(),
        "mg m1 q k\r\n".into(),
        "mg m1 v q\r\n".into(),
        "mg m1 u P L J1 D2 F9 C9 MS\r\n".into(),
        "mg  m1  k   s\r\n".into(),
        "mg miss\r\n".into(),
        "mg miss v Oo k\r\n".into(),
        "mg miss v q\r\n".into(),
        "mg miss v q Oo\r\nmg m1 v q\r\nmg miss k q\r\n".into(),
        "mg m1 x\r\n".into(),
        "mg m1 v v\r\n".into(),
        "mg m1 Tx x\r\n".into(),
        "mg m1 Tx v v\r\n".into(),
        "mg m1 T\r\n".into(),
        "mg m1 Fx\r\n".into(),
        "mg m1 Mxx\r\n".into(),
        "mg m1 Mxx Cx\r\n".into(),
        "mg m1 Cx Mxx\r\n".into(),
        "mg m1 Jx Dx\r\n".into(),
        "mg m1 Tx Fx\r\n".into(),
        "mg\r\n".into(),
        format!("mg m1 {opaque33}\r\n"),
        format!("mg miss {opaque33}\r\n"),
        format!("mg {long_key} v\r\n"),
        "ms m2 2 MA\r\nAA\r\n".into(),
        "ms m1 2 MA\r\nAA\r\n".into(),
        "ms m1 2 MP\r\nPP\r\n".into(),
        "mg m1 v f\r\n".into(),
        "ms m1 2 ME\r\nEE\r\n".into(),
        "ms m2 2 ME q\r\nEE\r\n".into(),
        "mg m2 v\r\n".into(),
        "ms m3 2 MR\r\nRR\r\n".into(),
        "ms m3 2 C1 MR q k\r\nRR\r\n".into(),
        "ms m1 1 C99999 c k Ox\r\nz\r\n".into(),
        "ms m1 1 C99999 MA\r\nz\r\n".into(),
        "ms m1 1 C99999 MP q\r\nz\r\n".into(),
        "ms m3 1 C99999 MA\r\nz\r\n".into(),
        "ms m3 1 C1 ME\r\nz\r\n".into(),
        "mg m3 v\r\n".into(),
        "ms m1 1 ME c\r\nz\r\n".into(),
        "ms m1 2 MS F4294967297 v t s f\r\nss\r\n".into(),
        "mg m1 v f\r\n".into(),
        "ms m1 2 Ms\r\nSS\r\n".into(),
        "ms m1 2 MX\r\nSS\r\n".into(),
        "ms m1 2 M\r\nSS\r\n".into(),
        "ms m1 2 MSS\r\nSS\r\n".into(),
        "ms m1 2 x\r\nSS\r\n".into(),
        "ms m1 2 c c\r\nSS\r\n".into(),
        "ms m1 2 Fx\r\nSS\r\n".into(),
        "ms m1 2 F-1\r\nSS\r\n".into(),
        "ms m1 2 Cx\r\nSS\r\n".into(),
        "ms m1 2 T\r\nSS\r\n".into(),
        "ms m1 2 MX Tx\r\nSS\r\n".into(),
        "ms m1 x\r\nSS\r\n".into(),
        "ms m1 -1\r\nSS\r\n".into(),
        "ms m1 S1 T0\r\nSS\r\n".into(),
        "ms m1\r\n".into(),
        "ms\r\n".into(),
        format!("ms m1 1 {opaque33}\r\nz\r\n"),
        format!("ms {long_key} 1\r\nz\r\n"),
        "ms m1 01\r\nz\r\n".into(),
        "mg m1 v\r\n".into(),
        "ms m4 1 T-1\r\nz\r\n".into(),
        "mg m4 v\r\n".into(),
        "ms m5 2 q\r\nhi\r\n".into(),
        "mg m5 v\r\n".into(),
        "ms YWJj 2 b k\r\nhi\r\n".into(),
        "mg YWJj b v k\r\n".into(),
        "mg YWJjZA== b v k\r\n".into(),
        "mg YWJ b v\r\n".into(),
        "mg YWJjZA b\r\n".into(),
        "mg !!!! b\r\n".into(),
        "md YWJj b k q\r\n".into(),
        "md YWJj b k\r\n".into(),
        "md m9\r\n".into(),
        "md m9 q\r\n".into(),
        "md m9 q Oz k\r\n".into(),
        "md m5 C99999\r\n".into(),
        "md m5 C99999 q\r\n".into(),
        "md m5 k Oz\r\n".into(),
        "md m5 x\r\n".into(),
        "md m5 q q\r\n".into(),
        "md m5 Cx\r\n".into(),
        format!("md m5 {opaque33}\r\n"),
        format!("md {long_key}\r\n"),
        "md\r\n".into(),
        "ms m6 1\r\nz\r\n".into(),
        "md m6 q\r\n".into(),
        "md m6 v T10 c f s t\r\n".into(),
        "set m7 0 0 1\r\nz\r\n".into(),
        "md m7 q\r\nmg m7 v\r\nms m7 1 q\r\ny\r\nmg m7 v q\r\nmn\r\n".into(),
        "mg a \u{80}\r\n".into(),
    ];
    let steps: Vec<Vec<u8>> = lines.into_iter().map(String::into_bytes).collect();
    differential(&steps, &[], Limits::default());
}

fn set_line(cmd: &str, key: &str, flags: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{cmd} {key} {flags} 0 {len}\r\n").into_bytes();
    v.extend(std::iter::repeat_n(b'v', len));
    v.extend_from_slice(b"\r\n");
    v
}

fn ms_line(key: &str, flags: u32, len: usize, extra: &str) -> Vec<u8> {
    let mut v = format!("ms {key} {len} F{flags}{extra}\r\n").into_bytes();
    v.extend(std::iter::repeat_n(b'v', len));
    v.extend_from_slice(b"\r\n");
    v
}

/// The item size limit counts the whole item like memcached (header, CAS, key, flags,
/// value): the largest accepted value and the first refused one, for short and 250-byte
/// keys, zero and non-zero flags, set and ms; a refused set/ms unlinks the old item,
/// refused add/append keep it; an append growing an item past the limit is NOT_STORED.
/// Checked at the default `-I 1m` and at `-I 512k`.
#[test]
fn item_size_limit_matches_memcached() {
    for (max, mc_arg) in [(1usize << 20, "1m"), (512 << 10, "512k")] {
        let mut steps: Vec<Vec<u8>> = Vec::new();
        for (key, flags) in [("k", 0), ("k", 7), (&*"K".repeat(250), 0), ("kk", 1)] {
            let fixed = skq_kv::protocol::item_size(key.len(), flags, 0);
            let largest = max - fixed;
            steps.push(set_line("set", key, flags, largest));
            steps.push(set_line("set", key, flags, largest + 1));
            steps.push(format!("get {key}\r\n").into_bytes());
            steps.push(ms_line(key, flags, largest, ""));
            steps.push(ms_line(key, flags, largest + 1, " q"));
            steps.push(format!("mg {key} s\r\n").into_bytes());
        }
        let largest = max - skq_kv::protocol::item_size(1, 0, 0);
        steps.push(set_line("set", "a", 0, 1));
        steps.push(set_line("add", "a", 0, largest + 1));
        steps.push(set_line("append", "a", 0, largest + 1));
        steps.push(b"mg a s\r\n".to_vec());
        steps.push(set_line("append", "a", 0, largest - 1));
        steps.push(set_line("append", "a", 0, 1));
        steps.push(b"mg a s\r\n".to_vec());
        steps.push(set_line("set", "a", 0, largest + 1).into_iter().collect());
        steps.push(b"mg a s\r\n".to_vec());
        steps.push(set_line("set", "b", 0, 1));
        let mut noreply = format!("set b 0 0 {} noreply\r\n", largest + 1).into_bytes();
        noreply.extend(std::iter::repeat_n(b'v', largest + 1));
        noreply.extend_from_slice(b"\r\n");
        steps.push(noreply);
        steps.push(b"mg b s\r\n".to_vec());
        let limits = Limits {
            max_item_size: max,
            ..Limits::default()
        };
        differential(&steps, &["-I", mc_arg], limits);
    }
}

/// Issue 26's differences that now match memcached 1.6.18 byte for byte: `shutdown`, a
/// leading `+` in numbers (lengths, flags, exptimes, `incr` deltas), flags above 2^32-1
/// (truncated to their low 32 bits), and `incr`/`decr` results shorter than the value
/// (kept at the value's length, space-padded).
#[test]
fn issue_26_answers_match_memcached() {
    let steps: Vec<Vec<u8>> = [
        "shutdown\r\n",
        "shutdown graceful\r\n",
        "set p 0 0 +2\r\nhi\r\n",
        "get p\r\n",
        "set p +7 +0 2\r\nhi\r\n",
        "get p\r\n",
        "set f 4294967297 0 1\r\nx\r\n",
        "get f\r\n",
        "set f 4294967296 0 1\r\nx\r\n",
        "get f\r\n",
        "set f 18446744073709551615 0 1\r\nx\r\n",
        "get f\r\n",
        "set f 18446744073709551616 0 1\r\nx\r\n",
        "set n 0 0 2\r\n10\r\n",
        "decr n 1\r\n",
        "get n\r\n",
        "incr n +3\r\n",
        "get n\r\n",
        "incr n 88\r\n",
        "get n\r\n",
        "set n 0 0 5\r\n99999\r\n",
        "incr n 1\r\n",
        "get n\r\n",
        "decr n 99990\r\n",
        "get n\r\n",
        "incr n -1\r\n",
        "touch n +10\r\n",
        "set m 0 -+1 1\r\nx\r\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .chain([
        // A 3,000-byte line is an unknown command, the connection kept.
        [vec![b'x'; 3000], b"\r\n".to_vec()].concat(),
        [b"get ".to_vec(), vec![b'k'; 3000], b"\r\n".to_vec()].concat(),
        [b"delete ".to_vec(), vec![b'k'; 3000], b"\r\n".to_vec()].concat(),
    ])
    .collect();
    differential(&steps, &[], Limits::default());
}

/// One random, valid-looking command of a differential fuzz case: keys from a small set
/// under the case's own prefix (so every case starts from an empty store on both
/// servers), values and numbers that make counters, appends and misses meet.
///
/// Left out, as expected differences (docs/MEMCACHED-SUITE.md): CAS values (`gets`,
/// `cas`, `mg c`, `ms c`, which number differently), TTL readouts (`mg t`, seconds tick
/// differently), `me`, the meta `I` flag, control bytes in keys, lines over 2,048 bytes,
/// `stats`, `version`, and commands on every key (`flush_all`).
fn fuzz_command(rng: &mut impl rand::Rng, case: usize) -> Vec<u8> {
    let key = format!("c{case}k{}", rng.gen_range(0..4));
    let nums = [
        "0",
        "1",
        "7",
        "10",
        "99",
        "+3",
        "18446744073709551615",
        "-1",
        "x",
    ];
    let num = nums[rng.gen_range(0..nums.len())];
    let vals = ["1", "10", "999", "abc", "", " 5", "18446744073709551615"];
    let val = vals[rng.gen_range(0..vals.len())];
    let flags = ["0", "1", "4294967295", "4294967297"][rng.gen_range(0..4)];
    let nr = if rng.gen_range(0..6) == 0 {
        " noreply"
    } else {
        ""
    };
    let s = match rng.gen_range(0..16) {
        0..=1 => format!("set {key} {flags} 0 {}{nr}\r\n{val}\r\n", val.len()),
        2 => format!("add {key} {flags} 0 {}{nr}\r\n{val}\r\n", val.len()),
        3 => format!("replace {key} {flags} 0 {}{nr}\r\n{val}\r\n", val.len()),
        4 => format!("append {key} 0 0 {}{nr}\r\n{val}\r\n", val.len()),
        5 => format!("prepend {key} 0 0 {}{nr}\r\n{val}\r\n", val.len()),
        6..=7 => {
            let n = rng.gen_range(1..5);
            let keys: Vec<String> = (0..n)
                .map(|_| format!("c{case}k{}", rng.gen_range(0..4)))
                .collect();
            format!("get {}\r\n", keys.join(" "))
        }
        8 => format!("delete {key}{nr}\r\n"),
        9 => format!("incr {key} {num}{nr}\r\n"),
        10 => format!("decr {key} {num}{nr}\r\n"),
        11 => format!("touch {key} 0{nr}\r\n"),
        12 => {
            let fl = [
                "v", "s", "f", "k", "q", "Oab", "v s f", "v k Ox", "q v", "v v",
            ];
            format!("mg {key} {}\r\n", fl[rng.gen_range(0..fl.len())])
        }
        13 => {
            let fl = ["", "q", "F5", "MA", "MP", "ME", "MR", "Oz k", "q q", "T0"];
            format!(
                "ms {key} {} {}\r\n{val}\r\n",
                val.len(),
                fl[rng.gen_range(0..fl.len())]
            )
        }
        14 => {
            let fl = ["", "q", "k", "Oq", "q q", "x"];
            format!("md {key} {}\r\n", fl[rng.gen_range(0..fl.len())])
        }
        _ => {
            let fl = ["", "v", "MI D5", "MD D2 v", "N0 J7 v", "q", "Md", "D+1 v"];
            format!("ma {key} {}\r\n", fl[rng.gen_range(0..fl.len())])
        }
    };
    s.into_bytes()
}

/// Differential fuzz (issue 26): random valid-looking command streams, replies compared
/// one by one with memcached 1.6.18's, on both architectures. 400 cases of 12 commands,
/// seeded (a failure names its case and command); each case uses keys of its own.
#[test]
fn differential_fuzz_against_memcached() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(26);
    let mut steps = Vec::new();
    for case in 0..400 {
        for _ in 0..12 {
            steps.push(fuzz_command(&mut rng, case));
        }
    }
    differential(&steps, &[], Limits::default());
}
