#!/usr/bin/env python3
"""Whether a point's first measured second carries a backlog more often than its others.

    python3 scripts/bench/first-second.py [--min-load 0.6] [--factor 3] DIR [DIR ...]

Reads every point of the `skq bench` run folders given (`points/*.json`, the points with
one-second intervals) at offered loads of at least `--min-load`, and counts per mode:

- points whose first second's p50 is over `--factor` times the median p50 of their other
  seconds: a queue already there when the window opened, draining in its first second
  (the warm-up before it was held, or the start-up left work behind);
- for comparison, the seconds from the third on whose p50 is over `--factor` times the
  point's median p50, per second (the second second is left out: it is where a backlog of
  the first drains);
- where the points recorded it (`warmup_host_steal_ms`, skq bench from 2026-12-07 on),
  how many of the first-second backlogs followed 50 ms or more of the host's steal in the
  warm-up.

A first second that carries a backlog several times as often as a later one, for every
mode alike, points at the start of a point (the warm-up), not at a server.
"""
import argparse
import glob
import json
import os
import statistics
import sys
from collections import Counter


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--min-load", type=float, default=0.6)
    p.add_argument("--factor", type=float, default=3.0)
    p.add_argument("dirs", nargs="+")
    a = p.parse_args()
    points, first, later, later_secs, steal_known, after_steal = (Counter() for _ in range(6))
    for d in a.dirs:
        files = sorted(glob.glob(os.path.join(d, "points", "*.json")))
        for f in files:
            name = os.path.basename(f)[:-5]
            try:
                load = float(name.rsplit("_", 1)[1])
                pt = json.load(open(f))
            except (ValueError, OSError, IndexError):
                continue
            iv = pt.get("intervals") or []
            p50 = [i.get("p50_us") for i in iv]
            if load < a.min_load or len(p50) < 6 or any(v is None for v in p50):
                continue
            mode = name.split("_")[0]
            points[mode] += 1
            if p50[0] > a.factor * statistics.median(p50[1:]):
                first[mode] += 1
                w = pt.get("warmup_host_steal_ms")
                if w is not None:
                    steal_known[mode] += 1
                    after_steal[mode] += w >= 50.0
            med = statistics.median(p50)
            later[mode] += sum(1 for v in p50[2:] if v > a.factor * med)
            later_secs[mode] += len(p50) - 2
    if not points:
        sys.exit("first-second: no points with one-second intervals at those loads")
    print(f"points at loads >= {a.min_load:g}, a second's p50 over {a.factor:g}x the rest's "
          f"({len(a.dirs)} run folder(s)):")
    print(f"  {'mode':<14} {'points':>6}  {'first second':>16}  {'a later second':>15}  warm-up steal")
    for m in sorted(points):
        rate_first = first[m] / points[m]
        rate_later = later[m] / later_secs[m] if later_secs[m] else float("nan")
        steal = (f"{after_steal[m]} of {steal_known[m]} after >= 50 ms"
                 if steal_known[m] else "not recorded")
        print(f"  {m:<14} {points[m]:>6}  {first[m]:>4} ({rate_first:6.1%})  "
              f"{later[m]:>4} ({rate_later:5.1%})   {steal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
