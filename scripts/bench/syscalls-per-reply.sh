#!/usr/bin/env bash
# System calls per reply of `skq serve rpc`, by call, counted exactly by
# perf's syscall tracepoints: the main job's server (8 workers on CPU 0,
# emulated exponential service of 500 µs) under `skq load` on CPU 1 at RATE
# req/s over 64 connections for SECS seconds (default 4). For each MODE a
# line per call: tgkill (targeted wake-ups), the epoll waits and epoll_ctl,
# futex (parkers), the socket calls, clock_nanosleep (the emulated service)
# and getsockopt (SO_INCOMING_CPU), each divided by the replies.
#
#   bash scripts/bench/syscalls-per-reply.sh RATE MODE [MODE ...]
#
# Environment: SKQ (default target/release/skq), SECS. Counts do not need a
# quiet machine; the load it puts on both CPUs disturbs any measurement
# beside it, so take /tmp/skq-measure.lock when others measure.
set -euo pipefail
rate=${1:?usage: syscalls-per-reply.sh RATE MODE [MODE ...]}
shift
[ $# -ge 1 ] || { echo "usage: syscalls-per-reply.sh RATE MODE [MODE ...]" >&2; exit 2; }
skq=${SKQ:-target/release/skq}
secs=${SECS:-4}
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq (or set SKQ)" >&2; exit 2; }
calls="tgkill epoll_pwait2 epoll_pwait epoll_wait epoll_ctl futex recvfrom sendto read write clock_nanosleep getsockopt"
events=$(for c in $calls; do printf 'syscalls:sys_enter_%s,' "$c"; done)
events=${events%,}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for mode in "$@"; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    taskset -c 0 "$skq" serve rpc --mode "$mode" --workers 8 --service emulate \
        --addr "127.0.0.1:$port" > "$tmp/server.log" 2>&1 &
    srv=$!
    for _ in $(seq 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),1).close()" 2>/dev/null && break
        kill -0 $srv 2>/dev/null || { cat "$tmp/server.log" >&2; exit 1; }
        sleep 0.05
    done
    perf stat -x, -e "$events" -p $srv -o "$tmp/perf.csv" &
    pf=$!
    "$skq" load --addr "127.0.0.1:$port" --rate "$rate" --connections 64 --mean-us 500 \
        --duration "$secs" --warmup 0 --cpus 1 --quiet --json "$tmp/load.json" > /dev/null 2>&1 || true
    kill -INT $pf; wait $pf || true
    kill $srv; wait $srv 2>/dev/null || true
    python3 - "$tmp/perf.csv" "$tmp/load.json" "$mode" "$rate" <<'PY'
import json, sys
perf, load, mode, rate = sys.argv[1:]
d = json.load(open(load))
n = d["client_sent_total"]
print(f"{mode}: {n} replies at {rate} req/s, errors {sum(d['errors'].values())}; system calls per reply")
for line in open(perf):
    f = line.strip().split(",")
    if len(f) > 2 and f[2].startswith("syscalls:sys_enter_"):
        count = float(f[0]) if f[0].replace(".", "").isdigit() else 0.0
        print(f"  {f[2][len('syscalls:sys_enter_'):]:<16} {count / n:8.3f}")
PY
done
