#!/usr/bin/env python3
"""Which self-checks the points of a `skq bench` run failed, from its
points.json: per check the number of measured points failing it, the points
failing only the read-lag check, and the read-lag p99 spread (with the
points read latest, beside their latency p99).

Usage: python3 scripts/bench/check-failures.py RUN_DIR/points.json ...
"""
import json
import sys

CHECKS = ["rate_ok", "ad_ok", "independence_ok", "lateness_ok", "read_lag_ok"]

if len(sys.argv) < 2:
    print(__doc__.strip())
    sys.exit(2)
for path in sys.argv[1:]:
    points = [p for p in json.load(open(path, encoding="utf-8")) if p.get("result")]
    fails = {c: 0 for c in CHECKS}
    passed = only_read = 0
    lags = []
    for p in points:
        ch = p["result"]["checks"]
        passed += bool(ch["pass"])
        for c in CHECKS:
            fails[c] += not ch.get(c, True)
        others = all(ch.get(c, True) for c in CHECKS if c != "read_lag_ok")
        only_read += others and not ch.get("read_lag_ok", True)
        if ch.get("read_lag_p99_us") is not None:
            m = p["result"]["meta"]
            name = f'{p["config"]} {m["workload"]} {m["connections"]}c'
            lags.append((ch["read_lag_p99_us"], p["result"]["latency"]["p99"]["value"],
                         name, p["load"]))
    print(f"{path}: {len(points)} measured points, {passed} passed every check")
    print("  failed: " + ", ".join(f"{c[:-3]} {n}" for c, n in fails.items())
          + f"; read lag alone {only_read}")
    if lags:
        lags.sort()
        v = [x[0] for x in lags]
        print(f"  read lag p99: median {v[len(v) // 2]:.0f} us, range {v[0]:.0f}-{v[-1]:.0f} us")
        print("  latest readers (read lag p99 / latency p99, us):",
              "; ".join(f"{c} @{l:g}: {a:.0f} / {b:.0f}" for a, b, c, l in lags[-5:]))
