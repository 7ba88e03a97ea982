#!/usr/bin/env bash
# How much one blocking poll takes from a shared readiness set, in the
# simulator: variants of the same build side by side, each a set of `skq sim`
# flags (by default one-event polls, `--batch-polls-above 64`, against the
# default rule, batches in sets of more than 8 workers while events are short),
# on one shared set with every idle worker polling (`--pollers 0`, the
# default), hybrid, 10 µs service, at 8, 16, 32 and 64 workers, exponential
# and bimodal-1, without a lock cost and with each poll holding the set's
# lock 500 ns plus 50 or 500 ns per source (`--set-hold-ns`, `--set-item-ns`).
# Seeded, in virtual time: the output does not depend on the machine. One
# line per variant and setting: p99 µs, modelled CPU µs and context switches
# per request at loads 0.2, 0.5, 0.8 and 0.9, then the max load at SLO
# (p99 <= 100 µs) as a fraction of capacity.
#
#   bash scripts/bench/poll-batch-sim.sh OUT.txt [LABEL="SIM FLAGS" ...]
#
# e.g. `bash scripts/bench/poll-batch-sim.sh out.txt one-event="--batch-polls-above 64"
# unbounded="--batch-polls-above 0" default=""`. Environment: SKQ
# (target/release/skq), WORKERS ("8 16 32 64"), REQUESTS (300000).
case ${1:-} in -h | --help) sed -n '2,/^case /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
set -eu
out=${1:?usage: poll-batch-sim.sh OUT.txt [LABEL="SIM FLAGS" ...]}
shift
[ $# -ge 1 ] || set -- one-event="--batch-polls-above 64" default=""
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "poll-batch-sim.sh: $skq is missing: cargo build --release -p skq" >&2; exit 2; }
for v in "$@"; do
    [[ $v == *=* ]] || { echo "poll-batch-sim.sh: a variant is LABEL=\"FLAGS\", not '$v'" >&2; exit 2; }
done
requests=${REQUESTS:-300000}
{
    echo "# $(date -u +%FT%TZ) binary $(git rev-parse --short HEAD): $skq sim -m hybrid --workers N --connections 1024 --harvest runtime --pollers 0 --workload W --mean-us 10 --loads 0.2,0.5,0.8,0.9 --requests $requests --set-hold-ns H --set-item-ns I [FLAGS]"
    for v in "$@"; do echo "# ${v%%=*}: '${v#*=}'"; done
    echo "# per load: p99 µs, CPU µs/req, switches/req; then max load at SLO (fraction of capacity)"
    for n in ${WORKERS:-8 16 32 64}; do
        for w in exponential bimodal-1; do
            for lock in "0 0" "500 50" "500 500"; do
                read -r hold item <<< "$lock"
                for v in "$@"; do
                    read -r -a flags <<< "${v#*=}"
                    printf "%-10s %2dw %-11s hold %3s item %3s: " "${v%%=*}" "$n" "$w" "$hold" "$item"
                    "$skq" sim -m hybrid --workers "$n" --connections 1024 --workload "$w" \
                        --mean-us 10 --loads 0.2,0.5,0.8,0.9 --requests "$requests" \
                        --harvest runtime --set-hold-ns "$hold" --set-item-ns "$item" --pollers 0 \
                        "${flags[@]}" 2>&1 |
                        awk '/^max load/{m=$0; sub(/.*\(/,"",m); sub(/ of capacity\)/,"",m);
                                         if ($0 ~ /≥/) m=">="m; if ($0 ~ /lowest load/) m="none"; printf "max %s", m; next}
                             /^  0\./{printf "%s p99 %7s cpu %5s sw %s | ", substr($1,1,3), $5, $7, $8}
                             /^error/{printf "%s", $0}'
                    echo
                done
            done
        done
    done
} | tee "$out"
