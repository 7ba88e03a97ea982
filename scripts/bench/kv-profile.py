#!/usr/bin/env python3
"""Where a cache request's cost goes: memcached against skq's cache, same run.

    python3 scripts/bench/kv-profile.py [--threads 1,2] [--workloads etc,sphinx-ro,sphinx-wo]
        [--servers memcached,kv-tpc,kv-cpu,kv-hybrid] [--rate1 10000] [--rate2 15000]
        [--secs 4] [--warm 0.5] [--runs 2] [--connections 64] [--flame DIR] [--breakdown]
        [--out docs/results/kv-profile-DATE.txt]

Servers (loopback, each with T worker threads):
  memcached   Debian's /usr/bin/memcached -t T (the baseline)
  kv-tpc      skq serve kv --arch tpc --workers T
  kv-tpc-strict  the same with --tpc-strict (every command for another
              worker's key over the rings, never a borrowed partition)
  kv-MODE     skq serve kv --arch shared --mode MODE --workers T (cpu, hybrid, ...)
  kv-MODE+groups  the same with --poll-groups T (an epoll set per worker)
  kv-MODE+FLAG=VALUE  the same with --FLAG VALUE, one of skq's tunables
              (e.g. kv-hybrid+pollers=1+promote-min-us=50); several may follow
  NAME@PATH   server NAME run from the skq binary at PATH (a before/after
              comparison in one run; the generator stays $SKQ)

Placement: with 1 thread the server is pinned to CPU 0 and the generator to
CPU 1 (each has a CPU of its own); with 2 threads neither is pinned and they
share both CPUs (the generator's cost is then in the server's way: compare
servers with each other, in the same run).

Each point: start the server, prefill and warm it with a 0.5 s `skq load`
pass (--warm SECS: longer, e.g. to fill skq's 64 MiB log before measuring), then read the server's CPU (sum of /proc/PID/task/*/schedstat) and its
context switches (/proc/PID/task/*/status), and count its system calls, page
faults and CPU migrations with `perf stat -e
raw_syscalls:sys_enter,page-faults,cpu-migrations -p PID` while `skq load` offers the rate
open-loop for --secs. Figures per reply = deltas / replies received. Counting
the syscall tracepoint costs each call a little; every server pays it alike.

--breakdown adds one pass per (threads, workload, server) that counts the
system calls by name (one `syscalls:sys_enter_NAME` tracepoint per call in
BREAKDOWN_CALLS, exact counts; the rest as "other"). --flame DIR adds one pass per (threads, server) on the
first workload under `perf record --call-graph dwarf` and writes
DIR/kv-SERVER-Tt-WORKLOAD.svg, .txt (flat profile) and .folded (the folded
stacks, one line per distinct stack, for grep) through
scripts/flamegraph.py; memcached's flame graph uses the symbol-carrying build
of scripts/build-memcached-prof.sh (same source, not stripped).
SKQ=PATH measures another build of skq (a before/after comparison).
Needs: bash scripts/setup.sh; cargo build --release -p skq; perf.
"""
import argparse
import collections
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import free_port, proc_cost, stop, wait_listening

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKQ = os.environ.get("SKQ") or os.path.join(ROOT, "target/release/skq")
STOCK = "/usr/bin/memcached"
PROF = os.path.join(ROOT, "target/memcached-prof/memcached")
FLAME = os.path.join(ROOT, "scripts/flamegraph.py")


