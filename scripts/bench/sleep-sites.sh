#!/usr/bin/env bash
# Where an RPC server's threads go to sleep, per reply: every context switch
# of the server process recorded with its kernel stack (perf, the
# sched:sched_switch tracepoint), a voluntary one classified by the system
# call it slept in (epoll wait, futex, the emulated service's nanosleep,
# other), an involuntary one counted as preempted. Beside it, the
# generator's p50/p99 and self-check verdict of the same point, so a
# configuration that sleeps less can be seen to pay for it in latency.
#
# Usage: scripts/bench/sleep-sites.sh [--runs N] MODE[,MODE...] [RATE...]
#   defaults: 1 run, rate 3200 (the main job's load 0.2). Each point: 8
#   workers, emulated exponential service S̄ = 500 µs, 64 connections,
#   4 s (perf, on the server's CPU, records 3 s of it after the warm-up);
#   server on CPU 0, generator on CPU 1; modes interleaved per run.
#   SKQ=path picks the binary (default target/release/skq).
# Needs perf with tracepoint access (root). Measure on a quiet machine.
# scripts/bench/switch-sites.sh counts, beside these sites, the epoll waits'
# returns (a wait that slept without returning) and who woke the threads.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RUNS=1
if [[ ${1:-} == --runs ]]; then RUNS=$2; shift 2; fi
if [[ $# -lt 1 || ${1:-} == -h || ${1:-} == --help ]]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
IFS=, read -r -a MODES <<< "$1"; shift
RATES=("${@:-3200}")
BIN=${SKQ:-target/release/skq}
[[ -x $BIN ]] || { echo "no binary at $BIN: cargo build --release -p skq" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
SECS=4
REC=3

point() { # mode rate
    local mode=$1 rate=$2 port pid gen
    port=$((20000 + RANDOM % 20000))
    taskset -c 0 "$BIN" serve rpc --addr "127.0.0.1:$port" --mode "$mode" --workers 8 \
        --service emulate > "$tmp/server.out" 2>&1 &
    pid=$!
    for _ in $(seq 100); do grep -q "listening on" "$tmp/server.out" 2>/dev/null && break; sleep 0.1; done
    # perf records REC seconds inside the measured window (after the
    # generator's 1 s warm-up), so its switches are divided by the replies
    # of the traced span (first to last switch) at the achieved rate.
    taskset -c 1 "$BIN" load --addr "127.0.0.1:$port" --protocol rpc --workload exponential \
        --mean-us 500 --rate "$rate" --duration "$SECS" --connections 64 > "$tmp/load.out" 2>&1 &
    gen=$!
    sleep 1.5
    timeout "$REC" taskset -c 0 perf record -e sched:sched_switch -g -p "$pid" -o "$tmp/perf.data" \
        > /dev/null 2>&1 || true
    wait "$gen" || true
    kill -INT "$pid"; wait "$pid" 2>/dev/null || true
    perf script -i "$tmp/perf.data" -F comm,tid,time,event,trace,ip,sym 2>/dev/null > "$tmp/trace.txt"
    python3 - "$tmp/trace.txt" "$tmp/load.out" "$mode" "$rate" "$REC" <<'PY'
import collections
import re
import sys

trace, load, mode, rate, rec = sys.argv[1:6]
# The first kernel frame that names where a voluntary sleep was entered.
SITES = [("do_epoll_wait", "epoll"), ("futex", "futex"), ("nanosleep", "nanosleep")]
count = collections.Counter()
current = None  # site of the voluntary switch whose stack is being read
first = last = None  # the trace's time span (s)


def close():
    if current is not None:
        count[current] += 1


for line in open(trace):
    if "sched:sched_switch" in line:
        close()
        t = re.search(r"\s([\d]+\.[\d]+):\s", line)
        if t:
            last = float(t.group(1))
            first = last if first is None else first
        state = re.search(r"prev_state=(\S+)", line)
        if state and state.group(1).startswith("R"):
            count["preempted"] += 1
            current = None
        else:
            current = "other"
        continue
    if current == "other":
        for key, site in SITES:
            if key in line:
                current = site
                break
close()
text = open(load).read()
achieved = re.search(r"achieved (\d+) req/s", text)
span = (last - first) if first is not None else float(rec)
replies = round((int(achieved.group(1)) if achieved else int(rate)) * span)
p50 = re.search(r"latency from schedule.*?p50 ([\d.]+)", text)
p99 = re.search(r"latency from schedule.*?p99 ([\d.]+)", text)
verdict = "pass" if "all checks passed" in text else "FAIL"
n = max(replies, 1)
vol = sum(v for k, v in count.items() if k != "preempted")
print(f"{mode:<14} {rate:>6} {replies:>7} {vol / n:6.3f} "
      + " ".join(f"{count[s] / n:9.3f}" for s in ("epoll", "futex", "nanosleep", "other"))
      + f" {count['preempted'] / n:9.3f} {float(p50.group(1)) if p50 else 0:7.0f}"
      f" {float(p99.group(1)) if p99 else 0:7.0f}  {verdict}")
PY
}

echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD) load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# per reply: voluntary switches (all), by where the thread slept; involuntary (preempted)"
printf '%-14s %6s %7s %6s %9s %9s %9s %9s %9s %7s %7s  %s\n' mode rate replies vol \
    epoll futex nanosleep other preempted p50_us p99_us checks
for run in $(seq "$RUNS"); do
    echo "# run $run"
    for rate in "${RATES[@]}"; do
        for mode in "${MODES[@]}"; do
            point "$mode" "$rate"
        done
    done
done
