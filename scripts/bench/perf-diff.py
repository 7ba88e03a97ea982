#!/usr/bin/env python3
"""Two cpu-clock profiles side by side: where one spends samples the other does not.

    python3 scripts/bench/perf-diff.py A.data B.data [--top 30] [--per N_A N_B]
        [--sum NAME=REGEX ...]

For each profile (`perf record` output, e.g. perf-skq.data and perf-tokio.data from
scripts/bench/hyper-profile.sh) it prints the samples per DSO, then the symbols whose
sample counts differ most (A - B), both ways. `--per N_A N_B` divides each profile's
counts by its number of replies (or any unit of work) first, so runs of different
length or throughput compare per reply; the differences are then in samples per
N replies with N = 1,000,000 (at 4,999 Hz one sample is about 200 µs of CPU).
`--sum NAME=REGEX` (repeatable) adds, per profile, the samples of every symbol matching
the regular expression (e.g. a runtime's own code: `--sum 'runtime=skq_|async_task|tokio::|mio::'`).
Reads the profiles with `perf report --no-children -g none`; needs perf.
"""
import argparse
import collections
import re
import subprocess
import sys


def samples(path, sort):
    """{key: samples} from `perf report --sort SORT` on `path`."""
    out = subprocess.run(
        ["perf", "report", "-i", path, "--no-children", "--sort", sort, "--stdio", "-n",
         "-g", "none"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"perf-diff: perf report failed on {path}:\n{out.stderr}")
    counts = collections.Counter()
    for line in out.stdout.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 3 or not parts[0].endswith("%"):
            continue
        key = parts[2].strip()
        # Symbol lines end with the (empty) extra columns perf pads with.
        while key.endswith(" -"):
            key = key[:-2].rstrip()
        counts[key] += int(parts[1])
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--per", nargs=2, type=float, metavar=("N_A", "N_B"),
                    help="units of work (replies) in A and in B: compare per 1,000,000 of them")
    ap.add_argument("--sum", action="append", default=[], metavar="NAME=REGEX",
                    help="also sum the symbols matching REGEX in each profile")
    args = ap.parse_args()
    scale = ((1e6 / args.per[0], 1e6 / args.per[1]) if args.per else (1.0, 1.0))
    unit = "samples per 1,000,000 replies" if args.per else "samples"
    for sort, title in [("dso", "DSO"), ("symbol", "symbol")]:
        a, b = samples(args.a, sort), samples(args.b, sort)
        sa, sb = sum(a.values()) * scale[0], sum(b.values()) * scale[1]
        print(f"== by {title} ({unit}): A {sa:.0f} in all, B {sb:.0f}, A - B {sa - sb:+.0f}")
        keys = set(a) | set(b)
        rows = sorted(((a[k] * scale[0], b[k] * scale[1], k) for k in keys),
                      key=lambda r: r[0] - r[1], reverse=True)
        if sort == "symbol":
            for spec in args.sum:
                name, _, rx = spec.partition("=")
                pat = re.compile(rx)
                ta = sum(v for k, v in a.items() if pat.search(k)) * scale[0]
                tb = sum(v for k, v in b.items() if pat.search(k)) * scale[1]
                print(f"  sum {name}: A {ta:.0f} ({ta / sa * 100:.2f}%), B {tb:.0f} "
                      f"({tb / sb * 100:.2f}%), A - B {ta - tb:+.0f}")
        if sort == "dso":
            for ra, rb, k in sorted(rows, key=lambda r: -(r[0] + r[1]))[:8]:
                print(f"  {ra:10.0f} {rb:10.0f} {ra - rb:+10.0f}  {k}")
            continue
        print(f"  {'A':>10} {'B':>10} {'A - B':>10}  most more in A")
        for ra, rb, k in rows[:args.top]:
            print(f"  {ra:10.0f} {rb:10.0f} {ra - rb:+10.0f}  {k[:110]}")
        print(f"  {'A':>10} {'B':>10} {'A - B':>10}  most more in B")
        for ra, rb, k in reversed(rows[-args.top:]):
            print(f"  {ra:10.0f} {rb:10.0f} {ra - rb:+10.0f}  {k[:110]}")


if __name__ == "__main__":
    main()
