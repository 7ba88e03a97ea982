#!/usr/bin/env python3
"""Summarises repeated `skq bench` runs of the imbalanced applications
(crates/skq-bench/examples/zippydb.toml, gis.toml; docs/ROCKSDB.md).

For each run folder: every configuration's maximum load at the SLO (from the
bench's own summary.csv; "< X" when the SLO was missed at the first point, X
the first offered rate), the ratios of the skq configuration to the baseline
and to tokio, and the widest p99 gap between the two over the loads both
measured, with each one's worker imbalance at that load (from points.csv,
the server's own statistics). Then the spread over runs.

usage: imbalanced-summary.py --skq rocksdb-hybrid --base rocksdb-epoll-1to1
                             --tokio rocksdb-tokio RUN_DIR...
"""
import argparse
import csv
import statistics
import sys
from pathlib import Path


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def max_load(summary, points, config):
    """(value, text): max load at SLO, or an upper bound when below the first point."""
    for r in summary:
        if r["config"] == config:
            v = r["max load @SLO req/s"]
            if v.replace(".", "", 1).isdigit():
                return float(v), v
            first = min(float(p["target_rps"]) for p in points if p["config"] == config)
            return first, f"< {first:.0f}"
    sys.exit(f"{config}: not in the run")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skq", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--tokio", required=True)
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    ratios_base, ratios_tokio, gaps = [], [], []
    for run in a.runs:
        d = Path(run)
        summary, points = rows(d / "summary.csv"), rows(d / "points.csv")
        print(f"== {run}")
        for r in summary:
            v, text = max_load(summary, points, r["config"])
            print(f"  {r['config']:<24} max load @SLO {text:>8} req/s  (SLO {r['SLO µs']} µs, S̄ {r['S̄ measured µs']} µs, self-check {r['self-check']})")
        s, _ = max_load(summary, points, a.skq)
        b, btext = max_load(summary, points, a.base)
        t, ttext = max_load(summary, points, a.tokio)
        lower = lambda txt: "≥ " if txt.startswith("<") else ""
        print(f"  {a.skq} / {a.base}: {lower(btext)}{s / b:.2f}×;  / {a.tokio}: {lower(ttext)}{s / t:.2f}×")
        ratios_base.append(s / b)
        ratios_tokio.append(s / t)
        by = {}
        for p in points:
            if p["status"] == "measured":
                by[(p["config"], p["load"])] = p
        best = None
        for (c, load), p in by.items():
            if c != a.skq or (a.base, load) not in by:
                continue
            q = by[(a.base, load)]
            gap = float(q["p99_us"]) / float(p["p99_us"])
            if best is None or gap > best[0]:
                best = (gap, load, p, q)
        if best:
            gap, load, p, q = best
            print(f"  widest p99 gap at load {load}: {a.base} {float(q['p99_us']):.0f} µs vs {a.skq} {float(p['p99_us']):.0f} µs = {gap:.1f}×;"
                  f" imbalance {a.skq} {p['imbalance_pct'] and float(p['imbalance_pct']):.1f}% vs {a.base} {q['imbalance_pct'] and float(q['imbalance_pct']):.1f}%")
            gaps.append(gap)
    if len(a.runs) > 1:
        fmt = lambda v: f"median {statistics.median(v):.2f}, min {min(v):.2f}, max {max(v):.2f} over {len(v)} runs"
        print(f"spread: {a.skq}/{a.base} {fmt(ratios_base)}; /{a.tokio} {fmt(ratios_tokio)}; widest p99 gap {fmt(gaps)}")


if __name__ == "__main__":
    main()
