#!/usr/bin/env bash
# The arrivals self-check across seeds: for each seed and rate, the
# Anderson-Darling A2 of the actual inter-send gaps (beyond the threshold),
# of the scheduled times of the same sends (the reference), of the schedule in
# schedule order, the send lateness p99 and the verdict.
#
#   bash scripts/bench/ad-seeds.sh [SEEDS] [RATES] [THREADS]
#   (defaults: "1 2 3 4 5 6", "3200 6400 9600", 4)
#
# It starts `skq serve rpc --mode epoll-1to1 --workers 8 --service emulate`
# on a free port and runs `skq load --threads THREADS --connections 64
# --mean-us 500` for 2 s per point. The verdicts do not depend on a quiet
# machine the way latency does, but lateness (and so the gap threshold) does.
set -euo pipefail
cd "$(dirname "$0")/../.."
SKQ=target/release/skq
SEEDS=${1:-1 2 3 4 5 6}
RATES=${2:-3200 6400 9600}
THREADS=${3:-4}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TMP=$(mktemp -d)
"$SKQ" serve rpc --addr 127.0.0.1:$PORT --mode epoll-1to1 --workers 8 --service emulate --duration 600 >"$TMP/server.log" 2>&1 &
SRV=$!
trap 'kill $SRV 2>/dev/null; rm -rf "$TMP"' EXIT
sleep 1
echo "load $(cut -d' ' -f1-3 /proc/loadavg); threads $THREADS"
printf '%-5s %-6s %-8s %-8s %-8s %-10s %s\n' seed rate actual ref sched late_p99 arrivals_ok
for s in $SEEDS; do
  for r in $RATES; do
    "$SKQ" load --addr 127.0.0.1:$PORT --rate "$r" --threads "$THREADS" --connections 64 \
      --duration 2 --warmup 0.5 --seed "$s" --mean-us 500 --json "$TMP/p.json" >/dev/null 2>&1 || true
    python3 - "$TMP/p.json" "$s" "$r" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["checks"]
f = lambda v: "-" if v is None else f"{v:.2f}"
print(f"{sys.argv[2]:<5} {sys.argv[3]:<6} {f(c['ad_statistic']):<8} {f(c.get('ad_reference')):<8} "
      f"{f(c['ad_scheduled']):<8} {c['lateness_p99_us']:<10.0f} {c['ad_ok']}")
PY
  done
done
