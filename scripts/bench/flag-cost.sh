#!/usr/bin/env bash
# Cost per reply of skq modes with one server flag at each of several
# values, beside the stock baselines, same run: server CPU and context
# switches per reply (scripts/bench/cost-per-reply.py: 8 workers, server on
# CPU 0, generator on CPU 1). Two runs, interleaved. Measure on a quiet
# machine.
# Usage: scripts/bench/flag-cost.sh OUT.txt FLAG "V1 V2 ..." MODES [cost-per-reply options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:?usage: $0 OUT.txt FLAG VALUES MODES [cost-per-reply options]}
flag=${2:?flag, e.g. --pollers}
values=${3:?values, e.g. "1 0"}
modes=${4:?skq modes, e.g. hybrid,cpu}
shift 4
: > "$out"
for run in 1 2; do
  for v in $values; do
    echo "## run $run, $flag $v" | tee -a "$out"
    python3 scripts/bench/cost-per-reply.py --runs 1 --modes "$modes" "$@" \
      --server-args "$flag $v" | tee -a "$out"
  done
  echo "## run $run, stock baselines" | tee -a "$out"
  python3 scripts/bench/cost-per-reply.py --runs 1 --modes epoll-shared,epoll-1to1 "$@" | tee -a "$out"
done
