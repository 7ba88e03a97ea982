#!/usr/bin/env python3
"""Server CPU and context switches per reply, one server at a time.

For each mode: `skq serve rpc --mode MODE --workers W` (emulated service) on
CPU 0, `skq load` pinned to CPU 1 at --rate over --conns connections for
--secs seconds (after a 1 s warm-up). The server's CPU time (utime + stime of
/proc/PID/stat, also printed apart as `usr us` and `sys us`: user space and kernel) and the voluntary and involuntary context switches of all its
threads (/proc/PID/task/*/status) are read when the generator starts and
when it ends, and divided by the replies of the whole run (warm-up
included: the generator's `client_sent_total` with no errors).

With emulated service each line also gives how far the service delivered overshot the
service asked for (µs), and after the last run every point is judged for host delay by
`skq bench`'s rule (crates/skq-bench/src/overshoot.rs: more than the larger of 50 µs and
20% of the service asked above the median overshoot of this invocation's points). The
verdict is one line, `# host delayed: MODE RUN ...` or `# host delayed: none ...`;
scripts/bench/cost-ratios.py leaves pairs with a delayed point out of its passing median.

With --speed, a CPU speed probe on CPU 0 before each point's server starts and after it
stops (benchlib.cpu_speed: a fixed user-space loop, a loop of getppid() calls, and pipe
round trips to a partner on CPU 1) gives the host's speed around that point, the mean
of the two probes, as `user ns` and `call ns` per operation and `wake us`, CPU 0's CPU
per round trip; cost-ratios.py prints ratios normalised by them beside the raw ones.
Off by default: on 2026-12-04 neither probe tracked the run-to-run spread of CPU per
reply (docs/MEASUREMENT.md, "The host's speed, probed around each point").

Usage: python3 scripts/bench/cost-per-reply.py [--runs 2] [--modes hybrid,cpu,...]
       [--service emulate|spin] [--server-args '--promote-min-us 0']
A mode written MODE+groups runs MODE with `--poll-groups WORKERS` (one epoll
set per worker), e.g. async-hybrid+groups.
Measure on a quiet machine (nothing else running; `uptime` load below 0.3).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from benchlib import cpu_speed, host_delayed

SKQ = os.environ.get("SKQ", "target/release/skq")
TICK = os.sysconf("SC_CLK_TCK")
# Modes without skq's scheduler: --server-args is not passed to them.
BASELINES = {"epoll-1to1", "epoll-shared", "epoll", "tokio", "tokio-spawn-blocking", "async-tokio"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid):
    """(user, system) CPU seconds of all the process's threads."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(f[11]) / TICK, int(f[12]) / TICK


def ctx_switches(pid):
    vol = inv = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{t}/status"):
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    inv += int(line.split()[1])
        except FileNotFoundError:
            pass
    return vol, inv


