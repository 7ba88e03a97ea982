#!/usr/bin/env bash
# Issue 21 item 2: one epoll set per worker (--poll-groups 8, the kernel
# wakes the owning worker directly) against the one shared set with
# leader/follower (--poll-groups 1), with epoll-shared and epoll-1to1 as the
# stock baselines, same run. Server CPU and context switches per reply
# (scripts/bench/cost-per-reply.py: 8 workers, server on CPU 0, generator
# on CPU 1). Two runs, interleaved. Measure on a quiet machine.
# Usage: scripts/bench/poll-groups-cost.sh OUT.txt [--service spin --mean-us 5 --rate 20000]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:?usage: $0 OUT.txt [cost-per-reply options]}
shift
: > "$out"
for run in 1 2; do
  for g in 1 8; do
    echo "## run $run, --poll-groups $g" | tee -a "$out"
    python3 scripts/bench/cost-per-reply.py --runs 1 --modes hybrid,cpu "$@" \
      --server-args "--poll-groups $g" | tee -a "$out"
  done
  echo "## run $run, stock baselines" | tee -a "$out"
  python3 scripts/bench/cost-per-reply.py --runs 1 --modes epoll-shared,epoll-1to1 "$@" | tee -a "$out"
done
