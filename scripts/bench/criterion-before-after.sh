#!/usr/bin/env bash
# A criterion benchmark group with two builds, interleaved, two runs each:
# BEFORE and AFTER are the bench executables (`cargo bench -p CRATE --bench
# NAME --no-run` in each tree, which prints their paths), GROUP the group to
# run: `cycle` (crates/skq-core/benches/core.rs, the default) or `store`
# (crates/skq-kv/benches/store.rs), or an extended regex for some of a
# group's benchmarks, e.g. 'cycle/(cpu|vanilla)/uncontended' (criterion's
# filter). Prints each run's estimates. Measure on a quiet machine.
# Usage: BEFORE=... AFTER=... [GROUP=cycle] scripts/bench/criterion-before-after.sh
set -euo pipefail
: "${BEFORE:?path of the bench executable built before}" "${AFTER:?and after}"
group=${GROUP:-cycle}
for run in 1 2; do
  for which in before after; do
    exe=$BEFORE; [ "$which" = after ] && exe=$AFTER
    dir=$(mktemp -d)
    echo "## run $run, $which"
    (cd "$dir" && "$exe" --bench "$group" --warm-up-time 1 --measurement-time 3 --noplot 2>&1 |
      grep -E "^($group)|time:" |
      awk '/time:/ { print prev $0; prev = ""; next } { prev = $0 " " }' | sed -E 's/ +/ /g')
    rm -rf "$dir"
  done
done
