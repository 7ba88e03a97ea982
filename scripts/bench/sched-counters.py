#!/usr/bin/env python3
"""The skq scheduler's own counters per point of a `skq bench` output folder.

    python3 scripts/bench/sched-counters.py BENCH_OUT_DIR [BENCH_OUT_DIR ...]

`skq bench` keeps each point's server statistics (`skq serve rpc
--stats-json`) as logs/POINT.stats.json. For every skq point this prints the
requests served, the events delivered (one event may carry several requests
of one connection), and, summed over the workers, the events pushed behind a
worker busy with a batch (`queued_behind_busy`: they wait for it or for a
thief), the sources stolen, the wake-ups sent and the migrations by reason;
each also per 1,000 events. Points of servers without skq's scheduler
(epoll-*, tokio) have no such counters and are skipped. `skq bench` itself
now keeps two of these per point (`wakeups_per_event`, `behind_busy_per_event`
in points.csv/points.json and tables in summary.txt); this script still gives
the raw counts, the migrations by reason and older output folders.
"""
import glob
import json
import os
import sys


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    head = (f"{'point':44s} {'requests':>9s} {'events':>8s} {'req/ev':>6s} "
            f"{'behind':>7s} {'steals':>7s} {'wakeups':>8s} {'cpu-fol':>7s} {'balance':>7s}"
            f"   per 1,000 events: behind steals")
    for d in sys.argv[1:]:
        files = sorted(glob.glob(os.path.join(d, "logs", "*.stats.json")))
        print(f"== {d}: {len(files)} points with server statistics")
        if not files:
            continue
        print(head)
        for f in files:
            try:
                st = json.load(open(f))
            except (OSError, ValueError) as e:
                print(f"{os.path.basename(f)}: unreadable ({e})")
                continue
            pw = (st.get("scheduler") or {}).get("per_worker") or []
            if not pw:
                continue

            def tot(k):
                return sum(w.get(k, 0) for w in pw)

            def mig(k):
                return sum((w.get("migrations") or {}).get(k, 0) for w in pw)

            req = st.get("requests", 0)
            ev = tot("delivered")
            behind, steals = tot("queued_behind_busy"), tot("steals_made")
            name = os.path.basename(f)[: -len(".stats.json")]
            per = (lambda x: f"{1000.0 * x / ev:7.2f}") if ev else (lambda x: "      -")
            print(f"{name:44s} {req:9d} {ev:8d} {req / max(ev, 1):6.2f} "
                  f"{behind:7d} {steals:7d} {tot('wakeups'):8d} {mig('cpu_follow'):7d} "
                  f"{mig('balance'):7d}   {per(behind)} {per(steals)}")


if __name__ == "__main__":
    main()
