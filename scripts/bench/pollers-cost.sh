#!/usr/bin/env bash
# Issue 21 item 2: several pollers per epoll set (--pollers 0, every idle
# worker blocks in the shared set; the one the kernel wakes keeps the event
# when the policy allows, others are woken by a targeted signal) against
# leader/follower (--pollers 1, one poller that hands the poll to a parked
# worker when it leaves to work), with epoll-shared and epoll-1to1 as the
# stock baselines, same run (scripts/bench/flag-cost.sh). Measure on a quiet
# machine.
# Usage: scripts/bench/pollers-cost.sh OUT.txt [cost-per-reply options]
set -euo pipefail
out=${1:?usage: $0 OUT.txt [cost-per-reply options]}
shift
exec "$(dirname "${BASH_SOURCE[0]}")/flag-cost.sh" "$out" --pollers "1 0" hybrid,cpu,best2 "$@"
