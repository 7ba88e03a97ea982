#!/usr/bin/env bash
# System calls per reply of `skq serve rpc`, per mode, counted by strace -c.
#
# One server at a time, WORKERS workers (default 1), SERVICE (spin, the
# default, or emulate) service of MEAN_US (default 10 µs; exponential with
# emulate, fixed with spin), offered RATE req/s (default 10000) over CONNS
# connections for SECS seconds by `skq load`. SKQ=PATH measures another
# build (a before/after comparison; nothing is built then). The server runs under `strace -c -f`; the
# total of its system calls is divided by the replies it sent (its
# --stats-json request count). strace slows every call, so compare modes
# with each other, not with an unstraced run. TRACER=perf counts with perf's
# syscall tracepoints instead (`perf stat -e 'syscalls:sys_enter_*'` on the
# server's process): exact, and the calls run at full speed.
#
# Usage: scripts/bench/syscalls-per-reply.sh [MODE ...]
#   default modes: epoll-1to1 epoll-shared tokio vanilla cpu hybrid
#   e.g. the main job's server: TRACER=perf WORKERS=8 SERVICE=emulate MEAN_US=500 CONNS=64 RATE=3200
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
TRACER=${TRACER:-strace}
case "$TRACER" in
    strace) command -v strace >/dev/null || { echo "strace is not installed (apt-get install strace)" >&2; exit 2; } ;;
    perf) command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; } ;;
    *) echo "TRACER must be strace or perf" >&2; exit 2 ;;
esac
WORKERS=${WORKERS:-1} RATE=${RATE:-10000} SECS=${SECS:-5} CONNS=${CONNS:-16} MEAN_US=${MEAN_US:-10}
SERVICE=${SERVICE:-spin}
case "$SERVICE" in spin) WORKLOAD=fixed ;; emulate) WORKLOAD=exponential ;;
    *) echo "SERVICE must be spin or emulate" >&2; exit 2 ;; esac
modes=("$@"); [ ${#modes[@]} -gt 0 ] || modes=(epoll-1to1 epoll-shared tokio vanilla cpu hybrid)
if [ -n "${SKQ:-}" ]; then skq=$SKQ; else cargo build --release -q -p skq; skq=target/release/skq; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
port=$((20000 + RANDOM % 20000))
printf '%-14s %10s %12s %14s %s\n' mode replies syscalls "calls/reply" "top calls per reply"
for mode in "${modes[@]}"; do
    serve=("$skq" serve rpc --addr "127.0.0.1:$port" --mode "$mode" --workers "$WORKERS"
           --service "$SERVICE" --stats-json "$tmp/$mode.json")
    load=("$skq" load --addr "127.0.0.1:$port" --protocol rpc --workload "$WORKLOAD" --mean-us "$MEAN_US"
          --rate "$RATE" --duration "$SECS" --connections "$CONNS" --quiet)
    if [ "$TRACER" = perf ]; then
        "${serve[@]}" > "$tmp/$mode.out" 2>/dev/null &
        pid=$!
        for _ in $(seq 100); do grep -q "listening on" "$tmp/$mode.out" 2>/dev/null && break; sleep 0.1; done
        perf stat -x, -e 'syscalls:sys_enter_*' -p "$pid" -o "$tmp/$mode.perf" &
        pf=$!
        sleep 1 # perf attaches its several hundred counters before the load starts
        "${load[@]}" > /dev/null 2>&1 || true
        kill -INT "$pf"; wait "$pf" || true
        # Rewrite the counts as strace's table (calls in the fourth column).
        awk -F, '$3 ~ /^syscalls:sys_enter_/ && $1 ~ /^[0-9]+$/ && $1 > 0 {
            sub("syscalls:sys_enter_", "", $3); print "0 0 0", $1, $3 }' "$tmp/$mode.perf" > "$tmp/$mode.strace"
        kill -INT "$pid"; wait "$pid" || true
    else
        strace -c -f -o "$tmp/$mode.strace" "${serve[@]}" > "$tmp/$mode.out" 2>/dev/null &
        pid=$!
        for _ in $(seq 100); do grep -q "listening on" "$tmp/$mode.out" 2>/dev/null && break; sleep 0.1; done
        "${load[@]}" > /dev/null 2>&1 || true
        # Stop the server itself (strace's child); strace then prints its table.
        kill -INT "$(pgrep -P "$pid" | head -1)"; wait "$pid" || true
    fi
    replies=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$tmp/$mode.json")
    python3 - "$tmp/$mode.strace" "$mode" "$replies" <<'PY'
import sys
path, mode, replies = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = {}
for line in open(path):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
        # % time, seconds, usecs/call, calls, [errors], syscall
        calls[f[-1]] = int(f[3])
total = sum(calls.values())
top = sorted(calls.items(), key=lambda kv: -kv[1])[:10]
tops = " ".join(f"{k}={v / max(replies, 1):.2f}" for k, v in top)
# Targeted wake-ups (a worker woken in its poll by the wake-up signal), named even when none.
tops += f" | tgkill={calls.get('tgkill', 0) / max(replies, 1):.3f}"
print(f"{mode:<14} {replies:>10} {total:>12} {total / max(replies, 1):>14.2f} {tops}")
PY
    port=$((port + 1))
done
echo "($WORKERS worker(s), $SERVICE service ${MEAN_US} µs ($WORKLOAD), ${RATE} req/s offered for ${SECS} s over ${CONNS} connections; counted by $TRACER; $(nproc) cores seen)"
