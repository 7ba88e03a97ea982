#!/usr/bin/env python3
"""Elastic workers and cooperative checkpoints (issue 15), measured.

--experiment step: one open-loop run per server of a step schedule, 10% -> 90% -> 10% of
  the capacity of 8 workers (`skq load --rate-profile steps=0.1,0.9,0.1@STEP`), emulated
  service (exponential, S = --mean-us), 8 workers at most: elastic hybrid (--min-workers 1)
  against fixed 8-worker hybrid, epoll-1to1 and tokio, in one run, repeated --runs times.
  Per server and phase: server CPU seconds (utime+stime from /proc/PID/stat, sampled every
  50 ms and interpolated at the phase boundaries) per request, p99 over the whole window;
  for the elastic server, when its worker count changed after each step (from its own
  decision log, on the same CLOCK_MONOTONIC as the generator's schedule). Ratios are
  against fixed hybrid of the same repetition.
--experiment checkpoint: the RPC server (hybrid, 8 workers, emulated service) under
  bimodal-2 (0.1% of requests 1000x longer) with and without --checkpoint-us, over a ladder
  of loads: max load at SLO (highest load up to which every point had p99 <= SLO =
  --slo-factor x S, achieved within 5% of target, no errors).

Run under the measurement lock, release build:
  cargo build --release -p skq
  flock /tmp/skq-measure.lock python3 scripts/bench/elastic.py --experiment step --runs 2
  flock /tmp/skq-measure.lock python3 scripts/bench/elastic.py --experiment checkpoint
Raw JSON (generator results, server stats, CPU samples) goes under --out.
"""
import argparse
import json
import os
import signal
import subprocess
import threading
import time

from benchlib import free_port, wait_listening

SKQ = os.path.join(os.path.dirname(__file__), "..", "..", "target", "release", "skq")
TICK = os.sysconf("SC_CLK_TCK")




