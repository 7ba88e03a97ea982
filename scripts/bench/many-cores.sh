#!/usr/bin/env bash
# The checks this 2-CPU project machine cannot make, in one short run for a
# machine with many CPUs (the device machine when one is lent): SKQ's pipe
# benchmark (§6.1: always-readable pipes, 5 µs spun per event, workers pinned)
# at 4, 8, 16, 32 and 64 workers, as far as the CPUs go, with epoll-1to1,
# epoll-shared, hybrid and cpu, ratios against epoll-shared; then hybrid again
# with one event per blocking poll at every set size (`--batch-polls-above
# 64`) against epoll-shared, so the batch rule for sets of more than 8 workers
# (docs/ARCHITECTURE.md, "Batches from a set of more than 8 workers") is timed
# on real cores. About 2 s per configuration, under two minutes at 64 CPUs.
#
#   bash scripts/bench/many-cores.sh OUT_DIR
#
# Environment: SKQ (target/release/skq; to carry a binary to another machine,
# `strip -o target/device/skq target/release/skq` keeps it small), DURATION (2),
# WORKERS (the list; default 4 8 16 32 64 up to the CPUs seen).
case ${1:-} in -h | --help) sed -n '2,/^case /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
set -eu
out=${1:?usage: many-cores.sh OUT_DIR}
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "many-cores.sh: $skq is missing: cargo build --release -p skq" >&2; exit 2; }
mkdir -p "$out"
cpus=$(nproc)
if [ -n "${WORKERS:-}" ]; then
    list=$WORKERS
else
    list=""
    for w in 4 8 16 32 64; do [ "$w" -le "$cpus" ] && list="$list $w"; done
fi
[ -n "$list" ] || { echo "many-cores.sh: $cpus CPUs, fewer than 4: nothing to measure" >&2; exit 2; }
workers=$(echo $list | tr ' ' ',')
d=${DURATION:-2}
{
    echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?'): $cpus CPUs; $(uname -r); load $(cut -d' ' -f1-3 /proc/loadavg)"
    lscpu 2>/dev/null | grep -E '^(Model name|Socket|Core|Thread|NUMA node\(s\))' | sed 's/^/# /'
} > "$out/machine.txt"
cat "$out/machine.txt"
"$skq" pipes --modes epoll-1to1,epoll-shared,hybrid,cpu --baseline epoll-shared \
    --workers "$workers" --spin-us 5 --emulated-workers 0 --duration "$d" --pin \
    --json "$out/pipes-default.json" 2>&1 | tee "$out/pipes-default.txt"
"$skq" pipes --modes epoll-shared,hybrid --baseline epoll-shared \
    --workers "$workers" --spin-us 5 --emulated-workers 0 --duration "$d" --pin \
    --batch-polls-above 64 --json "$out/pipes-one-event.json" 2>&1 | tee "$out/pipes-one-event.txt"
