#!/usr/bin/env bash
# skq load against itself: how far two back-to-back runs of the same load
# (same seed, same server) disagree on this host. The cross-check
# (scripts/bench/load-crosscheck.sh) runs its two clients one after the
# other and asks their p50 and p99 to agree within max(15%, 20 µs); this
# says whether two runs of one client do.
#
# The rpc server (`skq serve rpc --mode epoll-1to1 --workers 1 --service
# spin`, 5 µs fixed service) on CPU 0, `skq load` on CPU 1 over 64
# connections, RUNS runs (default 4) of DURATION s (default 5, 1 s warm-up)
# per rate. Prints each run's p50, p99 and lateness p99, and for each pair of
# consecutive runs whether it would pass the cross-check's latency tolerance.
#
# Usage: bash scripts/bench/load-self-agreement.sh [RATES] (default "3200 8000 16000")
#   RUNS, DURATION: environment. Build first: cargo build --release -p skq
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rates=${1:-3200 8000 16000}
RUNS=${RUNS:-4} DURATION=${DURATION:-5}
skq=target/release/skq
[ -x "$skq" ] || { echo "$skq is missing: cargo build --release -p skq" >&2; exit 2; }
tmp=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
taskset -c 0 "$skq" serve rpc --mode epoll-1to1 --workers 1 --service spin \
    --addr 127.0.0.1:$port > "$tmp/server.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 50); do grep -q "listening" "$tmp/server.log" && break; sleep 0.1; done
echo "# $(uptime)"
for rate in $rates; do
    for i in $(seq "$RUNS"); do
        "$skq" load --addr 127.0.0.1:$port --protocol rpc --rate "$rate" --connections 64 \
            --workload fixed --mean-us 5 --duration "$DURATION" --warmup 1 --seed 1 --cpus 1 \
            --quiet --json "$tmp/r$rate-$i.json" > /dev/null 2>&1 || [ $? = 3 ]
    done
    python3 - "$rate" "$RUNS" "$tmp" <<'PY'
import json, sys
rate, runs, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = [json.load(open(f"{tmp}/r{rate}-{i}.json")) for i in range(1, runs + 1)]
def agree(a, b):
    return abs(a - b) <= max(0.15 * max(a, b), 20.0)
rows = [(x["latency"]["p50"]["value"], x["latency"]["p99"]["value"],
         x["checks"]["lateness_p99_us"]) for x in r]
for i, (p50, p99, late) in enumerate(rows, 1):
    print(f"rate {rate} run {i}: p50 {p50:8.1f}  p99 {p99:8.1f}  lateness p99 {late:6.1f} µs")
pairs = [(rows[i], rows[i + 1]) for i in range(len(rows) - 1)]
ok = sum(agree(a[0], b[0]) and agree(a[1], b[1]) for a, b in pairs)
p99s = [x[1] for x in rows]
print(f"rate {rate}: p99 max/min {max(p99s) / min(p99s):.2f}; "
      f"{ok} of {len(pairs)} consecutive pairs agree within max(15%, 20 µs) on p50 and p99")
PY
done
