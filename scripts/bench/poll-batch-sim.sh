#!/usr/bin/env bash
# How much one blocking poll takes from a shared readiness set, in the
# simulator: builds of skq side by side (e.g. one from before a change to
# the poll's size and one after) on one shared set with every idle worker
# polling (`--pollers 0`, the default), hybrid, 10 µs service, at 8, 16, 32
# and 64 workers, exponential and bimodal-1, without a lock cost and with
# each poll holding the set's lock 500 ns plus 50 or 500 ns per source
# (`--set-hold-ns`, `--set-item-ns`). Seeded, in virtual time: the output
# does not depend on the machine. One line per build and setting: p99 µs,
# modelled CPU µs and context switches per request at loads 0.2, 0.5, 0.8
# and 0.9, then the max load at SLO (p99 <= 100 µs) as a fraction of capacity.
#
#   bash scripts/bench/poll-batch-sim.sh OUT.txt LABEL=BINARY [LABEL=BINARY ...]
#
# e.g. `git worktree add /tmp/old REV && cargo build --release -p skq
# --manifest-path /tmp/old/Cargo.toml`, then
# `bash scripts/bench/poll-batch-sim.sh out.txt before=/tmp/old/target/release/skq
# after=target/release/skq`. Environment: WORKERS ("8 16 32 64"), REQUESTS (300000).
case ${1:-} in -h | --help) sed -n '2,/^case /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
set -eu
out=${1:?usage: poll-batch-sim.sh OUT.txt LABEL=BINARY [LABEL=BINARY ...]}
shift
[ $# -ge 1 ] || { echo "usage: poll-batch-sim.sh OUT.txt LABEL=BINARY [LABEL=BINARY ...]" >&2; exit 2; }
for b in "$@"; do
    bin=${b#*=}
    [ -x "$bin" ] || { echo "poll-batch-sim.sh: $bin is not an executable skq build" >&2; exit 2; }
done
requests=${REQUESTS:-300000}
{
    echo "# $(date -u +%FT%TZ): skq sim -m hybrid --workers N --connections 1024 --harvest runtime --pollers 0 --workload W --mean-us 10 --loads 0.2,0.5,0.8,0.9 --requests $requests --set-hold-ns H --set-item-ns I"
    for b in "$@"; do echo "# ${b%%=*} = ${b#*=}"; done
    echo "# per load: p99 µs, CPU µs/req, switches/req; then max load at SLO (fraction of capacity)"
    for n in ${WORKERS:-8 16 32 64}; do
        for w in exponential bimodal-1; do
            for lock in "0 0" "500 50" "500 500"; do
                read -r hold item <<< "$lock"
                for b in "$@"; do
                    printf "%-8s %2dw %-11s hold %3s item %3s: " "${b%%=*}" "$n" "$w" "$hold" "$item"
                    "${b#*=}" sim -m hybrid --workers "$n" --connections 1024 --workload "$w" \
                        --mean-us 10 --loads 0.2,0.5,0.8,0.9 --requests "$requests" \
                        --harvest runtime --set-hold-ns "$hold" --set-item-ns "$item" --pollers 0 2>&1 |
                        awk '/^max load/{m=$0; sub(/.*\(/,"",m); sub(/ of capacity\)/,"",m);
                                         if ($0 ~ /≥/) m=">="m; if ($0 ~ /lowest load/) m="none"; printf "max %s", m; next}
                             /^  0\./{printf "%s p99 %7s cpu %5s sw %s | ", substr($1,1,3), $5, $7, $8}'
                    echo
                done
            done
        done
    done
} | tee "$out"
