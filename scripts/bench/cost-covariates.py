#!/usr/bin/env python3
"""What moves with a server's CPU per reply from run to run, in cost-per-reply.py logs.

    python3 scripts/bench/cost-covariates.py FILE [FILE ...]

For every (rate, mode) series of runs in each FILE (the output of
`scripts/bench/cost-per-reply.py`, one or more invocations), prints the runs' CPU per
reply and the Pearson correlation of it with the emulated service's overshoot (`S over
us`, measured inside the run) and, where the log has them (`--speed`), with the speed
probe's `call ns` and `wake us` (measured outside the run, before and after it). Then,
per file, the correlation over all series pooled, each series scaled to its own mean so
that only the run-to-run movement counts. A series of three gives a coarse figure; the
pooled one is the reading.
"""
import statistics
import sys

from benchlib import read_cost_log


def corr(a, b):
    try:
        return statistics.correlation(a, b)
    except (statistics.StatisticsError, ZeroDivisionError, ValueError):
        return None


def fmt(r):
    return "  -  " if r is None else f"{r:+.2f}"


def main(paths):
    if not paths or paths[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    for path in paths:
        series = {}
        for blk in read_cost_log(path):
            for p in blk["points"]:
                if p["overshoot_us"] is not None:
                    series.setdefault((blk["rate"], p["mode"]), []).append(
                        (p["cpu_us"], p["overshoot_us"], p["call_ns"], p["wake_us"]))
        print(f"# {path}: r = Pearson correlation with CPU per reply over the runs of a series")
        pooled = {"over": ([], []), "call": ([], []), "wake": ([], [])}
        for (r, mode), runs in sorted(series.items()):
            cpu = [x[0] for x in runs]
            cols = {"over": [x[1] for x in runs], "call": [x[2] for x in runs], "wake": [x[3] for x in runs]}
            rs = {}
            for name, col in cols.items():
                if None in col or len(runs) < 3:
                    rs[name] = None
                    continue
                rs[name] = corr(cpu, col)
                mc, mx = statistics.mean(cpu), statistics.mean(col)
                pooled[name][0].extend(c / mc for c in cpu)
                pooled[name][1].extend(x / mx for x in col)
            print(f"{r:>6} req/s {mode:<14} CPU us {' '.join(f'{c:.1f}' for c in cpu):<24}"
                  f" r(overshoot) {fmt(rs['over'])}  r(call ns) {fmt(rs['call'])}  r(wake us) {fmt(rs['wake'])}")
        for name, (a, b) in pooled.items():
            if len(a) >= 3:
                r = corr(a, b)
                print(f"pooled over {len(a)} runs: r(CPU per reply, {name}) = {fmt(r)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
