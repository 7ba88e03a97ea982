#!/usr/bin/env bash
# The cache's tail at one thread against memcached's, second by second: one
# server thread on CPU 0 (`skq serve kv --workers 1 KV_ARGS`, or
# `memcached -t 1`), `skq load` on CPU 1 at RATE over CONNS connections with
# the Sphinx mix MIX for SECS seconds, latency per 100-ms interval
# (`--interval-ms 100`), servers alternating REPS times. Prints per run p50,
# p99 and p99.9, how many 100-ms intervals had a p99 over 100 µs (a tail
# spread over the run reads many, a few stalls read few), and the server's
# CPU µs per request over the whole load run, warm-up included (/proc).
# Usage: bash scripts/bench/kv-tail.sh OUT [REPS] [MIX] [RATE] [CONNS] [SECS]
# KV_ARGS (default "--arch tpc"); SERVERS (default "memcached kv").
# WARM_US=N also runs, on CPU 0 beside every server, a thread that does
# nothing but sleep N µs in a loop (as memcached's LRU maintainer thread
# wakes about every 0.8 ms): whether a tail comes from the server's CPU
# waking from idle rather than from the server's request path.
# Measure on a quiet machine.
set -u
out=${1:?usage: kv-tail.sh OUT [REPS] [MIX] [RATE] [CONNS] [SECS]}
reps=${2:-2}; mix=${3:-sphinx-ro}; rate=${4:-10000}; conns=${5:-64}; secs=${6:-5}
kv_args=${KV_ARGS:---arch tpc}; servers=${SERVERS:-"memcached kv"}; warm_us=${WARM_US:-}
skq=target/release/skq
[ -x "$skq" ] || { echo "kv-tail.sh: build first (cargo build --release -p skq)" >&2; exit 2; }
command -v memcached >/dev/null || { echo "kv-tail.sh: memcached not installed (bash scripts/setup.sh)" >&2; exit 2; }
mkdir -p "$out"
port=11650
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); mix=$mix rate=$rate conns=$conns secs=$secs kv: $kv_args${warm_us:+; a ${warm_us}-us sleeper on CPU 0}"
warm=""
if [ -n "$warm_us" ]; then
  taskset -c 0 python3 -c "import time
while True: time.sleep($warm_us / 1e6)" &
  warm=$!
  trap 'kill $warm 2>/dev/null' EXIT
fi
for rep in $(seq 1 "$reps"); do
  for who in $servers; do
    port=$((port + 1))
    case $who in
      memcached) taskset -c 0 memcached -t 1 -m 64 -p $port -U 0 -u root >/dev/null 2>&1 & ;;
      kv) taskset -c 0 "$skq" serve kv $kv_args --workers 1 --addr 127.0.0.1:$port >/dev/null 2>&1 & ;;
      *) echo "kv-tail.sh: unknown server $who" >&2; exit 2 ;;
    esac
    pid=$!
    sleep 0.5
    f="$out/$who-$rep.json"
    c0=$(awk '{print $14+$15}' /proc/$pid/stat)
    taskset -c 1 "$skq" load --addr 127.0.0.1:$port --protocol memcached --kv-workload "$mix" \
      --rate "$rate" --connections "$conns" --duration "$secs" --warmup 1 --interval-ms 100 \
      --json "$f" --quiet >/dev/null 2>"$out/$who-$rep.err"
    c1=$(awk '{print $14+$15}' /proc/$pid/stat)
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    cpu_us=$(awk -v a="$c0" -v b="$c1" -v t="$(getconf CLK_TCK)" -v r="$rate" -v s="$secs" 'BEGIN {printf "%.2f", (b-a)/t*1e6/(r*(s+1))}')
    python3 - "$f" "$who" "$rep" "$cpu_us" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
iv = [i for i in r.get("intervals", []) if i.get("p99_us") is not None]
over = sum(1 for i in iv if i["p99_us"] > 100)
l = r["latency"]
print(f"{sys.argv[2]:<10} rep {sys.argv[3]}: p50 {l['p50']['value']:.0f} p99 {l['p99']['value']:.0f} "
      f"p99.9 {l['p999']['value']:.0f} us; 100-ms intervals with p99 > 100 us: {over} of {len(iv)}; "
      f"CPU {sys.argv[4]} us/request; checks {'pass' if r['checks']['pass'] else 'FAIL'}")
PY
  done
done
