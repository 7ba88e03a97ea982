#!/usr/bin/env bash
# The worker loop moved into skq-core (issue 21): cost per reply and pipes
# with the binary before the move ($BEFORE, default /work/target-before/
# release/skq, built from the commit before it) and after ($AFTER, default
# target/release/skq), interleaved, plus the hand-over threshold's effect
# on spun µs-scale service. Measure on a quiet machine (load < 0.3).
# Usage: scripts/bench/loop-before-after.sh OUTDIR
set -euo pipefail
out=${1:?usage: $0 OUTDIR}
BEFORE=${BEFORE:-/work/target-before/release/skq}
AFTER=${AFTER:-target/release/skq}
mkdir -p "$out"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1 /proc/loadavg); before=$BEFORE after=$AFTER"
for run in 1 2; do
  for which in before after; do
    bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
    echo "## cost per reply, emulated 500 us, run $run, $which"
    SKQ=$bin python3 scripts/bench/cost-per-reply.py --runs 1 --modes hybrid,cpu,shared,epoll-shared \
      | tee -a "$out/cost-$which.txt"
  done
done
for run in 1 2; do
  for pm in 0 20; do
    echo "## cost per reply, spun 5 us at 20000 req/s, --promote-min-us $pm, run $run (after)"
    SKQ=$AFTER python3 scripts/bench/cost-per-reply.py --runs 1 --modes hybrid,cpu,shared \
      --service spin --mean-us 5 --rate 20000 --server-args "--promote-min-us $pm" \
      | tee -a "$out/spin-promote-$pm.txt"
  done
  echo "## cost per reply, spun 5 us at 20000 req/s, epoll-shared baseline, run $run"
  SKQ=$AFTER python3 scripts/bench/cost-per-reply.py --runs 1 --modes epoll-shared,epoll-1to1 \
    --service spin --mean-us 5 --rate 20000 | tee -a "$out/spin-baseline.txt"
done
for which in before after; do
  bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
  echo "## skq pipes (defaults), $which"
  "$bin" pipes --json "$out/pipes-$which.json" 2>&1 | tail -25 | tee "$out/pipes-$which.txt"
done
