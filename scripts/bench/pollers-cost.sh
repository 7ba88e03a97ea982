#!/usr/bin/env bash
# Issue 21 item 2: several pollers per epoll set (--pollers 0, every idle
# worker blocks in the shared set; the one the kernel wakes keeps the event
# when the policy allows, others are woken by a targeted signal) against
# leader/follower (--pollers 1, one poller that hands the poll to a parked
# worker when it leaves to work), with epoll-shared and epoll-1to1 as the
# stock baselines, same run. Server CPU and context switches per reply
# (scripts/bench/cost-per-reply.py: 8 workers, server on CPU 0, generator on
# CPU 1). Two runs, interleaved. Measure on a quiet machine.
# Usage: scripts/bench/pollers-cost.sh OUT.txt [cost-per-reply options]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:?usage: $0 OUT.txt [cost-per-reply options]}
shift
: > "$out"
for run in 1 2; do
  for p in 1 0; do
    echo "## run $run, --pollers $p" | tee -a "$out"
    python3 scripts/bench/cost-per-reply.py --runs 1 --modes hybrid,cpu,best2 "$@" \
      --server-args "--pollers $p" | tee -a "$out"
  done
  echo "## run $run, stock baselines" | tee -a "$out"
  python3 scripts/bench/cost-per-reply.py --runs 1 --modes epoll-shared,epoll-1to1 "$@" | tee -a "$out"
done
