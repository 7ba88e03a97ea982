#!/usr/bin/env python3
"""Pool capi-memcached.py outputs: CPU per request × stock memcached over
every run of every file given.

    python3 scripts/bench/capi-pool.py [--metric p99_us] FILE [FILE ...]

Each file is what `scripts/bench/capi-memcached.py` wrote (its point lines,
`run=K workload=W server=S cpu_us_per_req=... checks_pass=...`). A ratio is a
server's CPU per request over stock's in the same run of the same file. Per
workload and server it prints the median ratio over all runs with its range
and count, then the same over the runs whose point and stock point both
passed every generator self-check ("clean"). `--metric p99_us` pools the
p99 latency ratio instead (any numeric field of the point lines works).
"""
import re
import statistics
import sys


def points(path, metric):
    out = {}
    for line in open(path):
        if not line.startswith("run="):
            continue
        f = dict(kv.split("=", 1) for kv in line.split())
        out[(int(f["run"]), f["workload"], f["server"])] = (
            float(f[metric]), f["checks_pass"] == "True")
    return out


def fmt(ratios):
    if not ratios:
        return "-"
    return (f"{statistics.median(ratios):.3f} [{min(ratios):.3f}..{max(ratios):.3f}] "
            f"n={len(ratios)}")


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if args else 2)
    metric = "cpu_us_per_req"
    if args[0] == "--metric":
        if len(args) < 3:
            sys.exit("--metric needs a field name and at least one file")
        metric, args = args[1], args[2:]
    ratios = {}
    order = []
    for path in args:
        try:
            pts = points(path, metric)
        except OSError as e:
            sys.exit(f"{path}: {e.strerror}")
        except KeyError:
            sys.exit(f"{path}: the point lines have no field {metric}")
        except ValueError:
            sys.exit(f"{path}: field {metric} is not a number")
        if not pts:
            sys.exit(f"{path}: no point lines (run=... workload=... server=...)")
        for (run, w, s), (cpu, ok) in pts.items():
            base = pts.get((run, w, "stock"))
            if base is None:
                sys.exit(f"{path}: run {run}, {w}: no stock point to compare with")
            if (w, s) not in ratios:
                ratios[(w, s)] = ([], [])
                order.append((w, s))
            r = cpu / base[0]
            ratios[(w, s)][0].append(r)
            if ok and base[1]:
                ratios[(w, s)][1].append(r)
    what = "CPU per request" if metric == "cpu_us_per_req" else metric
    print(f"# {what} x stock memcached, pooled over {len(args)} file(s): "
          f"median [min..max] n; clean = point and stock passed every check")
    print(f"{'workload':<10} {'server':<22} {'all runs':<28} clean")
    for w, s in sorted(order, key=lambda k: (k[0], order.index(k))):
        if s == "stock":
            continue
        every, clean = ratios[(w, s)]
        print(f"{w:<10} {s:<22} {fmt(every):<28} {fmt(clean)}")


if __name__ == "__main__":
    main()
