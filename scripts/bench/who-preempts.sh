#!/usr/bin/env bash
# What takes the generator's CPU inside this VM, against what its loop
# loses. Stock memcached (one thread) runs on CPU 0 and `skq load` on CPU 1
# (sphinx-ro, 4 s); for 3 s in the middle, `perf record -e
# sched:sched_switch -C 1` records every switch on the generator's CPU.
# Prints, per task that took the CPU from the generator while it could run
# (a preemption), how often and for how long, and beside it the generator's
# own count of loop stalls over 50 us and the time they lost. Time the guest
# scheduler gave to other tasks is what the guest can explain; the rest of
# the stalls' time was taken outside it (the hypervisor).
#
# Usage: scripts/bench/who-preempts.sh [RATE:CONNS]   (default 80000:384)
# Needs perf and /usr/bin/memcached (bash scripts/setup.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
case ${1:-} in -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
point=${1:-80000:384}
rate=${point%%:*} conns=${point##*:}
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load before $(cut -d' ' -f1-3 /proc/loadavg); $rate req/s over $conns connections, memcached on CPU 0, skq load on CPU 1"
taskset -c 0 /usr/bin/memcached -u root -U 0 -t 1 -l 127.0.0.1 -p "$port" -m 1024 -c 4096 &
mc=$!
sleep 0.4
"$skq" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload sphinx-ro \
    --connections "$conns" --rate "$rate" --cpus 1 --duration 4 >"$tmp/load.txt" 2>&1 &
ld=$!
sleep 1.5
perf record -q -e sched:sched_switch -C 1 -o "$tmp/perf.data" -- sleep 3 >/dev/null 2>&1
wait "$ld" || true
kill "$mc"; wait "$mc" 2>/dev/null || true
perf script -i "$tmp/perf.data" 2>/dev/null >"$tmp/switches.txt"
grep -E '^(checks|client cpu):' "$tmp/load.txt" || true
python3 - "$tmp/switches.txt" <<'PY'
import collections
import re
import sys

pat = re.compile(r"\s(\d+\.\d+):\s+sched:sched_switch: prev_comm=(.+?) prev_pid=\d+ "
                 r"prev_prio=\d+ prev_state=(\S+) ==> next_comm=(.+?) next_pid=")
taken = collections.defaultdict(list)  # task -> run lengths after preempting the generator
current = None  # (task, start) of a task that preempted the generator
for line in open(sys.argv[1]):
    m = pat.search(line)
    if not m:
        continue
    t, prev, state, nxt = float(m[1]), m[2], m[3], m[4]
    if current and prev == current[0]:
        taken[current[0]].append((t - current[1]) * 1e6)
        current = None
    if prev.startswith("skq-load") and state.startswith("R"):
        current = (nxt, t)
total = 0.0
print("preempted the generator in 3 s (task: times, us each median / max, ms in all):")
for task, runs in sorted(taken.items(), key=lambda kv: -sum(kv[1])):
    runs.sort()
    total += sum(runs)
    print(f"  {task}: {len(runs)}, {runs[len(runs) // 2]:.1f} / {runs[-1]:.1f} us, {sum(runs) / 1e3:.2f} ms")
print(f"  all: {sum(len(r) for r in taken.values())} preemptions, {total / 1e3:.2f} ms "
      "(the generator's stalls above cover 4 s, the trace 3 s)")
PY
