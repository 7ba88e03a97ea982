#!/usr/bin/env bash
# The generator's capacity on this machine for every protocol skq bench
# sweeps, at 8, 64 and 96 connections (issue 27 item 3): each search is
# recorded in the capacity file that `skq bench` checks its sweeps against.
# memcached also at 24 and 384 connections, the counts kv-vs-memcached
# sweeps. About a minute per (protocol, count). Measure on a quiet machine.
# Usage: scripts/bench/capacity-all.sh [OUT.txt]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-/dev/null}
SKQ=${SKQ:-target/release/skq}
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1 /proc/loadavg); $(nproc) CPUs" | tee "$out"
for p in rpc memcached http; do
  conns=8,64,96
  [ "$p" = memcached ] && conns=8,24,64,96,384
  "$SKQ" load --capacity --protocol "$p" --capacity-conns "$conns" 2>&1 | tee -a "$out"
done