def server_cmd(server, threads, port, profiled=False):
    t = str(threads)
    server, _, skq = server.partition("@")
    skq = skq or SKQ
    server, *extras = server.split("+")
    tunables = []
    for e in extras:
        if e == "groups":
            tunables += ["--poll-groups", t]
        elif "=" in e:
            flag, _, value = e.partition("=")
            tunables += [f"--{flag}", value]
        else:
            sys.exit(f"{server}+{e}: expected +groups or +FLAG=VALUE (e.g. +pollers=1)")
    if tunables and (not server.startswith("kv-") or server in ("kv-tpc", "kv-tpc-strict")):
        sys.exit(f"{server}: only the shared modes (kv-MODE) take skq's tunables")
    if server == "memcached":
        binary = PROF if profiled else STOCK
        cmd = [binary, "-u", "root", "-U", "0", "-l", "127.0.0.1", "-m", "1024",
               "-c", "4096", "-p", str(port), "-t", t]
    elif server in ("kv-tpc", "kv-tpc-strict"):
        cmd = [skq, "serve", "kv", "--addr", f"127.0.0.1:{port}", "--workers", t, "--arch", "tpc"]
        if server == "kv-tpc-strict":
            cmd.append("--tpc-strict")
    elif server.startswith("kv-"):
        cmd = [skq, "serve", "kv", "--addr", f"127.0.0.1:{port}", "--workers", t,
               "--arch", "shared", "--mode", server[len("kv-"):]]
        cmd += tunables
    else:
        sys.exit(f"unknown server {server!r}: memcached, kv-tpc, kv-tpc-strict or kv-MODE"
                 "[+groups][+FLAG=VALUE], each optionally @PATH")
    if threads == 1:
        cmd = ["taskset", "-c", "0"] + cmd
    return cmd


def load_cmd(port, workload, rate, secs, threads, conns, extra):
    cmd = [SKQ, "load", "--addr", f"127.0.0.1:{port}", "--protocol", "memcached",
           "--kv-workload", workload, "--rate", str(rate), "--duration", str(secs),
           "--connections", str(conns), "--quiet"] + extra
    if threads == 1:
        cmd += ["--cpus", "1"]
    return cmd


# System calls counted by name in the --breakdown pass (exact tracepoint
# counts); the rest are reported together as "other".
BREAKDOWN_CALLS = ["read", "write", "recvfrom", "sendto", "recvmsg", "sendmsg", "readv",
                   "writev", "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl", "futex",
                   "sched_yield", "clock_nanosleep", "nanosleep", "getsockopt", "tgkill",
                   "madvise", "accept4", "close", "poll", "ppoll", "mmap", "munmap", "brk"]


