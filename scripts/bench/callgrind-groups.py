#!/usr/bin/env python3
"""Instructions per reply by crate from callgrind dumps.

    python3 scripts/bench/callgrind-groups.py DUMP:REPLIES [DUMP:REPLIES ...] [--top N]

Each DUMP is a callgrind output file (scripts/bench/hyper-callgrind.sh writes them),
REPLIES the replies served while it counted (time-driven work of the server, such as idle
wake-ups and housekeeping threads, is spread over them: compare dumps of one rate and one
window length). Self cost per function
(`callgrind_annotate --inclusive=no`), summed by where the function's source lives:
the server's own code (app: the example), skq-core, skq-rt, skq-async, skq-sys, skq-net
(the servers' drivers, epoll-shared's among them), skq-servers, skq-proto,
async-task, tokio, mio, hyper, http, httparse, serde_json, bytes, the allocator (malloc.c, arena.c), memcpy, the clock, the standard
library (std: also code of other crates inlined into std's generic functions), other.
Thread entry points (a self cost above a fifth of the total: callgrind charges them
their callees' cycles) are left out. With --top N, also the N costliest functions of
the runtimes' own crates per dump. With --by-function N, a table across the dumps of
the N functions with the largest self cost per reply, each function's cost summed over
the source files it spans (code of std or of another crate inlined into it counts as
its own), with its calls per reply from the dump's call records: where two builds or
two runtimes differ, function by function.
"""
import argparse
import collections
import re
import subprocess

# (a piece of the source path, the group): the first that matches names the group.
GROUPS = [("/examples/", "app"), ("/skq-core/", "skq-core"), ("/skq-rt/", "skq-rt"),
          ("/skq-async/", "skq-async"), ("/skq-sys/", "skq-sys"), ("/async-task-", "async-task"),
          ("/tokio-1", "tokio"), ("/mio-", "mio"), ("/hyper-", "hyper"), ("/http-", "http"),
          ("/httparse-", "httparse"), ("/serde_json-", "serde_json"), ("/bytes-", "bytes"),
          ("/futures-", "futures"), ("/skq-net/", "skq-net"), ("/skq-servers/", "skq-servers"),
          ("/skq-proto/", "skq-proto")]
RUNTIME = {"skq-core", "skq-rt", "skq-async", "skq-sys", "async-task", "tokio", "mio", "skq-net"}


def group(name):
    where = name.split(":", 1)[0]
    for piece, g in GROUPS:
        if piece in where:
            return g
    if "malloc.c" in name or "arena.c" in name:
        return "malloc"
    if "memmove" in name or "memcpy" in name:
        return "memcpy"
    if "clock_gettime" in name or "unix/time.rs" in name:
        return "clock"
    if "/rustc/" in name:
        return "std"
    return "other"


def load(path):
    text = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no",
                           "--inclusive=no", path], capture_output=True, text=True,
                          check=True).stdout
    rows = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        if m and "PROGRAM TOTALS" not in m.group(2):
            rows.append((int(m.group(1).replace(",", "")), m.group(2)))
    top = max((ir for ir, _ in rows), default=0)
    return [(ir, name) for ir, name in rows if ir <= 0.2 * top]


def function(name):
    """The function of an annotate row, without its file and object."""
    fn = name.split(":", 1)[1] if ":" in name else name
    return re.sub(r" \[.*\]$", "", fn)


def calls(path):
    """Calls per function (by callee) from a dump's `calls=` records."""
    names = {}
    out = collections.Counter()
    callee = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("fn=", "cfn=")):
                key, val = line.rstrip("\n").split("=", 1)
                m = re.match(r"\((\d+)\)(?: (.*))?", val)
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    val = names.get(m.group(1), m.group(1))
                if key == "cfn":
                    callee = val
            elif line.startswith("calls=") and callee is not None:
                out[callee] += int(line.split("=", 1)[1].split()[0])
    return out


def by_function(cols, paths, top):
    per = []
    for (_, n, _, rows), path in zip(cols, paths):
        c = collections.Counter()
        for ir, name in rows:
            c[function(name)] += ir
        per.append((n, c, calls(path)))
    keys = sorted({k for _, c, _ in per for k in c}, key=lambda k: -max(c[k] / n for n, c, _ in per))
    print(f"\nthe {top} costliest functions: instructions per reply (calls per reply)")
    print("".join(f"{name[:18]:>20s}" for name, _, _, _ in cols))
    for k in keys[:top]:
        cells = []
        for n, c, cl in per:
            cells.append(f"{c[k] / n:10.0f} ({cl[k] / n:5.2f})" if c[k] else f"{'-':>18s}")
        print("".join(f"{x:>20s}" for x in cells) + "  " + k[:100])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dumps", nargs="+", help="DUMP:REPLIES")
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--by-function", type=int, default=0, metavar="N")
    args = ap.parse_args()
    cols = []
    for d in args.dumps:
        path, replies = d.rsplit(":", 1)
        rows = load(path)
        g = collections.Counter()
        for ir, name in rows:
            g[group(name)] += ir
        cols.append((path.rsplit("/", 1)[-1], int(replies), g, rows))
    keys = sorted({k for _, _, g, _ in cols for k in g},
                  key=lambda k: -max(g[k] / n for _, n, g, _ in cols))
    print("instructions per reply (callgrind, self cost by crate)")
    print(f"{'':12s}" + "".join(f"{name[:22]:>24s}" for name, _, _, _ in cols))
    for k in keys:
        print(f"{k:12s}" + "".join(f"{g[k] / n:24.0f}" for _, n, g, _ in cols))
    rt = [sum(v for k, v in g.items() if k in RUNTIME) / n for _, n, g, _ in cols]
    print(f"{'runtime':12s}" + "".join(f"{v:24.0f}" for v in rt))
    print(f"{'total':12s}" + "".join(f"{sum(g.values()) / n:24.0f}" for _, n, g, _ in cols))
    for name, n, _, rows in cols if args.top else []:
        print(f"\n{name}: the {args.top} costliest runtime functions, instructions per reply")
        own = [(ir, nm) for ir, nm in rows if group(nm) in RUNTIME]
        for ir, nm in sorted(own, reverse=True)[:args.top]:
            fn = nm.split(":", 1)[1] if ":" in nm else nm
            print(f"  {ir / n:8.0f}  {fn.split(' [')[0][:110]}")
    if args.by_function:
        by_function(cols, [d.rsplit(":", 1)[0] for d in args.dumps], args.by_function)


if __name__ == "__main__":
    main()
