#!/usr/bin/env bash
# Kernel network events per reply that run in hyper_server's own context, on
# skq-async and on tokio: the same example server, one worker on CPU 0, driven
# closed-loop by `wrk -t1 -c8` on CPU 1 (as scripts/bench/hyper-profile.sh).
# Counted with `perf stat -p PID` on tracepoints, so an event is counted only
# when it runs in the server's threads (a softirq included if it runs there):
#   net:netif_receive_skb   packets processed by the server's CPU
#   sock:sk_data_ready      data queued on a socket and its reader told
#   tcp:tcp_probe           segments taken in by an established socket
#   tcp:tcp_rcv_space_adjust  receive-buffer tuning after a read
#   sock:sock_recv_length / sock:sock_send_length  socket reads and sends
#   skb:consume_skb, skb:kfree_skb  buffers freed
# A cpu-clock profile shows where the time goes; these counts say whether the
# kernel did more work per reply under one runtime or the same work slower.
#
# Usage: scripts/bench/hyper-kernel-events.sh [OUT_DIR] [REPS]
#   OUT_DIR default /tmp/hyper-kernel-events; REPS (default 2) alternating
#   repetitions per runtime; SECS (default 5) per run; PATH_ (default
#   /api/hello?name=bench); MODE (skq's, default hybrid);
#   SERVER (default target/release/examples/hyper_server).
# Build first: cargo build --release -p skq-async --example hyper_server
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-/tmp/hyper-kernel-events}
reps=${2:-2}
SECS=${SECS:-5} MODE=${MODE:-hybrid} path=${PATH_:-/api/hello?name=bench}
server=${SERVER:-target/release/examples/hyper_server}
[ -x "$server" ] || { echo "$server is missing: cargo build --release -p skq-async --example hyper_server" >&2; exit 2; }
for t in wrk perf curl taskset; do command -v $t >/dev/null || { echo "$t is not installed" >&2; exit 2; }; done
events=net:netif_receive_skb,sock:sk_data_ready,tcp:tcp_probe,tcp:tcp_rcv_space_adjust,sock:sock_recv_length,sock:sock_send_length,skb:consume_skb,skb:kfree_skb
perf stat -e "$events" -- true > /dev/null 2>&1 || { echo "perf cannot count $events here" >&2; exit 2; }
mkdir -p "$out"
root=$(mktemp -d); spid=
trap 'rm -rf "$root"; [ -n "$spid" ] && kill "$spid" 2>/dev/null || true' EXIT

run_one() {
    local rt=$1 rep=$2 port extra=()
    port=$((20000 + RANDOM % 20000))
    [ "$rt" = skq ] && extra=(--mode "$MODE" --pin)
    taskset -c 0 "$server" --runtime "$rt" --workers 1 --port "$port" --root "$root" "${extra[@]}" \
        > "$out/server-$rt-$rep.log" 2>&1 &
    spid=$!
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$port$path" > /dev/null 2>&1 && break
        sleep 0.1
    done
    taskset -c 1 wrk -t1 -c8 -d1s "http://127.0.0.1:$port$path" > /dev/null
    perf stat -x, -e "$events" -p "$spid" -o "$out/stat-$rt-$rep.csv" -- \
        taskset -c 1 wrk -t1 -c8 -d"${SECS}s" "http://127.0.0.1:$port$path" > "$out/wrk-$rt-$rep.txt"
    kill "$spid"; wait "$spid" 2>/dev/null || true; spid=
    local reqs
    reqs=$(awk '/requests in/ {print $1}' "$out/wrk-$rt-$rep.txt")
    awk -F, -v rt="$rt" -v rep="$rep" -v n="$reqs" '
        $3 != "" { split($3, e, ":"); v[e[2]] = $1 / n }
        END {
            printf "%-6s %3d %9d", rt, rep, n
            split("netif_receive_skb sk_data_ready tcp_probe tcp_rcv_space_adjust sock_recv_length sock_send_length consume_skb kfree_skb", k, " ")
            for (i = 1; i <= 8; i++) printf " %9.3f", v[k[i]]
            printf "\n"
        }' "$out/stat-$rt-$rep.csv"
}

printf '%-6s %3s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n' runtime rep replies rx_skb data_rdy tcp_probe space_adj recv_len send_len consume kfree | tee "$out/summary.txt"
for rep in $(seq "$reps"); do
    if [ $((rep % 2)) -eq 1 ]; then order="skq tokio"; else order="tokio skq"; fi
    for rt in $order; do run_one "$rt" "$rep" | tee -a "$out/summary.txt"; done
done
echo "(per reply, in hyper_server's threads; 1 worker on CPU 0, wrk -t1 -c8 -d${SECS}s on CPU 1, path $path; skq mode $MODE)" | tee -a "$out/summary.txt"
