#!/usr/bin/env bash
# Where the simple client's CPU goes (issue 27): runs the rpc server on CPU 0
# and the simple client on CPU 1 under `perf sched record -C 1`, then prints
# the client's lateness and, per task on CPU 1, the run-time percentiles of
# its scheduling slices (`perf sched timehist`). A receiver slice longer than
# the client's --guard-us can run past the sender's next send. The client's
# line also counts its sends later than 50 µs and, of those, the ones due
# while its previous send call was still running.
#
# Usage: bash scripts/bench/simple-client-sched.sh [RATE] [extra simple_client flags]
#   SIMPLE=PATH runs another build of the client (a before/after comparison).
# Build first: cargo build --release -p skq && cargo build --release -p skq-load --example simple_client
# Measure on a quiet machine; run as root (perf, SCHED_FIFO).
set -euo pipefail
cd "$(dirname "$0")/../.."
rate=${1:-500}; shift || true
port=7993
data=$(mktemp -d)/sched.data
taskset -c 0 target/release/skq serve rpc --mode epoll-1to1 --workers 1 --service spin \
    --addr 127.0.0.1:$port >/dev/null 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
sleep 0.5
echo "== simple client at $rate req/s ${*:-}"
perf sched record -q -C 1 -o "$data" -- taskset -c 1 "${SIMPLE:-target/release/examples/simple_client}" \
    --addr 127.0.0.1:$port --rate "$rate" --connections 64 --workload fixed --mean-us 5 \
    --duration 4 --warmup 1 "$@" 2>&1 | grep -o "lateness p50 .* send call p99 [0-9.]* µs"
echo "== run time per scheduling slice on CPU 1, µs (whole run, start-up and drain included)"
perf sched timehist -i "$data" 2>/dev/null | awk 'NR > 3 { print $3, $6 * 1000 }' | python3 -c '
import sys, collections
runs = collections.defaultdict(list)
for line in sys.stdin:
    task, us = line.split()
    runs[task].append(float(us))
for task, v in sorted(runs.items(), key=lambda kv: -len(kv[1])):
    if len(v) >= 20:
        v.sort()
        q = lambda f: v[min(len(v) - 1, int(len(v) * f))]
        print(f"{task:34} n {len(v):6}  p50 {q(.5):8.1f}  p90 {q(.9):8.1f}  p99 {q(.99):8.1f}")
'
