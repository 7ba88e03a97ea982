#!/usr/bin/env bash
# Why an skq server sleeps more than once per reply: every blocking
# epoll_pwait2 of `skq serve rpc` traced with the wake-ups that ended its
# sleeps (perf tracepoints, system-wide, so wake-ups from the client's
# softirq are seen too). A call woken more than once was woken for
# readiness another worker took first and slept again inside the kernel;
# the waker's name says who woke it: skq-load-N (the client's send, in
# its softirq), skq-N (another worker: a doorbell, or the kernel's
# re-wake after a harvest left readiness in the set), swapper (a remote
# wake-up delivered on an idle CPU, waker unknown).
#
# Usage: scripts/bench/epoll-wakes.sh [BINARY] [MODE] [RATE]
#   (MODE may be an skq-async one, async-hybrid: its workers are skq-async-N)
#   default target/release/skq hybrid 3200 (the main job's load 0.2:
#   8 workers, emulated exponential 500 µs, 64 connections, 4 s)
# Needs perf with tracepoint access (root). Measure on a quiet machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BIN=${1:-target/release/skq} MODE=${2:-hybrid} RATE=${3:-3200}
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 20000))
"$BIN" serve rpc --addr "127.0.0.1:$port" --mode "$MODE" --workers 8 --service emulate > "$tmp/server.out" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$tmp/server.out" 2>/dev/null && break; sleep 0.1; done
timeout 4.5 perf record -a -e sched:sched_wakeup -e syscalls:sys_enter_epoll_pwait2 \
    -e syscalls:sys_exit_epoll_pwait2 -e syscalls:sys_exit_clock_nanosleep \
    -o "$tmp/perf.data" > /dev/null 2>&1 &
rec=$!
sleep 0.3
"$BIN" load --addr "127.0.0.1:$port" --protocol rpc --workload exponential --mean-us 500 \
    --rate "$RATE" --duration 4 --connections 64 --quiet > /dev/null 2>&1 || true
wait $rec || true
kill -INT $pid; wait $pid 2>/dev/null || true
perf script -i "$tmp/perf.data" -F comm,tid,time,event,trace 2>/dev/null > "$tmp/trace.txt"
python3 - "$tmp/trace.txt" "$MODE" "$RATE" <<'PY'
import collections
import re
import sys

path, mode, rate = sys.argv[1:4]
line_re = re.compile(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+(\S+):\s*(.*)")
workers = set()
for l in open(path):
    m = re.match(r"\s*(skq-(?:async-)?\d+)\s+(\d+)", l)
    if m:
        workers.add(int(m.group(2)))
inside, woken = {}, {}
per_call = collections.Counter()
wakers = collections.Counter()
replies = 0
for l in open(path):
    m = line_re.match(l)
    if not m:
        continue
    comm, tid, ev, rest = m.group(1), int(m.group(2)), m.group(4), m.group(5)
    if ev == "sched:sched_wakeup":
        pid = int(re.search(r"pid=(\d+)", rest).group(1))
        if pid in workers and inside.get(pid):
            woken[pid].append(re.sub(r"\d+", "N", comm))
    elif tid not in workers:
        continue
    elif ev == "syscalls:sys_enter_epoll_pwait2":
        inside[tid], woken[tid] = True, []
    elif ev == "syscalls:sys_exit_epoll_pwait2" and inside.get(tid):
        w = woken[tid]
        per_call[min(len(w), 4)] += 1
        for c in w[:-1]:
            wakers[c] += 1
        inside[tid] = False
    elif ev == "syscalls:sys_exit_clock_nanosleep":
        replies += 1  # the emulated service sleeps once per request
n = max(replies, 1)
calls = sum(per_call.values())
print(f"{mode} at {rate} req/s: {replies} replies traced; per reply:")
print(f"  epoll_pwait2 calls {calls / n:.3f}; sleeps in them "
      f"{sum(k * v for k, v in per_call.items()) / n:.3f} (4+ counted as 4)")
for k in sorted(per_call):
    label = "took readiness without sleeping" if k == 0 else f"woken {k}{'+' if k == 4 else ''} time(s)"
    print(f"    {label:<34} {per_call[k] / n:.3f}")
print(f"  wake-ups after which the call slept again: {sum(wakers.values()) / n:.3f}, by")
for c, v in wakers.most_common():
    print(f"    {c:<34} {v / n:.3f}")
PY
