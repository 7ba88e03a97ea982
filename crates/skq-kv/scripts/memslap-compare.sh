#!/usr/bin/env bash
# Quick loopback comparison: memcached 1.6 vs skq-kv (shared on the skq runtime, shared on
# plain epoll, thread-per-core), same thread count, with libmemcached's memslap (memcslap on
# Debian). Closed-loop: memslap reports the time for a fixed number of operations, so this
# measures throughput at saturation, not latency under load (the sweep harness does that).
# Usage: crates/skq-kv/scripts/memslap-compare.sh [threads=2] [clients=4] [ops=5000] [rounds=3]
set -euo pipefail
threads="${1:-2}"; clients="${2:-4}"; ops="${3:-5000}"; rounds="${4:-3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
slap="$(command -v memslap || command -v memcslap)" || { echo "memslap not installed: run scripts/setup.sh" >&2; exit 1; }
cargo build -q --release -p skq-kv --manifest-path "$root/Cargo.toml"
bin="$root/target/release/skq-kv"
port=11600
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; }
trap cleanup EXIT
start() { # name -> starts the server on $port, sets $pid
    case "$1" in
        memcached) memcached -p "$port" -U 0 -l 127.0.0.1 -t "$threads" -m 64 -u root & ;;
        skq-hybrid) "$bin" --arch shared --mode hybrid --workers "$threads" --addr "127.0.0.1:$port" >/dev/null & ;;
        skq-epoll) "$bin" --arch shared --mode epoll --workers "$threads" --addr "127.0.0.1:$port" >/dev/null & ;;
        skq-tpc) "$bin" --arch tpc --workers "$threads" --addr "127.0.0.1:$port" >/dev/null & ;;
    esac
    pid=$!
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0; sleep 0.05; done
    echo "server $1 did not start" >&2; exit 1
}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); threads=$threads clients=$clients ops/client=$ops"
echo "# round server test ops seconds ops_per_s"
for r in $(seq "$rounds"); do
    for s in memcached skq-hybrid skq-epoll skq-tpc; do
        port=$((port + 1))
        start "$s"
        for t in set get; do
            out="$("$slap" --servers="127.0.0.1:$port" --concurrency="$clients" --execute-number="$ops" --test="$t")"
            secs="$(echo "$out" | awk -v t="$t" '$1=="Time" && $2=="to" && $3==t {print $(NF-1)}')"
            n=$((clients * ops))
            echo "$r $s $t $n $secs $(awk -v n="$n" -v s="$secs" 'BEGIN{printf "%.0f", n/s}')"
        done
        kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    done
done
