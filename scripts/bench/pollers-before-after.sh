#!/usr/bin/env bash
# Several pollers per set (issue 21 item 2) against the commit before it:
# `skq pipes` (defaults) and the criterion core benchmark (group `cycle`),
# builds interleaved, two runs each. BEFORE/AFTER: the skq binaries;
# BENCH_BEFORE/BENCH_AFTER: the skq-core bench executables (`cargo bench -p
# skq-core --no-run` in each tree). Measure on a quiet machine.
# Usage: BEFORE=... AFTER=... BENCH_BEFORE=... BENCH_AFTER=... \
#   scripts/bench/pollers-before-after.sh OUTDIR
set -euo pipefail
out=${1:?usage: $0 OUTDIR}
: "${BEFORE:?skq binary before}" "${AFTER:?skq binary after}"
: "${BENCH_BEFORE:?core bench before}" "${BENCH_AFTER:?core bench after}"
mkdir -p "$out"
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1 /proc/loadavg); before=$BEFORE after=$AFTER"
for run in 1 2; do
  for which in before after; do
    bin=$BEFORE; [ "$which" = after ] && bin=$AFTER
    echo "## skq pipes (defaults), run $run, $which"
    "$bin" pipes --json "$out/pipes-$which-run$run.json" 2>&1 | tail -16 | tee "$out/pipes-$which-run$run.txt"
  done
done
BEFORE=$BENCH_BEFORE AFTER=$BENCH_AFTER scripts/bench/criterion-before-after.sh | tee "$out/criterion.txt"
