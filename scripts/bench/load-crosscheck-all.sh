#!/usr/bin/env bash
# Runs scripts/bench/load-crosscheck.sh for rpc (5 µs spun service, 1 worker,
# epoll-1to1) and memcached (Debian's memcached, 1 thread) at 3,200, 8,000
# and 16,000 req/s over 64 connections; server on CPU 0, both clients on
# CPU 1. Run as root (memcached -u root; the simple client's receiver asks
# for SCHED_FIFO). Tolerance and verdicts: scripts/bench/load-crosscheck.sh.
# REPS=K (environment, default 1): each point alternates K runs of each
# client and compares medians (load-crosscheck.sh --reps).
# Usage: [REPS=K] bash scripts/bench/load-crosscheck-all.sh [RUNS]
set -uo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-2}
B=target/release/skq
for run in $(seq "$runs"); do
    taskset -c 0 $B serve rpc --mode epoll-1to1 --workers 1 --service spin --addr 127.0.0.1:7981 >/dev/null 2>&1 &
    sp=$!
    sleep 0.5
    for r in 3200 8000 16000; do
        echo "== run $run rpc rate $r"
        bash scripts/bench/load-crosscheck.sh --addr 127.0.0.1:7981 --rate $r --connections 64 \
            --cpus 1 --workload fixed --mean-us 5 --duration 4 --warmup 1 --reps "${REPS:-1}" --out /tmp/xc-rpc-$r
    done
    kill $sp; wait $sp 2>/dev/null
    taskset -c 0 memcached -u root -p 7982 -l 127.0.0.1 -t 1 -U 0 -m 256 >/dev/null 2>&1 &
    mp=$!
    sleep 0.5
    for r in 3200 8000 16000; do
        echo "== run $run memcached etc rate $r"
        bash scripts/bench/load-crosscheck.sh --addr 127.0.0.1:7982 --protocol memcached --rate $r \
            --connections 64 --cpus 1 --kv-workload etc --duration 4 --warmup 1 --reps "${REPS:-1}" --out /tmp/xc-mc-$r
    done
    kill $mp; wait $mp 2>/dev/null
done
