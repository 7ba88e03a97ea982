#!/usr/bin/env python3
"""Points whose one-second intervals alternate: every interval of one parity
(even or odd seconds) reads a p99 more than FACTOR times every interval of
the other. A tail held by something periodic (a stall every two seconds)
shows this way; docs/MEASUREMENT.md ("And a crossing that most of its own
seconds met") counts such points over every sweep kept under docs/results.

Usage: python3 scripts/bench/alternating-seconds.py [FACTOR=1.8] [ROOT=docs/results]
Reads ROOT/*/*/points/*.json (skq bench's per-point results); points with
fewer than six intervals are skipped.
"""
import glob
import json
import os
import statistics
import sys

factor = float(sys.argv[1]) if len(sys.argv) > 1 else 1.8
root = sys.argv[2] if len(sys.argv) > 2 else "docs/results"
files = sorted(glob.glob(os.path.join(root, "*", "*", "points", "*.json")))
sweeps = {os.path.dirname(os.path.dirname(f)) for f in files}
found = 0
for f in files:
    try:
        with open(f, encoding="utf-8") as fh:
            d = json.load(fh)
    except (OSError, ValueError):
        continue
    p99 = [i.get("p99_us") for i in d.get("intervals") or []]
    p99 = [x for x in p99 if x is not None]
    if len(p99) < 6:
        continue
    even, odd = p99[0::2], p99[1::2]
    hi, lo = (even, odd) if statistics.median(even) > statistics.median(odd) else (odd, even)
    if min(hi) > factor * max(lo):
        found += 1
        print(f, " ".join(f"{x:.0f}" for x in p99))
print(f"{found} alternating points of {len(files)} in {len(sweeps)} sweeps (factor {factor})")
