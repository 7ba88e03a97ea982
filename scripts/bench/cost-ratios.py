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
one system call around the point), each ratio is also printed normalised by it: (A's CPU
/ A's call ns) / (B's CPU / B's call ns), which compares the two servers as if both
points had run on an equally fast host.
"""
import re
import statistics
import sys


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    path = argv[0]
    a, b = (argv[1], argv[2]) if len(argv) >= 3 else ("hybrid", "epoll-shared")
    rows, delayed, rate = {}, {}, None
    for line in open(path):
        m = re.search(r"(\d+) req/s over", line)
        if line.startswith("#") and m:
            # Each invocation is a block of its own: a file may hold several
            # at one rate (logs concatenated), whose run numbers repeat.
            rate = int(m.group(1))
            rows.setdefault(rate, []).append({})
            delayed.setdefault(rate, []).append(set())
            continue
        if line.startswith("# host delayed:") and rate is not None:
            for m, k in re.findall(r"([\w+.-]+) (\d+) \(", line):
                delayed[rate][-1].add((m, int(k)))
            continue
        f = line.split()
        if rate is not None and len(f) >= 9 and f[0] in (a, b) and f[1].isdigit():
            call_ns = None
            if len(f) >= 12:
                try:
                    call_ns = float(f[11])
                except ValueError:
                    pass
            rows[rate][-1].setdefault(int(f[1]), {})[f[0]] = (float(f[2]), f[7] == "True", call_ns)
    print(f"# per-run CPU per reply, {a} / {b}, from {path}; * = a point of the pair failed its "
          "checks, ! = the host delayed a point of the pair")
    every, clean, norm_every, norm_clean = [], [], [], []
    for r, blocks in sorted(rows.items()):
        rs, ns = [], []
        for runs, late in zip(blocks, delayed[r]):
            for k in sorted(runs):
                if a not in runs[k] or b not in runs[k]:
                    continue
                (x, xo, xs), (y, yo, ys) = runs[k][a], runs[k][b]
                mark = "" if xo and yo else "*"
                if (a, k) in late or (b, k) in late:
                    mark += "!"
                rs.append((x / y, mark))
                if xs and ys:
                    ns.append(((x / xs) / (y / ys), mark))
        if not rs:
            continue
        every += [x for x, _ in rs]
        clean += [x for x, mark in rs if not mark]
        cells = " ".join(f"{x:.3f}{mark}" for x, mark in rs)
        print(f"{r:>6} req/s: {cells}   median {statistics.median(x for x, _ in rs):.3f}")
        if ns:
            norm_every += [x for x, _ in ns]
            norm_clean += [x for x, mark in ns if not mark]
            cells = " ".join(f"{x:.3f}{mark}" for x, mark in ns)
            print(f"{'':>6}  by call ns: {cells}   median {statistics.median(x for x, _ in ns):.3f}")
    if not every:
        print(f"no {a}/{b} pairs found", file=sys.stderr)
        return 1
    line = f"all {len(every)}: median {statistics.median(every):.3f}, range {min(every):.3f}-{max(every):.3f}"
    if clean:
        line += (f"; the {len(clean)} pairs with both points passing and neither delayed: "
                 f"median {statistics.median(clean):.3f}")
    print(line)
    if norm_every:
        line = (f"normalised by the speed probe's call ns, all {len(norm_every)}: median "
                f"{statistics.median(norm_every):.3f}, range {min(norm_every):.3f}-{max(norm_every):.3f}")
        if norm_clean:
            line += f"; the {len(norm_clean)} clean pairs: median {statistics.median(norm_clean):.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