def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Sampler(threading.Thread):
    """(CLOCK_MONOTONIC ns, cumulative CPU s) of a process every 50 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.samples, self.stop = pid, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append((time.clock_gettime_ns(time.CLOCK_MONOTONIC), cpu_s(self.pid)))
            except OSError:
                return
            self.stop.wait(0.05)

    def at(self, t):
        """Cumulative CPU at monotonic ns t, linearly interpolated."""
        s = self.samples
        for (t0, c0), (t1, c1) in zip(s, s[1:]):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / max(1, t1 - t0)
        return s[-1][1] if t > s[-1][0] else s[0][1]


def start_server(args, mode, extra, stats_path, secs):
    port = free_port()
    cmd = [SKQ, "serve", "rpc", "--addr", f"127.0.0.1:{port}", "--workers", str(args.workers),
           "--mode", mode, "--service", "emulate", "--stats-json", stats_path,
           "--duration", str(secs)] + extra
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_listening(port, proc)
    return port, proc


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_load(port, rate, out, extra):
    cmd = [SKQ, "load", "--addr", f"127.0.0.1:{port}", "--rate", str(rate), "--quiet",
           "--json", out] + extra
    # exit 3: the run completed but a self-check failed (judged from the JSON)
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    if r.returncode not in (0, 3):
        raise RuntimeError(f"skq load exited with {r.returncode}")
    with open(out) as f:
        return json.load(f)


STEP_SERVERS = [
    ("elastic-hybrid", "hybrid", ["--min-workers", "1"]),
    ("hybrid", "hybrid", []),
    ("epoll-1to1", "epoll-1to1", []),
    ("tokio", "tokio", []),
]


def step(args):
    cap = args.workers * 1e6 / args.mean_us
    st = args.step_s
    warm = 1.0
    dur = 3 * st - warm
    phases = [("low1", warm, st), ("high", st, 2 * st), ("low2", 2 * st, 3 * st)]
    rows = []
    for run in range(args.runs):
        for name, mode, extra in STEP_SERVERS:
            tag = f"{args.out}/step-{name}-r{run}"
            port, proc = start_server(args, mode, extra, tag + "-server.json", dur + warm + 30)
            sampler = Sampler(proc.pid)
            sampler.start()
            r = run_load(port, cap, tag + "-load.json", [
                "--mean-us", str(args.mean_us), "--workload", "exponential",
                "--connections", str(args.connections),
                "--rate-profile", f"steps=0.1,0.9,0.1@{st}", "--warmup", str(warm),
                "--duration", str(dur), "--interval-ms", "250",
                "--service-mode-label", "emulate"])
            time.sleep(0.2)
            sampler.stop.set()
            sampler.join()
            stop_server(proc)
            with open(tag + "-server.json") as f:
                srv = json.load(f)
            with open(tag + "-cpu.json", "w") as f:
                json.dump(sampler.samples, f)
            t0 = r["schedule_start_ns"]
            row = {"server": name, "run": run, "p99_us": r["latency"]["p99"]["value"],
                   "errors": sum(r["errors"].values()), "pass": r["checks"]["pass"],
                   "notes": r["checks"]["notes"]}
            for ph, a, b in phases:
                cpu = sampler.at(t0 + int(b * 1e9)) - sampler.at(t0 + int(a * 1e9))
                reqs = sum(i["achieved_rps"] * 0.25 for i in r["intervals"]
                           if a <= i["start_s"] + warm < b)
                row[ph + "_cpu_s"] = cpu
                row[ph + "_reqs"] = reqs
                row[ph + "_cpu_us_per_req"] = cpu / reqs * 1e6 if reqs else None
            sched = srv.get("scheduler") or {}
            if sched.get("elastic"):
                origin = sched["started_ns"]
                dec = [(origin + t * 1e6, a) for t, _, a in sched["elastic"]]
                for label, at, cond in [
                    ("up", t0 + st * 1e9, lambda a: a >= args.workers),
                    ("down", t0 + 2 * st * 1e9, lambda a: a < args.workers),
                ]:
                    after = [t for t, a in dec if t >= at and cond(a)]
                    row[f"follow_{label}_ms"] = (after[0] - at) / 1e6 if after else None
                row["active_series"] = [((t - t0) / 1e9, a) for t, a in dec
                                        if t0 <= t <= t0 + 3 * st * 1e9]
            rows.append(row)
            print(f"run {run} {name}: p99 {row['p99_us']:.0f} us, cpu low1 {row['low1_cpu_s']:.3f} s "
                  f"high {row['high_cpu_s']:.3f} s low2 {row['low2_cpu_s']:.3f} s"
                  + (f", follow up {row.get('follow_up_ms')} ms down {row.get('follow_down_ms')} ms"
                     if "follow_up_ms" in row else ""), flush=True)
    with open(f"{args.out}/step-summary.json", "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print(f"step schedule 10% -> 90% -> 10% of {cap:.0f} req/s (8 workers x S={args.mean_us} us, "
          f"exponential), {st} s per step, emulated service, cores seen {os.cpu_count()}, "
          f"shared machine; elastic period 20 ms")
    print(f"{'server':<15} {'run':>3} {'p99 us':>9} {'x hyb':>6} {'cpu low1 s':>10} {'x hyb':>6} "
          f"{'cpu high s':>10} {'cpu low2 s':>10} {'x hyb':>6} {'us/req':>7} {'up ms':>6} {'down ms':>7}")
    for row in rows:
        base = next(b for b in rows if b["server"] == "hybrid" and b["run"] == row["run"])
        total = sum(row[p + "_cpu_s"] for p, _, _ in phases)
        reqs = sum(row[p + "_reqs"] for p, _, _ in phases)
        f = lambda v: "-" if v is None else f"{v:.0f}"
        print(f"{row['server']:<15} {row['run']:>3} {row['p99_us']:>9.0f} "
              f"{row['p99_us'] / base['p99_us']:>6.2f} {row['low1_cpu_s']:>10.3f} "
              f"{row['low1_cpu_s'] / base['low1_cpu_s']:>6.2f} {row['high_cpu_s']:>10.3f} "
              f"{row['low2_cpu_s']:>10.3f} {row['low2_cpu_s'] / base['low2_cpu_s']:>6.2f} "
              f"{total / reqs * 1e6:>7.1f} {f(row.get('follow_up_ms')):>6} "
              f"{f(row.get('follow_down_ms')):>7}")
    for row in rows:
        if "active_series" in row:
            changes, prev = [], None
            for t, a in row["active_series"]:
                if a != prev:
                    changes.append(f"{t:.2f}s:{a}")
                    prev = a
            print(f"elastic run {row['run']}, active workers at each change: " + " ".join(changes))
        bad = [n for n in row["notes"] if not n.startswith("info")]
        if bad or row["errors"]:
            print(f"{row['server']} run {row['run']}: errors {row['errors']}; " + "; ".join(bad))


def checkpoint(args):
    cap = args.workers * 1e6 / args.mean_us
    slo = args.slo_factor * args.mean_us
    variants = []
    for mode in args.modes:
        variants.append((f"{mode} no-checkpoints", mode, []))
        variants.append((f"{mode} checkpoint-{args.checkpoint_us}us", mode,
                         ["--checkpoint-us", str(args.checkpoint_us)]))
    rows = []
    for run in range(args.runs):
        for name, mode, extra in variants:
            for load in args.loads:
                tag = f"{args.out}/ckpt-{name.replace(' ', '-')}-{load}-r{run}"
                port, proc = start_server(args, mode, extra, tag + "-server.json", 120)
                r = run_load(port, cap * load, tag + "-load.json", [
                    "--mean-us", str(args.mean_us), "--workload", "bimodal-2",
                    "--connections", str(args.connections), "--warmup", "0.5",
                    "--duration", str(args.point_s), "--service-mode-label", "emulate"])
                stop_server(proc)
                p99 = r["latency"]["p99"]["value"]
                ok = (p99 <= slo and sum(r["errors"].values()) == 0
                      and r["achieved_rps"] >= 0.95 * r["target_rps"])
                rows.append({"variant": name, "run": run, "load": load, "p99_us": p99, "ok": ok,
                             "achieved_rps": r["achieved_rps"]})
                print(f"run {run} {name} load {load}: p99 {p99:.0f} us {'ok' if ok else 'over'}",
                      flush=True)
    with open(f"{args.out}/checkpoint-summary.json", "w") as f:
        json.dump(rows, f, indent=1)
    print()
    print(f"bimodal-2 (99.9% 0.5 S, 0.1% 500.5 S; S = {args.mean_us} us), "
          f"{args.workers} workers, {args.connections} connections, emulated service, "
          f"SLO {slo:.0f} us, cores seen {os.cpu_count()}, shared machine")
    for run in range(args.runs):
        for name, _, _ in variants:
            pts = [x for x in rows if x["variant"] == name and x["run"] == run]
            best = 0.0
            for x in sorted(pts, key=lambda x: x["load"]):
                if not x["ok"]:
                    break
                best = x["load"]
            print(f"run {run} {name:<32} max load at SLO {best:.2f} "
                  f"({best * cap:.0f} req/s); p99 by load: "
                  + ", ".join(f"{x['load']}: {x['p99_us']:.0f}" for x in pts))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiment", choices=["step", "checkpoint"], required=True)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--mean-us", type=float, default=1000.0)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--step-s", type=float, default=4.0)
    ap.add_argument("--modes", nargs="+", default=["hybrid-steal", "hybrid"],
                    help="checkpoint experiment's skq modes")
    ap.add_argument("--checkpoint-us", type=int, default=50)
    ap.add_argument("--loads", type=float, nargs="+", default=[0.3, 0.5, 0.6, 0.7, 0.8])
    ap.add_argument("--point-s", type=float, default=3.0)
    ap.add_argument("--slo-factor", type=float, default=10.0)
    ap.add_argument("--out", default="results/elastic")
    args = ap.parse_args()
    if not os.path.exists(SKQ):
        raise SystemExit(f"error: {SKQ} not found: run cargo build --release -p skq first")
    os.makedirs(args.out, exist_ok=True)
    (step if args.experiment == "step" else checkpoint)(args)


if __name__ == "__main__":
    main()
