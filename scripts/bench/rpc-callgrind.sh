#!/usr/bin/env bash
# Instructions per reply of `skq serve rpc` under callgrind, per mode: the user-space
# work each mode's worker loop does per reply, in a count that does not move with the
# host (issue 21: hybrid's CPU per reply against epoll-shared's).
#
#   bash scripts/bench/rpc-callgrind.sh OUT [RATE] [SECS] [MODES]
#
# The main job's server setting: 8 workers, emulated exponential service of mean
# 500 µs (an absolute-deadline sleep, so callgrind's slowness does not stretch it),
# 64 connections. For each mode in MODES (default "hybrid epoll-shared"), the server
# runs under `valgrind --tool=callgrind` (with --cache-sim=yes when CACHE=1: simulated
# L1/LL misses, which rank first touches of shared state the instruction count cannot
# see); `skq load` warms it for 2 s at RATE (default 800 req/s), the counters are zeroed,
# a window of SECS (default 6) runs at RATE and the counters are dumped.
# scripts/bench/callgrind-groups.py prints the instructions per reply by crate.
# Callgrind serializes the server's threads and runs them about 50 times slower, so RATE
# must stay low; the point is the count per reply, not the latency.
#
# Environment: SKQ (default target/release/skq), LABEL (appended to the output names),
# CACHE=1 (simulate the caches), TOP=N (the N costliest skq functions per mode).
set -euo pipefail
out=${1:?usage: rpc-callgrind.sh OUT [RATE] [SECS] [MODES]}
rate=${2:-800}
secs=${3:-6}
modes=${4:-hybrid epoll-shared}
skq=${SKQ:-target/release/skq}
label=${LABEL:+-$LABEL}
for t in valgrind callgrind_control callgrind_annotate; do
    command -v $t >/dev/null || { echo "$t is not installed (apt-get install valgrind)" >&2; exit 2; }
done
[ -x "$skq" ] || { echo "$skq is missing: cargo build --release -p skq" >&2; exit 2; }
mkdir -p "$out"
CG_OPTS=()
[ "${CACHE:-0}" = 1 ] && CG_OPTS=(--cache-sim=yes)
. "$(dirname "$0")/callgrind-lib.sh"
files=()
for mode in $modes; do
    port=$(free_port)
    load=("$skq" load --addr "127.0.0.1:$port" --protocol rpc --workload exponential
          --mean-us 500 --rate "$rate" --connections 64 --quiet)
    cg="$out/cg-$mode$label.out"
    replies=$(callgrind_window "$cg" "$out/server-$mode$label.log" "$port" 2 "$secs" \
        "$out/warm-$mode$label.json" "$out/load-$mode$label.json" \
        "$skq" serve rpc --addr "127.0.0.1:$port" --mode "$mode" --workers 8 --service emulate) || exit 1
    echo "$mode$label: $replies replies in the window ($rate req/s offered, $secs s)"
    files+=("$cg.1:$replies")
done
top=()
[ -n "${TOP:-}" ] && top=(--top "$TOP")
python3 "$(dirname "$0")/callgrind-groups.py" "${files[@]}" "${top[@]}" | tee "$out/groups$label.txt"
