#!/usr/bin/env python3
"""Does the host probe at a job's start foretell the job's self-check problems?

Usage: python3 scripts/bench/probe-vs-strict.py [--gate N] [--jobs PREFIXES] DIR [DIR ...]

For every sweep job (default: `main` and `asyncmain`) that scripts/bench/quiet-loop.sh
started right after a host probe (`HOST_PROBE=N`, which logs the probe in
DIR/probes.txt), prints the probe's late sleeps per CPU (of 1,000 sleeps of
500 µs, those that overshot by more than 200 µs), its longest spin gap, and the
job's `--strict` problem count from DIR/JOB.log (0 when the sweep passed). Then
it splits the jobs at the gate N (the larger of the two CPUs' counts at most N,
or above it) and gives each side's job count, problem median and mean, and how
many passed `--strict`, and a one-sided permutation test of the difference in
mean problems (10,000 relabellings, fixed seed): the share of random splits of
the same jobs into groups of the same sizes whose gated side does at least as
well.

The sweeps' rules changed over the days these folders cover (the crossing and
held-host rules of 2026-12-06 measure more points again and so fail fewer), so
compare jobs of the same days, or read the split as a direction only.
"""
import argparse
import os
import random
import re
import statistics
import sys

PROBE = re.compile(
    r"^(\d\d:\d\d:\d\d) host probe: cpu0: .*?(\d+) over 200 us; spin 1 s: \d+ gaps over 100 us, "
    r"longest (\d+) us.*?cpu1: .*?(\d+) over 200 us; spin 1 s: \d+ gaps over 100 us, longest (\d+) us"
)
START = re.compile(r"^(\S+) start (\d\d:\d\d:\d\d) ")
STRICT = re.compile(r"skq: --strict: (\d+) problem")


def secs(t):
    h, m, s = (int(x) for x in t.split(":"))
    return h * 3600 + m * 60 + s


def jobs_of(d, prefixes):
    probes = []
    try:
        with open(os.path.join(d, "probes.txt")) as f:
            for line in f:
                m = PROBE.match(line)
                if m:
                    t, l0, g0, l1, g1 = m.groups()
                    probes.append((secs(t), int(l0), int(l1), max(int(g0), int(g1))))
    except FileNotFoundError:
        return []
    out = []
    try:
        runs = open(os.path.join(d, "runs.txt")).read().splitlines()
    except FileNotFoundError:
        return []
    for line in runs:
        m = START.match(line)
        if not m:
            continue
        job, t = m.groups()
        if not any(re.fullmatch(p + r"\d+", job) for p in prefixes):
            continue
        # The probe the loop took just before starting this job (same
        # second or a few seconds earlier; a probe taken minutes before
        # belongs to an earlier attempt).
        near = [p for p in probes if 0 <= secs(t) - p[0] <= 60]
        if not near:
            continue
        _, l0, l1, gap = near[-1]
        log = os.path.join(d, job + ".log")
        try:
            text = open(log, errors="replace").read()
        except FileNotFoundError:
            continue
        if "skq bench:" not in text:
            continue
        m = STRICT.search(text)
        problems = int(m.group(1)) if m else 0
        out.append((d, job, l0, l1, gap, problems))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--gate", type=int, default=10,
                    help="late sleeps per CPU at most this many: the gated side (default 10)")
    ap.add_argument("--jobs", default="main,asyncmain",
                    help="job name prefixes, comma-separated (default main,asyncmain)")
    a = ap.parse_args()
    prefixes = [p for p in a.jobs.split(",") if p]
    rows = [r for d in a.dirs for r in jobs_of(d, prefixes)]
    if not rows:
        sys.exit("probe-vs-strict: no job with a host probe at its start in those folders")
    print(f"{'folder':<36} {'job':<12} {'late cpu0':>9} {'late cpu1':>9} {'longest gap µs':>14} {'--strict problems':>17}")
    for d, job, l0, l1, gap, n in rows:
        print(f"{os.path.basename(d.rstrip('/')):<36} {job:<12} {l0:>9} {l1:>9} {gap:>14} {n:>17}")
    print()
    gated = [r for r in rows if max(r[2], r[3]) <= a.gate]
    other = [r for r in rows if max(r[2], r[3]) > a.gate]
    for name, side in (
        (f"probe at most {a.gate} late sleeps per CPU", gated),
        (f"probe over {a.gate}", other),
    ):
        if not side:
            print(f"{name}: no jobs")
            continue
        ps = [r[5] for r in side]
        print(f"{name}: {len(side)} jobs, problems median {statistics.median(ps):g}, "
              f"mean {statistics.mean(ps):.1f}, passed --strict {sum(1 for p in ps if p == 0)}")
    pv = permutation_p([r[5] for r in gated], [r[5] for r in other])
    if pv is not None:
        print(f"one-sided permutation p (gated mean problems this low or lower by chance): {pv:.3f}")


def permutation_p(gated, other, rounds=10_000, seed=1):
    """Share of random relabellings whose gated mean is at most the observed."""
    if not gated or not other:
        return None
    observed = statistics.mean(gated) - statistics.mean(other)
    pool = gated + other
    rng = random.Random(seed)
    hits = 0
    for _ in range(rounds):
        rng.shuffle(pool)
        d = statistics.mean(pool[: len(gated)]) - statistics.mean(pool[len(gated):])
        if d <= observed:
            hits += 1
    return hits / rounds


if __name__ == "__main__":
    main()
