#!/usr/bin/env python3
"""Whether a point's first second says how its generator checks will end.

    python3 scripts/bench/stall-onset.py DIR...   (sweep folders or folders of them)

For every measured point of the sweeps given (points.json with per-second intervals), it
first bins the points by the mean milliseconds per second the machine's stalls took from
the generator's loop, with how many failed the generator's lateness or read-lag check.
Then the milliseconds of the generator's loop that the machine's stalls took in the point's
first second (`generator_stall_ms` of interval 0) are binned, and per bin the script
prints how many points failed the generator's lateness or read-lag check, and how many
had a later second (the third on) that lost 20 ms or more. A stall that is already
there when a point starts and persists is what a gate before each point
(`skq bench --host-gate`) can wait out; one that starts later it cannot.

With --gated it instead splits the points of gated sweeps by what the gate did before
them (passed at once, waited, measured after the longest wait) and prints the same
failure counts per group, beside each group's median probe figures.
"""
import argparse
import glob
import json
import os
import statistics
import sys

BINS = [(0, 5), (5, 10), (10, 20), (20, float("inf"))]


def sweeps(paths):
    for p in paths:
        if os.path.isfile(os.path.join(p, "points.json")):
            yield p
        else:
            yield from sorted(os.path.dirname(f) for f in glob.glob(os.path.join(p, "*", "points.json")))


def points(paths):
    for d in sweeps(paths):
        try:
            recs = json.load(open(os.path.join(d, "points.json")))
        except (OSError, ValueError) as e:
            print(f"stall-onset: skipping {d}: {e}", file=sys.stderr)
            continue
        for rec in recs:
            r = rec.get("result")
            if r:
                yield d, rec, r


def generator_ok(r):
    c = r["checks"]
    return c["lateness_ok"] and c.get("read_lag_ok", True)


def label(lo, hi):
    return f"{lo:g}-{hi:g} ms" if hi != float("inf") else f">= {lo:g} ms"


MEAN_BINS = [(0, 5), (5, 10), (10, 15), (15, 20), (20, float("inf"))]


def onset(paths):
    rows = {b: [0, 0, 0] for b in BINS}
    by_mean = {b: [0, 0] for b in MEAN_BINS}
    for _, _, r in points(paths):
        iv = [i.get("generator_stall_ms") for i in r.get("intervals") or []]
        if len(iv) < 4 or None in iv:
            continue
        b = next(b for b in BINS if b[0] <= iv[0] < b[1])
        rows[b][0] += 1
        rows[b][1] += not generator_ok(r)
        rows[b][2] += max(iv[2:]) >= 20
        mean = sum(iv) / len(iv)
        m = next(b for b in MEAN_BINS if b[0] <= mean < b[1])
        by_mean[m][0] += 1
        by_mean[m][1] += not generator_ok(r)
    print("stalls per second, the point's mean   points   failed a generator check")
    for (lo, hi), (n, bad) in by_mean.items():
        if n:
            print(f"{label(lo, hi):>35} {n:8d} {bad:10d} ({100 * bad / n:4.1f}%)")
    print()
    print("first second's stalls   points   failed a generator check   a later second >= 20 ms")
    for (lo, hi), (n, bad, later) in rows.items():
        if n:
            print(f"{label(lo, hi):>22} {n:8d} {bad:10d} ({100 * bad / n:4.1f}%) {later:14d} ({100 * later / n:4.0f}%)")


def gated(paths):
    groups = {"passed at once": [], "waited, then passed": [], "measured after the longest wait": []}
    for _, rec, r in points(paths):
        g = rec.get("host_gate")
        if not g:
            continue
        key = ("passed at once" if g["probes"] == 1 else "waited, then passed") if g["passed"] \
            else "measured after the longest wait"
        groups[key].append((g, r))
    print("gate before the point               points   failed a generator check   median waited s   median lost ms (spin, worst CPU)")
    for key, rows in groups.items():
        if not rows:
            continue
        bad = sum(not generator_ok(r) for _, r in rows)
        waited = statistics.median(g["waited_s"] for g, _ in rows)
        lost = statistics.median(max(c["spin_lost_ms"] for c in g["last"]["cpus"]) for g, _ in rows)
        print(f"{key:>34} {len(rows):8d} {bad:10d} ({100 * bad / len(rows):4.1f}%) {waited:16.0f} {lost:14.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--gated", action="store_true", help="split gated sweeps' points by what the gate did")
    a = ap.parse_args()
    (gated if a.gated else onset)(a.dirs)


if __name__ == "__main__":
    main()
