#!/usr/bin/env python3
"""A/B of `skq serve rpc` builds and modes at one offered load, interleaved.

Each repetition starts every configuration in turn: the server (8 workers,
emulated service) under `taskset -c $SRVCPU` (default 0; `0,1` lets it float
as in the main job), `skq load` on CPU 1 at RATE req/s over 64 connections
for $DUR s (default 5) after $WARMUP s of warm-up (default 1; 0 measures
from a fresh server's first request, as `skq bench` does), mean service
500 µs. Per run:
p50/p99/p99.9 (µs), server CPU per reply from the threads' schedstat run
time, voluntary and involuntary context switches per reply (both over the
whole load, warm-up included), the generator's lateness p99 and its
self-check verdict; then the median of each figure per configuration.
Run it on a quiet machine (nothing else running).

usage: ab-rpc.py RATE WORKLOAD REPS LABEL=BINARY:MODE [LABEL=BINARY:MODE ...]
  e.g. SRVCPU=0,1 scripts/bench/ab-rpc.py 13600 bimodal-1 3 \\
         old=/tmp/skq-old:hybrid new=target/release/skq:hybrid \\
         eshared=target/release/skq:epoll-shared
"""
import glob
import json
import os
import random
import statistics as st
import subprocess
import sys
import tempfile
import time

if len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
rate, wl, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfgs = [a.split("=", 1) for a in sys.argv[4:]]
dur = os.environ.get("DUR", "5")
warmup = os.environ.get("WARMUP", "1")
srvcpu = os.environ.get("SRVCPU", "0")
load_bin = os.environ.get("LOAD", cfgs[0][1].split(":")[0])
tmp = tempfile.mkdtemp(prefix="ab-rpc-")


def counters(pid):
    """Run time (ns), voluntary and involuntary switches of pid's threads."""
    cpu = vcs = ics = 0
    for t in glob.glob(f"/proc/{pid}/task/*"):
        try:
            cpu += int(open(t + "/schedstat").read().split()[0])
            for line in open(t + "/status"):
                if line.startswith("voluntary_ctxt"):
                    vcs += int(line.split()[1])
                if line.startswith("nonvoluntary_ctxt"):
                    ics += int(line.split()[1])
        except OSError:
            pass
    return cpu, vcs, ics


res = {label: [] for label, _ in cfgs}
print(f"# {rate} req/s {wl}, server on CPUs {srvcpu}, load on CPU 1, {reps} reps; "
      f"load average {open('/proc/loadavg').read().split()[0]}", flush=True)
for r in range(reps):
    for label, spec in cfgs:
        binp, mode = spec.rsplit(":", 1)
        port = 20000 + random.randrange(20000)
        logp = f"{tmp}/server.log"
        with open(logp, "w") as log:
            srv = subprocess.Popen(
                ["taskset", "-c", srvcpu, binp, "serve", "rpc", "--addr", f"127.0.0.1:{port}",
                 "--mode", mode, "--workers", "8", "--service", "emulate"],
                stdout=log, stderr=log)
        for _ in range(100):
            if "listening" in open(logp).read():
                break
            time.sleep(0.05)
        out = f"{tmp}/{label}-{r}.json"
        a = counters(srv.pid)
        lr = subprocess.run(
            ["taskset", "-c", "1", load_bin, "load", "--addr", f"127.0.0.1:{port}", "--rate", rate,
             "--connections", "64", "--workload", wl, "--mean-us", "500", "--duration", dur,
             "--warmup", warmup, "--quiet", "--json", out],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        b = counters(srv.pid)
        srv.send_signal(2)
        srv.wait()
        # Exit 3: a self-check failed (the JSON says which); else no result.
        if lr.returncode not in (0, 3) or not os.path.exists(out):
            print(f"{label:10s} rep{r} load failed (exit {lr.returncode})", flush=True)
            continue
        d = json.load(open(out))
        replies = d["received"] + float(rate) * 1.0  # the warm-up's replies too
        row = dict(p50=d["latency"]["p50"]["value"], p99=d["latency"]["p99"]["value"],
                   p999=d["latency"]["p999"]["value"], cpu_us=(b[0] - a[0]) / 1e3 / replies,
                   vcs=(b[1] - a[1]) / replies, ics=(b[2] - a[2]) / replies,
                   ok=d["checks"]["pass"], late=d["checks"]["lateness_p99_us"])
        res[label].append(row)
        print(f"{label:10s} rep{r} p50 {row['p50']:8.0f} p99 {row['p99']:8.0f} "
              f"p999 {row['p999']:8.0f} cpu/reply {row['cpu_us']:6.1f}us vcs {row['vcs']:.2f} "
              f"ics {row['ics']:.2f} late {row['late']:.0f} {'pass' if row['ok'] else 'FAIL'}",
              flush=True)
print("-- medians")
for label, rows in res.items():
    if rows:
        print(label, " ".join(f"{k} {st.median(x[k] for x in rows):.2f}"
                              for k in ["p50", "p99", "p999", "cpu_us", "vcs", "ics"]))
