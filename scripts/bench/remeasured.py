#!/usr/bin/env python3
"""Points `skq bench` measured again because the generator fell behind, and
whose doing it was. Each such line of a bench log names the generator's
lateness p99, and (since 2026-11-29) the machine's stalls of its loop and
its lateness p99 without them; older logs name the machine floor of its CPU
sampled in the same run instead (an ideal generator's lateness p99 there,
docs/MEASUREMENT.md "Whose lateness").

A point is counted as the machine's when its lateness without the stalls is
within the check's bound (50 µs), or, in a log without stall figures, when
the floor is at least half its lateness; the rest are the generator's own.
Since the read-lag check (2026-11-29 evening) the line also names the read
lag p99; a point whose sends kept the bound but whose reads did not is
counted apart, as read late, and (since 2026-11-30, when the line also names
the read lag without the stalls) split into the machine's and the
generator's own the same way.

Since 2026-12-03 `skq bench` also measures again a point whose server the
host delayed (its emulated service overshot the run's median past the
limit, docs/MEASUREMENT.md "Host delays"); those lines are counted apart.
Since 2026-12-06 it also measures again a point whose tail came from seconds
in which the host held the machine (docs/MEASUREMENT.md "Tail episodes");
those are counted apart too, and so are crossings measured three times (a
p99 over the SLO below a load that met it, since 2026-11-27, or though at
least half of the point's seconds met it, since 2026-12-06: docs/MEASUREMENT.md
"A crossing below a load that met the SLO is measured three times").

Usage: python3 scripts/bench/remeasured.py BENCH_LOG ...
"""
import re
import sys

BOUND_US = 50.0
LINE = re.compile(
    r"skq bench: (\S+) \[(.*?)\]: load ([\d.]+): generator (\d+) µs late at p99 "
    r"(?:sending, (?:(\d+) µs|n/a) reading )?"
    r"\(preempted (\d+) times, ([\d.]+) ms waiting for a CPU"
    r"(?:; machine floor ([\d.]+) us)?"
    r"(?:; (\d+) stalls \(([\d.]+) ms\), lateness p99 without them ([\d.]+) us"
    r"(?:, read lag p99 without them ([\d.]+) us)?)?\)"
)
DELAYED = re.compile(
    r"skq bench: (\S+) \[(.*?)\]: load ([\d.]+): the host delayed the server: "
    r"emulated service (\d+) µs over"
)
HELD = re.compile(
    r"skq bench: (\S+) \[(.*?)\]: load ([\d.]+): the host held the machine through the tail: "
    r"p99 (\d+) µs"
)

CROSSING = re.compile(
    r"skq bench: (\S+) \[(.*?)\]: load ([\d.]+): p99 (\d+) µs over the SLO \((\d+) µs\) "
    r"(below a load that met it|though \d+ of its \d+ seconds met it), measuring again"
)


def classify(row):
    late, floor, without = row["late"], row["floor"], row["without"]
    if late <= BOUND_US and (row["read"] or 0) > BOUND_US:
        return "read"
    if without is not None:
        return "machine" if without <= BOUND_US else "own"
    if floor is not None:
        return "machine" if floor >= 0.5 * late else "own"
    return "own"


def span(values):
    v = sorted(values)
    return f"median {v[len(v) // 2]:g} us [{v[0]:g}-{v[-1]:g}]"


if len(sys.argv) < 2:
    print(__doc__.strip())
    sys.exit(2)
for path in sys.argv[1:]:
    rows = []
    delayed = []
    held = []
    crossings = []
    for line in open(path, encoding="utf-8"):
        c = CROSSING.search(line)
        if c:
            why = "below" if c.group(6).startswith("below") else "seconds"
            crossings.append((c.group(1), float(c.group(3)), int(c.group(4)), why))
            continue
        d = DELAYED.search(line)
        if d:
            delayed.append((d.group(1), float(d.group(3)), int(d.group(4))))
            continue
        h = HELD.search(line)
        if h:
            held.append((h.group(1), float(h.group(3)), int(h.group(4))))
            continue
        m = LINE.search(line)
        if not m:
            continue
        opt = lambda i: float(m.group(i)) if m.group(i) is not None else None  # noqa: E731
        # Groups after the read lag (5) moved by one.
        rows.append({
            "mode": m.group(1),
            "group": m.group(2),
            "load": float(m.group(3)),
            "late": int(m.group(4)),
            "read": opt(5),
            "floor": opt(8),
            "without": opt(11),
            "read_without": opt(12),
        })
    mach = [r for r in rows if classify(r) == "machine"]
    own = [r for r in rows if classify(r) == "own"]
    read = [r for r in rows if classify(r) == "read"]
    print(f"{path}: {len(rows)} re-measured; the machine's (stalls or floor): {len(mach)}; "
          f"the generator's own: {len(own)}; read late (sends on time): {len(read)}")
    if read:
        print(f"  read late: read lag p99 {span([r['read'] for r in read])}; ",
              [(r["mode"], r["group"], r["load"]) for r in read][:10])
        rw = [r["read_without"] for r in read if r["read_without"] is not None]
        if rw:
            mine = sum(1 for x in rw if x <= BOUND_US)
            print(f"  read late, without stalls: {span(rw)}; the machine's {mine}, "
                  f"the generator's own {len(rw) - mine} (of {len(rw)} with the figure)")
    if own:
        print(f"  generator's own: lateness p99 {span([r['late'] for r in own])}", end="")
        w = [r["without"] for r in own if r["without"] is not None]
        print(f", without stalls {span(w)}" if w else "")
        groups = {}
        for r in own:
            conns = re.search(r"(\d+) conns", r["group"])
            key = f"{conns.group(1)} conns" if conns else r["group"]
            groups.setdefault(key, []).append(r["load"])
        print("  by connections:", "; ".join(
            f"{k}: {len(v)} (loads {', '.join(f'{x:g}' for x in sorted(v))})"
            for k, v in sorted(groups.items())))
    if delayed:
        print(f"  measured again because the host delayed the server: {len(delayed)} "
              f"(config, load, overshoot µs): {delayed[:10]}")
    if held:
        print(f"  measured again because the host held the machine through the tail: {len(held)} "
              f"(config, load, p99 µs): {held[:10]}")
    if crossings:
        below = sum(1 for c in crossings if c[3] == "below")
        print(f"  crossings measured three times: {len(crossings)} (below a load that met "
              f"the SLO {below}, most of their seconds met it {len(crossings) - below}) "
              f"(config, load, p99 µs): {[c[:3] for c in crossings][:10]}")
    if mach:
        print("  machine's:", [(r["mode"], r["load"], r["late"], r["without"] or r["floor"])
                               for r in mach][:10])
