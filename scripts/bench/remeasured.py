#!/usr/bin/env python3
"""Points `skq bench` measured again because the generator fell behind, and
whose doing it was: each such line of a bench log names the generator's
lateness p99 and the machine floor of its CPU sampled in the same run (an
ideal generator's lateness p99 there, docs/MEASUREMENT.md "Whose lateness").
A point whose floor is at least half its lateness is counted as the
machine's, the rest as the generator's own.

Usage: python3 scripts/bench/remeasured.py BENCH_LOG ...
"""
import re, sys
for f in sys.argv[1:]:
    rows=[]
    for l in open(f):
        m=re.search(r'skq bench: (\S+) \[(.*?)\]: load ([\d.]+): generator (\d+) µs late at p99 \(preempted (\d+) times, ([\d.]+) ms waiting for a CPU; machine floor ([\d.]+) us\)', l)
        if m: rows.append((m.group(1), m.group(2), float(m.group(3)), int(m.group(4)), int(m.group(5)), float(m.group(6)), float(m.group(7))))
    mach=[r for r in rows if r[6] >= 0.5*r[3]]
    own=[r for r in rows if r[6] < 0.5*r[3]]
    print(f"{f}: {len(rows)} re-measured; floor >= half the lateness (the machine's): {len(mach)}; floor < half (the generator's own): {len(own)}")
    if own:
        fl=sorted(r[6] for r in own); la=sorted(r[3] for r in own)
        print(f"  generator's own: lateness p99 median {la[len(la)//2]} us [{la[0]}-{la[-1]}], floor median {fl[len(fl)//2]} us [{fl[0]}-{fl[-1]}]")
    if mach:
        print("  machine's:", [(r[0], r[2], r[3], r[6]) for r in mach][:10])