def point(server, threads, workload, args, mode="count", flame_dir=None):
    port = free_port()
    rate = args.rate1 if threads == 1 else args.rate2
    p = subprocess.Popen(server_cmd(server, threads, port, profiled=(mode == "flame")),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    perf = None
    try:
        wait_listening(port, p)
        pid = p.pid  # taskset execs the server, so the child is the server
        warm = subprocess.run(load_cmd(port, workload, rate, args.warm, threads, args.connections,
                                       ["--warmup", "0"]), capture_output=True, text=True,
                              timeout=120 + args.warm)
        if warm.returncode not in (0, 3):
            raise RuntimeError(f"warm-up load failed: {warm.stderr[:300]}")
        tmp = tempfile.mkdtemp(prefix="kv-profile-")
        out_json = os.path.join(tmp, "load.json")
        window = f"{args.secs + 0.3:.2f}"
        if mode == "count":
            perf_out = os.path.join(tmp, "perf.csv")
            perf = subprocess.Popen(["perf", "stat", "-x,", "-o", perf_out, "-e",
                                     "raw_syscalls:sys_enter,page-faults,cpu-migrations",
                                     "-p", str(pid), "--", "sleep", window],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elif mode == "trace":
            perf_out = os.path.join(tmp, "perf.csv")
            events = ",".join(f"syscalls:sys_enter_{c}" for c in BREAKDOWN_CALLS)
            perf = subprocess.Popen(["perf", "stat", "-x,", "-o", perf_out, "-e",
                                     "raw_syscalls:sys_enter," + events, "-p", str(pid), "--",
                                     "sleep", window], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        else:
            perf_out = os.path.join(tmp, "perf.data")
            perf = subprocess.Popen(["perf", "record", "-q", "-F", "999", "--call-graph",
                                     "dwarf,16384", "-o", perf_out, "-p", str(pid), "--",
                                     "sleep", window], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        time.sleep(0.15)
        before = proc_cost(pid)
        r = subprocess.run(load_cmd(port, workload, rate, args.secs, threads, args.connections,
                                    ["--warmup", "0", "--no-prefill", "--json", out_json]),
                           capture_output=True, text=True, timeout=300)
        after = proc_cost(pid)
        perf.wait(timeout=60)
        perf = None
        if r.returncode not in (0, 3):
            raise RuntimeError(f"load failed: {r.stderr[:300]}")
        d = json.load(open(out_json))
    finally:
        if perf is not None:
            perf.kill()
            perf.wait()
        stop(p)
    replies = max(d["received"], 1)
    res = {
        "replies": d["received"],
        "cpu_us": (after[0] - before[0]) / 1e3 / replies,
        "vol_cs": (after[1] - before[1]) / replies,
        "invol_cs": (after[2] - before[2]) / replies,
        "p50_us": d["latency"]["p50"]["value"],
        "p99_us": d["latency"]["p99"]["value"],
        "client_work_us": 1e6 * (d.get("client_busy_s") or 0.0) / replies,
        "checks_pass": d["checks"]["pass"],
    }
    if mode == "count":
        counts = {}
        for line in open(perf_out):
            f = line.strip().split(",")
            if len(f) > 2 and f[0].isdigit():
                counts[f[2]] = int(f[0])
        res["syscalls"] = counts.get("raw_syscalls:sys_enter", 0) / replies
        res["faults"] = counts.get("page-faults", 0) / replies
        res["migrations"] = counts.get("cpu-migrations", 0) / replies
    elif mode == "trace":
        calls = collections.Counter()
        for line in open(perf_out):
            f = line.strip().split(",")
            if len(f) > 2 and f[0].isdigit():
                name = f[2].split("sys_enter_")[-1] if "sys_enter_" in f[2] else "total"
                calls[name] = int(f[0])
        total = calls.pop("total", 0)
        named = sum(calls.values())
        by = {k: v / replies for k, v in calls.most_common() if v > 0}
        by["other"] = (total - named) / replies
        res["by_call"] = by
    else:
        name = server.split("@")[0] + ("-other-build" if "@" in server else "")
        tag = f"kv-{name.replace('kv-', '')}-{threads}t-{workload}"
        svg = os.path.join(flame_dir, tag + ".svg")
        title = (f"{server}, {threads} thread(s), {workload} at {rate:g} req/s "
                 f"({'CPU 0, generator on CPU 1' if threads == 1 else 'both CPUs shared'})")
        script = subprocess.run(["perf", "script", "-i", perf_out], capture_output=True,
                                text=True, timeout=600)
        fl = subprocess.run([sys.executable, FLAME, "--title", title, "--svg", svg,
                             "--top", "30", "--folded", os.path.join(flame_dir, tag + ".folded")],
                            input=script.stdout, capture_output=True, text=True, timeout=600)
        with open(os.path.join(flame_dir, tag + ".txt"), "w") as f:
            f.write(f"# {title}\n# perf record -F 999 --call-graph dwarf; "
                    f"scripts/bench/kv-profile.py --flame\n")
            f.write(fl.stdout)
        res["flame"] = svg
    subprocess.run(["rm", "-rf", tmp])
    return res


def main():
    ap = argparse.ArgumentParser(description="memcached against skq's cache: CPU, system calls "
                                 "and context switches per reply, flame graphs")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--workloads", default="etc,sphinx-ro,sphinx-wo")
    ap.add_argument("--servers", default="memcached,kv-tpc,kv-cpu,kv-hybrid")
    ap.add_argument("--rate1", type=float, default=10000, help="req/s with 1 server thread")
    ap.add_argument("--rate2", type=float, default=15000, help="req/s with 2 server threads")
    ap.add_argument("--secs", type=float, default=4.0)
    ap.add_argument("--warm", type=float, default=0.5,
                    help="seconds of the warm-up pass before each point (after the prefill)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--flame", metavar="DIR", help="write flame graphs here")
    ap.add_argument("--breakdown", action="store_true", help="system calls by name (perf trace)")
    ap.add_argument("--out", default=os.path.join(
        ROOT, f"docs/results/kv-profile-{datetime.date.today().isoformat()}.txt"))
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    workloads = args.workloads.split(",")
    servers = args.servers.split(",")
    for path in (SKQ, STOCK):
        if not os.path.exists(path):
            sys.exit(f"{path} missing: run bash scripts/setup.sh and cargo build --release -p skq")
    for s in servers:
        other = s.partition("@")[2]
        if other and not os.access(other, os.X_OK):
            sys.exit(f"{s}: {other} is not an executable skq binary")
        server_cmd(s, 1, 0)  # names checked before the first point
    if args.flame and "memcached" in servers and not os.path.exists(PROF):
        sys.exit(f"{PROF} missing: run bash scripts/build-memcached-prof.sh")
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    with open("/proc/loadavg") as f:
        la = f.read().split()[0]
    say(f"# kv-profile: {datetime.datetime.now().isoformat(timespec='seconds')}, load {la} before")
    say("# command: python3 scripts/bench/kv-profile.py " + " ".join(sys.argv[1:]))
    say(f"# cores seen: {os.cpu_count()}; 1 thread: server on CPU 0, generator on CPU 1; "
        f"2 threads: both share both CPUs; {args.connections} connections; "
        f"rates {args.rate1:g} (1 thread) / {args.rate2:g} (2 threads) req/s, {args.secs:g} s")
    res = collections.defaultdict(list)
    for run in range(args.runs):
        for t in threads:
            for w in workloads:
                order = servers[run % len(servers):] + servers[:run % len(servers)]
                for s in order:
                    r = point(s, t, w, args)
                    res[(t, w, s)].append(r)
                    say(f"run={run + 1} threads={t} workload={w} server={s} " + " ".join(
                        f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in r.items()))
    say("")
    say("# summary: per reply, runs r1 / r2 ...; x = ratio to memcached in the same run")
    say(f"{'threads':>7} {'workload':<10} {'server':<11} {'CPU µs':>15} {'x':>11} "
        f"{'syscalls':>11} {'vol cs':>11} {'invol cs':>11} {'faults':>11} {'migr':>11} "
        f"{'p99 µs':>15} checks")
    for t in threads:
        for w in workloads:
            for s in servers:
                rs = res[(t, w, s)]
                base = res[(t, w, "memcached")] if "memcached" in servers else None

                def fmt(key, digits):
                    return " / ".join(f"{r[key]:.{digits}f}" for r in rs)

                xs = [r["cpu_us"] / b["cpu_us"] for r, b in zip(rs, base)] if base else []
                ratio = " / ".join(f"{x:.2f}" for x in xs) if base else "-"
                if len(xs) > 2:
                    clean = [x for x, r, b in zip(xs, rs, base)
                             if r["checks_pass"] and b["checks_pass"]]
                    ratio += f" (median {statistics.median(xs):.2f}" + (
                        f", clean {statistics.median(clean):.2f} of {len(clean)})" if clean
                        else ", none clean)")
                say(f"{t:>7} {w:<10} {s:<11} {fmt('cpu_us', 1):>15} {ratio:>11} "
                    f"{fmt('syscalls', 2):>11} {fmt('vol_cs', 2):>11} {fmt('invol_cs', 2):>11} "
                    f"{fmt('faults', 3):>11} {fmt('migrations', 3):>11} {fmt('p99_us', 0):>15} "
                    f"{'/'.join('pass' if r['checks_pass'] else 'FAIL' for r in rs)}")
    if args.breakdown:
        say("")
        say("# system calls per reply by name (syscalls:sys_enter_* tracepoint counts, separate pass)")
        for t in threads:
            for w in workloads:
                for s in servers:
                    r = point(s, t, w, args, mode="trace")
                    calls = " ".join(f"{k}={v:.2f}" for k, v in r["by_call"].items())
                    say(f"threads={t} workload={w} server={s}: {calls}")
    if args.flame:
        os.makedirs(args.flame, exist_ok=True)
        say("")
        say(f"# flame graphs (perf record, one pass, workload {workloads[0]})")
        for t in threads:
            for s in servers:
                r = point(s, t, workloads[0], args, mode="flame", flame_dir=args.flame)
                say(f"threads={t} server={s}: {os.path.relpath(r['flame'], ROOT)}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
