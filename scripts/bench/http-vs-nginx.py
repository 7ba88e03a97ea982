#!/usr/bin/env python3
"""skq serve http against Debian's nginx, and against itself under IO variance (issue 13).

Drives every server with the same open-loop generator (`skq load --protocol http`) over a
ladder of offered loads, server and generator pinned to disjoint CPUs, and reports per
configuration: max load at SLO (the highest offered load up to which every point had
p99-from-schedule <= SLO, its achieved rate within 5% of target and no errors; files
written before 2026-11-23 04:30 UTC took the highest such point instead), server CPU time per request at each load, the
p99 at every load, and a `wrk` cross-check (an independent closed-loop client) of the
saturation point. Repeated --runs times; ratios are against the baseline measured in the
same run. Every output line says the service mode and IO variance.

  python3 scripts/bench/http-vs-nginx.py --experiment spin --runs 3
  python3 scripts/bench/http-vs-nginx.py --experiment io --runs 3

Writes the document root, nginx.conf and every raw JSON under --out.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from benchlib import free_port, nginx_conf, wait_listening


def page():
    """The ~640-byte page (SKQ §6.7 served small HTML pages of about 640 bytes)."""
    p = "<!DOCTYPE html>\n<html><head><title>skq</title></head><body>\n"
    while len(p) < 620:
        p += "<p>static page for skq serve http</p>\n"
    return (p + "</body></html>\n").encode()


def tree_cpu_s(pid):
    """utime+stime (s) of pid and its direct children (nginx's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        ppid, ut, stime = int(fields[1]), int(fields[11]), int(fields[12])
        if int(entry) == pid or ppid == pid:
            total += ut + stime
    return total / tick


class Server:
    def __init__(self, cfg, args, root, out):
        self.cfg = cfg
        self.port = free_port()
        cpus = args.server_cpus
        if cfg["mode"] == "nginx":
            work = os.path.join(out, "nginx")
            os.makedirs(work, exist_ok=True)
            conf = os.path.join(work, "nginx.conf")
            with open(conf, "w") as f:
                f.write(nginx_conf(cfg["workers"], self.port, work, root))
            nginx = shutil.which("nginx") or "/usr/sbin/nginx"
            cmd = ["taskset", "-c", cpus, nginx, "-p", work, "-c", conf, "-e", "stderr"]
        else:
            cmd = ["taskset", "-c", cpus, args.skq, "serve", "http", "--root", root,
                   "--addr", f"127.0.0.1:{self.port}", "--workers", str(cfg["workers"]),
                   "--mode", cfg["mode"]] + cfg.get("args", [])
        self.log = open(os.path.join(out, f"server-{cfg['name']}.log"), "a")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL)
        wait_listening(self.port, self.proc)

    def cpu_s(self):
        return tree_cpu_s(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def load_point(args, port, rate, out_json):
    cmd = [args.skq, "load", "--addr", f"127.0.0.1:{port}", "--protocol", "http",
           "--http-path", "/index.html", "--rate", str(rate), "--duration", str(args.point_secs),
           "--warmup", str(args.warmup_secs), "--connections", str(args.connections),
           "--cpus", args.load_cpus, "--service-mode-label", "spin", "--quiet", "--json", out_json]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    with open(out_json) as f:
        return json.load(f)


def wrk_point(args, port):
    cmd = ["taskset", "-c", args.load_cpus, "wrk", "-t1", f"-c{args.connections}",
           f"-d{args.wrk_secs}s", "--latency", f"http://127.0.0.1:{port}/index.html"]
    text = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", text)
    scale = {"us": 1.0, "ms": 1000.0, "s": 1e6}
    return (float(rps.group(1)) if rps else None,
            float(p99.group(1)) * scale[p99.group(2)] if p99 else None, text)


def experiment(name, args):
    if name == "spin":
        # Equal worker counts: one server CPU, so one nginx worker and one skq worker.
        return {
            "what": "640-byte page, spin (real work), 1 worker each, server and generator on disjoint CPUs",
            "slo_us": 1000.0,
            "baseline": "nginx",
            "rates": [5000, 10000, 15000, 20000, 25000, 30000, 35000],
            "configs": [
                {"name": "nginx", "mode": "nginx", "workers": 1},
                {"name": "hybrid", "mode": "hybrid", "workers": 1},
                # epoll-1to1 and nginx take up to 64 events per wait; skq's default is 1
                # (every queued event stays stealable), which one worker does not need.
                {"name": "hybrid-batch64", "mode": "hybrid", "workers": 1, "args": ["--batch", "64"]},
                {"name": "epoll-1to1", "mode": "epoll-1to1", "workers": 1},
            ],
            "io_label": "io=none",
        }
    miss, lat = args.io_miss, args.io_latency_us
    if args.io_mode == "fadvise":
        io = ["--io-variance", "fadvise", "--io-miss", str(miss)]
        label = f"io=fadvise miss={miss:.3f}"
    else:
        io = ["--io-variance", "emulate", "--io-miss", str(miss), "--io-latency-us", str(lat), "--io-dist", "exp"]
        label = f"io=emulated miss={miss:.3f} latency=exp({lat:g}us)"
    return {
        "what": f"640-byte page, 8 workers on 1 server CPU, page-cache misses ({args.io_mode})",
        "slo_us": args.slo_us or 5000.0,
        "baseline": "epoll-1to1",
        "rates": args.rates or [2000, 4000, 6000, 8000, 10000, 12000, 14000],
        "configs": [
            {"name": "epoll-1to1", "mode": "epoll-1to1", "workers": 8, "args": io},
            {"name": "hybrid", "mode": "hybrid", "workers": 8, "args": io},
            {"name": "hybrid+steal", "mode": "hybrid+steal", "workers": 8, "args": io},
        ],
        "io_label": label,
    }


def summarize(path, slo, baseline):
    """Re-reads a saved output of this script and summarizes it by the median over runs
    (a VM stall that wrecks one run's point does not decide the figure)."""
    data = {}  # name -> rate -> list of (p99, cpu, achieved)
    name = None
    for line in open(path):
        m = re.match(r"run (\d+) · (\S+) \(", line)
        if m:
            name = m.group(2)
            continue
        m = re.match(r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+(PASS|FAIL)", line)
        if m and name:
            rate, ach, _p50, p99, cpu = (int(m.group(1)), int(m.group(2)), int(m.group(3)),
                                         int(m.group(4)), float(m.group(5)))
            data.setdefault(name, {}).setdefault(rate, []).append((p99, cpu, ach))
        elif not line.startswith(" "):
            name = None

    def med(v):
        v = sorted(v)
        return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2

    print(f"# summary by median over runs of {path}; SLO p99 <= {slo:.0f} us; baseline {baseline}")
    print("config          load: median p99 us (runs)  ...")
    best = {}
    for n, by_rate in data.items():
        cells, mx = [], 0
        stop = False
        for rate in sorted(by_rate):
            p99s = [x[0] for x in by_rate[rate]]
            m = med(p99s)
            ok = all(abs(x[2] - rate) <= 0.05 * rate for x in by_rate[rate])
            if not stop and m <= slo and ok:
                mx = rate
            else:
                stop = True
            cells.append(f"{rate}:{m:.0f} ({'/'.join(str(p) for p in p99s)})")
        best[n] = mx
        print(f"{n:14s}  " + "  ".join(cells))
    print("\nconfig          max load @SLO on median p99   ratio vs baseline   median cpu us/req at each load")
    for n, by_rate in data.items():
        b = best.get(baseline, 0)
        ratio = f"{best[n] / b:.2f}" if b else "n/a (baseline 0)"
        cpu = "  ".join(f"{rate}:{med([x[1] for x in by_rate[rate]]):.1f}" for rate in sorted(by_rate))
        print(f"{n:14s}  {best[n]:>10d} req/s              {ratio:18s}  {cpu}")
    print("\nwidest gap of median p99 (baseline / config) at the same offered load:")
    for n, by_rate in data.items():
        if n == baseline or baseline not in data:
            continue
        gaps = [(med([x[0] for x in data[baseline][r]]) / med([x[0] for x in by_rate[r]]), r)
                for r in sorted(by_rate) if r in data[baseline]]
        g = max(gaps)
        print(f"{n:14s}  {g[0]:.2f}x at {g[1]} req/s")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", choices=["spin", "io"], default="spin")
    ap.add_argument("--skq", default="target/release/skq")
    ap.add_argument("--out", default=None)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--point-secs", type=float, default=3.0)
    ap.add_argument("--warmup-secs", type=float, default=0.5)
    ap.add_argument("--wrk-secs", type=int, default=3)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--load-cpus", default="1")
    ap.add_argument("--io-mode", choices=["emulate", "fadvise"], default="emulate",
                    help="io experiment: emulated storage latency, or real misses (POSIX_FADV_DONTNEED)")
    ap.add_argument("--io-miss", type=float, default=0.1, help="io experiment: fraction of reads that miss")
    ap.add_argument("--io-latency-us", type=float, default=1000.0, help="io experiment: mean emulated miss latency")
    ap.add_argument("--slo-us", type=float, default=None, help="override the experiment's p99 SLO")
    ap.add_argument("--rates", type=lambda v: [int(x) for x in v.split(",")], default=None,
                    help="override the offered loads (comma-separated req/s)")
    ap.add_argument("--summarize", metavar="FILE", default=None,
                    help="summarize a saved output of this script by the median over runs, and exit")
    ap.add_argument("--baseline", default=None, help="with --summarize: the baseline configuration")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.summarize, args.slo_us or 1000.0, args.baseline or "nginx")
        return
    exp = experiment(args.experiment, args)
    if args.slo_us:
        exp["slo_us"] = args.slo_us
    if args.rates:
        exp["rates"] = args.rates
    out = os.path.abspath(args.out or f"results/http-{args.experiment}")
    os.makedirs(out, exist_ok=True)
    root = os.path.abspath(os.path.join(out, "www"))
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "index.html"), "wb") as f:
        f.write(page())
    cores = os.cpu_count()
    slo = exp["slo_us"]
    print(f"# skq serve http, experiment `{args.experiment}`: {exp['what']}")
    print(f"# cores seen {cores}; server CPUs {args.server_cpus}, generator CPUs {args.load_cpus}; "
          f"service: spin (real work), {exp['io_label']}; page {len(page())} bytes; "
          f"{args.connections} connections; {args.point_secs}s per point after {args.warmup_secs}s warm-up; "
          f"SLO p99 <= {slo:.0f} us; baseline {exp['baseline']}")
    print("# command: python3 scripts/bench/http-vs-nginx.py " + " ".join(sys.argv[1:]))
    summary = {c["name"]: [] for c in exp["configs"]}
    for run in range(1, args.runs + 1):
        for cfg in exp["configs"]:
            rows = []
            srv = Server(cfg, args, root, out)
            try:
                for rate in exp["rates"]:
                    c0 = srv.cpu_s()
                    t0 = time.time()
                    j = load_point(args, srv.port, rate,
                                   os.path.join(out, f"run{run}-{cfg['name']}-{rate}.json"))
                    c1 = srv.cpu_s()
                    sent_total = j["achieved_rps"] * (args.point_secs + args.warmup_secs)
                    cpu_us = (c1 - c0) * 1e6 / sent_total if sent_total else float("nan")
                    rows.append({
                        "rate": rate, "achieved": j["achieved_rps"], "p99": j["latency"]["p99"]["value"],
                        "p50": j["latency"]["p50"]["value"], "pass": j["checks"]["pass"],
                        "rate_ok": abs(j["achieved_rps"] - rate) <= 0.05 * rate,
                        "errors": sum(j["errors"].values()), "cpu_us": cpu_us,
                        "wall": time.time() - t0,
                    })
                wrk_rps, wrk_p99, wrk_text = wrk_point(args, srv.port)
                with open(os.path.join(out, f"run{run}-{cfg['name']}-wrk.txt"), "w") as f:
                    f.write(wrk_text)
            finally:
                srv.stop()
            # Max load at SLO: the highest offered load up to which every point met the SLO
            # (a lucky quiet point above a failed one does not count).
            max_at_slo = 0
            for r in rows:
                if not (r["p99"] <= slo and r["rate_ok"] and r["errors"] == 0):
                    break
                max_at_slo = r["rate"]
            peak = max(r["achieved"] for r in rows)
            summary[cfg["name"]].append({"max_at_slo": max_at_slo, "rows": rows,
                                         "wrk_rps": wrk_rps, "wrk_p99": wrk_p99, "peak": peak})
            print(f"\nrun {run} · {cfg['name']} ({cfg['workers']} workers, {exp['io_label']}, spin)")
            print("  offered   achieved   p50 us    p99 us  cpu us/req  self-check")
            for r in rows:
                print(f"  {r['rate']:7d}  {r['achieved']:9.0f}  {r['p50']:7.0f}  {r['p99']:8.0f}  "
                      f"{r['cpu_us']:10.2f}  {'PASS' if r['pass'] else 'FAIL'}"
                      f"{'' if r['errors'] == 0 else ' errors=' + str(r['errors'])}")
            print(f"  max load @ p99<={slo:.0f}us: {max_at_slo} req/s; open-loop peak achieved {peak:.0f} req/s; "
                  f"wrk (closed loop, {args.connections} conns): {wrk_rps} req/s, p99 {wrk_p99} us")
            sys.stdout.flush()
    base = exp["baseline"]
    print(f"\n## summary over {args.runs} runs (ratio = config / {base} in the same run)")
    print("config          max@SLO per run              ratio per run         min..max ratio   "
          "cpu us/req @ 2nd load (per run)      wrk req/s per run")
    for name, runs in summary.items():
        ratios = []
        for i, r in enumerate(runs):
            b = summary[base][i]["max_at_slo"]
            ratios.append(r["max_at_slo"] / b if b else float("nan"))
        cpu = [r["rows"][1]["cpu_us"] for r in runs]
        print(f"{name:14s}  {str([r['max_at_slo'] for r in runs]):28s} "
              f"{str([round(x, 2) for x in ratios]):22s} "
              f"{min(ratios):.2f}..{max(ratios):.2f}        "
              f"{str([round(c, 2) for c in cpu]):36s} {[round(r['wrk_rps'] or 0) for r in runs]}")
    print("\np99 (us) at each offered load, per run:")
    for name, runs in summary.items():
        for i, r in enumerate(runs):
            print(f"{name:14s} run {i + 1}: " + "  ".join(f"{row['rate']}:{row['p99']:.0f}" for row in r["rows"]))
    # The widest p99 gap between each config and the baseline at the same offered load.
    print("\nwidest p99 gap vs baseline (baseline p99 / config p99 at the same offered load, per run):")
    for name, runs in summary.items():
        if name == base:
            continue
        gaps = []
        for i, r in enumerate(runs):
            best = max(((b["p99"] / c["p99"], c["rate"]) for b, c in zip(summary[base][i]["rows"], r["rows"])
                        if c["p99"] > 0), default=(float("nan"), 0))
            gaps.append(f"{best[0]:.2f}x at {best[1]}")
        print(f"{name:14s} " + "; ".join(gaps))


if __name__ == "__main__":
    main()
