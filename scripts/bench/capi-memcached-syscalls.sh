#!/usr/bin/env bash
# System calls per request of stock memcached and memcached-on-skq (cpu,
# hybrid): `strace -c -f` attached to each server (2 threads) while skq load
# sends a fixed number of etc requests at a low rate. Explains where
# memcached-on-skq spends its extra CPU (docs/results/capi-memcached-*.txt).
#   bash scripts/bench/capi-memcached-syscalls.sh [OUT]
# Needs strace, bash scripts/build-memcached-skq.sh, cargo build --release -p skq-cli.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/docs/results/capi-memcached-syscalls-$(date -u +%F).txt}"
skq="$root/target/release/skq"
mc_skq="$root/target/capi/memcached-skq/memcached"
command -v strace >/dev/null || { echo "strace missing (apt-get install strace)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
{
    echo "# command: bash scripts/bench/capi-memcached-syscalls.sh ($(date -u +%FT%TZ)); cores seen: $(nproc)"
    echo "# each server: -t 2; skq load etc at 5000 req/s for 2 s after a prefill pass; strace -c -f"
    for server in stock mc-skq-cpu mc-skq-hybrid; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        if [ "$server" = stock ]; then
            env -u MEMCACHED_SKQ /usr/bin/memcached -u root -U 0 -t 2 -l 127.0.0.1 -p "$port" &
        else
            MEMCACHED_SKQ="${server#mc-skq-}" "$mc_skq" -u root -U 0 -t 2 -l 127.0.0.1 -p "$port" &
        fi
        pid=$!
        sleep 0.5
        "$skq" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload etc --rate 3000 \
            --duration 0.3 --warmup 0 --quiet >/dev/null 2>&1 || true
        strace -c -f -p "$pid" -o "$tmp/$server.txt" 2>/dev/null &
        spid=$!
        sleep 0.5
        "$skq" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload etc --rate 5000 \
            --duration 2 --warmup 0 --no-prefill --json "$tmp/$server.json" --quiet >/dev/null 2>&1 || true
        sleep 0.3
        kill -INT "$spid"; wait "$spid" 2>/dev/null || true
        kill "$pid"; wait "$pid" 2>/dev/null || true
        replies=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['received'])" "$tmp/$server.json")
        echo "## $server: $replies replies"
        python3 - "$tmp/$server.txt" "$replies" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        rows.append((f[-1], int(f[3])))
for name, calls in sorted(rows, key=lambda r: -r[1]):
    print(f"  {name:<16} {calls:>8} calls  {calls / int(sys.argv[2]):.3f} per reply")
PY
    done
} | tee "$out"
