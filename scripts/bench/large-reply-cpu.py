#!/usr/bin/env python3
"""Server CPU per reply for large replies, before and after a change, beside
memcached and nginx, same run.

    python3 scripts/bench/large-reply-cpu.py --before OLD_SKQ [--after target/release/skq]
        [--runs 2] [--secs 4] [--kv-rate 2000] [--value-kib 64] [--http-rate 100]
        [--file-mib 4] [--what kv,http] [--out FILE]

What it measures (loopback, one server thread pinned to CPU 0, the generator
`skq load` of --after pinned to CPU 1, open loop at a fixed rate):
  kv    gets of --value-kib KiB values (custom mix, get ratio 1.0, 64 keys,
        prefilled) from memcached -t 1, `skq serve kv --arch shared --mode
        hybrid --workers 1` and `--arch tpc --workers 1` of each binary;
  http  GET of one --file-mib MiB file from nginx (one worker, configured as
        its docs advise for static files: sendfile, tcp_nopush,
        open_file_cache; benchlib.nginx_conf) and `skq serve http --mode
        hybrid --workers 1` of each binary.

Per server: CPU (sum of the server's threads' /proc schedstat; nginx's
workers included), voluntary and involuntary context switches, each per
reply received, p50/p99 and whether `skq load`'s self-checks passed. The
servers run interleaved, run after run, so drift hits them alike; the table
gives each run and the after/before ratio per run.

Measure on a quiet machine (load below 0.3, nothing else running). Needs
`bash scripts/setup.sh` (memcached, nginx) and both binaries built.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchlib import free_port, nginx_conf, proc_cost, stop, wait_listening

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pinned(cmd):
    return ["taskset", "-c", "0"] + cmd


def kv_server(name, binary, port):
    if name == "memcached":
        return pinned(["/usr/bin/memcached", "-u", "root", "-U", "0", "-l", "127.0.0.1",
                       "-m", "1024", "-c", "4096", "-p", str(port), "-t", "1"])
    arch = ["--arch", "tpc"] if name.endswith("tpc") else ["--arch", "shared", "--mode", "hybrid"]
    return pinned([binary, "serve", "kv", "--addr", f"127.0.0.1:{port}", "--workers", "1"] + arch)


def http_server(name, binary, port, root, work):
    if name == "nginx":
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(nginx_conf(1, port, work, root, static_tuned=True))
        return pinned(["/usr/sbin/nginx", "-c", conf, "-p", work])
    return pinned([binary, "serve", "http", "--root", root, "--addr", f"127.0.0.1:{port}",
                   "--mode", "hybrid", "--workers", "1"])


def measure(cmd, port, load, args, tree):
    """Starts `cmd`, warms it, then measures one `skq load` pass."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tmp = tempfile.mkdtemp(prefix="large-reply-")
    try:
        wait_listening(port, p)
        warm = subprocess.run(load + ["--duration", "0.5", "--warmup", "0"],
                              capture_output=True, text=True, timeout=120)
        if warm.returncode not in (0, 3):
            raise RuntimeError(f"warm-up failed: {warm.stderr[:300]}")
        out = os.path.join(tmp, "load.json")
        before = proc_cost(p.pid, tree)
        r = subprocess.run(load + ["--duration", str(args.secs), "--warmup", "0",
                                   "--no-prefill", "--json", out],
                           capture_output=True, text=True, timeout=300)
        after = proc_cost(p.pid, tree)
        if r.returncode not in (0, 3):
            raise RuntimeError(f"load failed: {r.stderr[:300]}")
        d = json.load(open(out))
    finally:
        stop(p)
        shutil.rmtree(tmp, ignore_errors=True)
    n = max(d["received"], 1)
    return {
        "replies": d["received"],
        "cpu_us": (after[0] - before[0]) / 1e3 / n,
        "vol": (after[1] - before[1]) / n,
        "invol": (after[2] - before[2]) / n,
        "p50": d["latency"]["p50"]["value"],
        "p99": d["latency"]["p99"]["value"],
        "pass": d["checks"]["pass"],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the skq binary before the change")
    ap.add_argument("--after", default=os.path.join(ROOT, "target/release/skq"))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--secs", type=float, default=4.0)
    ap.add_argument("--kv-rate", type=float, default=2000.0)
    ap.add_argument("--value-kib", type=int, default=64)
    ap.add_argument("--http-rate", type=float, default=100.0)
    ap.add_argument("--file-mib", type=int, default=4)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--what", default="kv,http")
    ap.add_argument("--out", default=os.path.join(
        ROOT, f"docs/results/large-reply-cpu-{datetime.date.today()}.txt"))
    args = ap.parse_args()
    for b in (args.before, args.after):
        if not os.access(b, os.X_OK):
            sys.exit(f"large-reply-cpu: {b} is not an executable skq binary")
    what = [w.strip() for w in args.what.split(",") if w.strip()]
    if not set(what) <= {"kv", "http"}:
        sys.exit(f"large-reply-cpu: --what takes kv and/or http, not {args.what!r}")

    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    say(f"# python3 scripts/bench/large-reply-cpu.py {' '.join(sys.argv[1:])}")
    say(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load "
        f"{open('/proc/loadavg').read().split()[0]}; server on CPU 0, generator on CPU 1; "
        f"before={args.before} after={args.after}")
    gen = args.after
    work = tempfile.mkdtemp(prefix="large-reply-work-")
    root = os.path.join(work, "www")
    os.makedirs(root)
    with open(os.path.join(root, "big.bin"), "wb") as f:
        f.write(os.urandom(args.file_mib << 20))
    # nginx's workers run as an unprivileged user: let them read the file.
    for d in (work, root):
        os.chmod(d, 0o755)
    os.chmod(os.path.join(root, "big.bin"), 0o644)
    results = {}
    try:
        for run in range(1, args.runs + 1):
            if "kv" in what:
                for name, binary in (("memcached", None), ("kv-hybrid before", args.before),
                                     ("kv-hybrid after", args.after),
                                     ("kv-tpc before", args.before), ("kv-tpc after", args.after)):
                    port = free_port()
                    load = [gen, "load", "--addr", f"127.0.0.1:{port}", "--protocol", "memcached",
                            "--kv-workload", "custom", "--value-size", str(args.value_kib << 10),
                            "--get-ratio", "1.0", "--keyspace", "64", "--rate", str(args.kv_rate),
                            "--connections", str(args.connections), "--cpus", "1", "--quiet"]
                    r = measure(kv_server(name.split()[0], binary, port), port, load, args, False)
                    results[(f"kv {args.value_kib} KiB", name, run)] = r
                    say(f"run {run} kv {name:18} {r['cpu_us']:8.1f} µs/reply  "
                        f"cs {r['vol']:.2f}+{r['invol']:.2f}  p99 {r['p99']:.0f} µs  "
                        f"{'pass' if r['pass'] else 'FAIL'}  ({r['replies']} replies)")
            if "http" in what:
                for name, binary in (("nginx", None), ("http before", args.before),
                                     ("http after", args.after)):
                    port = free_port()
                    nginx_work = tempfile.mkdtemp(prefix="nginx-", dir=work)
                    load = [gen, "load", "--addr", f"127.0.0.1:{port}", "--protocol", "http",
                            "--http-path", "/big.bin", "--rate", str(args.http_rate),
                            "--connections", str(args.connections), "--cpus", "1", "--quiet"]
                    cmd = http_server(name.split()[0], binary, port, root, nginx_work)
                    r = measure(cmd, port, load, args, name == "nginx")
                    results[(f"http {args.file_mib} MiB", name, run)] = r
                    say(f"run {run} http {name:16} {r['cpu_us']:8.1f} µs/reply  "
                        f"cs {r['vol']:.2f}+{r['invol']:.2f}  p99 {r['p99']:.0f} µs  "
                        f"{'pass' if r['pass'] else 'FAIL'}  ({r['replies']} replies)")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    say("")
    say("server CPU µs per reply (each run), after/before and × the stock server per run:")
    for group, stock, pairs in ((f"kv {args.value_kib} KiB", "memcached",
                                 ["kv-hybrid", "kv-tpc"]),
                                (f"http {args.file_mib} MiB", "nginx", ["http"])):
        if not any(k[0] == group for k in results):
            continue
        runs = range(1, args.runs + 1)
        st = [results[(group, stock, k)]["cpu_us"] for k in runs]
        say(f"  {group:12} {stock:10} {' / '.join(f'{x:.1f}' for x in st)}")
        for srv in pairs:
            b = [results[(group, f"{srv} before", k)]["cpu_us"] for k in runs]
            a = [results[(group, f"{srv} after", k)]["cpu_us"] for k in runs]
            say(f"  {group:12} {srv:10} before {' / '.join(f'{x:.1f}' for x in b)}, after "
                f"{' / '.join(f'{x:.1f}' for x in a)}; after/before "
                f"{' / '.join(f'{y / x:.2f}' for x, y in zip(b, a))}; after × {stock} "
                f"{' / '.join(f'{y / s:.2f}' for s, y in zip(st, a))}")
    fails = sum(1 for r in results.values() if not r["pass"])
    say(f"points whose load self-checks failed: {fails} of {len(results)}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
