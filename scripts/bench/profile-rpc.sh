#!/usr/bin/env bash
# CPU profile of `skq serve rpc` under open-loop load: where a mode's CPU per
# reply goes (kernel, skq's own code, libc), by cpu-clock sampling (these VMs
# have no hardware counters). Server on CPU 0 under `perf record`, `skq load`
# on CPU 1; 8 workers, emulated exponential service of 500 µs (the main
# job's), RATE req/s (default 6400, load 0.4) over 64 connections for SECS
# seconds (default 5), sampled at FREQ Hz (default 2999).
# Prints, per mode, the share of samples per binary, the top symbols and
# skq's own symbols (OUT_DIR/MODE-skq.txt). With CLOCKS=1 a second run per
# mode counts precise clock reads (libc clock_gettime of CLOCK_MONOTONIC or
# CLOCK_REALTIME, through a uprobe this script creates once; needs root) and
# system calls per reply, with perf stat, into OUT_DIR/MODE-counts.txt.
# Run it on a quiet machine, one mode after the other.
#
# Usage: bash scripts/bench/profile-rpc.sh OUT_DIR MODE [MODE ...]
#   e.g. bash scripts/bench/profile-rpc.sh /tmp/prof epoll-shared hybrid
set -eu  # no pipefail: `head` closes perf report's pipe early
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ $# -lt 2 ]; then
    sed -n 2,13p "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
out=$1; shift
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "no $skq: cargo build --release -p skq (or set SKQ)" >&2; exit 2; }
rate=${RATE:-6400}
secs=${SECS:-5}
freq=${FREQ:-2999}
mkdir -p "$out"
libc=/lib/x86_64-linux-gnu/libc.so.6
if [ "${CLOCKS:-0}" = 1 ] && ! perf list 2>/dev/null | grep -q 'probe_libc:clock_gettime'; then
    perf probe -q -x "$libc" 'clock_gettime clk=%di:s32' ||
        { echo "cannot create the clock_gettime uprobe (root needed)" >&2; exit 2; }
fi
# Runs one server of MODE on CPU 0 under "$@" (a perf command) and the load
# on CPU 1; the generator's result goes to $out/$mode$2.json.
serve_under_load() {
    local mode=$1 tag=$2; shift 2
    port=$((20000 + RANDOM % 20000))
    taskset -c 0 "$@" "$skq" serve rpc \
        --addr "127.0.0.1:$port" --mode "$mode" --workers 8 --service emulate \
        --stats-json "$out/$mode$tag.stats.json" >"$out/$mode$tag.server.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q listening "$out/$mode$tag.server.log" && break; sleep 0.05; done
    taskset -c 1 "$skq" load --addr "127.0.0.1:$port" --rate "$rate" --connections 64 \
        --workload exponential --mean-us 500 --duration "$secs" --quiet --json "$out/$mode$tag.json" \
        >/dev/null 2>&1 || true
    # The server is perf's child: stop it, and perf ends with it (perf stat
    # does not pass a SIGINT on to its workload).
    pkill -INT -P "$server" || kill -INT "$server"
    wait "$server" || true
}
for mode in "$@"; do
    if [ "${CLOCKS:-0}" = 1 ]; then
        serve_under_load "$mode" -counts perf stat -x, -o "$out/$mode-counts.csv" \
            -e raw_syscalls:sys_enter -e probe_libc:clock_gettime --filter 'clk == 0 || clk == 1' --
        python3 - "$out/$mode-counts.csv" "$out/$mode-counts.stats.json" "$mode" <<'PY' | tee "$out/$mode-counts.txt"
import json, sys
counts = {}
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        counts[f[2]] = float(f[0])
st = json.load(open(sys.argv[2]))
replies = st["requests"]  # the whole run, warm-up included, as perf counted
sc = counts.get("raw_syscalls:sys_enter", 0)
ck = counts.get("probe_libc:clock_gettime", 0)
print(f"{sys.argv[3]}: {replies} replies, system calls {sc / max(replies, 1):.2f} per reply, "
      f"precise clock reads {ck / max(replies, 1):.2f} per reply")
PY
    fi
    serve_under_load "$mode" "" perf record -q -F "$freq" -o "$out/$mode.data"
    {
        echo "== $mode: share of samples per binary"
        perf report -i "$out/$mode.data" --no-children --sort dso --stdio 2>/dev/null \
            | grep -v '^#' | grep -v '^$' | head -6
        echo "== $mode: top symbols"
        perf report -i "$out/$mode.data" --no-children --sort dso,sym --stdio 2>/dev/null \
            | grep -v '^#' | grep -v '^$' | head -25
    } | tee "$out/$mode.txt"
    perf report -i "$out/$mode.data" --no-children --dsos skq --sort sym --stdio 2>/dev/null \
        | grep -v '^#' | grep -v '^$' > "$out/$mode-skq.txt" || true
done
