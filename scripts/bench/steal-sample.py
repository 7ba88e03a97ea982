#!/usr/bin/env python3
"""Print each CPU's steal time every 50 ms while it rises, until SIGTERM.

    python3 scripts/bench/steal-sample.py OUT.txt & pid=$!; <run something>; kill $pid

Reads the per-CPU lines of /proc/stat every 50 ms and writes one line to OUT.txt for each
reading in which any CPU's steal (the 8th field, in 10-ms ticks: time the hypervisor kept
the vCPU from running while it had work) rose: CLOCK_MONOTONIC seconds, then `cpuN:ticks`
per CPU. The clock is the one `skq bench` stamps its points with (`schedule_start_ns`), so
a rise can be placed in a point's seconds. `skq bench` records the same per interval
itself now (`host_steal_ms`); this is the probe that showed the host's holds there
(docs/MEASUREMENT.md, "Both CPUs busy at once").
"""
import signal
import sys
import time


def read():
    r = {}
    for line in open("/proc/stat"):
        if line.startswith("cpu") and line[3].isdigit():
            f = line.split()
            r[f[0]] = int(f[8]) if len(f) > 8 else 0
    return r


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = open(sys.argv[1], "w")
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    prev = read()
    while not stop:
        time.sleep(0.05)
        cur = read()
        t = time.monotonic()
        d = {k: cur[k] - prev.get(k, cur[k]) for k in cur}
        if any(d.values()):
            out.write(f"{t:.3f} " + " ".join(f"{k}:{v}" for k, v in sorted(d.items())) + "\n")
            out.flush()
        prev = cur
    return 0


if __name__ == "__main__":
    sys.exit(main())
