#!/usr/bin/env python3
"""Summarises scripts/bench/tail-episodes.sh's output: per point the p99,
the generator's self-check, its send lateness p99, and how many 250 ms
intervals had a p99 above the threshold; then per configuration the ranges.

    python3 scripts/bench/tail-episodes.py OUT [THRESHOLD_US=4000]
"""
import json
import sys
from collections import defaultdict


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    thr = float(sys.argv[2]) if len(sys.argv) > 2 else 4000.0
    rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/index.tsv") if l.strip()]
    per = defaultdict(list)
    print(f"{'point':36s} {'p99 µs':>8s} {'check':5s} {'late p99 µs':>11s} {'>thr':>5s}  load before")
    for tag, spec, rep, load in rows:
        try:
            d = json.load(open(f"{out}/{tag}.json"))
        except (OSError, ValueError):
            print(f"{tag:36s} no result")
            continue
        c = d["checks"]
        p99 = d["latency"]["p99"]["value"]
        ivs = [i["p99_us"] for i in d.get("intervals") or []]
        over = sum(1 for x in ivs if x > thr)
        ok = "PASS" if c["pass"] else "FAIL"
        print(f"{tag:36s} {p99:8.0f} {ok:5s} {c['lateness_p99_us']:11.0f} {over:3d}/{len(ivs):<3d} {load}")
        per[spec].append((p99, over, len(ivs), c["pass"]))
    print(f"\nintervals with p99 above {thr:.0f} µs, and p99, per configuration (passing points only):")
    for spec, v in per.items():
        ok = [x for x in v if x[3]]
        if not ok:
            print(f"  {spec}: no passing point")
            continue
        overs = sum(x[1] for x in ok)
        total = sum(x[2] for x in ok)
        p = sorted(x[0] for x in ok)
        print(f"  {spec}: {overs}/{total} intervals; p99 {p[0]:.0f}-{p[-1]:.0f} µs over {len(ok)} of {len(v)} points")


if __name__ == "__main__":
    main()
