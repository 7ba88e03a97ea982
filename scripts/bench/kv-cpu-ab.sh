#!/usr/bin/env bash
# Server CPU per reply of the cache, two skq builds against memcached, in
# turns (issue 22: the arena's compaction, 2026-11-30). Each turn starts one
# server with one worker on CPU 0 (`skq serve kv --arch tpc --workers 1`, or
# `memcached -t 1 -m 64`), primes it with PRIME seconds of the same load
# (discarded: the arena reaches its steady size), then runs
# `skq load --protocol memcached --kv-workload MIX --rate RATE --connections
# CONNS --duration SECS` from CPU 1 and reads the server's utime and stime from
# /proc around that run. Prints one line per turn: CPU µs per reply (user,
# system), the generator's p99, the server's RSS and, for skq, the arena's
# segment bytes.
# Usage: bash scripts/bench/kv-cpu-ab.sh BEFORE_SKQ AFTER_SKQ [REPS] [MIX] [RATE] [CONNS] [SECS] [PRIME]
# SYSCALLS=1 adds a second run per turn under `perf stat`: system calls and
# epoll waits per reply.
# KV_ARGS picks the cache's architecture (default "--arch tpc"; e.g.
# KV_ARGS="--arch shared --mode hybrid" for the shared store on skq).
# The generator is always target/release/skq. Measure on a quiet machine.
set -u
before=${1:?usage: kv-cpu-ab.sh BEFORE_SKQ AFTER_SKQ [REPS] [MIX] [RATE] [CONNS] [SECS] [PRIME]}
after=${2:?usage: kv-cpu-ab.sh BEFORE_SKQ AFTER_SKQ [REPS] [MIX] [RATE] [CONNS] [SECS] [PRIME]}
reps=${3:-2}; mix=${4:-sphinx-wo}; rate=${5:-40000}; conns=${6:-96}; secs=${7:-4}; prime=${8:-3}
gen=target/release/skq
[ -x "$gen" ] || { echo "kv-cpu-ab.sh: build the generator first (cargo build --release -p skq)" >&2; exit 2; }
command -v memcached >/dev/null || { echo "kv-cpu-ab.sh: memcached not installed (bash scripts/setup.sh)" >&2; exit 2; }
kv_args=${KV_ARGS:---arch tpc}
port=11450
tick=$(getconf CLK_TCK)
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); mix=$mix rate=$rate conns=$conns secs=$secs prime=$prime"
echo "# before=$before after=$after kv: $kv_args"
for rep in $(seq 1 "$reps"); do
  for who in memcached before after; do
    port=$((port + 1))
    case $who in
      memcached) taskset -c 0 memcached -t 1 -m 64 -p $port -U 0 -u root >/dev/null 2>&1 & ;;
      before) taskset -c 0 "$before" serve kv $kv_args --workers 1 --addr 127.0.0.1:$port >/dev/null 2>&1 & ;;
      after) taskset -c 0 "$after" serve kv $kv_args --workers 1 --addr 127.0.0.1:$port >/dev/null 2>&1 & ;;
    esac
    pid=$!
    sleep 0.5
    taskset -c 1 $gen load --addr 127.0.0.1:$port --protocol memcached --kv-workload "$mix" --rate "$rate" \
      --connections "$conns" --duration "$prime" --warmup 0.5 --quiet >/dev/null 2>&1
    read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
    taskset -c 1 $gen load --addr 127.0.0.1:$port --protocol memcached --kv-workload "$mix" --rate "$rate" \
      --connections "$conns" --duration "$secs" --warmup 0.5 --quiet --json /tmp/kv-cpu-ab.json >/tmp/kv-cpu-ab.out 2>&1
    read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
    rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
    sysrep=""
    if [ "${SYSCALLS:-0}" = 1 ]; then
      # A counted run of its own, so the counting does not touch the CPU figure.
      perf stat -x, -o /tmp/kv-cpu-ab.sys -p "$pid" \
        -e raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_pwait2 -- \
        taskset -c 1 $gen load --addr 127.0.0.1:$port --protocol memcached --kv-workload "$mix" --rate "$rate" \
        --connections "$conns" --duration "$secs" --warmup 0 --quiet --json /tmp/kv-cpu-ab-sys.json >/dev/null 2>&1
      sysrep=$(python3 - <<'PY'
import json
n = json.load(open("/tmp/kv-cpu-ab-sys.json"))["received"] or 1
calls = epolls = 0
for line in open("/tmp/kv-cpu-ab.sys"):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].isdigit():
        if "raw_syscalls" in f[2]:
            calls += int(f[0])
        elif "epoll" in f[2]:
            epolls += int(f[0])
print(f"  syscalls {calls / n:.2f}/reply (epoll waits {epolls / n:.2f})")
PY
)
    fi
    seg=$(python3 - "$port" <<'PY'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    s.sendall(b"stats\r\n"); d = b""
    while not d.endswith(b"END\r\n"):
        d += s.recv(65536)
    v = [l.split()[2] for l in d.decode().splitlines() if l.startswith("STAT skq_segment_bytes_allocated")]
    print(int(v[0]) // 1024 if v else "-")
except OSError:
    print("-")
PY
)
    kill $pid; wait $pid 2>/dev/null
    python3 - "$who" "$rep" "$u0" "$s0" "$u1" "$s1" "$tick" "$rss" "$seg" "$sysrep" <<'PY'
import json, sys
who, rep, u0, s0, u1, s1, tick, rss, seg, sysrep = sys.argv[1:]
a = json.load(open("/tmp/kv-cpu-ab.json"))
n = a.get("client_sent_total") or a["sent"]
us = lambda t: float(t) / float(tick) * 1e6 / n
user, sys_ = us(int(u1) - int(u0)), us(int(s1) - int(s0))
c = a["checks"]
checks = "ok" if c.get("pass") else "FAILED " + ",".join(k[:-3] for k, v in c.items() if k.endswith("_ok") and v is False)
print(f"{who:9} rep {rep}  cpu {user + sys_:5.1f} us/reply (user {user:4.1f} sys {sys_:4.1f})  "
      f"p99 {a['latency']['p99']['value']:7.1f} us  rss {int(rss)//1024:4d} MiB  segments {seg} KiB  checks {checks}{sysrep}")
PY
  done
done
