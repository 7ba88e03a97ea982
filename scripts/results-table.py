#!/usr/bin/env python3
"""The figures a docs/RESULTS.md row quotes, from the runs scripts/results.sh
left in one folder.

    python3 scripts/results-table.py DIR [NAME ...]

DIR holds NAME-run1, NAME-run2, ... (as `bash scripts/results.sh NAME
--dir DIR` writes them). For each `skq bench` experiment it prints every
configuration's max load at SLO, × the sweep's baseline, × the theoretical
bound, server CPU and context switches per reply, self-check verdict and
disturbed decisive points, run by run ("r1 / r2"), then the ratios the row
quotes (RATIOS below: A's max load over B's, run by run, same run), and for
the priority experiments each probe's p99 from the lowest load to the peak.
For `pipes` it prints events/s and the ratio to the baseline per mode and
worker count, run by run.
"""
import glob
import json
import os
import sys

# Per experiment: (configuration A, configuration B) pairs whose max load at
# SLO the row compares, A / B, within each run and workload group.
RATIOS = {
    "zygos": [("hybrid", "epoll-shared"), ("hybrid", "tokio"), ("hybrid", "epoll-1to1")],
    "gis": [("hybrid", "vanilla"), ("hybrid", "epoll-1to1"), ("hybrid", "epoll-shared"),
            ("hybrid", "tokio")],
    "zippydb": [("rocksdb-hybrid", "rocksdb-vanilla"), ("rocksdb-hybrid", "rocksdb-epoll-1to1"),
                ("rocksdb-hybrid", "rocksdb-tokio-spawn-blocking")],
    "http": [("hybrid", "epoll-1to1"), ("hybrid", "epoll-shared"), ("hybrid", "tokio")],
    "nginx": [("hybrid", "nginx"), ("hybrid-batch64", "nginx")],
    "colocation": [("hybrid diffusion 6,7", "hybrid no diffusion"),
                   ("hybrid diffusion 6,7", "tokio")],
}


def runs_of(d, name):
    found = sorted(glob.glob(os.path.join(d, f"{name}-run*")),
                   key=lambda p: int(p.rsplit("run", 1)[1]) if p.rsplit("run", 1)[1].isdigit()
                   else 0)
    return [p for p in found if os.path.isdir(p)]


def fmt(v, digits=2):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return f"{v:,.{digits}f}" if abs(v) < 1000 else f"{v:,.0f}"


def joined(vals, digits=2):
    return " / ".join(fmt(v, digits) for v in vals)


def bench_rows(name, runs):
    sums = [json.load(open(os.path.join(r, "summary.json"))) for r in runs]
    keys = []
    for s in sums:
        for c in s["curves"]:
            k = (c["spec"]["name"], group(c))
            if k not in keys:
                keys.append(k)
    by = [{(c["spec"]["name"], group(c)): c for c in s["curves"]} for s in sums]
    print(f"## {name}: {len(runs)} run(s): {', '.join(runs)}")
    base = sums[0]["settings"].get("baseline", "")
    print(f"columns are run 1 / run 2 / ...; baseline of the × column: {base}")
    head = ["config", "group", "max load @SLO req/s", "× baseline", "× bound",
            "CPU µs/reply", "ctx sw/reply", "self-check", "disturbed/decisive"]
    rows = []
    for k in keys:
        cs = [b.get(k) for b in by]

        def each(f):
            return [f(c) if c else None for c in cs]

        rows.append([
            k[0], k[1],
            joined(each(lambda c: c["max_load_rps"]), 0),
            joined(each(lambda c: c["vs_baseline"])),
            joined(each(lambda c: c["vs_bound"])),
            joined(each(lambda c: c["cpu_s_per_request"] * 1e6
                        if c["cpu_s_per_request"] is not None else None), 1),
            joined(each(lambda c: (c["ctx_switches_per_request"]["voluntary"]
                                   + c["ctx_switches_per_request"]["involuntary"])
                        if c.get("ctx_switches_per_request") else None)),
            " / ".join((c["self_check"]["status"] if c else "-") for c in cs),
            " / ".join((f"{len(c['disturbed'])}/{c['decisive_points']}" if c else "-")
                       for c in cs),
        ])
    table(head, rows)
    lower = any(c.get("max_load_is_lower_bound") for s in sums for c in s["curves"])
    if lower:
        print("(a max load that is a lower bound, SLO met at the highest load tried, is "
              "flagged in summary.txt with ≥)")
    for a, b in RATIOS.get(name, []):
        for g in sorted({k[1] for k in keys}):
            vals = []
            for m in by:
                ca, cb = m.get((a, g)), m.get((b, g))
                if ca and cb and ca["max_load_rps"] and cb["max_load_rps"]:
                    vals.append(ca["max_load_rps"] / cb["max_load_rps"])
                else:
                    vals.append(None)
            if any(v is not None for v in vals):
                print(f"  max load {a} × {b} [{g}]: {joined(vals)}")
    prios = [(k, [b.get(k, {}).get("priority") for b in by]) for k in keys]
    for k, ps in prios:
        if not any(ps) or not any(p and p.get("probe_class") for p in ps):
            continue
        parts = []
        for p in ps:
            if not p or p["probe_p99_low_us"] is None or p["probe_p99_peak_us"] is None:
                parts.append("-")
                continue
            lo, hi = p["probe_p99_low_us"], p["probe_p99_peak_us"]
            parts.append(f"{lo:,.0f} → {hi:,.0f} µs ({hi / lo:.2f}×) at {p['peak_load']}")
        print(f"  probe ({ps[0]['probe_class'] if ps[0] else '?'}) p99 {k[0]}: "
              + " / ".join(parts))
    print()


def group(c):
    s = c["spec"]
    return f"{s['workload']} · {s['connections']} conns"


def pipes_rows(runs):
    print(f"## pipes: {len(runs)} run(s): {', '.join(runs)}")
    data = [json.load(open(os.path.join(r, "pipes.json"))) for r in runs]
    rows_by = []
    for d in data:
        rows_by.append({(x["mode"], x["workers"], x["service"]): x
                        for x in (d["results"] if isinstance(d, dict) else d)})
    keys = []
    for m in rows_by:
        for k in m:
            if k not in keys:
                keys.append(k)
    rows = []
    for k in keys:
        xs = [m.get(k) for m in rows_by]
        rows.append([k[0], str(k[1]), k[2],
                     joined([x["events_per_s"] if x else None for x in xs], 0),
                     joined([x.get("ratio_to_baseline") if x else None for x in xs], 3)])
    table(["mode", "workers", "service", "events/s", "× baseline"], rows)
    print()


def table(head, rows):
    w = [max(len(str(r[i])) for r in [head] + rows) for i in range(len(head))]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * w[i] for i in range(len(head))))
    for r in rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.exit(__doc__)
    d = sys.argv[1]
    names = sys.argv[2:] or ["pipes", "zygos", "gis", "zippydb", "http", "nginx", "priority",
                             "priority-vanilla", "colocation", "elastic", "sphinx"]
    for name in names:
        runs = runs_of(d, name)
        if not runs:
            continue
        if name == "pipes":
            pipes_rows(runs)
        else:
            bench_rows(name, runs)


if __name__ == "__main__":
    main()
