#!/usr/bin/env bash
# The arrivals self-check's threshold, judged on real runs: `skq load`
# against Debian's memcached (-t 1, CPU 0; generator on CPU 1) at the rates
# and connection counts where kv-vs-memcached failed the arrivals test, with
# SKQ_LOAD_GAPS_DIR recording each run's sampled gaps, then
# scripts/bench/arrivals-gaps.py on them.
#
#   bash scripts/bench/arrivals-gaps.sh [OUT]     (default results/arrivals-gaps)
#
# Needs memcached (scripts/setup.sh) and target/release/skq. Each run is 4 s
# (+0.5 s warm-up); measure on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-results/arrivals-gaps}
SKQ=${SKQ:-target/release/skq}
PORT=${PORT:-22122}
mkdir -p "$OUT"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/env.txt"
for spec in "8000 24 sphinx-ro 1" "8000 96 sphinx-ro 1" "8000 24 etc 2" "8000 24 sphinx-wo 3" \
            "20000 384 sphinx-wo 1" "56000 24 sphinx-ro 1"; do
  read -r rate conns wl seed <<<"$spec"
  d=$OUT/$rate-$conns-$wl-s$seed
  rm -rf "$d"; mkdir -p "$d"
  taskset -c 0 memcached -p "$PORT" -t 1 -U 0 -l 127.0.0.1 -u nobody & mc=$!
  sleep 0.5
  SKQ_LOAD_GAPS_DIR=$d "$SKQ" load --addr 127.0.0.1:"$PORT" --protocol memcached \
    --kv-workload "$wl" --rate "$rate" --connections "$conns" --duration 4 --warmup 0.5 \
    --cpus 1 --seed "$seed" --json "$d/result.json" --quiet > "$d/load.log" 2>&1 || true
  kill "$mc"; wait "$mc" 2>/dev/null || true
  echo "[arrivals-gaps] $rate req/s, $conns conns, $wl, seed $seed: $(grep -c 'FAILED CHECK' "$d/load.log" || true) failed check line(s)"
done
python3 scripts/bench/arrivals-gaps.py "$OUT"/*/ | tee "$OUT/arrivals-gaps.txt"
