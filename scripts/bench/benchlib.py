"""Helpers the benchmark scripts in this folder share (stdlib only).

Import as `from benchlib import free_port, wait_listening, stop, nginx_conf, proc_cost,
host_delayed, cpu_speed, read_cost_log` from a
script run as `python3 scripts/bench/NAME.py` (its folder is on sys.path).
"""
import os
import re
import socket
import subprocess
import time


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_steal_ms(cpus):
    """The host's steal time (ms) so far on each CPU in `cpus` (/proc/stat, USER_HZ ticks)."""
    want = {f"cpu{c}" for c in cpus}
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in want:
                out[parts[0]] = int(parts[8]) * 1000 / os.sysconf("SC_CLK_TCK")
    return out


def wait_listening(port, proc, timeout=15.0):
    """Waits until 127.0.0.1:`port` accepts a connection; raises if `proc`
    exits first or `timeout` seconds pass."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start listening")


def stop(proc, timeout=5.0):
    """SIGTERM, then SIGKILL after `timeout` seconds; reaps the process."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def nginx_conf(workers, port, work, root, static_tuned=False):
    """The nginx configuration the bench scripts run: `workers` worker
    processes serving `root` on 127.0.0.1:`port`, in the foreground, every
    path inside `work`, no access log. nginx's defaults otherwise (no
    sendfile), unless `static_tuned`: then also what nginx's documentation
    advises for static files (sendfile, tcp_nopush, tcp_nodelay,
    open_file_cache), as skq bench's own peer configuration does
    (crates/skq-bench/src/peers.rs)."""
    tuned = ("    sendfile on;\n    tcp_nopush on;\n    tcp_nodelay on;\n"
             "    open_file_cache max=1000 inactive=20s;\n    open_file_cache_valid 30s;\n"
             if static_tuned else "")
    return f"""daemon off;
master_process on;
worker_processes {workers};
pid {work}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
{tuned}    keepalive_requests 1000000;
    client_body_temp_path {work}/tmp-body;
    proxy_temp_path {work}/tmp-proxy;
    fastcgi_temp_path {work}/tmp-fastcgi;
    uwsgi_temp_path {work}/tmp-uwsgi;
    scgi_temp_path {work}/tmp-scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{ root {root}; }}
    }}
}}
"""


def process_tree(pid):
    """`pid` and every process below it (nginx's workers under its master)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def proc_cost(pid, tree=False):
    """(CPU ns, voluntary, involuntary context switches) summed over every
    thread of `pid` (and of the processes below it with `tree`), from
    /proc/PID/task/TID/schedstat and status: exact, not sampled."""
    cpu = vol = invol = 0
    for p in (process_tree(pid) if tree else [pid]):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    cpu += int(f.read().split()[0])
                with open(f"/proc/{p}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            vol += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            invol += int(line.split()[1])
            except (FileNotFoundError, ProcessLookupError):
                pass
    return cpu, vol, invol


# The host-delay rule of `skq bench` (crates/skq-bench/src/overshoot.rs, which explains it):
# an emulated point whose service overshot the median overshoot of its run by more than
# the larger of SLACK_US and SLACK_FRACTION of the service asked was held off its CPUs by
# the host. Kept equal to the constants there.
OVERSHOOT_SLACK_US = 50.0
OVERSHOOT_SLACK_FRACTION = 0.20
OVERSHOOT_MIN_REFERENCE_POINTS = 3


def host_delayed(points):
    """Judges emulated points for host delay, as `skq bench` does.

    `points` maps a key to (overshoot µs, requested service µs), or to None where the
    service was not emulated or not reported. Returns (reference µs or None, {key: (limit
    µs, delayed)}): nothing is judged with fewer than three points that have both figures.
    """
    known = {k: v for k, v in points.items() if v is not None}
    if len(known) < OVERSHOOT_MIN_REFERENCE_POINTS:
        return None, {}
    over = sorted(o for o, _ in known.values())
    n = len(over)
    ref = over[n // 2] if n % 2 else (over[n // 2 - 1] + over[n // 2]) / 2
    out = {}
    for k, (o, req) in known.items():
        limit = ref + max(OVERSHOOT_SLACK_US, OVERSHOOT_SLACK_FRACTION * req)
        out[k] = (limit, o > limit)
    return ref, out


# A fixed amount of work timed on one CPU: a user-space loop and a loop of
# getppid() system calls (never served by the vDSO), each the median of five
# repetitions, in ns per operation; then 2,000 round trips of one byte over a
# pair of pipes to a partner pinned to the other CPU, in CPU µs spent on this
# CPU per round trip (two system calls, one sleep and one wake-up each: the
# pattern a server's reply costs). About 0.3 s in all.
_SPEED_PROBE = r"""
import os, statistics, subprocess, sys, time
def user(n):
    x = 1
    for i in range(n):
        x = (x * 33 + i) & 0xFFFFFF
    return x
