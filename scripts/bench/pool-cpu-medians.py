#!/usr/bin/env python3
"""Median CPU-per-reply ratio per configuration and workload from `skq pool --cpu-vs` output.

    target/release/skq pool --cpu-vs memcached RUN1 RUN2 > pool.txt
    python3 scripts/bench/pool-cpu-medians.py pool.txt

`skq pool --cpu-vs NAME` prints, per curve (configuration, workload, connections), the
pooled server CPU per reply over NAME's at each load. This takes every such ratio of a
configuration and workload, over its connection counts and loads, and prints their median,
range and count: one figure per configuration and workload, as the cache's closing notes
give it. The baseline's own lines (all 1.000) are left out.
"""
import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^\s+(\S+) \[(\S+) · ")
RATIO = re.compile(r"\d+\.\d\d: (\d+\.\d+) \[")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    ratios = defaultdict(list)
    for line in open(sys.argv[1], errors="replace"):
        if line.startswith("left out"):
            break
        m = LINE.match(line)
        if not m:
            continue
        vals = [float(v) for v in RATIO.findall(line)]
        if vals and any(v != 1.0 for v in vals):
            ratios[(m.group(1), m.group(2))].extend(vals)
    if not ratios:
        sys.exit("pool-cpu-medians: no ratios found (was the file written by skq pool --cpu-vs?)")
    print(f"{'configuration':<16} {'workload':<12} median  range        n")
    for (mode, wl), v in sorted(ratios.items()):
        print(f"{mode:<16} {wl:<12} {statistics.median(v):6.3f}  {min(v):.2f}–{max(v):.2f}  {len(v):3d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
