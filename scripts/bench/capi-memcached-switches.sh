#!/usr/bin/env bash
# CPU, context switches and the wait-related system calls per reply of stock
# memcached and memcached-on-skq, without strace. strace slows every call and
# makes the workers contend (`capi-memcached-syscalls.sh` counts 0.49 futex
# calls per reply for MEMCACHED_SKQ=hybrid under strace, 0.01 without).
# Each server runs with -t 2 on loopback. It is prefilled by a short
# `skq load` pass. Then, while `skq load` sends etc at RATE req/s for 3 s,
# the script reads the server's CPU from /proc/PID/task/*/schedstat and
# counts its futex, epoll_wait, epoll_pwait2 and tgkill calls and its
# context switches and CPU migrations with `perf stat`. Every figure is per reply received.
# Servers are run in the order given, RUNS times.
#
# Usage: scripts/bench/capi-memcached-switches.sh [--runs N] [--rate R] [SERVER ...]
#   SERVER: stock (/usr/bin/memcached) or an skq policy for the patched
#   build (hybrid, cpu, ...), POLICY+pin with MEMCACHED_SKQ_PIN=1 (each
#   worker pinned to its skq worker's CPU), POLICY+groups with
#   MEMCACHED_SKQ_POLL_GROUPS=2 (one epoll set per worker), POLICY+oneset
#   with MEMCACHED_SKQ_POLL_GROUPS=1 (one shared set), or +pin with either;
#   without them the library chooses (cpu: one set per worker at -t 2 on 2
#   CPUs; the others one set). Default: stock hybrid cpu, 2 runs, 15000 req/s.
# Needs perf, bash scripts/build-memcached-skq.sh, cargo build --release -p skq.
# MC_SKQ=path runs another build of the patched memcached (an A/B).
# Measure on a quiet machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
runs=2 rate=15000
while [ $# -gt 0 ]; do
    case $1 in
        --runs) runs=$2; shift 2 ;;
        --rate) rate=$2; shift 2 ;;
        -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) break ;;
    esac
done
servers=("$@"); [ ${#servers[@]} -gt 0 ] || servers=(stock hybrid cpu)
skq=${SKQ:-target/release/skq}
mc_skq=${MC_SKQ:-target/capi/memcached-skq/memcached}
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq" >&2; exit 2; }
[ -x "$mc_skq" ] || { echo "no $mc_skq: bash scripts/build-memcached-skq.sh" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load before $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs seen, server and generator share them"
echo "# -t 2, etc at $rate req/s for 3 s; per reply"
cpu_ns() { awk '{s += $1} END {print s}' /proc/"$1"/task/*/schedstat; }
for run in $(seq "$runs"); do
    for s in "${servers[@]}"; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        if [ "$s" = stock ]; then
            env -u MEMCACHED_SKQ /usr/bin/memcached -u root -U 0 -t 2 -l 127.0.0.1 -p "$port" &
        else
            pin=0; [[ $s == *+pin* ]] && pin=1
            # Unset: the library's choice (cpu: one set per worker here).
            groups=(-u MEMCACHED_SKQ_POLL_GROUPS)
            [[ $s == *+groups* ]] && groups=(MEMCACHED_SKQ_POLL_GROUPS=2)
            [[ $s == *+oneset* ]] && groups=(MEMCACHED_SKQ_POLL_GROUPS=1)
            env "${groups[@]}" MEMCACHED_SKQ=${s%%+*} MEMCACHED_SKQ_PIN=$pin \
                "$mc_skq" -u root -U 0 -t 2 -l 127.0.0.1 -p "$port" &
        fi
        pid=$!
        sleep 0.5
        "$skq" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload etc --rate 3000 \
            --duration 0.3 --warmup 0 --quiet >/dev/null 2>&1 || true
        c0=$(cpu_ns "$pid")
        perf stat -x, -o "$tmp/stat.txt" -p "$pid" -e syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait2,syscalls:sys_enter_tgkill,context-switches,cpu-migrations &
        ps=$!
        "$skq" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload etc --rate "$rate" \
            --duration 3 --warmup 0 --no-prefill --json "$tmp/load.json" --quiet >/dev/null 2>&1 || true
        c1=$(cpu_ns "$pid")
        kill -INT "$ps"; wait "$ps" 2>/dev/null || true
        kill "$pid"; wait "$pid" 2>/dev/null || true
        python3 - "$s" "$run" "$c0" "$c1" "$tmp/load.json" "$tmp/stat.txt" <<'PY'
import json
import sys

server, run, c0, c1, load, stat = sys.argv[1:7]
d = json.load(open(load))
n = max(d["received"], 1)
counts = {}
for line in open(stat):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        counts[f[2].split(":")[-1].replace("sys_enter_", "")] = float(f[0]) / n
checks = "pass" if d["checks"]["pass"] else "FAIL"
print(f"{server:10} run {run}  cpu {(int(c1) - int(c0)) / n / 1000:6.2f} us  "
      + "  ".join(f"{k} {v:.3f}" for k, v in counts.items()) + f"  checks {checks}")
PY
    done
done
