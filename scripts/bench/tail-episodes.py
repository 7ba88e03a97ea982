#!/usr/bin/env python3
"""Summarises scripts/bench/tail-episodes.sh's output: per point the p99,
the generator's self-check, its send lateness p99, and how many 250 ms
intervals had a p99 above the threshold; then per configuration the ranges.

Where the generator recorded them per interval (`service_overshoot_us`,
`generator_stall_ms`, since 2026-12-06), it also says whose the bad
intervals were: per point the median overshoot, how many intervals
overshot more than 25 µs above it and how many of those were over the
threshold, and the rank correlation of the intervals' p99 with their
overshoot and with the generator's stalls; per configuration the same
counts summed.

    python3 scripts/bench/tail-episodes.py OUT [THRESHOLD_US=4000]
"""
import json
import statistics
import sys
from collections import defaultdict

# An interval "overshot" when its mean service overshoot is this far above
# its point's median (µs).
OVERSHOT_US = 25.0


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    for k, i in enumerate(order):
        r[i] = float(k)
    return r


def spearman(a, b):
    """Rank correlation (ties broken by position); None when undefined."""
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den else None


def attribution(ivs, thr):
    """(median overshoot, overshot, overshot and over thr, rho overshoot,
    rho stalls) over the intervals with replies, or None without figures."""
    ivs = [i for i in ivs if i.get("p99_us") is not None]
    if not ivs or any(i.get("service_overshoot_us") is None for i in ivs):
        return None
    p99 = [i["p99_us"] for i in ivs]
    over = [i["service_overshoot_us"] for i in ivs]
    med = statistics.median(over)
    hot = [k for k, o in enumerate(over) if o > med + OVERSHOT_US]
    both = [k for k in hot if p99[k] > thr]
    stalls = [i.get("generator_stall_ms") for i in ivs]
    rho_s = spearman(p99, stalls) if None not in stalls else None
    return med, len(hot), len(both), spearman(p99, over), rho_s


def fmt_rho(r):
    return "-" if r is None else f"{r:+.2f}"


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    out = sys.argv[1]
    thr = float(sys.argv[2]) if len(sys.argv) > 2 else 4000.0
    rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/index.tsv") if l.strip()]
    per = defaultdict(list)
    print(f"{'point':36s} {'p99 µs':>8s} {'check':5s} {'late p99 µs':>11s} {'>thr':>7s} "
          f"{'overshoot med':>13s} {'overshot (>thr)':>15s} {'rho ov':>6s} {'rho st':>6s}  load before")
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
        a = attribution(d.get("intervals") or [], thr)
        cols = (f"{a[0]:13.1f} {a[1]:7d} ({a[2]:3d})   {fmt_rho(a[3]):>6s} {fmt_rho(a[4]):>6s}"
                if a else f"{'-':>13s} {'-':>15s} {'-':>6s} {'-':>6s}")
        print(f"{tag:36s} {p99:8.0f} {ok:5s} {c['lateness_p99_us']:11.0f} {over:3d}/{len(ivs):<3d} {cols}  {load}")
        per[spec].append((p99, over, len(ivs), c["pass"], a))
    print(f"\nintervals with p99 above {thr:.0f} µs, and p99, per configuration (passing points only):")
    for spec, v in per.items():
        ok = [x for x in v if x[3]]
        if not ok:
            print(f"  {spec}: no passing point")
            continue
        overs = sum(x[1] for x in ok)
        total = sum(x[2] for x in ok)
        p = sorted(x[0] for x in ok)
        line = f"  {spec}: {overs}/{total} intervals; p99 {p[0]:.0f}-{p[-1]:.0f} µs over {len(ok)} of {len(v)} points"
        att = [x[4] for x in ok if x[4]]
        if att:
            hot = sum(x[1] for x in att)
            both = sum(x[2] for x in att)
            line += (f"; {hot} intervals overshot > {OVERSHOT_US:.0f} µs above their point's median,"
                     f" {both} of them over {thr:.0f} µs")
        print(line)


if __name__ == "__main__":
    main()
