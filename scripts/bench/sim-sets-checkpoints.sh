#!/usr/bin/env bash
# Issue 21 item 4 in the simulator: hybrid on one shared readiness set, on a set
# per group of 8 workers, on a set per worker, and on a set per worker with a
# handler that checkpoints every C µs (`skq sim --checkpoint-us`: the busy
# worker harvests its own set and hands the work on), at 16 and 64 workers
# with µs-scale service. The output does not depend on the machine (seeded).
#
#   bash scripts/bench/sim-sets-checkpoints.sh OUT.txt
#
# Environment: SKQ (target/release/skq), WORKERS ("16 64"), WORKLOADS
# ("bimodal-1 exponential"), CKPT ("10 20 50"), MEAN_US (10), REQUESTS (100000),
# LOADS (0.1,0.3,0.5,0.7,0.8,0.9), EXTRA (more `skq sim` flags for every run, e.g.
# "--set-hold-ns 500 --set-item-ns 200" to model each set's lock).
case ${1:-} in -h | --help) sed -n '2,/^case /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
set -eu
out=${1:?usage: sim-sets-checkpoints.sh OUT.txt}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
skq=${SKQ:-target/release/skq}
workers=${WORKERS:-16 64}
workloads=${WORKLOADS:-bimodal-1 exponential}
ckpt=${CKPT:-10 20 50}
mean=${MEAN_US:-10}
requests=${REQUESTS:-100000}
loads=${LOADS:-0.1,0.3,0.5,0.7,0.8,0.9}
read -r -a more <<< "${EXTRA:-}"
{
    echo "# $(date -u +%FT%TZ) binary $(git rev-parse --short HEAD): $skq sim -m hybrid --workers N --harvest runtime --poll-groups G [--checkpoint-us C] --workload W --mean-us $mean --loads $loads --requests $requests ${EXTRA:-}"
    for n in $workers; do
        for w in $workloads; do
            runs=("1:one shared set" "$((n / 8)):a set per 8 workers" "$n:a set per worker")
            for c in $ckpt; do runs+=("$n+$c:a set per worker, checkpoint every $c us"); done
            for r in "${runs[@]}"; do
                spec=${r%%:*}
                label=${r#*:}
                g=${spec%%+*}
                extra=()
                [[ $spec == *+* ]] && extra=(--checkpoint-us "${spec#*+}")
                echo "## $n workers, $w, $label (--poll-groups $g ${extra[*]})"
                "$skq" sim -m hybrid --workers "$n" --harvest runtime --poll-groups "$g" \
                    "${extra[@]}" "${more[@]}" --workload "$w" --mean-us "$mean" --loads "$loads" \
                    --requests "$requests" 2>&1 | grep -v '^== '
            done
        done
    done
} > "$out.tmp"
# One line per run: max load at SLO, p99 at 0.3, CPU and switches per request
# at 0.3 and 0.7 (when those loads are in LOADS).
{
    cat "$out.tmp"
    echo "# summary: max load at SLO (fraction of capacity); at loads 0.3 and 0.7, p99 µs, CPU µs/req, switches/req"
    awk '/^## /{h=$0; sub(/ \(--poll.*/,"",h); sub(/^## /,"",h)}
         /^  0\.(300|700)/{cpu[$1]=$7; sw[$1]=$8; p99[$1]=$5}
         /^max load/{m=$0; sub(/.*\(/,"",m); sub(/ of capacity\)/,"",m); if ($0 ~ /≥/) m="≥"m; if ($0 ~ /none/) m="none";
                     printf "%-62s max %-7s p99@0.3 %6s  CPU@0.3 %s @0.7 %s  sw@0.3 %s @0.7 %s\n", h, m, p99["0.300"], cpu["0.300"], cpu["0.700"], sw["0.300"], sw["0.700"]}' "$out.tmp"
} | tee "$out"
rm -f "$out.tmp"
