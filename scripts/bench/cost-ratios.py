#!/usr/bin/env python3
"""Per-run CPU-per-reply ratios from a cost-per-reply.py log.

    python3 scripts/bench/cost-ratios.py FILE [MODE_A MODE_B]

FILE holds the output of one or more `scripts/bench/cost-per-reply.py
--modes A,B --rate R --runs N` invocations (the measuring loop's costrpcN
job writes five, one per rate; several jobs' files may be concatenated, and
the invocations at one rate are then pooled). For every rate and run the ratio A / B of
CPU per reply is printed, starred when either point failed the generator's
checks and marked `!` when the invocation's `# host delayed:` line names either point
(the host held the server off its CPUs: cost-per-reply.py judges it by `skq bench`'s
rule; logs from before that line have no such mark), with the median per rate, over all
runs, and over the pairs whose points both passed and neither was delayed. Defaults:
hybrid / epoll-shared.

Where the log carries cost-per-reply.py's CPU speed probe (`call ns`, the host's cost of
one system call around the point, and `wake us`, the CPU of one pipe round trip with a
sleep and a wake-up), each ratio is also printed normalised by each: (A's CPU / A's
probe) / (B's CPU / B's probe), which compares the two servers as if both points had
run on an equally fast host, to the extent the probe tracks the host's speed.

Where the log splits CPU per reply into user space and kernel (`usr us`, `sys us`:
utime and stime, cost-per-reply.py since 2026-12-07), the last line says where the
difference A - B lies: the median over the clean pairs (all pairs if none is clean) of
each part's difference, in µs per reply.
"""
import statistics
import sys

from benchlib import read_cost_log

# The speed probe's columns in cost-per-reply.py's lines (after `user ns`).
PROBES = ("call ns", "wake us")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    path = argv[0]
    a, b = (argv[1], argv[2]) if len(argv) >= 3 else ("hybrid", "epoll-shared")
    rows, delayed = {}, {}
    for blk in read_cost_log(path):
        runs = {}
        for p in blk["points"]:
            if p["mode"] in (a, b):
                runs.setdefault(p["run"], {})[p["mode"]] = (
                    p["cpu_us"], p["passed"], [p["call_ns"], p["wake_us"]],
                    (p["user_us"], p["sys_us"]))
        rows.setdefault(blk["rate"], []).append(runs)
        delayed.setdefault(blk["rate"], []).append(blk["delayed"])
    print(f"# per-run CPU per reply, {a} / {b}, from {path}; * = a point of the pair failed its "
          "checks, ! = the host delayed a point of the pair")
    every, clean = [], []
    split, split_clean = [], []
    norm = {name: ([], []) for name in PROBES}
    for r, blocks in sorted(rows.items()):
        rs, ns = [], {name: [] for name in PROBES}
        for runs, late in zip(blocks, delayed[r]):
            for k in sorted(runs):
                if a not in runs[k] or b not in runs[k]:
                    continue
                (x, xo, xs, xu), (y, yo, ys, yu) = runs[k][a], runs[k][b]
                mark = "" if xo and yo else "*"
                if (a, k) in late or (b, k) in late:
                    mark += "!"
                rs.append((x / y, mark))
                if None not in xu + yu:
                    d = (x - y, xu[0] - yu[0], xu[1] - yu[1])
                    split.append(d)
                    if not mark:
                        split_clean.append(d)
                for name, px, py in zip(PROBES, xs, ys):
                    if px and py:
                        ns[name].append(((x / px) / (y / py), mark))
        if not rs:
            continue
        every += [x for x, _ in rs]
        clean += [x for x, mark in rs if not mark]
        cells = " ".join(f"{x:.3f}{mark}" for x, mark in rs)
        print(f"{r:>6} req/s: {cells}   median {statistics.median(x for x, _ in rs):.3f}")
        for name, xs in ns.items():
            if xs:
                norm[name][0].extend(x for x, _ in xs)
                norm[name][1].extend(x for x, mark in xs if not mark)
                cells = " ".join(f"{x:.3f}{mark}" for x, mark in xs)
                print(f"{'':>6}  by {name}: {cells}   median {statistics.median(x for x, _ in xs):.3f}")
    if not every:
        print(f"no {a}/{b} pairs found", file=sys.stderr)
        return 1
    line = f"all {len(every)}: median {statistics.median(every):.3f}, range {min(every):.3f}-{max(every):.3f}"
    if clean:
        line += (f"; the {len(clean)} pairs with both points passing and neither delayed: "
                 f"median {statistics.median(clean):.3f}")
    print(line)
    for name, (all_, clean_) in norm.items():
        if not all_:
            continue
        line = (f"normalised by the speed probe's {name}, all {len(all_)}: median "
                f"{statistics.median(all_):.3f}, range {min(all_):.3f}-{max(all_):.3f}")
        if clean_:
            line += f"; the {len(clean_)} clean pairs: median {statistics.median(clean_):.3f}"
        print(line)
    pool, which = (split_clean, "clean") if split_clean else (split, "all")
    if pool:
        med = [statistics.median(d[i] for d in pool) for i in range(3)]
        print(f"where {a} - {b} lies, median over the {len(pool)} {which} pairs with the split: "
              f"{med[0]:+.2f} us per reply, user space {med[1]:+.2f}, kernel {med[2]:+.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