def point(mode, a):
    speed0 = cpu_speed(0) if a.speed else None
    port = free_port()
    base, _, suffix = mode.partition("+groups")
    if suffix:
        sys.exit(f"{mode}: +groups must end the mode")
    groups = ["--poll-groups", str(a.workers)] if mode.endswith("+groups") else []
    # skq's tunables go to skq modes only: a baseline refuses them.
    extra = [] if base in BASELINES else a.server_args.split()
    err = tempfile.TemporaryFile(mode="w+")
    srv = subprocess.Popen(["taskset", "-c", "0", SKQ, "serve", "rpc", "--mode", base,
                            "--workers", str(a.workers), "--service", a.service,
                            "--addr", f"127.0.0.1:{port}"] + groups + extra,
                           stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(200):
            if srv.poll() is not None:
                err.seek(0)
                raise RuntimeError(f"{mode}: the server exited: {err.read().strip()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.025)
        with tempfile.NamedTemporaryFile(suffix=".json") as tf:
            c0, (v0, i0) = cpu_s(srv.pid), ctx_switches(srv.pid)
            r = subprocess.run([SKQ, "load", "--addr", f"127.0.0.1:{port}", "--rate", str(a.rate),
                                "--connections", str(a.conns), "--mean-us", str(a.mean_us),
                                "--duration", str(a.secs), "--warmup", "1", "--cpus", "1",
                                "--quiet", "--json", tf.name],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            c1, (v1, i1) = cpu_s(srv.pid), ctx_switches(srv.pid)
            if r.returncode not in (0, 3):
                raise RuntimeError(f"skq load failed: {r.stderr}")
            d = json.load(open(tf.name))
    finally:
        srv.terminate()
        srv.wait(timeout=10)
        err.close()
    speed = None
    if speed0 is not None:
        speed1 = cpu_speed(0)
        speed = tuple((x + y) / 2 for x, y in zip(speed0, speed1))
    n = d["client_sent_total"]
    return {
        "mode": mode, "replies": n, "errors": sum(d["errors"].values()),
        "cpu_us": (sum(c1) - sum(c0)) / n * 1e6,
        "user_us": (c1[0] - c0[0]) / n * 1e6, "sys_us": (c1[1] - c0[1]) / n * 1e6, "vol": (v1 - v0) / n, "invol": (i1 - i0) / n,
        "p99_us": d["latency"]["p99"]["value"], "checks": d["checks"]["pass"],
        "lateness_p99_us": d["checks"]["lateness_p99_us"],
        "overshoot": overshoot(d, a.service),
        "speed": speed,
    }


def overshoot(d, service):
    """(service delivered less asked, asked), µs, for emulated service; None otherwise."""
    got, asked = d.get("measured_service_us"), d.get("requested_service_us")
    if service != "emulate" or got is None or asked is None:
        return None
    return got - asked, asked


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--modes", default="hybrid,hybrid-steal,cpu,best2,shared,vanilla,epoll-shared,epoll-1to1,tokio")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--rate", type=float, default=3200)
    p.add_argument("--conns", type=int, default=64)
    p.add_argument("--mean-us", type=float, default=500)
    p.add_argument("--secs", type=float, default=5)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--service", choices=["emulate", "spin"], default="emulate",
                   help="the server's service mode (emulate: sleep; spin: busy CPU)")
    p.add_argument("--server-args", default="",
                   help="extra arguments for skq serve rpc, passed to skq modes only (the "
                        "baselines refuse skq's tunables), e.g. '--promote-min-us 0'")
    p.add_argument("--speed", action="store_true",
                   help="probe the CPUs' speed before and after each point (benchlib.cpu_speed; "
                        "about 0.6 s a point)")
    a = p.parse_args()
    extra = f"; server args '{a.server_args}'" if a.server_args else ""
    print(f"# {a.workers} workers, {a.service} {a.mean_us} us exponential{extra}, {a.rate:.0f} req/s over "
          f"{a.conns} conns, {a.secs} s + 1 s warm-up; server on CPU 0, generator on CPU 1; "
          f"cores seen {os.cpu_count()}; load {os.getloadavg()[0]:.2f}")
    print(f"{'mode':<20} {'run':>3} {'CPU us/reply':>12} {'vol cs/reply':>12} {'invol cs/reply':>14} "
          f"{'p99 us':>8} {'lateness p99':>12} {'checks':>6} {'errors':>6} {'S over us':>9} "
          f"{'user ns':>7} {'call ns':>7} {'wake us':>7} {'usr us':>7} {'sys us':>7}")
    judged = {}
    for run in range(1, a.runs + 1):
        for mode in a.modes.split(","):
            x = point(mode, a)
            judged[(mode, run)] = x["overshoot"]
            over = "-" if x["overshoot"] is None else f"{x['overshoot'][0]:.0f}"
            sp = (("-", "-", "-") if x["speed"] is None else
                  (f"{x['speed'][0]:.1f}", f"{x['speed'][1]:.0f}", f"{x['speed'][2]:.2f}"))
            print(f"{mode:<20} {run:>3} {x['cpu_us']:>12.1f} {x['vol']:>12.2f} {x['invol']:>14.2f} "
                  f"{x['p99_us']:>8.0f} {x['lateness_p99_us']:>12.1f} {str(x['checks']):>6} {x['errors']:>6} "
                  f"{over:>9} {sp[0]:>7} {sp[1]:>7} {sp[2]:>7} {x['user_us']:>7.1f} {x['sys_us']:>7.1f}",
                  flush=True)
    ref, verdicts = host_delayed(judged)
    if ref is None:
        print("# host delayed: not judged (fewer than three points with emulated service)")
    else:
        bad = [f"{m} {r} ({judged[(m, r)][0]:.0f} > {lim:.0f} us)"
               for (m, r), (lim, late) in sorted(verdicts.items(), key=lambda kv: (kv[0][1], kv[0][0]))
               if late]
        print(f"# host delayed: {', '.join(bad) if bad else 'none'} "
              f"(median overshoot {ref:.0f} us over {len(verdicts)} points)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
