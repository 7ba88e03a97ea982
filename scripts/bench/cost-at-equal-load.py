#!/usr/bin/env python3
"""Server CPU and context switches per reply at equal offered load, against
the sweep's baseline, from skq bench runs.

    python3 scripts/bench/cost-at-equal-load.py BASELINE RUN_DIR [RUN_DIR ...]

A sweep's "CPU per reply" column is taken over the loads each configuration
reached, so two configurations with different max loads are averaged over
different rates. This pairs every point with BASELINE's point at the same
workload, connection count, offered load and run, and prints per (workload,
connections, mode): the ratio of server CPU per reply at each load and run,
their median and range, and the context switches per reply (voluntary +
involuntary) of both. Cost does not depend on the generator keeping its
schedule the way p99 does, so points that failed a latency self-check are
kept; a point the sweep could not measure is skipped. With --passing, a pair
counts only when both of its points passed every self-check and neither was
disturbed nor delayed by the host (the figure to cite from a run whose
saturated points failed their checks). `skq pool --cpu-vs BASELINE RUN_DIR ...`
applies the same filter by default and pools several runs per load; on one
run it gives the same per-load ratios (checked on
docs/results/quiet-2026-12-07d/main1), so prefer it where runs are pooled.

    python3 scripts/bench/cost-at-equal-load.py [--passing] BASELINE RUN_DIR ...
"""
import collections
import json
import os
import statistics
import sys


def per_reply(pt):
    res = pt.get("result") or {}
    got = res.get("received") or 0
    cpu = res.get("server_cpu")
    cs = pt.get("server_ctx_switches")
    if not got or not cpu:
        return None
    us = (cpu["user_s"] + cpu["sys_s"]) * 1e6 / got
    sw = (cs["voluntary"] + cs["involuntary"]) / got if cs else float("nan")
    return us, sw


def clean(pt):
    """Passed every self-check, not disturbed, not delayed by the host."""
    checks = (pt.get("result") or {}).get("checks") or {}
    return (
        checks.get("pass", False)
        and not (pt.get("disturbance") or {}).get("disturbed", False)
        and not (pt.get("overshoot") or {}).get("delayed", False)
    )


def main():
    args = sys.argv[1:]
    passing = "--passing" in args
    args = [a for a in args if a != "--passing"]
    if len(args) < 2:
        sys.exit(__doc__)
    base = args[0]
    cost = {}
    for run, path in enumerate(args[1:]):
        for pt in json.load(open(os.path.join(path, "points.json"))):
            c = per_reply(pt)
            if c is None or (passing and not clean(pt)):
                continue
            meta = pt["result"]["meta"]
            key = (meta["workload"], meta["connections"], pt["config"])
            cost[(key, pt["target_rps"], run)] = c
    rows = collections.defaultdict(list)
    for ((wl, conns, mode), rate, run), (us, sw) in cost.items():
        if mode == base:
            continue
        b = cost.get(((wl, conns, base), rate, run))
        if b is None:
            continue
        rows[(wl, conns, mode)].append((rate, run, us / b[0], sw, b[1]))
    mw = max([11] + [len(k[2]) for k in rows])
    print(f"{'workload':<10} {'conns':>5} {'mode':<{mw}} {'CPU × ' + base:>16} "
          f"{'range':>11}  {'ctx sw/reply':>13} {base:>10}  ratios (rate/run)")
    for key in sorted(rows):
        r = sorted(rows[key])
        ratios = [x[2] for x in r]
        sw = statistics.median(x[3] for x in r)
        bsw = statistics.median(x[4] for x in r)
        each = " ".join(f"{x[2]:.2f}" for x in r)
        print(f"{key[0]:<10} {key[1]:>5} {key[2]:<{mw}} {statistics.median(ratios):>16.2f} "
              f"{min(ratios):>5.2f}–{max(ratios):<5.2f}  {sw:>13.2f} {bsw:>10.2f}  {each}")


if __name__ == "__main__":
    main()
