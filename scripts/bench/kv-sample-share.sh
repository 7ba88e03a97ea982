#!/usr/bin/env bash
# cpu-clock samples per binary (kernel, the server, libc, ...) of one cache server
# with one thread under open-loop load: the server pinned to CPU 0 under
# `perf record -F 4999 -p PID`, `skq load` (memcached protocol, 64 connections,
# 10,000 req/s) pinned to CPU 1. perf starts 3 s into the load and samples SECS
# seconds; the printed sample counts of two servers taken back to back compare
# their CPU over the same number of replies (10,000 × SECS).
# SERVER: memcached (Debian's /usr/bin/memcached -t 1, or MC=PATH) or kv-tpc
# (skq serve kv --arch tpc --workers 1). WORKLOAD: etc, sphinx-ro or sphinx-wo.
# Run it on a quiet machine, under /tmp/skq-measure.lock, one server at a time.
#
# Usage: bash scripts/bench/kv-sample-share.sh OUT_DIR SERVER WORKLOAD SECS
#   e.g. for s in memcached kv-tpc memcached kv-tpc; do
#          bash scripts/bench/kv-sample-share.sh /tmp/share "$s" sphinx-ro 15; done
set -eu
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ $# -ne 4 ]; then
    sed -n 2,14p "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
out=$1 server=$2 wl=$3 secs=$4
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq (or set SKQ)" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
mkdir -p "$out"
port=$((20000 + RANDOM % 20000))
case $server in
    memcached) taskset -c 0 "${MC:-/usr/bin/memcached}" -u root -U 0 -l 127.0.0.1 -m 1024 \
                   -c 4096 -p "$port" -t 1 > /dev/null 2>&1 & ;;
    kv-tpc) taskset -c 0 "$skq" serve kv --addr "127.0.0.1:$port" --workers 1 --arch tpc \
                > /dev/null 2>&1 & ;;
    *) echo "SERVER is memcached or kv-tpc, not $server" >&2; exit 2 ;;
esac
sp=$!
trap 'kill $sp 2>/dev/null || true' EXIT
sleep 0.5
tag=$server-$wl-$(date +%H%M%S)
"$skq" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload "$wl" \
    --connections 64 --rate 10000 --duration $((secs + 2)) --warmup 1 --cpus 1 \
    --json "$out/$tag.json" > "$out/$tag.load.txt" 2>&1 &
lp=$!
sleep 3
perf record -q -F 4999 -p "$sp" -o "$out/$tag.data" -- sleep "$secs" > /dev/null 2>&1
wait $lp || true
echo "== $server $wl, ${secs} s at 10000 req/s ($out/$tag.data; load: $out/$tag.load.txt)"
perf report -i "$out/$tag.data" --sort dso --stdio -n 2>/dev/null | grep -E '^ +[0-9]' | head -6
