#!/usr/bin/env python3
"""Per-point figures of the priority experiments from skq bench's points.json.

    python3 scripts/priority-points.py results/priority-skq68/points.json [...]

One line per measured point: configuration, offered load, achieved req/s,
regular clients' p99, the probe's p99 (the high-priority client when the
curve ran one, else the regular probe), best-effort req/s and p99, and
whether the generator's self-checks passed. Numbers are copied from the
file, nothing is estimated.
"""
import json
import sys


def p99(lat):
    if not lat or not lat.get("count"):
        return None
    return lat["p99"]["value"]


def fmt(v, nd=0):
    return "-" if v is None else f"{v:.{nd}f}"


def main(paths):
    for path in paths:
        print(f"# {path}")
        print(f"{'config':<26} {'load':>5} {'achieved/s':>10} {'reg p99 µs':>11} "
              f"{'probe':>5} {'probe p99 µs':>12} {'BE/s':>6} {'BE p99 µs':>10} checks")
        for rec in json.load(open(path)):
            r = rec.get("result")
            if rec.get("status") != "measured" or r is None:
                print(f"{rec['config']:<26} {rec['load']:>5.2f} {rec.get('status', '?')}")
                continue
            high = p99(r.get("high_priority_latency"))
            probe = high if high is not None else p99(r.get("probe_latency"))
            kind = "hi" if high is not None else ("reg" if probe is not None else "-")
            b = r.get("batch_latency")
            dur = r["meta"]["duration_s"] or 1.0
            be_rps = b["count"] / dur if b else None
            print(f"{rec['config']:<26} {rec['load']:>5.2f} {r['achieved_rps']:>10.0f} "
                  f"{fmt(p99(r['latency'])):>11} {kind:>5} {fmt(probe):>12} "
                  f"{fmt(be_rps):>6} {fmt(p99(b)):>10} "
                  f"{'pass' if r['checks']['pass'] else 'FAIL'}"
                  f"{' saturated' if rec.get('saturated') else ''}")


if __name__ == "__main__":
    main(sys.argv[1:])
