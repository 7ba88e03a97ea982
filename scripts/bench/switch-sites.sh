#!/usr/bin/env bash
# Where the RPC server's threads go to sleep, per reply: the kernel site of every
# voluntary context switch (the epoll wait, the emulated service's sleep, a futex,
# other) and what the epoll waits returned, for each mode (issue 21: switches per
# reply at load 0.2, hybrid against epoll-shared). scripts/bench/sleep-sites.sh
# classifies the same sleeps with each point's p50, p99 and self-checks, over
# several modes and rates; this script adds what the two questions it leaves need:
# how often a wait slept without returning, and who woke the threads.
#
#   bash scripts/bench/switch-sites.sh OUT [RATE] [SECS] [MODES]
#
# The main job's server setting: `skq serve rpc --workers 8` on CPU 0, emulated
# exponential service of mean 500 µs, `skq load` on CPU 1 at RATE (default 3,200
# req/s, load 0.2) over 64 connections. After 2 s of warm-up, `perf record` takes
# SECS (default 4) of `sched:sched_switch` with kernel call chains and the exits of
# the epoll, recv, send and nanosleep system calls. Replies are the sends in that
# window. A wait that slept more often than it returned slept again inside the
# kernel: a waiter woken for readiness another thread had taken first. Then 2 s
# of `sched:sched_waking` on every CPU (the waker's own call chain) say who woke
# the server's threads: readiness (`ep_poll_callback`), a harvest that left
# readiness on the set's list (`ep_done_scan` wakes one more waiter, although
# the waiter woken for that readiness is already on its way), a timer (the
# service's sleep), a futex, or other.
# Counts, not times: perf's own cost does not change them much, but run it on a
# quiet machine all the same (the races it counts depend on timing).
#
# Needs perf with tracepoints (these VMs have them; no hardware counters needed), and
# root or perf_event_paranoid <= -1 for the system-wide wakings.
case ${1:-} in -h | --help) sed -n '2,/^case /p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
set -euo pipefail
out=${1:?usage: switch-sites.sh OUT [RATE] [SECS] [MODES]}
rate=${2:-3200}
secs=${3:-4}
modes=${4:-hybrid epoll-shared}
skq=${SKQ:-target/release/skq}
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 2; }
[ -x "$skq" ] || { echo "$skq is missing: cargo build --release -p skq" >&2; exit 2; }
mkdir -p "$out"
. "$(dirname "$0")/callgrind-lib.sh" # free_port
wait_port() {
    for _ in $(seq 100); do
        (echo > /dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "the server did not listen on $1" >&2
    return 1
}
server=
cleanup() { [ -n "$server" ] && kill -9 "$server" 2>/dev/null || true; }
trap cleanup EXIT
events=sched:sched_switch
for s in epoll_wait epoll_pwait epoll_pwait2 recvfrom sendto clock_nanosleep futex; do
    events="$events,syscalls:sys_exit_$s"
done
for mode in $modes; do
    port=$(free_port)
    taskset -c 0 "$skq" serve rpc --mode "$mode" --workers 8 --addr "127.0.0.1:$port" \
        > "$out/server-$mode.log" 2>&1 &
    server=$!
    wait_port "$port"
    taskset -c 1 "$skq" load --addr "127.0.0.1:$port" --protocol rpc --workload exponential \
        --mean-us 500 --rate "$rate" --connections 64 --duration $((secs + 6)) --cpus 1 \
        --quiet --json "$out/load-$mode.json" > "$out/load-$mode.txt" 2>&1 &
    load=$!
    sleep 2
    perf record -q -g -e "$events" -p "$server" -o "$out/perf-$mode.data" -- sleep "$secs" \
        2> "$out/perf-$mode.log"
    tids=$(ls /proc/"$server"/task | tr '\n' ' ')
    perf record -q -a -g -e sched:sched_waking -o "$out/waking-$mode.data" -- sleep 2 \
        2>> "$out/perf-$mode.log"
    wait "$load" || echo "$mode: the generator failed (see $out/load-$mode.txt)" >&2
    kill -INT "$server"
    wait "$server" 2>/dev/null || true
    server=
    perf script -i "$out/perf-$mode.data" > "$out/script-$mode.txt" 2> /dev/null
    perf script -i "$out/waking-$mode.data" > "$out/waking-$mode.txt" 2> /dev/null
    python3 - "$mode" "$out/script-$mode.txt" "$out/waking-$mode.txt" "$tids" "$secs" <<'PY' | tee "$out/sites-$mode.txt"
import collections, re, sys
mode, path, waking_path, tids = sys.argv[1], sys.argv[2], sys.argv[3], set(sys.argv[4].split())
secs = float(sys.argv[5])
SITES = [("do_epoll_wait", "epoll wait"), ("do_nanosleep", "service sleep"),
         ("futex", "futex"), ("do_sigtimedwait", "signal wait")]
sleeps = collections.Counter()
exits = collections.Counter()
for block in open(path).read().split("\n\n"):
    lines = [l for l in block.strip().split("\n") if l.strip()]
    if not lines:
        continue
    head = lines[0]
    m = re.search(r"syscalls:sys_exit_(\w+):.*0x([0-9a-f]+)$", head)
    if m:
        ret = int(m.group(2), 16)
        if ret >= 1 << 63:
            ret -= 1 << 64
        name = m.group(1)
        if name.startswith("epoll"):
            exits["poll returned " + ("0 (timeout)" if ret == 0 else
                                      "an error" if ret < 0 else "events")] += 1
            if ret > 0:
                exits["events harvested"] += ret
        else:
            exits[name] += 1
        continue
    if "sched:sched_switch" not in head or "prev_state=S" not in head:
        continue
    stack = " ".join(lines[1:])
    site = next((label for key, label in SITES if key in stack), "other")
    sleeps[site] += 1
replies = exits["sendto"]
if not replies:
    sys.exit(f"{mode}: no replies in the window")
print(f"{mode}: {replies} replies in the window")
print(f"  voluntary switches per reply   {sum(sleeps.values()) / replies:6.3f}")
for site, n in sleeps.most_common():
    print(f"    in the {site:<22} {n / replies:6.3f}")
polls = sum(v for k, v in exits.items() if k.startswith("poll returned"))
for k in sorted(k for k in exits if k.startswith("poll") or k == "events harvested"):
    print(f"  {k:<30} {exits[k] / replies:6.3f}")
print(f"  slept again inside the wait    {max(0, sleeps['epoll wait'] - polls) / replies:6.3f}"
      "  (at least: sleeps in the wait minus its returns)")
WAKERS = [("ep_done_scan", "a harvest that left readiness"), ("ep_poll_callback", "readiness"),
          ("hrtimer_wakeup", "a timer"), ("futex", "a futex")]
wakers = collections.Counter()
for block in open(waking_path).read().split("\n\n"):
    lines = [l for l in block.strip().split("\n") if l.strip()]
    if not lines or "sched:sched_waking" not in lines[0]:
        continue
    m = re.search(r" pid=(\d+)", lines[0])
    if not m or m.group(1) not in tids:
        continue
    stack = " ".join(lines[1:])
    wakers[next((label for key, label in WAKERS if key in stack), "other")] += 1
total = sum(wakers.values())
if total:
    # Per reply at the first window's reply rate (the load is steady).
    per = replies / secs * 2
    print(f"  who woke the server's threads, per reply (2 s, {total} wakings)")
    for label, n in wakers.most_common():
        print(f"    {label:<32} {n / per:6.3f}")
PY
done
