#!/usr/bin/env python3
"""The arrivals self-check at two thresholds, from recorded inter-send gaps.

    python3 scripts/bench/arrivals-gaps.py DIR [DIR ...]

Each DIR holds the `gaps-PID-TID.txt` files that `skq load` writes with
`SKQ_LOAD_GAPS_DIR=DIR` (first line: the thread's lateness quantiles; then
one sampled send per line: its actual gap and its scheduled (reference) gap,
ns). For each file it prints Stephens' modified Anderson-Darling A2 of the
excesses over a threshold, actual and reference, with the threshold at the
larger of 20 µs and the lateness p99 (skq load until 2026-11-27) and at the
p99.9 (since), how many gaps each keeps, and how many gaps scheduled at or
under the p99 threshold came out above it (short gaps stretched to one send).
The 5% critical value is 1.341.
"""
import glob
import math
import os
import sys

CRITICAL = 1.341


def a2(gaps):
    n = len(gaps)
    if n < 8:
        return None
    m = sum(gaps) / n
    x = sorted(gaps)
    s = 0.0
    for i in range(n):
        cdf = -math.expm1(-max(x[i], 1e-300) / m)
        s += (2 * i + 1) * (math.log(max(cdf, 1e-300)) - x[n - 1 - i] / m)
    return (-n - s / n) * (1 + 0.6 / n)


def fmt(v):
    return "-" if v is None else f"{v:.2f}{'!' if v > CRITICAL else ''}"


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(f"{'file':<44} {'threshold':>14} {'n':>5} {'A2 actual':>10} {'A2 ref':>8}  stretched")
    for d in sys.argv[1:]:
        for path in sorted(glob.glob(os.path.join(d, "gaps-*.txt"))):
            lines = open(path).read().splitlines()
            head = lines[0].split()
            q = {head[i]: float(head[i + 1]) for i in range(2, len(head) - 1, 2)}
            pairs = [tuple(map(float, l.split())) for l in lines[1:] if l.strip()]
            name = os.path.join(os.path.basename(d.rstrip("/")), os.path.basename(path))
            for label in ("p99", "p99.9"):
                t = max(20e3, q[label])
                act = [a - t for a, _ in pairs if a > t]
                ref = [r - t for _, r in pairs if r > t]
                stretched = sum(1 for a, r in pairs if a > t >= r)
                print(f"{name:<44} {label + ' ' + format(t / 1e3, '.0f') + ' us':>14} "
                      f"{len(act):>5} {fmt(a2(act)):>10} {fmt(a2(ref)):>8}  {stretched}")
                name = ""


if __name__ == "__main__":
    main()
