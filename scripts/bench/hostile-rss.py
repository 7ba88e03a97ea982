#!/usr/bin/env python3
"""Peak RSS of skq's servers under issue 26's hostile clients, beside memcached and nginx.

Every attack runs against a fresh server of each kind, in the same run, one server at a
time, loopback only:

  1 big-multiget   a 1 MB value under `a`, then one `get a a a ...` line of 1,000 keys on
                   one connection whose replies are never read
  2 pipelined      1 MB values under a, b, c, d, then 1,000 pipelined `get a b c d` on one
                   connection, replies unread (the tpc cache's defect)
  3 slow-readers   200 connections with a 4 KB receive buffer (SO_RCVBUF set before
                   connect) each GET a 4 MiB file and read nothing
  6 floods         12 rounds of 100,000 pipelined gets of 10 KB values, replies read and
                   counted; RSS after each round

Servers: attacks 1, 2, 6: `skq serve kv --arch shared --mode hybrid`, `skq serve kv
--arch tpc` (2 workers each, -m 64) and `memcached -t 2 -m 64`; attack 3: `skq serve http
--mode hybrid --workers 2` and nginx with 2 worker processes (configuration as
crates/skq-bench/src/peers.rs writes it: a private prefix folder, `daemon off`, a port on
127.0.0.1; nginx's defaults otherwise, so `sendfile off`).

Figures per server and attack, from /proc/PID/status (summed over nginx's master and
workers): RSS once the data is stored and before the attack (`before`), the peak during
the attack (`VmHWM`, reset to the current RSS through /proc/PID/clear_refs just before the
attack), RSS at the end of the attack with the attackers still connected (`held`), and RSS
after the attackers closed and a second passed (`after`). `good during` / `good after`:
whether a fresh good client got a correct reply (a set then get of a fresh value, or a
GET of a small file checked byte for byte) while the attackers were connected and after
they left; `up`: the server process still runs at the end.

Build first:  cargo build --release -p skq
Run:          python3 scripts/bench/hostile-rss.py --out docs/results/hostile-rss-DATE.txt
Options:      --skq PATH (default target/release/skq), --attacks 1,2,3,6, --quick (tiny
              sizes: a functional check of the script, not a measurement), --keep (leave
              the scratch folder with server logs).

Needs memcached and nginx (`bash scripts/setup.sh`); exits 2 naming what is missing.
Python 3 standard library only.
"""
import argparse
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from benchlib import free_port, nginx_conf, wait_listening

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MB = 1_000_000


def die(msg):
    sys.stderr.write(f"hostile-rss: {msg}\n")
    sys.exit(2)




# ---------------------------------------------------------------- /proc figures

def tree_pids(pid):
    """pid and its children (nginx's workers)."""
    pids = [pid]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rindex(")") + 2:].split()[1]) == pid:
            pids.append(int(entry))
    return pids


def status_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_kb(pid, field):
    return sum(status_kb(p, field) for p in tree_pids(pid))


def reset_peak(pid):
    """Resets VmHWM to the current RSS (Linux >= 4.0); False if not allowed."""
    ok = True
    for p in tree_pids(pid):
        try:
            with open(f"/proc/{p}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            ok = False
    return ok


# ---------------------------------------------------------------- servers

class Server:
    """One server process on a fresh port; `kind` is kv or http."""

    def __init__(self, name, kind, argv_of, scratch):
        self.name, self.kind = name, kind
        self.port = free_port()
        argv = argv_of(self.port)
        slug = "".join(c if c.isalnum() else "-" for c in name)
        self.log = open(os.path.join(scratch, f"{slug}-{self.port}.log"), "a")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL)
        try:
            wait_listening(self.port, self.proc)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{name}: {e} (log: {self.log.name})")

    def up(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def kv_servers(args, scratch):
    skq, mc = args.skq, args.memcached
    user = ["-u", "root"] if os.geteuid() == 0 else []
    return [
        ("skq kv shared/hybrid", lambda p: [skq, "serve", "kv", "--arch", "shared", "--mode",
                                            "hybrid", "--workers", "2", "-m", "64",
                                            "--addr", f"127.0.0.1:{p}"]),
        ("skq kv tpc", lambda p: [skq, "serve", "kv", "--arch", "tpc", "--workers", "2",
                                  "-m", "64", "--addr", f"127.0.0.1:{p}"]),
        ("memcached -t 2", lambda p: [mc, "-t", "2", "-m", "64", "-p", str(p), "-U", "0",
                                      "-l", "127.0.0.1"] + user),
    ]


def http_servers(args, scratch, root):
    skq, nginx = args.skq, args.nginx

    def nginx_argv(port):
        work = os.path.join(scratch, f"nginx-{port}")
        os.makedirs(work)
        os.chmod(work, 0o755)
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(2, port, work, root))
        return [nginx, "-p", work, "-c", conf, "-e", "stderr"]

    return [
        ("skq http hybrid", lambda p: [skq, "serve", "http", "--root", root, "--mode", "hybrid",
                                       "--workers", "2", "--addr", f"127.0.0.1:{p}"]),
        ("nginx 2 workers", nginx_argv),
    ]


