#!/usr/bin/env bash
# What an idle server costs: voluntary context switches (wake-ups) and CPU
# ticks of all its threads over SECS seconds (default 10) with no client,
# per server command. An idle server should sleep: every wake-up here is a
# timer or a poll of its own.
#
# Usage: scripts/bench/idle-wakeups.sh [LABEL=BINARY:SERVE-ARGS ...]
#   default: skq's rpc server in hybrid with 8 workers, and the cache (kv)
#   in hybrid and tpc with 2, from target/release/skq
#   e.g. scripts/bench/idle-wakeups.sh old=/tmp/skq-old:"rpc --mode hybrid --workers 8"
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SECS=${SECS:-10}
skq=${SKQ:-target/release/skq}
cfgs=("$@")
[ ${#cfgs[@]} -gt 0 ] || cfgs=(
    "rpc-hybrid-8=$skq:rpc --mode hybrid --workers 8"
    "kv-hybrid-2=$skq:kv --mode hybrid --workers 2"
    "kv-tpc-2=$skq:kv --arch tpc --workers 2")
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/{s+=$2} END{print s+0}'; }
ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }
printf '%-16s %8s %16s %12s\n' server threads "wake-ups/s" "CPU ticks"
for c in "${cfgs[@]}"; do
    label=${c%%=*}; rest=${c#*=}; bin=${rest%%:*}; args=${rest#*:}
    port=$((20000 + RANDOM % 20000))
    out=$(mktemp)
    # shellcheck disable=SC2086
    "$bin" serve $args --addr "127.0.0.1:$port" > "$out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q "listening on" "$out" 2>/dev/null && break; sleep 0.1; done
    sleep 1 # let every worker reach its first sleep
    s0=$(switches $pid); t0=$(ticks $pid)
    sleep "$SECS"
    s1=$(switches $pid); t1=$(ticks $pid)
    printf '%-16s %8s %16.1f %12s\n' "$label" "$(ls /proc/$pid/task | wc -l)" \
        "$(echo "($s1 - $s0) / $SECS" | bc -l)" "$((t1 - t0))"
    kill -INT $pid; wait $pid 2>/dev/null || true
    rm -f "$out"
done
echo "(idle for $SECS s after start-up; CPU ticks of $(getconf CLK_TCK) Hz over the whole window; $(nproc) CPUs)"
