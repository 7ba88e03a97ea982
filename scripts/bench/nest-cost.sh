#!/usr/bin/env bash
# What nesting epoll sets costs on this kernel: the measurement behind
# docs/ARCHITECTURE.md, "An idle worker harvesting a busy owner's set".
#
#   bash scripts/bench/nest-cost.sh OUT [RUNS]
#
# Runs crates/skq-rt/examples/nest_cost.rs with one thread and with two at once
# (each on its own CPU and its own sets), RUNS (2) times each, then profiles
# one two-thread run with perf (cpu-clock, kernel call chains) and writes the
# hottest kernel symbols and the call chain into the hottest one. Outputs:
# OUT/nest-cost.txt (every run's lines), OUT/perf-symbols.txt,
# OUT/perf-top-chain.txt. Run it on a quiet machine (scripts/bench/gated.sh).
case ${1:-} in -h | --help) sed -n '2,/^case /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
set -eu
out=${1:?usage: nest-cost.sh OUT [RUNS]}
runs=${2:-2}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p "$out"
cargo build --release -q -p skq-rt --example nest_cost
bin=target/release/examples/nest_cost
{
    echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
    for r in $(seq 1 "$runs"); do
        for t in 1 2; do
            echo "## run $r, --threads $t"
            "$bin" --threads "$t" --pairs 200000 --runs 3
        done
    done
} | tee "$out/nest-cost.txt"
if command -v perf > /dev/null; then
    perf record -q -e cpu-clock -F 5000 -g -o "$out/nest.perf" \
        "$bin" --threads 2 --pairs 200000 --runs 1 --only nest > /dev/null 2>&1
    perf report -i "$out/nest.perf" --no-children --sort symbol --stdio -g none 2>/dev/null \
        | grep '%' | head -20 > "$out/perf-symbols.txt"
    top=$(awk '{print $3; exit}' "$out/perf-symbols.txt")
    perf report -i "$out/nest.perf" --no-children --sort symbol --stdio -G -S "$top" 2>/dev/null \
        | grep -v '^#' | grep -v '^$' | head -20 > "$out/perf-top-chain.txt"
    rm -f "$out/nest.perf"
    cat "$out/perf-symbols.txt" "$out/perf-top-chain.txt"
fi
