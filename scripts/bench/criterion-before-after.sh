#!/usr/bin/env bash
# The criterion core benchmark (crates/skq-core/benches/core.rs, group
# `cycle`) with two builds, interleaved, two runs each: BEFORE and AFTER are
# the bench executables (`cargo bench -p skq-core --no-run` in each tree).
# Prints each run's estimates. Measure on a quiet machine.
# Usage: BEFORE=... AFTER=... scripts/bench/criterion-before-after.sh
set -euo pipefail
: "${BEFORE:?path of the bench executable built before}" "${AFTER:?and after}"
for run in 1 2; do
  for which in before after; do
    exe=$BEFORE; [ "$which" = after ] && exe=$AFTER
    dir=$(mktemp -d)
    echo "## run $run, $which"
    (cd "$dir" && "$exe" --bench cycle --warm-up-time 1 --measurement-time 3 --noplot 2>&1 |
      grep -E "^cycle/|time:" | paste - - | sed -E 's/ +/ /g')
    rm -rf "$dir"
  done
done
