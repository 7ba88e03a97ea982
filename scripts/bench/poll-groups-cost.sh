#!/usr/bin/env bash
# Issue 21 item 2: one epoll set per worker (--poll-groups 8, the kernel
# wakes the owning worker directly) against the one shared set
# (--poll-groups 1), with epoll-shared and epoll-1to1 as the stock
# baselines, same run (scripts/bench/flag-cost.sh). Measure on a quiet
# machine. Its 2026-11-25 figures were taken with one poller per set
# (--pollers 1, then the default).
# Usage: scripts/bench/poll-groups-cost.sh OUT.txt [--service spin --mean-us 5 --rate 20000]
set -euo pipefail
out=${1:?usage: $0 OUT.txt [cost-per-reply options]}
shift
exec "$(dirname "${BASH_SOURCE[0]}")/flag-cost.sh" "$out" --poll-groups "1 8" hybrid,cpu "$@"
