#!/usr/bin/env bash
# Issue 21 item 4, in the simulator: one shared readiness set against one
# set per group of 8 workers, at 16 and 64 workers, 10 µs exponential
# service, as the cost of a set's lock per ready source grows (the lock is
# held set-hold-ns per harvest plus set-item-ns per source harvested; the
# core lets one worker at a time harvest a set). Deterministic (seed 1);
# virtual time, so the machine's noise does not enter. POLLERS (default 1,
# leader/follower, the setting of the committed 2026-11-25 figures) is
# passed as --pollers; 0 is every idle worker polling.
# Usage: [POLLERS=0] scripts/bench/harvest-scaling-sim.sh [OUT.txt]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-/dev/stdout}
SKQ=${SKQ:-target/release/skq}
POLLERS=${POLLERS:-1}
{
  echo "# skq sim, hybrid, 1024 connections, exponential S=10 us, --harvest runtime, --pollers $POLLERS, 400000 requests/point, seed 1"
  for w in 16 64; do
    for item in 50 500 2000; do
      for g in 1 $((w / 8)); do
        echo "== $w workers, --set-hold-ns 500 --set-item-ns $item, --poll-groups $g"
        "$SKQ" sim --model hybrid --workers "$w" --connections 1024 --workload exponential \
          --mean-us 10 --loads 0.3,0.6,0.8,0.9 --requests 400000 --harvest runtime \
          --set-hold-ns 500 --set-item-ns "$item" --poll-groups "$g" --pollers "$POLLERS" 2>&1 |
          grep -E "load    offered|^  0\.|max load"
      done
    done
  done
} > "$out"
