#!/usr/bin/env bash
# Cross-check `skq load` against the independent simple client
# (skq_load::simple; issue 27, item 4): same server, same rate, same seed
# (so the same per-connection Poisson send instants), same connections and
# workload, one run after the other. The simple client times replies by the
# kernel's receive timestamp (SO_TIMESTAMPNS), skq load by its own clock
# after epoll; prints latency p50/p99 (from the scheduled send time) and
# send lateness side by side with the ratio skq/simple, and PASS/FAIL.
#
# Tolerance (stated in docs/MEASUREMENT.md, adjustable): a figure agrees when
#     |skq - simple| <= max(TOL_PCT % of the larger, TOL_ABS_US µs)
# (default 15 % or 20 µs). Compared: latency p50, latency p99, lateness p99.
# PASS needs all three to agree, both clients to keep their schedule
# (lateness p99 <= LATE_US, default 50 µs, skq load's own bound), both runs
# free of missing and bad replies, every measured reply of the simple client
# timed by the kernel (none before its send stamp), and no step of the
# realtime clock during its run. Exit status: 0 PASS, 1 FAIL, 2 usage or
# run error.
#
# The server must already run, e.g. on CPU 0:
#   taskset -c 0 target/release/skq serve rpc --mode epoll-1to1 --workers 1 --service spin &
#   scripts/bench/load-crosscheck.sh --addr 127.0.0.1:7878 --rate 8000 \
#       --connections 64 --cpus 1 --workload fixed --mean-us 5
# Run as root (or with CAP_SYS_NICE): the simple client's receiver runs
# SCHED_FIFO (see skq_load::simple); the output says whether it did.
# Binaries (build them first, under the measurement lock):
#   cargo build --release -p skq && cargo build --release -p skq-load --example simple_client
#   SKQ=...     skq binary          (default target/release/skq)
#   SIMPLE=...  simple client       (default target/release/examples/simple_client)
# memcached: skq load runs first and prefills the keys the simple client reads.
set -euo pipefail

usage() {
    sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
    echo "flags: --addr A --rate R [--protocol rpc|memcached|http] [--connections N]"
    echo "       [--duration S] [--warmup S] [--cpus LIST] [--workload fixed|exponential]"
    echo "       [--mean-us U] [--kv-workload MIX] [--http-path P] [--seed N]"
    echo "       [--tol-pct P] [--tol-abs-us U] [--late-us U] [--spin-us U] [--out DIR]"
    exit 2
}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SKQ=${SKQ:-$ROOT/target/release/skq}
SIMPLE=${SIMPLE:-$ROOT/target/release/examples/simple_client}
ADDR="" RATE="" PROTOCOL=rpc CONNS=64 DURATION=5 WARMUP=1 CPUS="" WORKLOAD=exponential
MEAN_US=500 KV=etc HTTP_PATH=/ SEED=1 TOL_PCT=15 TOL_ABS_US=20 LATE_US=50 SPIN_US=2000 OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --addr) ADDR=$2 ;;
        --rate) RATE=$2 ;;
        --protocol) PROTOCOL=$2 ;;
        --connections) CONNS=$2 ;;
        --duration) DURATION=$2 ;;
        --warmup) WARMUP=$2 ;;
        --cpus) CPUS=$2 ;;
        --workload) WORKLOAD=$2 ;;
        --mean-us) MEAN_US=$2 ;;
        --kv-workload) KV=$2 ;;
        --http-path) HTTP_PATH=$2 ;;
        --seed) SEED=$2 ;;
        --tol-pct) TOL_PCT=$2 ;;
        --tol-abs-us) TOL_ABS_US=$2 ;;
        --late-us) LATE_US=$2 ;;
        --spin-us) SPIN_US=$2 ;;
        --out) OUT=$2 ;;
        -h|--help) usage ;;
        *) echo "load-crosscheck: unknown flag $1" >&2; usage ;;
    esac
    shift 2 || { echo "load-crosscheck: $1 needs a value" >&2; exit 2; }
done
[ -n "$ADDR" ] && [ -n "$RATE" ] || { echo "load-crosscheck: --addr and --rate are required" >&2; usage; }
for b in "$SKQ" "$SIMPLE"; do
    [ -x "$b" ] || { echo "load-crosscheck: $b not built (see --help)" >&2; exit 2; }
done
OUT=${OUT:-$(mktemp -d /tmp/load-crosscheck.XXXXXX)}
mkdir -p "$OUT"

common=(--addr "$ADDR" --protocol "$PROTOCOL" --rate "$RATE" --connections "$CONNS"
        --duration "$DURATION" --warmup "$WARMUP" --seed "$SEED"
        --workload "$WORKLOAD" --mean-us "$MEAN_US" --kv-workload "$KV" --http-path "$HTTP_PATH")
