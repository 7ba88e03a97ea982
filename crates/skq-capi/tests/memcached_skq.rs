//! memcached 1.6.18 patched onto libskq (patches/memcached-1.6.18-skq.patch,
//! built by scripts/build-memcached-skq.sh against the libskq of this test
//! run) under real clients, in the cpu and hybrid policies: the libmemcached
//! tools (memccp, memccat, memcrm, memcstat, memcslap) and pymemcache,
//! including concurrent connections with values large enough to need partial
//! writes. These tests FAIL when the source package, the compiler, libevent
//! or the clients are missing: `bash scripts/setup.sh` installs them
//! (scripts/setup.d/20-kv.sh and 40-capi.sh).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the patched memcached once per test binary.
fn memcached_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let deps = exe.parent().unwrap();
        let lib = [deps, deps.parent().unwrap()]
            .iter()
            .map(|d| d.join("libskq_capi.a"))
            .find(|p| p.exists())
            .expect("libskq_capi.a built by this test run");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("memcached-skq");
        let r = Command::new("bash")
            .arg(root().join("scripts/build-memcached-skq.sh"))
            .env("SKQ_CAPI_LIB", &lib)
            .env("SKQ_MEMCACHED_OUT", &out)
            .output()
            .expect("bash");
        assert!(
            r.status.success(),
            "building memcached-on-skq failed (run `bash scripts/setup.sh` if a package is \
             missing):\n{}{}",
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
        out.join("memcached")
    })
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(policy: &str, threads: u32) -> Server {
    start_with(policy, threads, &[])
}

/// A loopback port free now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether something accepts on `port` within 5 s.
fn serving(port: u16) -> bool {
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}

