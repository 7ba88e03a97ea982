#!/usr/bin/env python3
"""Thread-per-core against memcached at equal offered load, from skq bench runs.

    python3 scripts/bench/sphinx-compare.py RUN_DIR [RUN_DIR ...]

Reads each run's points.json (from `skq bench --config
crates/skq-bench/examples/sphinx.toml`), pairs every other configuration's point (kv-tpc, kv-tpc-strict, kv-cpu,
kv-hybrid) with memcached's point at the same workload, connection
count, offered load and run, and prints per (workload, connections, mode):
the p99 ratio to memcached at each load and run, their median, and in how
many pairs the mode's p99 was lower. A pair where either point failed a
self-check is marked `*`; the median is given over all pairs and over the
pairs where both passed.
"""
import collections
import json
import os
import statistics
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    p99 = {}
    for run, path in enumerate(sys.argv[1:]):
        for pt in json.load(open(os.path.join(path, "points.json"))):
            res = pt.get("result")
            if not res:
                continue
            meta = res["meta"]
            key = (meta["workload"].replace("kv:", ""), meta["connections"], pt["config"],
                   pt["load"], run)
            p99[key] = (res["latency"]["p99"]["value"], bool(res["checks"]["pass"]))
    rows = collections.defaultdict(list)
    for (w, c, mode, load, run), (v, ok) in p99.items():
        if mode == "memcached":
            continue
        base = p99.get((w, c, "memcached", load, run))
        if base:
            rows[(w, c, mode)].append((load, run, v / base[0], ok and base[1]))
    print(f"{'workload':<10} {'conns':>5} {'mode':<10} {'median':>7} {'median ok':>9} "
          f"{'lower':>7}  ratios (load/run, * = a self-check failed)")
    for (w, c, mode) in sorted(rows):
        r = sorted(rows[(w, c, mode)])
        ok = [x[2] for x in r if x[3]]
        lower = sum(1 for x in r if x[2] < 1.0)
        cells = " ".join(f"{x[2]:.2f}{'' if x[3] else '*'}" for x in r)
        med_ok = f"{statistics.median(ok):.2f}" if ok else "-"
        print(f"{w:<10} {c:>5} {mode:<10} {statistics.median(x[2] for x in r):>7.2f} "
              f"{med_ok:>9} {lower:>3}/{len(r):<3}  {cells}")


if __name__ == "__main__":
    main()