if [ -n "$CPUS" ]; then common+=(--cpus "$CPUS"); fi

echo "== skq load (one epoll thread)"
# skq load exits 3 when one of its self-checks fails; that is reported below, not fatal here.
rc=0; "$SKQ" load "${common[@]}" --max-lateness-us "$LATE_US" --quiet --json "$OUT/skq.json" || rc=$?
[ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "load-crosscheck: skq load failed ($rc)" >&2; exit 2; }
echo "== simple client (non-blocking sender, one poll receiver reading only while the sender lends it the CPU, kernel receive stamps)"
"$SIMPLE" "${common[@]}" --spin-us "$SPIN_US" --json "$OUT/simple.json" \
    || { echo "load-crosscheck: simple client failed" >&2; exit 2; }

python3 - "$OUT/skq.json" "$OUT/simple.json" "$TOL_PCT" "$TOL_ABS_US" "$LATE_US" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
tol_pct, tol_abs, late_us = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
rows = [  # name, skq load, simple, compared?
    ("latency p50 µs", a["latency"]["p50"]["value"], b["latency"]["p50_us"], True),
    ("latency p99 µs", a["latency"]["p99"]["value"], b["latency"]["p99_us"], True),
    ("latency p99.9 µs", a["latency"]["p999"]["value"], b["latency"]["p999_us"], False),
    ("from send p99 µs", a["raw_latency"]["p99"]["value"], b["raw_latency"]["p99_us"], False),
    ("lateness p50 µs", None, b["lateness"]["p50_us"], False),
    ("lateness p99 µs", a["checks"]["lateness_p99_us"], b["lateness"]["p99_us"], True),
    ("send call p99 µs", None, b["send_call"]["p99_us"], False),
    ("recv delay p99 µs", None, b["recv_delay"]["p99_us"], False),
    ("achieved req/s", a["achieved_rps"], b["achieved_rps"], False),
]
ok = True
print(f"{'':18}{'skq load':>12}{'simple':>12}{'ratio':>8}  verdict")
for name, x, y, cmp in rows:
    xs = "-" if x is None else f"{x:.1f}"
    ratio = f"{x / y:.2f}" if x is not None and y else "-"
    verdict = ""
    if cmp:
        agree = abs(x - y) <= max(tol_pct / 100 * max(x, y), tol_abs)
        ok &= agree
        verdict = "PASS" if agree else "FAIL"
    print(f"{name:18}{xs:>12}{y:>12.1f}{ratio:>8}  {verdict}")
ea, eb = a["errors"], b["errors"]
bad_a = ea["missing"] + ea["bad_reply"] + ea["duplicate"] + ea["connection_failures"]
bad_b = eb["missing"] + eb["bad_reply"] + eb["connection_failures"]
print(f"errors: skq load {ea}; simple {eb}")
print(f"skq load self-checks: {'pass' if a['checks']['pass'] else 'FAIL ' + '; '.join(a['checks']['notes'])}")
st = b["stamps"]
stamped = st["kernel"] == b["received"] and st["user"] == 0 and st["before_send"] == 0
print(f"simple client reply times: {st['kernel']} of {b['received']} kernel-stamped, "
      f"{st['user']} user-space, {st['before_send']} before their send; {st['shared']} shared a read's "
      f"stamp (an upper bound); receiver SCHED_FIFO: {b['receivers_realtime']}; "
      f"realtime clock step {b['realtime_step_us']:.3f} µs")
cpu = sum(t["user_s"] + t["sys_s"] for t in b["thread_cpu"])
print(f"client CPU: skq load {a['client_cpu']['user_s'] + a['client_cpu']['sys_s']:.2f} s; "
      f"simple {cpu:.2f} s (its sender spins, see skq_load::simple)")
on_time = a["checks"]["lateness_p99_us"] <= late_us and b["lateness"]["p99_us"] <= late_us
if not on_time:
    print(f"a client missed its schedule (lateness p99 over {late_us:g} µs): the comparison is void")
if not stamped:
    print("the simple client did not time every measured reply by a kernel stamp")
if b["realtime_step_us"] > 10:
    print("the realtime clock was stepped during the simple client's run: its figures are void")
ok &= bad_a == 0 and bad_b == 0 and on_time and stamped and b["realtime_step_us"] <= 10
print(f"tolerance: |skq - simple| <= max({tol_pct:g}% of the larger, {tol_abs:g} µs) "
      f"on latency p50, p99 and lateness p99; both lateness p99 <= {late_us:g} µs; "
      f"every simple reply kernel-stamped; no missing or bad replies")
print("CROSS-CHECK PASS" if ok else "CROSS-CHECK FAIL")
sys.exit(0 if ok else 1)
EOF
