#!/usr/bin/env bash
# One open-loop point per (mode, repetition), interleaved, to count tail
# episodes: the 250 ms intervals whose p99 exceeds a threshold. The RPC
# server (8 workers, emulated service) runs on CPU 0, `skq load` on CPU 1.
#
#   bash scripts/bench/tail-episodes.sh OUT RATE WORKLOAD REPS MODE[:FLAGS] ...
#   e.g. bash scripts/bench/tail-episodes.sh /tmp/tail 9600 exponential 3 \
#          async-hybrid async-tokio async-shared "async-hybrid:--steal-k 4"
#   then: python3 scripts/bench/tail-episodes.py OUT [THRESHOLD_US=4000]
#
# FLAGS after a colon go to `skq serve rpc` (space-separated). DURATION
# (seconds, default 5) sets each point's length after a 1-s warm-up. Every point
# waits for the 1-minute load average to fall below 0.25 (up to 10 min) and
# records it; run it on a quiet machine (docs/MEASUREMENT.md).
set -euo pipefail
if [ $# -lt 5 ]; then
  sed -n 2,15p "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
out=$1 rate=$2 workload=$3 reps=$4
shift 4
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq (or set SKQ)" >&2; exit 1; }
mkdir -p "$out"
quiet() {
  for _ in $(seq 60); do
    l=$(cut -d' ' -f1 /proc/loadavg)
    awk "BEGIN{exit !($l < 0.25)}" && break
    sleep 10
  done
  cut -d' ' -f1-3 /proc/loadavg
}
for rep in $(seq "$reps"); do
  for spec in "$@"; do
    mode=${spec%%:*}
    flags=""
    [ "$spec" != "$mode" ] && flags=${spec#*:}
    tag="$(echo "$spec" | tr ' :/+' '__-p')-$rep"
    load=$(quiet)
    port=$((20000 + RANDOM % 20000))
    # shellcheck disable=SC2086
    taskset -c 0 "$skq" serve rpc --addr 127.0.0.1:$port --mode "$mode" --workers 8 \
      --service emulate --stats-json "$out/$tag.stats.json" $flags >"$out/$tag.server.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q listening "$out/$tag.server.log" && break; sleep 0.05; done
    taskset -c 1 "$skq" load --addr 127.0.0.1:$port --rate "$rate" --connections 64 \
      --workload "$workload" --mean-us 500 --duration "${DURATION:-5}" --warmup 1 --interval-ms 250 \
      --json "$out/$tag.json" --quiet >"$out/$tag.load.log" 2>&1 || true
    kill -INT "$server"
    wait "$server" || true
    printf '%s\t%s\t%s\t%s\n' "$tag" "$spec" "$rep" "$load" >>"$out/index.tsv"
    echo "$tag done (load before: $load)"
  done
done
