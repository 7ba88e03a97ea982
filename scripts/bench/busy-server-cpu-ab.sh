#!/bin/bash
# Does keeping the server's CPU busy draw the host's 100-ms holds?
#
#   bash scripts/bench/busy-server-cpu-ab.sh OUT [PAIRS]
#
# Runs `skq bench --modes hybrid --loads 0.75 --point-secs 20` PAIRS times (default 3)
# as it is ("plainN") and with a spinner at SCHED_IDLE pinned to CPU 0, the server's
# CPU ("spinN"): the spinner yields to every server thread at once but keeps the vCPU
# from ever halting, so the host sees it busy all the time. Each run waits for the
# 1-minute load < 0.30 and the 5-minute < 0.90 and holds /tmp/skq-measure.lock; the
# machine's steal ticks (/proc/stat, 10 ms each) over each run go to OUT/runs.txt.
# Read the held seconds with
#   python3 scripts/bench/held-seconds.py --loads 0.75 OUT/plain* and ... OUT/spin*
# (docs/MEASUREMENT.md, "Both CPUs busy at once").
set -u
OUT=${1:?usage: busy-server-cpu-ab.sh OUT [PAIRS]}
PAIRS=${2:-3}
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
for i in $(seq 1 "$PAIRS"); do
  for v in plain spin; do
    while :; do
      read -r l1 l5 _ < /proc/loadavg
      if awk -v a="$l1" -v b="$l5" 'BEGIN{exit !(a<0.30 && b<0.90)}'; then break; fi
      sleep 10
    done
    sp=
    if [ "$v" = spin ]; then
      chrt -i 0 taskset -c 0 python3 -c 'while 1: pass' &
      sp=$!
      sleep 1
    fi
    st0=$(awk '/^cpu /{print $9}' /proc/stat)
    echo "$v$i start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/runs.txt"
    flock /tmp/skq-measure.lock target/release/skq bench --modes hybrid --loads 0.75 \
      --point-secs 20 --out "$OUT/$v$i" > "$OUT/$v$i.log" 2>&1
    rc=$?
    st1=$(awk '/^cpu /{print $9}' /proc/stat)
    [ -n "$sp" ] && kill "$sp"
    echo "$v$i end $(date +%T) rc=$rc steal_ticks=$((st1 - st0))" >> "$OUT/runs.txt"
  done
done