fn start_with(policy: &str, threads: u32, env: &[(&str, &str)]) -> Server {
    let port = free_port();
    let mut child = Command::new(memcached_bin())
        .args(["-u", "root", "-U", "0", "-l", "127.0.0.1", "-m", "256"])
        .args(["-p", &port.to_string(), "-t", &threads.to_string()])
        .env("MEMCACHED_SKQ", policy)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    if serving(port) {
        return Server { child, port };
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("memcached-on-skq ({policy}) did not start on port {port}");
}

/// A libmemcached tool under its upstream or Debian (`memc*`) name.
fn tool(name: &str) -> String {
    let debian = format!("memc{}", &name[3..]);
    [name.to_string(), debian]
        .into_iter()
        .find(|c| {
            Command::new("sh")
                .args(["-c", &format!("command -v {c}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} (libmemcached-tools) is not installed: run `bash scripts/setup.sh` first"
            )
        })
}

fn run(cmd: &str, args: &[&str]) -> (bool, String) {
    let o = Command::new("timeout")
        .arg("60")
        .arg(cmd)
        .args(args)
        .output()
        .expect("timeout(1)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.success(), text)
}

fn tools_against(policy: &str) {
    let srv = start(policy, 4);
    let servers = format!("--servers=127.0.0.1:{}", srv.port);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("mc-tools-{policy}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("note.txt");
    std::fs::write(&file, "stored by memcp on skq\n").unwrap();
    let (ok, out) = run(&tool("memcp"), &[&servers, file.to_str().unwrap()]);
    assert!(ok, "{policy}: memcp: {out}");
    let (ok, out) = run(&tool("memcat"), &[&servers, "note.txt"]);
    assert!(
        ok && out.trim_end() == "stored by memcp on skq",
        "{policy}: memcat: {out:?}"
    );
    let (ok, out) = run(&tool("memrm"), &[&servers, "note.txt"]);
    assert!(ok, "{policy}: memrm: {out}");
    let (ok, _) = run(&tool("memcat"), &[&servers, "note.txt"]);
    assert!(!ok, "{policy}: memcat must fail after memrm");
    let (ok, out) = run(&tool("memstat"), &[&servers]);
    assert!(ok && out.contains("threads: 4"), "{policy}: memstat: {out}");
    for test in ["set", "get", "mget"] {
        let (ok, out) = run(
            &tool("memslap"),
            &[
                &servers,
                "--concurrency=4",
                "--execute-number=500",
                &format!("--test={test}"),
            ],
        );
        assert!(
            ok && !out.contains("fail"),
            "{policy}: memslap --test={test}: {out}"
        );
    }
    let (_, out) = run(&tool("memstat"), &[&servers]);
    let stat = |name: &str| -> u64 {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{policy}: no {name} in {out}"))
    };
    assert!(
        stat("cmd_set") >= 2000,
        "{policy}: memslap's sets arrived: {out}"
    );
    assert!(
        stat("get_hits") >= 2000,
        "{policy}: memslap's gets hit: {out}"
    );
}

const PY: &str = r#"
import sys, threading
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheServerError
port = int(sys.argv[1])
def client():
    return Client(("127.0.0.1", port), default_noreply=False, connect_timeout=10, timeout=30)
c = client()
assert c.set("a", b"1", expire=100, flags=3)
assert c.get("a") == b"1"
assert c.get_many(["a", "absent"]) == {"a": b"1"}
assert c.add("a", b"2") is False and c.replace("a", b"3") is True
assert c.append("a", b"4") and c.prepend("a", b"0")
assert c.get("a") == b"034"
v, cas = c.gets("a")
assert c.cas("a", b"x", int(cas) + 99) is False
assert c.cas("a", b"new", cas) is True
assert c.set("n", b"41") and c.incr("n", 1) == 42 and c.decr("n", 50) == 0
assert c.incr("absent", 1) is None
assert c.touch("n", 50) is True and c.touch("absent", 50) is False
assert c.delete("n") is True and c.delete("n") is False
try:
    c.set("huge", b"x" * (2 << 20))
    raise SystemExit("a value over the item size limit was accepted")
except MemcacheServerError as e:
    assert "too large" in str(e), e
# Concurrent connections, values up to 200 KB (replies need several writes),
# multi-gets of 100 keys: every connection reads back exactly what it wrote.
errors = []
def worker(t):
    try:
        cl = client()
        for i in range(150):
            key = "t%d-%d" % (t, i)
            val = bytes([65 + t]) * ((i * 1499) % 200000)
            assert cl.set(key, val), key
            assert cl.get(key) == val, key
        got = cl.get_many(["t%d-%d" % (t, i) for i in range(100)])
        assert len(got) == 100 and all(got["t%d-%d" % (t, i)] == bytes([65 + t]) * ((i * 1499) % 200000) for i in range(100))
        cl.quit()
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
assert not errors, errors
st = c.stats()
assert st[b"threads"] == 4, st
assert st[b"curr_items"] >= 8 * 150, st
assert c.version().startswith(b"1.6.18")
assert c.flush_all() is True and c.get("a") is None
print("pymemcache ok")
"#;

fn pymemcache_against(policy: &str) {
    let probe = Command::new("python3")
        .args(["-c", "import pymemcache"])
        .output();
    assert!(
        probe.is_ok_and(|o| o.status.success()),
        "python3 with pymemcache is not installed: run `bash scripts/setup.sh` first"
    );
    let srv = start(policy, 4);
    let (ok, out) = run("python3", &["-c", PY, &srv.port.to_string()]);
    assert!(ok && out.contains("pymemcache ok"), "{policy}: {out}");
}

#[test]
fn libmemcached_tools_cpu() {
    tools_against("cpu");
}

#[test]
fn libmemcached_tools_hybrid() {
    tools_against("hybrid");
}

#[test]
fn pymemcache_cpu() {
    pymemcache_against("cpu");
}

#[test]
fn pymemcache_hybrid() {
    pymemcache_against("hybrid");
}

/// An unknown policy is refused with a usage error, not ignored; so is
/// `shared`, whose one queue cannot keep each thread's notify eventfd PINNED.
#[test]
fn unknown_and_shared_policies_are_refused() {
    for policy in ["fastest", "shared"] {
        let o = Command::new(memcached_bin())
            .args(["-u", "root", "-U", "0", "-p", "0"])
            .env("MEMCACHED_SKQ", policy)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{policy} accepted");
        assert!(String::from_utf8_lossy(&o.stderr).contains("MEMCACHED_SKQ"));
    }
}

/// The CPUs each `mc-worker` thread of process `pid` may run on, as
/// /proc writes them (`Cpus_allowed_list`).
fn worker_cpus(pid: u32) -> Vec<String> {
    let mut lists = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != "mc-worker" {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap();
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list in /proc status");
        lists.push(list.trim().to_string());
    }
    lists.sort();
    lists
}

/// `MEMCACHED_SKQ_PIN=1` runs each worker thread on its skq worker's CPU:
/// one CPU each, spread over the CPUs there are, and the cache still serves
/// every command. Unset, the threads keep the process's CPUs.
#[test]
fn pinned_workers_run_on_one_cpu_each_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let srv = start_with("cpu", 4, &[("MEMCACHED_SKQ_PIN", "1")]);
    let (ok, out) = run("python3", &["-c", PY, &srv.port.to_string()]);
    assert!(ok && out.contains("pymemcache ok"), "pinned cpu: {out}");
    let mut pinned = worker_cpus(srv.child.id());
    assert_eq!(pinned.len(), 4, "four mc-worker threads: {pinned:?}");
    for list in &pinned {
        assert!(
            list.parse::<u32>().is_ok(),
            "a pinned worker may run on one CPU, not {list}"
        );
    }
    pinned.dedup();
    assert_eq!(pinned.len(), cpus.min(4), "workers not spread: {pinned:?}");
    if cpus >= 2 {
        let free = start("cpu", 4);
        let (ok, out) = run("python3", &["-c", PY, &free.port.to_string()]);
        assert!(ok, "unpinned cpu: {out}");
        for list in worker_cpus(free.child.id()) {
            assert!(list.parse::<u32>().is_err(), "unpinned worker on {list}");
        }
    }
}

/// `MEMCACHED_SKQ_PIN` other than 0 or 1 is refused with a usage error.
#[test]
fn a_bad_pin_setting_is_refused() {
    let o = Command::new(memcached_bin())
        .args(["-u", "root", "-U", "0", "-p", "0"])
        .env("MEMCACHED_SKQ", "cpu")
        .env("MEMCACHED_SKQ_PIN", "yes")
        .output()
        .unwrap();
    assert!(!o.status.success(), "MEMCACHED_SKQ_PIN=yes accepted");
    assert!(String::from_utf8_lossy(&o.stderr).contains("MEMCACHED_SKQ_PIN: 0 or 1"));
}

/// Epoll sets process `pid` holds open.
fn epoll_sets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.unwrap().path()).ok())
        .filter(|target| target.to_string_lossy() == "anon_inode:[eventpoll]")
        .count()
}

/// `MEMCACHED_SKQ_POLL_GROUPS=G` splits the workers into G epoll sets: with
/// one set per worker the process holds three more than with one, and the
/// cache serves every command either way. (One is asked for explicitly:
/// `cpu`'s own choice depends on how many CPUs the machine has.)
#[test]
fn poll_groups_give_each_worker_its_own_epoll_set_cpu() {
    let one = start_with("cpu", 4, &[("MEMCACHED_SKQ_POLL_GROUPS", "1")]);
    let (ok, out) = run("python3", &["-c", PY, &one.port.to_string()]);
    assert!(ok && out.contains("pymemcache ok"), "one set: {out}");
    let four = start_with("cpu", 4, &[("MEMCACHED_SKQ_POLL_GROUPS", "4")]);
    let (ok, out) = run("python3", &["-c", PY, &four.port.to_string()]);
    assert!(ok && out.contains("pymemcache ok"), "four sets: {out}");
    assert_eq!(
        epoll_sets(four.child.id()),
        epoll_sets(one.child.id()) + 3,
        "one epoll set per group"
    );
}

/// With `-v` the patched memcached says what skq built, `skq_get_config`'s
/// view: the policy, the workers and the epoll sets the library chose when
/// `MEMCACHED_SKQ_POLL_GROUPS` is unset (for `cpu` at `-t 2`, one per worker
/// where the process may use two CPUs, else one). The count printed is the
/// count of epoll sets the process holds beyond one with a single set.
#[test]
fn verbose_start_reports_the_sets_the_library_chose_cpu() {
    let port = free_port();
    let mut child = Command::new(memcached_bin())
        .args(["-u", "root", "-U", "0", "-l", "127.0.0.1", "-m", "64", "-v"])
        .args(["-p", &port.to_string(), "-t", "2"])
        .env("MEMCACHED_SKQ", "cpu")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let srv = Server { child, port };
    let line = loop {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(l) if l.starts_with("skq: policy") => break l,
            Ok(_) => continue,
            Err(e) => panic!("no `skq: policy` line on stderr with -v: {e}"),
        }
    };
    let sets: usize = line
        .split(", ")
        .find_map(|f| f.strip_suffix(" epoll sets"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no set count in {line:?}"));
    assert!(line.starts_with("skq: policy cpu, 2 workers, "), "{line}");
    assert!(line.ends_with("stealing off"), "{line}");
    // The child inherits this process's CPUs.
    let allowed = skq_rt::sys::cpu::allowed_cpu_count();
    assert_eq!(sets, if allowed >= 2 { 2 } else { 1 }, "{line}");
    // Once it serves, count its sets against a one-set server.
    assert!(serving(srv.port), "memcached -v did not start");
    let one = start_with("cpu", 2, &[("MEMCACHED_SKQ_POLL_GROUPS", "1")]);
    assert_eq!(
        epoll_sets(srv.child.id()),
        epoll_sets(one.child.id()) + sets - 1,
        "{line}"
    );
}

/// `MEMCACHED_SKQ_POLL_GROUPS` outside 1..=-t, or not a number, is refused
/// with a usage error.
#[test]
fn a_bad_poll_groups_setting_is_refused() {
    for groups in ["0", "5", "two", ""] {
        let o = Command::new(memcached_bin())
            .args(["-u", "root", "-U", "0", "-p", "0", "-t", "4"])
            .env("MEMCACHED_SKQ", "hybrid")
            .env("MEMCACHED_SKQ_POLL_GROUPS", groups)
            .output()
            .unwrap();
        assert!(
            !o.status.success(),
            "MEMCACHED_SKQ_POLL_GROUPS={groups:?} accepted"
        );
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("MEMCACHED_SKQ_POLL_GROUPS: 1 to the -t"),
            "{groups:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// `watch` and `lru_crawler metadump` hand a connection to a side thread
/// (logger, crawler) and back: the watcher gets log lines, its close is
/// handled by its worker, and a metadump connection serves commands again.
#[test]
fn side_threads_hand_connections_back_hybrid() {
    use std::io::{BufRead, BufReader, Read, Write};
    let srv = start("hybrid", 2);
    let addr = ("127.0.0.1", srv.port);
    let connect = || {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    };
    let mut watcher = connect();
    watcher.write_all(b"watch fetchers\r\n").unwrap();
    let mut ok = [0u8; 4];
    watcher.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"OK\r\n");
    let mut c = connect();
    c.write_all(b"set w 0 0 1\r\nv\r\nget w\r\n").unwrap();
    let mut reply = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    for want in ["STORED", "VALUE w 0 1", "v", "END"] {
        line.clear();
        reply.read_line(&mut line).unwrap();
        assert_eq!(line.trim_end(), want);
    }
    let mut log = [0u8; 256];
    let n = watcher.read(&mut log).unwrap();
    assert!(
        String::from_utf8_lossy(&log[..n]).contains("key=w"),
        "watcher log"
    );
    drop(watcher); // the logger hands the connection back to be closed
    c.write_all(b"lru_crawler metadump all\r\n").unwrap();
    let mut dump = String::new();
    while !dump.ends_with("END\r\n") {
        line.clear();
        assert!(
            reply.read_line(&mut line).unwrap() > 0,
            "metadump cut: {dump}"
        );
        dump.push_str(&line);
    }
    assert!(dump.contains("key=w"), "{dump}");
    // The crawler gave the connection back: it serves commands again.
    c.write_all(b"get w\r\n").unwrap();
    line.clear();
    reply.read_line(&mut line).unwrap();
    assert_eq!(line.trim_end(), "VALUE w 0 1");
    // And the server still takes new connections after all of it.
    for _ in 0..20 {
        let mut n = connect();
        n.write_all(b"version\r\n").unwrap();
        let mut v = [0u8; 14];
        n.read_exact(&mut v).unwrap();
        assert_eq!(&v, b"VERSION 1.6.18");
    }
}
