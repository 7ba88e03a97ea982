#!/usr/bin/env python3
"""memcached on skq against stock memcached and skq's own cache, same run.

    python3 scripts/bench/capi-memcached.py [--threads 2] [--rate 15000] [--secs 3]
        [--runs 3] [--servers stock,mc-skq-cpu,...] [--workloads etc,...]
        [--split] [--out docs/results/capi-memcached-DATE.txt]

Servers, each with --threads worker threads on loopback:
  stock          /usr/bin/memcached (Debian 1.6.18)            -- the baseline
  patched-off    the patched build without MEMCACHED_SKQ (libevent workers)
  mc-skq-cpu     the patched build, MEMCACHED_SKQ=cpu
  mc-skq-hybrid  the patched build, MEMCACHED_SKQ=hybrid
  mc-skq-P+pin   (not in the default set) MEMCACHED_SKQ=P with MEMCACHED_SKQ_PIN=1:
                 each worker thread pinned to its skq worker's CPU
  mc-skq-P+groups  (not in the default set) MEMCACHED_SKQ_POLL_GROUPS=--threads:
                 one epoll set per worker; combines with +pin (mc-skq-P+pin+groups)
  mc-skq-P+oneset  (not in the default set) MEMCACHED_SKQ_POLL_GROUPS=1: one
                 epoll set shared by every worker, whatever the policy's default
  kv-cpu         skq serve kv --arch shared --mode cpu
  kv-hybrid      skq serve kv --arch shared --mode hybrid
  kv-P+groups, kv-P+oneset  (not in the default set) the cache with
                 --poll-groups --threads (one set per worker) or 1 (one set)
Workloads: skq load's memcached mixes etc, sphinx-ro, sphinx-wo.

--split (with --threads 1) gives the server CPU 0 and the generator CPU 1
(`taskset -c 0` and `skq load --cpus 1`), so neither preempts the other and
the generator's self-checks can pass; without it both share every CPU.

Each point: start the server, prefill and warm it with a short skq load pass,
read the server's CPU time (sum over its threads of /proc/PID/task/*/schedstat),
run skq load open-loop at --rate for --secs (no warm-up, no prefill), read the
CPU time again. CPU per request = CPU delta / replies received; p99 = skq
load's latency from schedule. Every run visits every (workload, server) once,
servers in a rotated order per run; ratios are against stock in the same run.
Needs: bash scripts/setup.sh, bash scripts/build-memcached-skq.sh,
cargo build --release -p skq.
Environment, to compare builds: SKQ (the skq binary: the kv servers and the
generator; default target/release/skq), MC_SKQ (memcached on skq; default
target/capi/memcached-skq/memcached).
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKQ = os.environ.get("SKQ", os.path.join(ROOT, "target/release/skq"))
MC_SKQ = os.environ.get("MC_SKQ", os.path.join(ROOT, "target/capi/memcached-skq/memcached"))
STOCK = "/usr/bin/memcached"
SERVERS = ["stock", "patched-off", "mc-skq-cpu", "mc-skq-hybrid", "kv-cpu", "kv-hybrid"]
WORKLOADS = ["etc", "sphinx-ro", "sphinx-wo"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


# Suffixes that choose the epoll sets: +groups one per worker, +oneset one.
SETS = {"groups": lambda t: t, "oneset": lambda t: "1"}


def command(server, threads, port):
    t = str(threads)
    mc_args = ["-u", "root", "-U", "0", "-l", "127.0.0.1", "-m", "1024", "-c", "4096",
               "-p", str(port), "-t", t]
    env = dict(os.environ)
    env.pop("MEMCACHED_SKQ", None)
    env.pop("MEMCACHED_SKQ_PIN", None)
    env.pop("MEMCACHED_SKQ_POLL_GROUPS", None)
    if server == "stock":
        return [STOCK] + mc_args, env
    if server.startswith("patched") or server.startswith("mc-skq"):
        if server.startswith("mc-skq-"):
            policy = server[len("mc-skq-"):]
            policy, *extras = policy.split("+")
            for extra in extras:
                if extra == "pin":
                    env["MEMCACHED_SKQ_PIN"] = "1"
                elif extra in SETS:
                    env["MEMCACHED_SKQ_POLL_GROUPS"] = SETS[extra](t)
                else:
                    sys.exit(f"{server}: unknown suffix +{extra} (+pin, +groups, +oneset)")
            env["MEMCACHED_SKQ"] = policy
        return [MC_SKQ] + mc_args, env
    mode, *extras = server[len("kv-"):].split("+")
    sets = []
    for extra in extras:
        if extra in SETS:
            sets = ["--poll-groups", SETS[extra](t)]
        else:
            sys.exit(f"{server}: unknown suffix +{extra} (+groups, +oneset)")
    return [SKQ, "serve", "kv", "--addr", f"127.0.0.1:{port}", "--workers", t,
            "--arch", "shared", "--mode", mode] + sets, env


def cpu_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def load(port, workload, rate, secs, extra, out_json=None, split=False):
    cmd = [SKQ, "load", "--addr", f"127.0.0.1:{port}", "--protocol", "memcached",
           "--kv-workload", workload, "--rate", str(rate), "--duration", str(secs),
           "--connections", "64", "--quiet"] + extra
    if split:
        cmd += ["--cpus", "1"]
    if out_json:
        cmd += ["--json", out_json]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return r


def point(server, workload, args):
    port = free_port()
    cmd, env = command(server, args.threads, port)
    if args.split:
        cmd = ["taskset", "-c", "0"] + cmd
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.025)
        else:
            raise RuntimeError(f"{server} did not start")
        warm = load(port, workload, args.rate, 0.5, ["--warmup", "0"], split=args.split)
        if warm.returncode not in (0, 3):
            raise RuntimeError(f"warm-up load failed: {warm.stderr}")
        with tempfile.NamedTemporaryFile(suffix=".json") as tf:
            before = cpu_ns(p.pid)
            r = load(port, workload, args.rate, args.secs,
                     ["--warmup", "0", "--no-prefill"], tf.name, split=args.split)
            after = cpu_ns(p.pid)
            d = json.load(open(tf.name))
    finally:
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    errors = sum(v for v in d["errors"].values() if isinstance(v, int))
    return {
        "cpu_us_per_req": (after - before) / 1e3 / max(d["received"], 1),
        "p99_us": d["latency"]["p99"]["value"],
        "p50_us": d["latency"]["p50"]["value"],
        "achieved": d["achieved_rps"],
        "sent": d["sent"],
        "received": d["received"],
        "errors": errors,
        "checks_pass": d["checks"]["pass"],
        "failed": ",".join(k[:-3] for k in ("rate_ok", "ad_ok", "independence_ok",
                                            "lateness_ok", "read_lag_ok")
                           if d["checks"].get(k) is False) or "-",
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rate", type=float, default=15000)
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--servers", default=",".join(SERVERS),
                    help="comma-separated; must include stock (the baseline); "
                         "mc-skq-POLICY+pin pins memcached's workers, "
                         "+groups gives each its own epoll set, "
                         "+oneset one set shared by all")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--split", action="store_true",
                    help="server on CPU 0, generator on CPU 1 (needs --threads 1)")
    ap.add_argument("--out", default=os.path.join(
        ROOT, f"docs/results/capi-memcached-{datetime.date.today().isoformat()}.txt"))
    args = ap.parse_args()
    if args.split and args.threads != 1:
        sys.exit("--split gives the server one CPU (CPU 0): use it with --threads 1")
    if args.split and not {0, 1} <= os.sched_getaffinity(0):
        sys.exit("--split needs two CPUs (0 and 1) in this process's affinity")
    servers = [x for x in args.servers.split(",") if x]
    workloads = [x for x in args.workloads.split(",") if x]
    known = ("stock", "patched-off", "mc-skq-", "kv-")
    bad = [x for x in servers if not x.startswith(known)]
    if "stock" not in servers or bad:
        sys.exit(f"--servers: must include stock; unknown: {', '.join(bad) or '-'}")
    bad = [x for x in workloads if x not in WORKLOADS]
    if not workloads or bad:
        sys.exit(f"--workloads: from {', '.join(WORKLOADS)}; unknown: {', '.join(bad) or '-'}")
    for path in (SKQ, MC_SKQ, STOCK):
        if not os.path.exists(path):
            sys.exit(f"{path} missing: run bash scripts/setup.sh, bash "
                     "scripts/build-memcached-skq.sh and cargo build --release -p skq")
    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    say(f"# capi-memcached: {datetime.datetime.now().isoformat(timespec='seconds')}")
    say(f"# command: python3 scripts/bench/capi-memcached.py --threads {args.threads} "
        f"--rate {args.rate:g} --secs {args.secs:g} --runs {args.runs} "
        f"--servers {','.join(servers)} --workloads {','.join(workloads)}"
        + (" --split" if args.split else ""))
    placement = ("server on CPU 0, generator on CPU 1" if args.split
                 else "server and generator share them")
    say(f"# cores seen: os.cpu_count()={os.cpu_count()}, "
        f"affinity={len(os.sched_getaffinity(0))}; {placement}")
    say(f"# servers: {', '.join(servers)}; baseline: stock; workloads: {', '.join(workloads)}")
    res = {}
    for run in range(args.runs):
        order = servers[run % len(servers):] + servers[:run % len(servers)]
        for w in workloads:
            for s in order:
                r = point(s, w, args)
                res.setdefault((w, s), []).append(r)
                say(f"run={run + 1} workload={w} server={s} " + " ".join(
                    f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in r.items()))
    say("")
    say("# summary: median of runs [min..max]; ratio = server/stock within each run")
    for w in workloads:
        say(f"## {w}")
        for s in servers:
            rs = res[(w, s)]
            base = res[(w, "stock")]
            for key in ("cpu_us_per_req", "p99_us"):
                vals = [r[key] for r in rs]
                ratios = [r[key] / b[key] for r, b in zip(rs, base)]
                say(f"{s:<14} {key:<15} {statistics.median(vals):9.2f} "
                    f"[{min(vals):.2f}..{max(vals):.2f}]  ratio {statistics.median(ratios):.3f} "
                    f"[{min(ratios):.3f}..{max(ratios):.3f}]")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