def calls(n):
    g = os.getppid
    for _ in range(n):
        g()
u, s = [], []
for _ in range(5):
    t0 = time.perf_counter_ns(); user(60000); t1 = time.perf_counter_ns()
    calls(20000); t2 = time.perf_counter_ns()
    u.append((t1 - t0) / 60000); s.append((t2 - t1) / 20000)
PARTNER = "import os, sys\nr, w = int(sys.argv[1]), int(sys.argv[2])\nwhile True:\n    b = os.read(r, 1)\n    if not b or b == b'q':\n        break\n    os.write(w, b)\n"
a_r, a_w = os.pipe()
b_r, b_w = os.pipe()
p = subprocess.Popen(["taskset", "-c", sys.argv[1], sys.executable, "-c", PARTNER, str(a_r), str(b_w)],
                     pass_fds=(a_r, b_w))
for _ in range(50):
    os.write(a_w, b"x"); os.read(b_r, 1)
n = 2000
c0 = time.process_time_ns()
for _ in range(n):
    os.write(a_w, b"x"); os.read(b_r, 1)
c1 = time.process_time_ns()
os.write(a_w, b"q"); p.wait()
print(statistics.median(u), statistics.median(s), (c1 - c0) / n / 1000)
"""


def cpu_speed(cpu, partner=None):
    """(user ns per op, system call ns per op, CPU µs per wake-up round trip) on `cpu`.

    A server's CPU per reply moves by up to 43% between runs of one server at one rate
    on this VM (2026-12-04). The first two figures time fixed work on a CPU that stays
    busy; the third times the sleep-and-wake pattern of a reply against a partner
    pinned to `partner` (default: the other of CPUs 0 and 1). Run it when both CPUs
    are otherwise idle (before the server starts, after it stops). Taken around each
    point of cost-per-reply.py --speed, neither tracked that spread
    (docs/MEASUREMENT.md, "The host's speed, probed around each point")."""
    partner = (1 if cpu == 0 else 0) if partner is None else partner
    r = subprocess.run(["taskset", "-c", str(cpu), "python3", "-c", _SPEED_PROBE, str(partner)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"speed probe on CPU {cpu} failed: {r.stderr.strip()}")
    u, s, w = r.stdout.split()
    return float(u), float(s), float(w)


def read_cost_log(path):
    """The invocations in a cost-per-reply.py log, in file order.

    Each is {"rate": req/s, "points": [...], "delayed": {(mode, run), ...}}: a file
    may hold several invocations (logs concatenated), whose run numbers repeat, so
    each is a block of its own. A point is {"mode", "run", "cpu_us", "passed",
    "overshoot_us", "call_ns", "wake_us", "user_us", "sys_us"}, each of the last five
    None where the line has no such column (older logs, or no `--speed`); "delayed" holds the points the
    `# host delayed:` line names."""
    def num(f, i):
        try:
            return float(f[i])
        except (IndexError, ValueError):
            return None

    blocks = []
    for line in open(path):
        m = re.search(r"(\d+) req/s over", line)
        if line.startswith("#") and m:
            blocks.append({"rate": int(m.group(1)), "points": [], "delayed": set()})
            continue
        if not blocks:
            continue
        if line.startswith("# host delayed:"):
            for mode, run in re.findall(r"([\w+.-]+) (\d+) \(", line):
                blocks[-1]["delayed"].add((mode, int(run)))
            continue
        f = line.split()
        if len(f) < 9 or not f[1].isdigit() or num(f, 2) is None:
            continue
        blocks[-1]["points"].append({
            "mode": f[0], "run": int(f[1]), "cpu_us": num(f, 2), "passed": f[7] == "True",
            "overshoot_us": num(f, 9), "call_ns": num(f, 11), "wake_us": num(f, 12),
            "user_us": num(f, 13), "sys_us": num(f, 14),
        })
    return blocks
