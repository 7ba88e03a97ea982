#!/usr/bin/env bash
# Long idle stretches of one CPU in a `perf sched record` trace, with their start's
# phase on a 100-ms grid.
#
# Usage: bash scripts/bench/long-idles.sh PERF_DATA [CPU] [MIN_MS]
#
# Prints every stretch in which CPU (default 0) ran its idle task for more than MIN_MS
# (default 50) ms, the task that ran just before it, and when it began modulo 100 ms.
# A host that throttles a vCPU's thread on a 100-ms period (CFS bandwidth control) leaves
# stretches of about 100 ms that all begin at the same phase: the guest sees its CPU
# idle, though work was due (docs/MEASUREMENT.md, "Both CPUs busy at once"). Record one
# with, for example:
#   perf sched record -a -o sched.data -- skq bench --modes hybrid --workloads bimodal-1 \
#       --loads 0.75 --point-secs 20 --out /tmp/trace
set -euo pipefail
data=${1:?usage: long-idles.sh PERF_DATA [CPU] [MIN_MS]}
cpu=${2:-0}
min=${3:-50}
[ -r "$data" ] || { echo "long-idles: cannot read $data" >&2; exit 1; }
cpu_tag=$(printf '[%04d]' "$cpu")
perf sched timehist -i "$data" -I 2>/dev/null | awk -v c="$cpu_tag" -v min="$min" '
  $2 == c {
    if ($3 == "<idle>" && $NF + 0 > min) {
      start = $1 - $NF / 1000
      phase = (start * 1000) % 100
      printf "CPU %s idle %.3f ms from %.6f s (phase %.1f ms of 100), after %s\n", c, $NF, start, phase, prev
      n++
    }
    prev = $3
  }
  END { printf "%d stretch(es) over %s ms\n", n, min }'
