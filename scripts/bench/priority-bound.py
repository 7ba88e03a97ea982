#!/usr/bin/env python3
"""What ideal two-level priority allows in the SKQ §6.8 experiment.

    python3 scripts/bench/priority-bound.py [--workers 8] [--probe-rps 600]
        [--loads 0.1,0.3,0.5,0.7,0.85,0.95] [--secs 60] [--runs 3]
        [--overhead-us 0,500]

A discrete-event model of the experiment in
crates/skq-bench/examples/priority-skq68*.toml with every overhead removed:
W identical workers, no system calls, no wake-ups, no polling delay. Regular
requests arrive as a Poisson stream at LOAD × capacity (capacity = W / S̄,
S̄ = 675 µs for gis ×50) and draw the gis classes per request (95% 500 µs,
4% 2,500 µs, 1% 10,000 µs; the experiment keeps a class per connection over
256 connections, which adds each heavy connection's own queue on top of
this). The probe is a second Poisson stream at --probe-rps of the lightest
class (500 µs), run once at high priority and once as regular. A worker
that finishes takes the oldest high-priority request first, else the oldest
regular one (non-preemptive priority, FIFO within a level); a request that
finds an idle worker starts at once.

For each load it prints the probe's p99 sojourn (waiting + service) and its
growth from the lowest load, with OVERHEAD µs added to every sojourn (a
fixed per-request cost of the real system outside the queue: at load 0.1
the measured probe p99 is about 1,050 µs, so about 500 µs of it is not
service). The high-priority growth is the floor non-preemptive priority
leaves: the wait for the first of W busy workers to finish. It needs no
build and measures nothing on this machine; run it when no measurement is
running (it keeps one CPU busy for a few seconds per load).
"""
import argparse
import heapq
import random
import statistics
import sys
from collections import deque

GIS = [(0.95, 500.0), (0.04, 2500.0), (0.01, 10000.0)]
LIGHT_US = 500.0


def mean_service():
    return sum(p * s for p, s in GIS)


def draw(rng):
    u = rng.random()
    acc = 0.0
    for p, s in GIS:
        acc += p
        if u < acc:
            return s
    return GIS[-1][1]


def simulate(workers, load, probe_rps, probe_high, secs, seed):
    """Returns the probe's sojourn times (µs) over `secs` after a warm-up."""
    rng = random.Random(seed)
    cap = workers / mean_service() * 1e6  # req/s
    reg_rate = load * cap / 1e6  # per µs
    probe_rate = probe_rps / 1e6
    horizon = (secs + 2.0) * 1e6
    warm = 2.0e6
    # Events: (time, kind, payload); kind 0 = worker free, 1 = regular
    # arrival, 2 = probe arrival.
    ev = []
    heapq.heappush(ev, (rng.expovariate(reg_rate), 1, 0))
    heapq.heappush(ev, (rng.expovariate(probe_rate), 2, 0))
    idle = workers
    high = deque()
    reg = deque()
    out = []

    def start(now, arrival, service, is_probe):
        heapq.heappush(ev, (now + service, 0, (arrival, service, is_probe)))

    while ev:
        now, kind, payload = heapq.heappop(ev)
        if now > horizon:
            break
        if kind == 0:
            arrival, service, is_probe = payload
            if is_probe and arrival >= warm:
                out.append(now - arrival)
            if high:
                a, s, p = high.popleft()
                start(now, a, s, p)
            elif reg:
                a, s, p = reg.popleft()
                start(now, a, s, p)
            else:
                idle += 1
            continue
        if kind == 1:
            heapq.heappush(ev, (now + rng.expovariate(reg_rate), 1, 0))
            req = (now, draw(rng), False)
            q = reg
        else:
            heapq.heappush(ev, (now + rng.expovariate(probe_rate), 2, 0))
            req = (now, LIGHT_US, True)
            q = high if probe_high else reg
        if idle > 0:
            idle -= 1
            start(now, *req)
        else:
            q.append(req)
    return out


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--probe-rps", type=float, default=600.0)
    ap.add_argument("--loads", default="0.1,0.3,0.5,0.7,0.85,0.95")
    ap.add_argument("--secs", type=float, default=60.0, help="simulated seconds per load and run")
    ap.add_argument("--runs", type=int, default=3, help="runs (seeds) per load; the median p99 is printed")
    ap.add_argument("--overhead-us", default="0,500",
                    help="fixed cost added to every sojourn, comma-separated values")
    a = ap.parse_args()
    try:
        loads = [float(x) for x in a.loads.split(",")]
        overheads = [float(x) for x in a.overhead_us.split(",")]
    except ValueError as e:
        sys.exit(f"priority-bound: --loads and --overhead-us take numbers: {e}")
    if a.workers < 1 or a.runs < 1 or a.secs <= 0 or any(not 0 < l < 1 for l in loads):
        sys.exit("priority-bound: need --workers >= 1, --runs >= 1, --secs > 0 and loads in (0, 1)")
    print(f"# ideal non-preemptive priority, {a.workers} workers, gis x50 (S = {mean_service():.0f} us), "
          f"probe {a.probe_rps:.0f} req/s of {LIGHT_US:.0f} us; {a.secs:.0f} s x {a.runs} runs per load")
    p99s = {}
    for cls in ("high", "regular"):
        for load in loads:
            runs = [p99(simulate(a.workers, load, a.probe_rps, cls == "high", a.secs, 1000 * r + int(load * 100)))
                    for r in range(a.runs)]
            p99s[(cls, load)] = (statistics.median(runs), min(runs), max(runs))
    for o in overheads:
        print(f"\n## probe p99 sojourn + {o:.0f} us overhead (median of runs [min-max]); growth from load {loads[0]}")
        print(f"{'load':>5}  {'high p99 us':>22}  {'growth':>6}  {'regular p99 us':>22}  {'growth':>6}")
        for load in loads:
            h, hlo, hhi = p99s[("high", load)]
            r, rlo, rhi = p99s[("regular", load)]
            h0 = p99s[("high", loads[0])][0] + o
            r0 = p99s[("regular", loads[0])][0] + o
            print(f"{load:5.2f}  {h + o:8.0f} [{hlo + o:5.0f}-{hhi + o:5.0f}]  {(h + o) / h0:5.2f}x"
                  f"  {r + o:8.0f} [{rlo + o:5.0f}-{rhi + o:5.0f}]  {(r + o) / r0:5.2f}x")


if __name__ == "__main__":
    main()