# ---------------------------------------------------------------- clients

def connect(port, rcvbuf=None, timeout=10.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    return s


def read_exact(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise OSError("server closed")
        buf += chunk
    return bytes(buf)


def kv_store(port, items):
    """Stores each (key, value); True when every reply was STORED."""
    with connect(port, timeout=30) as s:
        for k, v in items:
            s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (k, len(v), v))
            if read_exact(s, 8) != b"STORED\r\n":
                return False
    return True


GOOD_N = [0]


def kv_good(port):
    """A fresh client's set and get of a fresh value, checked byte for byte."""
    GOOD_N[0] += 1
    k, v = b"good%d" % GOOD_N[0], b"value-%d" % GOOD_N[0]
    want = b"STORED\r\nVALUE %s 0 %d\r\n%s\r\nEND\r\n" % (k, len(v), v)
    try:
        with connect(port, timeout=5) as s:
            s.sendall(b"set %s 0 0 %d\r\n%s\r\nget %s\r\n" % (k, len(v), v, k))
            return read_exact(s, len(want)) == want
    except OSError:
        return False


SMALL = b"small file for the good client\n" * 4


def http_good(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/small.txt")
        r = c.getresponse()
        ok = r.status == 200 and r.read() == SMALL
        c.close()
        return ok
    except (OSError, http.client.HTTPException):
        return False


# ---------------------------------------------------------------- attacks

def attack_big_multiget(port, q):
    """Attack 1: one unread `get a a a ...` of 1,000 keys over a 1 MB value."""
    keys = q(1000, 100)
    s = connect(port)
    s.sendall(b"get" + b" a" * keys + b"\r\n")
    return [s]


def attack_pipelined(port, q):
    """Attack 2: 1,000 pipelined `get a b c d` of 1 MB values, unread."""
    n = q(1000, 50)
    s = connect(port)
    s.setblocking(False)
    data = b"get a b c d\r\n" * n
    sent, deadline = 0, time.time() + 10
    while sent < len(data) and time.time() < deadline:
        try:
            sent += s.send(data[sent:])
        except BlockingIOError:
            time.sleep(0.01)
    s.settimeout(10)
    return [s]


def attack_slow_readers(port, q):
    """Attack 3: connections with a 4 KB receive buffer GET the 4 MiB file, read nothing."""
    conns = []
    for _ in range(q(200, 10)):
        s = connect(port, rcvbuf=4096)
        s.sendall(b"GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        conns.append(s)
    return conns


def flood_round(port, gets, nkeys, vlen):
    """One round of attack 6: `gets` pipelined gets of `vlen`-byte values on one
    connection, every reply read; returns the number of whole replies (END lines)."""
    s = connect(port, timeout=60)
    req = b"".join(b"get k%d\r\n" % (i % nkeys) for i in range(gets))
    err = []

    def send():
        try:
            s.sendall(req)
        except OSError as e:
            err.append(e)

    t = threading.Thread(target=send)
    t.start()
    ends, tail = 0, b""
    try:
        while ends < gets:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            joined = tail + chunk
            # END\r\n never occurs inside a value (values are all `x`), and counting on the
            # joined tail catches a marker split across two reads exactly once.
            ends += joined.count(b"END\r\n") - tail.count(b"END\r\n")
            tail = joined[-4:]
    except OSError:
        pass
    t.join()
    s.close()
    return ends


# ---------------------------------------------------------------- runs

def run_held(name, srv, attack, setup, good, args, q):
    """Attacks 1-3: set up, reset the peak, attack, hold, check, release, check."""
    row = {"attack": name, "server": srv.name}
    if not setup(srv.port):
        row["note"] = "setup failed (values not stored)"
    row["before"] = tree_kb(srv.proc.pid, "VmRSS")
    if not reset_peak(srv.proc.pid):
        row["note"] = "VmHWM not reset (clear_refs refused): peak includes start-up"
    conns = attack(srv.port, q)
    time.sleep(args.hold)
    row["good_during"] = good(srv.port)
    row["held"] = tree_kb(srv.proc.pid, "VmRSS")
    row["peak"] = tree_kb(srv.proc.pid, "VmHWM")
    for s in conns:
        s.close()
    time.sleep(1.0)
    row["good_after"] = good(srv.port)
    row["after"] = tree_kb(srv.proc.pid, "VmRSS")
    row["up"] = srv.up()
    return row


def run_floods(srv, args, q):
    rounds, gets, nkeys, vlen = q(12, 2), q(100_000, 2_000), 100, 10_000
    row = {"attack": "6 floods", "server": srv.name}
    value = b"x" * vlen
    if not kv_store(srv.port, [(b"k%d" % i, value) for i in range(nkeys)]):
        row["note"] = "setup failed (values not stored)"
    row["before"] = tree_kb(srv.proc.pid, "VmRSS")
    reset_peak(srv.proc.pid)
    per_round, short = [], 0
    for _ in range(rounds):
        got = flood_round(srv.port, gets, nkeys, vlen)
        short += gets - got
        time.sleep(0.2)
        per_round.append(tree_kb(srv.proc.pid, "VmRSS"))
    row["peak"] = tree_kb(srv.proc.pid, "VmHWM")
    row["held"] = per_round[-1] if per_round else 0
    time.sleep(1.0)
    row["after"] = tree_kb(srv.proc.pid, "VmRSS")
    row["good_during"] = short == 0
    row["good_after"] = kv_good(srv.port)
    row["up"] = srv.up()
    row["rounds"] = per_round
    if short:
        row["note"] = f"{short} of {rounds * gets} replies missing"
    return row


def mb(kb):
    return f"{kb / 1024:.1f}"


def table(rows, args):
    head = ["attack", "server", "before MB", "peak MB", "held MB", "after MB",
            "peak-before MB", "good during", "good after", "up"]
    lines = []
    for r in rows:
        if "error" in r:
            lines.append([r["attack"], r["server"], "ERROR"] + ["-"] * 7)
            continue
        yn = lambda b: "yes" if b else "NO"
        lines.append([r["attack"], r["server"], mb(r["before"]), mb(r["peak"]), mb(r["held"]),
                      mb(r["after"]), mb(r["peak"] - r["before"]), yn(r["good_during"]),
                      yn(r["good_after"]), yn(r["up"])])
    widths = [max(len(str(x[i])) for x in [head] + lines) for i in range(len(head))]
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(l) for l in lines]
    notes = []
    for r in rows:
        if r.get("rounds"):
            notes.append(f"{r['attack']} / {r['server']}: RSS after each round (MB): "
                         + " ".join(mb(k) for k in r["rounds"]))
        if r.get("note"):
            notes.append(f"{r['attack']} / {r['server']}: {r['note']}")
        if r.get("error"):
            notes.append(f"{r['attack']} / {r['server']}: ERROR {r['error']}")
    mode = "QUICK (functional check, sizes cut down: not a measurement)" if args.quick else "full"
    meta = [f"hostile-rss.py, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, "
            f"mode {mode}, hold {args.hold} s",
            f"skq: {args.skq}; memcached: {args.memcached} ({version([args.memcached, '-V'])}); "
            f"nginx: {args.nginx} ({version([args.nginx, '-v'])})",
            "RSS in MB of 2^20 bytes from /proc/PID/status (VmRSS, VmHWM), summed over nginx's "
            "processes; 'held' = attackers still connected (attack 6: after the last round)",
            ""]
    return "\n".join(meta + out + ([""] + notes if notes else [])) + "\n"


def version(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        return (p.stdout + p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "version unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="write the table here too")
    ap.add_argument("--skq", default=os.path.join(ROOT, "target", "release", "skq"))
    ap.add_argument("--attacks", default="1,2,3,6", help="comma-separated subset of 1,2,3,6")
    ap.add_argument("--hold", type=float, default=3.0,
                    help="seconds the attackers stay connected before the figures are read")
    ap.add_argument("--quick", action="store_true",
                    help="tiny sizes: checks the script end to end, measures nothing")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (logs)")
    args = ap.parse_args()

    if not (os.path.isfile(args.skq) and os.access(args.skq, os.X_OK)):
        die(f"{args.skq} not found: build it with `cargo build --release -p skq` "
            "(or pass --skq PATH)")
    args.memcached = shutil.which("memcached")
    args.nginx = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    missing = [n for n, p in (("memcached", args.memcached), ("nginx", args.nginx)) if not p]
    if missing:
        die(f"{' and '.join(missing)} not found: install with `bash scripts/setup.sh` "
            "(Debian packages memcached, nginx-light); the comparison needs both")
    attacks = [a.strip() for a in args.attacks.split(",") if a.strip()]
    bad = [a for a in attacks if a not in ("1", "2", "3", "6")]
    if bad:
        die(f"--attacks {args.attacks}: unknown attack {bad[0]} (choose from 1,2,3,6)")
    if args.quick:
        args.hold = min(args.hold, 0.5)
    q = (lambda full, quick: quick) if args.quick else (lambda full, quick: full)

    scratch = tempfile.mkdtemp(prefix="skq-hostile-rss-")
    os.chmod(scratch, 0o755)
    root = os.path.join(scratch, "www")
    os.makedirs(root)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(os.urandom(4 << 20))
    with open(os.path.join(root, "small.txt"), "wb") as f:
        f.write(SMALL)
    big = b"x" * MB

    def store(keys):
        return lambda port: kv_store(port, [(k, big) for k in keys])

    rows = []
    plan = []
    for a in attacks:
        if a == "1":
            plan += [("1 big-multiget", n, argv, "kv", store([b"a"]), attack_big_multiget)
                     for n, argv in kv_servers(args, scratch)]
        elif a == "2":
            plan += [("2 pipelined", n, argv, "kv", store([b"a", b"b", b"c", b"d"]),
                      attack_pipelined) for n, argv in kv_servers(args, scratch)]
        elif a == "3":
            plan += [("3 slow-readers", n, argv, "http", lambda port: True, attack_slow_readers)
                     for n, argv in http_servers(args, scratch, root)]
        else:
            plan += [("6 floods", n, argv, "kv", None, None) for n, argv in kv_servers(args, scratch)]
    try:
        for attack_name, name, argv, kind, setup, attack in plan:
            sys.stderr.write(f"hostile-rss: {attack_name} against {name}\n")
            srv = None
            try:
                srv = Server(name, kind, argv, scratch)
                if attack is None:
                    rows.append(run_floods(srv, args, q))
                else:
                    good = kv_good if kind == "kv" else http_good
                    rows.append(run_held(attack_name, srv, attack, setup, good, args, q))
            except (OSError, RuntimeError) as e:
                rows.append({"attack": attack_name, "server": name, "error": str(e)})
            finally:
                if srv is not None:
                    srv.stop()
    finally:
        if args.keep:
            sys.stderr.write(f"hostile-rss: scratch folder kept: {scratch}\n")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    text = table(rows, args)
    sys.stdout.write(text)
    with open(args.out, "w") as f:
        f.write(text)
    failed = [r for r in rows if "error" in r or not (r["good_after"] and r["up"])]
    if failed:
        sys.stderr.write(f"hostile-rss: {len(failed)} server/attack pairs failed or did not "
                         "answer the good client afterwards (see the table)\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
