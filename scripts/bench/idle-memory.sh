#!/usr/bin/env bash
# Memory per idle connection of every server, measured the same way:
# `skq conns` holds N connections (each served once) against the server
# process and reports its RSS growth per connection and the kernel's slab
# growth, while a busy client checks replies.
#
#   bash scripts/bench/idle-memory.sh [CONNS]      (default 15000)
#
# Servers: skq's cache (shared on hybrid, thread-per-core), memcached
# 1.6.18 (Debian), the RPC server on skq hybrid, epoll-1to1 and tokio.
# Each runs with 2 workers and a connection limit above CONNS. Output:
# one block per server, then a summary table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
conns=${1:-15000}
cargo build -q --release -p skq
skq=target/release/skq
command -v memcached >/dev/null || { echo "memcached missing: run bash scripts/setup.sh" >&2; exit 1; }
ulimit -n 20000 2>/dev/null || true
port=$((22000 + RANDOM % 2000))
summary=()

measure() { # name touch cmd...
    local name=$1 touch=$2; shift 2
    "$@" >/tmp/skq-idle-$$.log 2>&1 &
    local pid=$!
    for _ in $(seq 50); do
        python3 -c "import socket;socket.create_connection(('127.0.0.1',$port)).close()" 2>/dev/null && break
        sleep 0.1
    done
    echo "== $name"
    local out
    out=$($skq conns --addr 127.0.0.1:$port --pid $pid --conns "$conns" --touch "$touch" --busy-requests 20000 --json)
    kill -TERM $pid; wait $pid 2>/dev/null || true
    echo "$out"
    summary+=("$(python3 -c "
import json,sys; r=json.loads(sys.argv[1])
print(f\"{sys.argv[2]:<28} {r['rss_per_conn']:>9.0f} {r['kernel_slab_per_conn']:>11.0f} {r['rss_before']/2**20:>9.1f} {r['rss_held']/2**20:>9.1f} {r['rss_after_close']/2**20:>9.1f} {r['busy_ok']:>6} {r['cpu_per_activation_ns']/1e3:>10.1f}\")
" "$out" "$name")")
    port=$((port + 1))
}

max=$((conns + 100))
measure "skq kv shared (hybrid)" memcached $skq serve kv --arch shared --mode hybrid --workers 2 -m 64 --max-conns $max --addr 127.0.0.1:$port
measure "skq kv tpc" memcached $skq serve kv --arch tpc --workers 2 -m 64 --max-conns $max --addr 127.0.0.1:$port
measure "memcached 1.6.18" memcached memcached -u nobody -t 2 -m 64 -c $max -l 127.0.0.1 -p $port -U 0
measure "skq rpc hybrid" rpc $skq serve rpc --mode hybrid --workers 2 --max-conns $max --addr 127.0.0.1:$port
measure "skq rpc epoll-1to1" rpc $skq serve rpc --mode epoll-1to1 --workers 2 --max-conns $max --addr 127.0.0.1:$port
measure "skq rpc tokio" rpc $skq serve rpc --mode tokio --workers 2 --max-conns $max --addr 127.0.0.1:$port

echo
echo "$conns idle connections, each served once; $(nproc) CPUs; $(date -u +%F)"
printf '%-28s %9s %11s %9s %9s %9s %6s %10s\n' server "RSS B/conn" "slab B/conn" "MiB before" "MiB held" "MiB after" "busy" "CPU µs/act"
printf '%s\n' "${summary[@]}"
