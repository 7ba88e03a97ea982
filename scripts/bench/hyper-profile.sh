#!/usr/bin/env bash
# Where hyper's CPU goes on skq-async and on tokio: the same example server
# (crates/skq-async/examples/hyper_server.rs), one worker pinned to CPU 0,
# driven closed-loop by `wrk -t1 -c8` on CPU 1 on one path, per runtime:
#   - wrk requests/s, server CPU µs and context switches per reply
#     (/proc/PID/stat and /proc/PID/status of every thread, around the run);
#   - system calls per reply (`perf stat` on the raw_syscalls:sys_enter
#     tracepoint, a second run so the counting does not slow the first), and
#     of them the epoll waits (epoll_wait, epoll_pwait, epoll_pwait2), and
#     precise clock reads per reply when libc's clock_gettime has a uprobe
#     (`perf probe -x /lib/x86_64-linux-gnu/libc.so.6 'clock_gettime clk=%di:s32'`);
#   - in the same counting run, the kernel's network events per reply that
#     run in the server's threads (tracepoints; a softirq counted when it
#     runs there): packets processed (net:netif_receive_skb), data-ready
#     callbacks (sock:sk_data_ready), segments taken in by a socket
#     (tcp:tcp_probe), receive-buffer tuning (tcp:tcp_rcv_space_adjust),
#     socket reads and sends (sock:sock_recv_length, sock:sock_send_length),
#     buffers freed (skb:consume_skb, skb:kfree_skb): whether the kernel did
#     more work per reply under one runtime or the same work slower
#     (events-RUNTIME.txt, and a line each in summary.txt);
#   - a cpu-clock profile (`perf record -g`), its top symbols printed and
#     kept as perf-RUNTIME.data in OUT, with the replies wrk got during it
#     (wrk-perf-RUNTIME.txt), so scripts/bench/perf-diff.py can compare the
#     two per reply.
#
# Usage: scripts/bench/hyper-profile.sh [OUT_DIR] [PATH]
#   OUT_DIR default /tmp/hyper-profile; PATH default /api/hello?name=bench
#   SECS (default 8) per run; RUNTIMES (default "skq tokio"); MODE (skq's, default hybrid);
#   SERVER (the example binary, default target/release/examples/hyper_server)
# Build first: cargo build --release -p skq-async --example hyper_server
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-/tmp/hyper-profile}
path=${2:-/api/hello?name=bench}
SECS=${SECS:-8} RUNTIMES=${RUNTIMES:-"skq tokio"} MODE=${MODE:-hybrid}
server=${SERVER:-target/release/examples/hyper_server}
[ -x "$server" ] || { echo "$server is missing: cargo build --release -p skq-async --example hyper_server" >&2; exit 2; }
for t in wrk perf; do command -v $t >/dev/null || { echo "$t is not installed" >&2; exit 2; }; done
mkdir -p "$out"
root=$(mktemp -d); trap 'rm -rf "$root"; [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null || true' EXIT
head -c 512 /dev/urandom | base64 > "$root/small.html"

