#!/usr/bin/env python3
"""How much the host is taking from this VM's CPUs right now, in two seconds per CPU.

    python3 scripts/bench/host-probe.py [--cpus 0,1] [--sleeps 1000] [--spin-secs 1]

The load average sees only this VM's runnable threads; a host that holds a vCPU off its
physical CPU does not show there, and on the 2-CPU development VM such stretches ruin
whole runs while the load average reads 0.1-0.3 (docs/MEASUREMENT.md, "Host delays"). Two
probes per CPU, pinned to it, show them:

* **sleep**: `--sleeps` sleeps of 500 µs; how far each overshot (a thread's default timer
  slack is 50 µs, so a quiet CPU overshoots by 50-100 µs), and how many overshot by more
  than 200 µs.
* **spin**: `--spin-secs` of reading the clock in a loop; the gaps over 100 µs between two
  reads (time the thread did not run), their count, the longest and their sum.

`--together-secs S` adds a third probe: the spin on every CPU of `--cpus` at once, for S
seconds (one process per CPU), printing each CPU's gaps over 1 ms. A host that can give
this VM one physical CPU at a time but not all of them shows there and nowhere else: on
the Firecracker VM of 2026-12-06 (evening), 20 s of spinning on one CPU had no gap over
221 µs, while both CPUs spinning together lost 100-ms stretches
(docs/results/quiet-2026-12-06g/probe-*.txt; docs/MEASUREMENT.md, "Both CPUs busy at
once").

One line per CPU. `--max-late N` makes the exit status 1 when more than N sleeps
overshot by more than 200 µs on any CPU (`scripts/bench/quiet-loop.sh` with
HOST_PROBE=N uses it as a gate). Run it with nothing else running: it measures the
host, not a benchmark.
"""
import argparse
import os
import sys
import time

LATE_US = 200


def sleep_probe(n):
    over = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        time.sleep(0.0005)
        over.append((time.perf_counter_ns() - t0) / 1000 - 500)
    over.sort()
    return over


def spin_gaps(start_ns, secs, min_gap_ns):
    """Reads the clock in a loop from `start_ns` (perf_counter_ns) for `secs`; the gaps
    between two reads over `min_gap_ns`, as (ns from the start, gap ns)."""
    now = time.perf_counter_ns
    while now() < start_ns:
        pass
    end = start_ns + int(secs * 1e9)
    last = now()
    gaps = []
    while last < end:
        t = now()
        if t - last > min_gap_ns:
            gaps.append((last - start_ns, t - last))
        last = t
    return gaps


def spin_probe(secs):
    return [g / 1000 for _, g in spin_gaps(time.perf_counter_ns(), secs, 100_000)]


def together_probe(cpus, secs):
    """Spins on every CPU of `cpus` at once for `secs`; per CPU, the gaps over 1 ms as
    (seconds from the start, ms)."""
    import multiprocessing as mp

    def spin(cpu, start, q):
        os.sched_setaffinity(0, {cpu})
        q.put((cpu, [(t / 1e9, g / 1e6) for t, g in spin_gaps(start, secs, 1_000_000)]))

    ctx = mp.get_context("fork")
    q = ctx.Queue()
    start = time.perf_counter_ns() + 200_000_000
    ps = [ctx.Process(target=spin, args=(c, start, q)) for c in cpus]
    for p in ps:
        p.start()
    out = dict(q.get() for _ in ps)
    for p in ps:
        p.join()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpus", default="0,1")
    p.add_argument("--sleeps", type=int, default=1000)
    p.add_argument("--spin-secs", type=float, default=1.0)
    p.add_argument("--max-late", type=int, default=None,
                   help="exit 1 when more sleeps than this overshot by over 200 µs on a CPU")
    p.add_argument("--together-secs", type=float, default=0.0,
                   help="also spin on all --cpus at once for this long (0: not)")
    a = p.parse_args()
    if a.sleeps < 1 or a.spin_secs < 0 or a.together_secs < 0:
        sys.exit("host-probe: --sleeps must be at least 1, --spin-secs and --together-secs "
                 "not negative")
    worst = 0
    for cpu in (int(c) for c in a.cpus.split(",")):
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError as e:
            sys.exit(f"host-probe: cannot run on CPU {cpu}: {e}")
        over = sleep_probe(a.sleeps)
        gaps = spin_probe(a.spin_secs)
        q = lambda f: over[min(len(over) - 1, int(f * len(over)))]
        late = sum(1 for o in over if o > LATE_US)
        worst = max(worst, late)
        print(f"cpu{cpu}: sleep 500 us x{len(over)}: overshoot median {q(0.5):.0f} p99 {q(0.99):.0f} "
              f"max {over[-1]:.0f} us, {late} over {LATE_US} us; spin {a.spin_secs:g} s: "
              f"{len(gaps)} gaps over 100 us, longest {max(gaps, default=0):.0f} us, "
              f"{sum(gaps) / 1000:.1f} ms in all", flush=True)
    if a.together_secs > 0:
        cpus = [int(c) for c in a.cpus.split(",")]
        for cpu, gaps in sorted(together_probe(cpus, a.together_secs).items()):
            at = ", ".join(f"{ms:.1f} ms at {t:.2f} s" for t, ms in gaps)
            print(f"cpu{cpu}: spin {a.together_secs:g} s with all of {a.cpus} spinning: "
                  f"{len(gaps)} gaps over 1 ms, longest {max((g for _, g in gaps), default=0):.1f} ms, "
                  f"{sum(g for _, g in gaps):.1f} ms in all{': ' + at if at else ''}", flush=True)
    if a.max_late is not None and worst > a.max_late:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
