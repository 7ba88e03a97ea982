#!/usr/bin/env bash
# CPU profile of `skq serve rpc` under open-loop load: where a mode's CPU per
# reply goes (kernel, skq's own code, libc), by cpu-clock sampling (these VMs
# have no hardware counters). Server on CPU 0 under `perf record`, `skq load`
# on CPU 1; 8 workers, emulated exponential service of 500 µs (the main
# job's), RATE req/s (default 6400, load 0.4) over 64 connections for SECS
# seconds (default 5), sampled at FREQ Hz (default 2999).
# Prints, per mode, the share of samples per binary and the top symbols.
# Run it on a quiet machine, one mode after the other.
#
# Usage: bash scripts/bench/profile-rpc.sh OUT_DIR MODE [MODE ...]
#   e.g. bash scripts/bench/profile-rpc.sh /tmp/prof epoll-shared hybrid
set -eu  # no pipefail: `head` closes perf report's pipe early
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ $# -lt 2 ]; then
    sed -n 2,13p "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
out=$1; shift
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq (or set SKQ)" >&2; exit 2; }
rate=${RATE:-6400}
secs=${SECS:-5}
freq=${FREQ:-2999}
mkdir -p "$out"
for mode in "$@"; do
    port=$((20000 + RANDOM % 20000))
    taskset -c 0 perf record -q -F "$freq" -o "$out/$mode.data" "$skq" serve rpc \
        --addr "127.0.0.1:$port" --mode "$mode" --workers 8 --service emulate \
        >"$out/$mode.server.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q listening "$out/$mode.server.log" && break; sleep 0.05; done
    taskset -c 1 "$skq" load --addr "127.0.0.1:$port" --rate "$rate" --connections 64 \
        --workload exponential --mean-us 500 --duration "$secs" --quiet --json "$out/$mode.json" \
        >/dev/null 2>&1 || true
    kill -INT "$server"
    wait "$server" || true
    {
        echo "== $mode: share of samples per binary"
        perf report -i "$out/$mode.data" --no-children --sort dso --stdio 2>/dev/null \
            | grep -v '^#' | grep -v '^$' | head -6
        echo "== $mode: top symbols"
        perf report -i "$out/$mode.data" --no-children --sort dso,sym --stdio 2>/dev/null \
            | grep -v '^#' | grep -v '^$' | head -25
    } | tee "$out/$mode.txt"
done
