#!/usr/bin/env python3
"""Summarises `skq load --trace-late` files (or a folder of them written by
`SKQ_LOAD_TRACE_DIR=DIR skq bench ...`): for every send later than 50 µs,
which of the generator thread's activities covered most of the time between
its scheduled instant and its actual send (`write` of another connection,
`read`, `poll`, `sleep`, or time no recorded activity covers), and the
durations of the writes recorded around late sends. Tracing adds work of
its own to the generator, so read the shares, not the absolute lateness.

Usage: python3 scripts/bench/late-trace-summary.py FILE_OR_DIR [...]
"""
import collections
import os
import re
import sys

ACT = re.compile(r"\s+([+-][\d.]+) us\s+([\d.]+) us\s+(\w+)")


def blocks(path):
    """Each late send with the activities listed under it, once read whole."""
    cur = None
    for line in open(path):
        if line.startswith("late "):
            if cur is not None:
                yield cur
            cur = {"late": float(line.split()[1]), "acts": []}
        elif cur is not None:
            m = ACT.match(line)
            if m:
                cur["acts"].append((float(m.group(1)), float(m.group(2)), m.group(3)))
    if cur is not None:
        yield cur


def files(args):
    for a in args:
        if os.path.isdir(a):
            for n in sorted(os.listdir(a)):
                yield os.path.join(a, n)
        else:
            yield a


def main(args):
    if not args:
        print(__doc__.strip())
        return 2
    cause = collections.Counter()
    writes = []
    n = 0
    worst = 0.0
    for path in files(args):
        for b in blocks(path):
            late = b["late"]
            worst = max(worst, late)
            covered = collections.Counter()
            for start, dur, what in b["acts"]:
                lo, hi = max(start, 0.0), min(start + dur, late)
                if hi > lo:
                    covered[what] += hi - lo
                if what == "write":
                    writes.append(dur)
            covered["uncovered"] = max(0.0, late - sum(covered.values()))
            cause[max(covered, key=covered.get)] += 1
            n += 1
    if n == 0:
        print("no late sends")
        return 0
    print(f"{n} sends later than 50 us (worst {worst:.1f} us); what covered most of each one's delay:")
    for what, k in cause.most_common():
        print(f"  {what:10s} {k:7d}  {100.0 * k / n:5.1f}%")
    if writes:
        writes.sort()
        q = lambda p: writes[min(len(writes) - 1, int(p * len(writes)))]
        print(f"writes recorded around late sends: n={len(writes)} p50={q(0.5):.1f} us "
              f"p90={q(0.9):.1f} us p99={q(0.99):.1f} us max={writes[-1]:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
