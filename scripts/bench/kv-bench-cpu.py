#!/usr/bin/env python3
"""Server CPU per reply by workload and mode from a `skq bench` points.csv.

    python3 scripts/bench/kv-bench-cpu.py RESULTS/points.csv [MAX_LOAD]

Takes every measured, unsaturated point at offered load <= MAX_LOAD (default
0.7), divides the server's CPU (from /proc, 10 ms ticks) by the replies it
received, and prints the median per (workload, mode) over every connection
count, with its ratio to memcached's median. Meant for kv-vs-memcached sweeps.
"""
import collections
import csv
import statistics
import sys

MODES = ["memcached", "kv-tpc", "kv-cpu", "kv-hybrid"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    max_load = float(sys.argv[2]) if len(sys.argv) > 2 else 0.7
    cpu = collections.defaultdict(list)
    for r in csv.DictReader(open(sys.argv[1])):
        received = int(r["received"] or 0)
        if float(r["load"]) > max_load or r["saturated"] == "true" or received == 0:
            continue
        cpu[(r["workload"], r["mode"])].append(float(r["server_cpu_s"]) * 1e6 / received)
    for w in sorted({w for w, _ in cpu}):
        base = statistics.median(cpu[(w, "memcached")]) if cpu[(w, "memcached")] else None
        cells = []
        for m in MODES:
            if not cpu[(w, m)]:
                continue
            med = statistics.median(cpu[(w, m)])
            ratio = f"{med / base:.2f}x" if base else "-"
            cells.append(f"{m}={med:.1f} µs ({ratio}, n={len(cpu[(w, m)])})")
        print(f"{w}: " + "  ".join(cells))


if __name__ == "__main__":
    main()
