#!/usr/bin/env python3
"""Per-phase efficiency figures from `skq bench` runs of
crates/skq-bench/examples/elastic-step.toml: for each curve of each
points.json, the server CPU per request, p99 over the point, and per phase of
the step (window seconds [0,3) 10%, [3,7) 90%, [7,11) 10%: the profile's 4 s
steps start at the 1 s warm-up) the time-weighted mean active workers and
the mean server CPU use (cores) from the point's `series`.

    python3 scripts/bench/elastic_series.py OUT1/points.json [OUT2/points.json ...]
"""
import json
import sys

PHASES = [("low1", 0.0, 3.0), ("high", 3.0, 7.0), ("low2", 7.0, 11.0)]


def step_mean(steps, lo, hi):
    """Time-weighted mean of a step function [(t, value from t on)] over [lo, hi)."""
    total, cur, t_prev = 0.0, None, lo
    for t, v in steps:
        if t <= lo:
            cur = v
            continue
        if t >= hi:
            break
        if cur is not None:
            total += cur * (t - t_prev)
        t_prev, cur = t, v
    if cur is not None:
        total += cur * (hi - t_prev)
    return total / (hi - lo)


def span_mean(spans, lo, hi):
    vals = [c for t, c in spans if lo <= t < hi]
    return sum(vals) / len(vals) if vals else float("nan")


def main(paths):
    for path in paths:
        pts = json.load(open(path))
        print(f"# {path}")
        print("config          cpu_us/req  p99_us    " + "  ".join(
            f"{n}:workers {n}:cores" for n, _, _ in PHASES))
        for p in pts:
            r = p.get("result")
            s = p.get("series")
            if not r or not s:
                print(f"{p['config']:<15} (no result or series)")
                continue
            cpu = r.get("server_cpu") or {}
            per_req = (cpu.get("user_s", 0) + cpu.get("sys_s", 0)) / max(r["received"], 1) * 1e6
            cols = []
            for _, lo, hi in PHASES:
                cols.append(f"{step_mean(s['workers'], lo, hi):11.2f} {span_mean(s['server_cpu'], lo, hi):9.3f}")
            print(f"{p['config']:<15} {per_req:10.1f}  {r['latency']['p99']['value']:8.0f}  " + "  ".join(cols))


if __name__ == "__main__":
    main(sys.argv[1:])
