#!/usr/bin/env python3
"""Seconds whose p99 was held far above the rest, per configuration, over `skq bench` runs.

    python3 scripts/bench/held-seconds.py [--over-ms 20] [--loads 0.6,0.75] DIR [DIR ...]

Reads every point of each run folder (`points.json`, else `points/*.json`: the point's
one-second intervals)
and counts, per configuration (mode and workload), the measured seconds whose p99 was
over `--over-ms` (default 20 ms, four times the main job's SLO), with the points they
fell in. A host that holds the server's threads off their CPU for 100 ms leaves such
seconds at loads the configuration otherwise meets (docs/MEASUREMENT.md, "Both CPUs busy
at once"); this tells whether some configurations draw them more than others. With
`--loads`, only points at those offered loads count.

Where the run recorded the host's steal time per second (`host_steal_ms`, skq bench from
2026-12-06 night on), it also gives the configuration's steal over all its kept seconds and
how many of its held seconds had 50 ms or more of it (a 100-ms hold of the host's shows as
10 ticks). Where it also recorded the steal of the warm-up before each window
(`warmup_host_steal_ms`, from 2026-12-07 on), a held first second counts as following the
host's steal when the warm-up had 50 ms or more (a hold there leaves a backlog that the
window's first second drains).

A point that `skq bench` measured again keeps only its last measurement; the earlier
tries are counted from the run's log (`DIR.log` beside the folder, or `DIR/bench.log`),
whose line for each says how many of its seconds met the SLO: the rest are added as
"earlier tries' seconds over the SLO".
"""
import argparse
import glob
import json
import os
import re
import sys
from collections import defaultdict

AGAIN = re.compile(r"^skq bench: (.+?) \[([\w.-]+) .*?\]: load ([\d.]+): p99 \d+ µs over the SLO "
                   r"\(\d+ µs\) though (\d+) of its (\d+) seconds met it, measuring again")


def earlier_tries(d, loads):
    """{(mode, workload): [(run, load, seconds over the SLO), ...]} from the run's log."""
    out = defaultdict(list)
    for log in (d.rstrip("/") + ".log", os.path.join(d, "bench.log")):
        if not os.path.exists(log):
            continue
        for line in open(log, errors="replace"):
            m = AGAIN.match(line)
            if not m:
                continue
            load = round(float(m.group(3)), 3)
            if loads is None or load in loads:
                # Named configurations ("hybrid spin 50") name their
                # point files with dashes for the spaces.
                out[(m.group(1).replace(" ", "-"), m.group(2))].append(
                    (os.path.basename(d.rstrip("/")), load, int(m.group(5)) - int(m.group(4))))
        break
    return out


def points_of(d):
    """(mode, workload, load, result) of every measured point of a run folder: from its
    points.json (the kept attempts, with what the harness added, such as the host's steal)
    where there is one, else from points/*.json."""
    agg = os.path.join(d, "points.json")
    if os.path.exists(agg):
        try:
            recs = json.load(open(agg))
        except (OSError, ValueError) as e:
            sys.exit(f"held-seconds: {agg}: {e}")
        for x in recs:
            r = x.get("result")
            if not r:
                continue
            # The generator names the cache's mixes "kv:etc"; the sweep, "etc".
            yield (x["config"].replace(" ", "-"), r["meta"]["workload"].split(":")[-1],
                   round(float(x["load"]), 3), r)
        return
    files = sorted(glob.glob(os.path.join(d, "points", "*.json")))
    if not files:
        sys.exit(f"held-seconds: {d}: neither points.json nor points/*.json")
    for f in files:
        name = os.path.basename(f)[:-5]
        try:
            pt = json.load(open(f))
        except (OSError, ValueError) as e:
            sys.exit(f"held-seconds: {f}: {e}")
        parts = name.split("_")
        yield parts[0], parts[1], round(float(parts[-1]), 3), pt


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--over-ms", type=float, default=20.0)
    p.add_argument("--loads", default=None, help="offered loads to count, e.g. 0.6,0.75")
    p.add_argument("dirs", nargs="+")
    a = p.parse_args()
    loads = None if a.loads is None else {round(float(x), 3) for x in a.loads.split(",")}
    secs = defaultdict(int)
    held = defaultdict(list)
    # The host's steal per second where skq bench recorded it (host_steal_ms):
    # over every second, and in the seconds over the bound.
    steal_all = defaultdict(float)
    steal_secs = defaultdict(int)
    steal_held = defaultdict(list)
    # Held first seconds of points that recorded their warm-up's steal, and
    # those that followed 50 ms or more of it.
    first_held = defaultdict(int)
    first_after_steal = defaultdict(int)
    again = defaultdict(list)
    seen = 0
    for d in a.dirs:
        for k, v in earlier_tries(d, loads).items():
            again[k].extend(v)
        for mode, workload, load, pt in points_of(d):
            if loads is not None and load not in loads:
                continue
            key = (mode, workload)
            for iv in pt.get("intervals") or []:
                secs[key] += 1
                seen += 1
                st = iv.get("host_steal_ms")
                if st is not None:
                    steal_all[key] += st
                    steal_secs[key] += 1
                if (iv.get("p99_us") or 0) > a.over_ms * 1e3:
                    held[key].append((os.path.basename(d.rstrip("/")), load, iv["start_s"],
                                      iv["p99_us"] / 1e3))
                    if st is not None:
                        steal_held[key].append(st)
                    wst = pt.get("warmup_host_steal_ms")
                    if iv["start_s"] <= 0.0 and wst is not None:
                        first_held[key] += 1
                        first_after_steal[key] += wst >= 50.0
    if not seen:
        sys.exit("held-seconds: no intervals in the points given (older results have none)")
    print(f"seconds with p99 over {a.over_ms:g} ms, per configuration "
          f"({len(a.dirs)} run(s){'' if loads is None else ', loads ' + a.loads}):")
    for key in sorted(secs):
        h = held[key]
        pts = sorted({(r, l) for r, l, _, _ in h})
        where = "; ".join(f"{r} {l:g}" for r, l in pts)
        ag = again.get(key, [])
        tries = (f"; earlier tries' seconds over the SLO {sum(n for _, _, n in ag)} in {len(ag)} "
                 f"({'; '.join(f'{r} {l:g}' for r, l, _ in ag)})") if ag else ""
        steal = ""
        if steal_secs[key]:
            sh = steal_held[key]
            steal = (f"; the host's steal {steal_all[key]:.0f} ms over {steal_secs[key]} s"
                     + (f", {sum(1 for x in sh if x >= 50):d} of the {len(sh)} held seconds "
                        f"with 50 ms or more" if sh else ""))
        if first_held[key]:
            steal += (f"; {first_after_steal[key]} of {first_held[key]} held first seconds "
                      f"after 50 ms or more of it in the warm-up")
        print(f"  {key[0]:<14} {key[1]:<12} {len(h):>3} of {secs[key]:>4}"
              f"{'  (' + where + ')' if where else ''}{tries}{steal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
