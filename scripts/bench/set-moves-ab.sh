#!/usr/bin/env bash
# Flows whose CPU changes, with one epoll set per worker: two builds of
# memcached-on-skq (MEMCACHED_SKQ=cpu, MEMCACHED_SKQ_POLL_GROUPS=2, -t 2)
# in turns. The generator (`skq load`, etc at RATE req/s, 96 connections, 3 s)
# is moved between CPU 0 and CPU 1 every FLIP seconds (`taskset -a -p`), so
# every connection's SO_INCOMING_CPU changes that often. `perf stat` counts
# the server's tgkill (a targeted wake-up: a flow's readiness harvested in
# one worker's set and handed to the other), epoll_ctl (a move of a
# registration is two) and context switches, and the server's CPU time is
# read from /proc/PID/task/*/schedstat; each figure is per reply.
# Usage: bash scripts/bench/set-moves-ab.sh BEFORE AFTER [RUNS] [RATE] [FLIP]
# (BEFORE and AFTER: two builds of memcached-on-skq, or of skq with SERVER=rpc)
# SERVER=rpc: BEFORE and AFTER are skq builds instead, each serving
# `skq serve rpc --mode cpu --workers 2 --poll-groups 2 --service spin`,
# loaded with the rpc protocol, fixed 5 µs requests.
# Needs perf, cargo build --release -p skq. Counts, not times: a noisy host
# changes them little, but measure on a quiet machine all the same.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
case ${1:-} in -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
before=${1:?usage: set-moves-ab.sh BEFORE AFTER [RUNS] [RATE] [FLIP]}
after=${2:?usage: set-moves-ab.sh BEFORE AFTER [RUNS] [RATE] [FLIP]}
runs=${3:-3}; rate=${4:-15000}; flip=${5:-0.25}
server=${SERVER:-memcached}
case $server in
    memcached) load_args=(--protocol memcached --kv-workload etc) ;;
    rpc) load_args=(--protocol rpc --workload fixed --mean-us 5) ;;
    *) echo "SERVER must be memcached or rpc, not $server" >&2; exit 2 ;;
esac
skq=target/release/skq
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cpu_ns() { awk '{s += $1} END {print s}' /proc/"$1"/task/*/schedstat; }
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); $server, cpu + 2 poll groups, 2 workers; ${load_args[*]} at $rate req/s, 96 conns, 3 s; generator moved every $flip s"
echo "# before=$before after=$after"
for run in $(seq "$runs"); do
    for which in before after; do
        bin=$before; [ "$which" = after ] && bin=$after
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        if [ "$server" = rpc ]; then
            "$bin" serve rpc --mode cpu --workers 2 --poll-groups 2 --service spin --addr "127.0.0.1:$port" >/dev/null 2>&1 &
        else
            MEMCACHED_SKQ=cpu MEMCACHED_SKQ_POLL_GROUPS=2 "$bin" -u root -U 0 -t 2 -l 127.0.0.1 -p "$port" &
        fi
        pid=$!
        sleep 0.5
        "$skq" load --addr "127.0.0.1:$port" "${load_args[@]}" --rate 3000 \
            --duration 0.3 --warmup 0 --quiet >/dev/null 2>&1 || true
        c0=$(cpu_ns "$pid")
        perf stat -x, -o "$tmp/stat.txt" -p "$pid" -e syscalls:sys_enter_tgkill,syscalls:sys_enter_epoll_ctl,context-switches &
        ps=$!
        taskset -c 1 "$skq" load --addr "127.0.0.1:$port" "${load_args[@]}" --rate "$rate" \
            --connections 96 --duration 3 --warmup 0 --no-prefill --json "$tmp/load.json" --quiet >/dev/null 2>&1 &
        gen=$!
        cpu=0; flips=0
        while kill -0 "$gen" 2>/dev/null; do
            sleep "$flip"
            taskset -a -p -c "$cpu" "$gen" >/dev/null 2>&1 || true
            cpu=$((1 - cpu)); flips=$((flips + 1))
        done
        wait "$gen" || true
        c1=$(cpu_ns "$pid")
        kill -INT "$ps"; wait "$ps" 2>/dev/null || true
        kill "$pid"; wait "$pid" 2>/dev/null || true
        python3 - "$which" "$run" "$flips" "$tmp/load.json" "$tmp/stat.txt" "$c0" "$c1" <<'PY'
import json, sys
which, run, flips, load, stat, c0, c1 = sys.argv[1:8]
n = max(json.load(open(load))["received"], 1)
c = {}
for line in open(stat):
    p = line.strip().split(",")
    if len(p) > 2 and p[0].replace(".", "").isdigit():
        c[p[2].split(":")[-1]] = float(p[0]) / n
cpu = (int(c1) - int(c0)) / 1e3 / n
print(f"{which:6} run {run}  replies {n}  generator moves {flips}  cpu {cpu:5.2f} us  tgkill {c.get('sys_enter_tgkill', 0):.4f}  "
      f"epoll_ctl {c.get('sys_enter_epoll_ctl', 0):.4f}  context-switches {c.get('context-switches', 0):.3f}  per reply")
PY
    done
done
