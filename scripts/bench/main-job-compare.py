#!/usr/bin/env python3
"""Compares runs of the main job (`skq bench`, built-in default) from their
summary.json files: per workload, hybrid's max load at SLO against
epoll-shared's and against the M/G/8 bound, and both servers' CPU per reply
over the curve; how many configurations failed a self-check; plus how many
points each run measured again (the count of
"measuring again" lines kept beside the summary as remeasured.txt, if any).

Usage: python3 scripts/bench/main-job-compare.py RUN_DIR [RUN_DIR ...]
"""
import json
import os
import sys


def us(x):
    return "-" if x is None else f"{x * 1e6:.1f}"


def main(dirs):
    if not dirs:
        print(__doc__.strip())
        return 2
    for d in dirs:
        s = json.load(open(os.path.join(d, "summary.json")))
        by = {(c["spec"]["name"], c["spec"]["workload"]): c for c in s["curves"]}
        parts = []
        for w in ("exponential", "bimodal-1"):
            h, e = by[("hybrid", w)], by[("epoll-shared", w)]
            if h["max_load_rps"] and e["max_load_rps"]:
                ratio = f"{h['max_load_rps'] / e['max_load_rps']:.2f}"
            else:
                ratio = "n/a (a curve below its first point)"
            bound = "-" if h["vs_bound"] is None else f"{h['vs_bound']:.2f}"
            parts.append(
                f"{w}: hybrid x epoll-shared {ratio}, x bound {bound}, CPU/reply "
                f"{us(h['cpu_s_per_request'])} vs {us(e['cpu_s_per_request'])} us"
            )
        failed = sum(1 for c in s["curves"] if c["self_check"].get("status") == "fail")
        parts.append(f"self-check failed: {failed} of {len(s['curves'])} configurations")
        rem = os.path.join(d, "remeasured.txt")
        again = open(rem).read().strip() if os.path.exists(rem) else "?"
        print(f"{os.path.basename(d.rstrip('/'))} | " + "; ".join(parts) + f" | measured again: {again}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