# Sum utime+stime (clock ticks) and voluntary+involuntary switches over threads.
snap() {
    local pid=$1 ticks=0 vol=0 invol=0
    for t in /proc/"$pid"/task/*; do
        read -r -a f < "$t/stat" || continue
        ticks=$((ticks + f[13] + f[14]))
        vol=$((vol + $(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status")))
        invol=$((invol + $(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$t/status")))
    done
    echo "$ticks $vol $invol"
}

start_server() {
    local rt=$1 port=$2 extra=()
    [ "$rt" = skq ] && extra=(--mode "$MODE" --pin)
    taskset -c 0 "$server" --runtime "$rt" --workers 1 --port "$port" --root "$root" "${extra[@]}" \
        > "$out/server-$rt.log" 2>&1 &
    spid=$!
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$port$path" > /dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "server $rt did not answer on port $port" >&2; exit 1
}

hz=$(getconf CLK_TCK)
# Precise clock reads per reply (CLOCK_MONOTONIC and CLOCK_REALTIME; the
# cheaper coarse clocks are not counted), when libc's clock_gettime has a
# uprobe with the clock id (created once as root:
# perf probe -x /lib/x86_64-linux-gnu/libc.so.6 'clock_gettime clk=%di:s32').
net_events=net:netif_receive_skb,sock:sk_data_ready,tcp:tcp_probe,tcp:tcp_rcv_space_adjust,sock:sock_recv_length,sock:sock_send_length,skb:consume_skb,skb:kfree_skb
perf stat -e "$net_events" -- true > /dev/null 2>&1 || { echo "perf cannot count $net_events here" >&2; exit 2; }
clock_event=()
if perf list 2>/dev/null | grep 'probe_libc:clock_gettime' >/dev/null; then
    clock_event=(-e probe_libc:clock_gettime --filter 'clk == 0 || clk == 1')
fi
printf '%-6s %10s %12s %12s %12s %12s %12s %12s\n' runtime "req/s" "cpu us/rep" "vol cs/rep" "inv cs/rep" "sys/rep" "epoll/rep" "clock/rep" | tee "$out/summary.txt"
for rt in $RUNTIMES; do
    port=$((20000 + RANDOM % 20000))
    start_server "$rt" "$port"
    taskset -c 1 wrk -t1 -c8 -d1s "http://127.0.0.1:$port$path" > /dev/null
    read -r t0 v0 i0 < <(snap "$spid")
    taskset -c 1 wrk -t1 -c8 -d"${SECS}s" "http://127.0.0.1:$port$path" > "$out/wrk-$rt.txt"
    read -r t1 v1 i1 < <(snap "$spid")
    reqs=$(awk '/requests in/ {print $1}' "$out/wrk-$rt.txt")
    rps=$(awk '/Requests\/sec/ {print $2}' "$out/wrk-$rt.txt")
    # System calls per reply, counted in a run of its own.
    perf stat -e "raw_syscalls:sys_enter,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_pwait2,$net_events" \
        "${clock_event[@]}" -p "$spid" -x, -o "$out/sys-$rt.csv" -- \
        taskset -c 1 wrk -t1 -c8 -d"${SECS}s" "http://127.0.0.1:$port$path" > "$out/wrk-sys-$rt.txt"
    sreqs=$(awk '/requests in/ {print $1}' "$out/wrk-sys-$rt.txt")
    sys=$(awk -F, '/raw_syscalls/ {print $1}' "$out/sys-$rt.csv")
    epolls=$(awk -F, '/sys_enter_epoll/ {n += $1} END {print n + 0}' "$out/sys-$rt.csv")
    clocks=$(awk -F, '/probe_libc:clock_gettime/ {n += $1} END {print n + 0}' "$out/sys-$rt.csv")
    awk -F, -v n="$sreqs" -v rt="$rt" '$3 ~ /^(net|sock|tcp|skb):/ { printf " %s=%.3f", $3, $1 / n }
        END { printf "\n" }' "$out/sys-$rt.csv" | sed "s/^/kernel events per reply, $rt:/" > "$out/events-$rt.txt"
    # The profile, in a third run.
    perf record -q -F 4999 -g -p "$spid" -o "$out/perf-$rt.data" -- \
        taskset -c 1 wrk -t1 -c8 -d"${SECS}s" "http://127.0.0.1:$port$path" > "$out/wrk-perf-$rt.txt" 2>&1
    kill "$spid"; wait "$spid" 2>/dev/null || true; spid=
    python3 - "$rt" "$rps" "$reqs" "$((t1 - t0))" "$((v1 - v0))" "$((i1 - i0))" "$hz" "$sys" "$sreqs" "$epolls" "$clocks" "${#clock_event[@]}" <<'PY' | tee -a "$out/summary.txt"
import sys
rt, rps, reqs, ticks, vol, inv, hz, sys_, sreqs, epolls, clocks, counted = sys.argv[1:]
reqs, ticks, vol, inv, hz = int(reqs), int(ticks), int(vol), int(inv), int(hz)
clock = f"{int(clocks) / int(sreqs):>12.2f}" if counted != "0" else f"{'-':>12}"
print(f"{rt:<6} {float(rps):>10.0f} {ticks / hz * 1e6 / reqs:>12.2f} {vol / reqs:>12.3f} "
      f"{inv / reqs:>12.3f} {int(sys_) / int(sreqs):>12.2f} {int(epolls) / int(sreqs):>12.3f} {clock}")
PY
    perf report -i "$out/perf-$rt.data" --no-children --sort symbol --stdio -g none --percent-limit 0.7 2>/dev/null \
        | grep -v '^#' | grep -v '^$' | head -45 > "$out/top-$rt.txt"
done
echo "(hyper_server --workers 1 on CPU 0, wrk -t1 -c8 on CPU 1, ${SECS} s per run, path $path, $(nproc) cores seen; skq mode $MODE)" | tee -a "$out/summary.txt"
for rt in $RUNTIMES; do cat "$out/events-$rt.txt"; done | tee -a "$out/summary.txt"
for rt in $RUNTIMES; do echo "== top symbols, $rt"; cat "$out/top-$rt.txt"; done
# Replies during each profile, for scripts/bench/perf-diff.py --per.
per=()
for rt in $RUNTIMES; do
    n=$(awk '/requests in/ {print $1}' "$out/wrk-perf-$rt.txt")
    per+=("$n")
    echo "replies during the profile, $rt: $n" | tee -a "$out/summary.txt"
done
set -- $RUNTIMES
if [ $# -eq 2 ]; then
    echo "compare: python3 scripts/bench/perf-diff.py $out/perf-$1.data $out/perf-$2.data --per ${per[*]}"
fi
