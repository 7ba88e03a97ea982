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
# --reps K (default 1): K runs of each client, alternating (skq, simple,
# skq, simple, ...), all with the same seed; every figure compared is the
# median over a client's K runs, and each run's figures are printed too.
# At a few per cent of a CPU the p99 is the host's rare stalls, and one
# run's p99 differs from the next run's of the same client by up to 3x
# (docs/MEASUREMENT.md); alternating spreads the host's drift over both
# clients, and the median of K damps single runs.
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
    echo "       [--tol-pct P] [--tol-abs-us U] [--late-us U] [--spin-us U] [--reps K] [--out DIR]"
    exit 2
}

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SKQ=${SKQ:-$ROOT/target/release/skq}
SIMPLE=${SIMPLE:-$ROOT/target/release/examples/simple_client}
ADDR="" RATE="" PROTOCOL=rpc CONNS=64 DURATION=5 WARMUP=1 CPUS="" WORKLOAD=exponential
MEAN_US=500 KV=etc HTTP_PATH=/ SEED=1 TOL_PCT=15 TOL_ABS_US=20 LATE_US=50 SPIN_US=2000 REPS=1 OUT=""
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
        --reps) REPS=$2 ;;
        --out) OUT=$2 ;;
        -h|--help) usage ;;
        *) echo "load-crosscheck: unknown flag $1" >&2; usage ;;
    esac
    shift 2 || { echo "load-crosscheck: $1 needs a value" >&2; exit 2; }
done
[ -n "$ADDR" ] && [ -n "$RATE" ] || { echo "load-crosscheck: --addr and --rate are required" >&2; usage; }
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "load-crosscheck: --reps needs a whole number of at least 1" >&2; exit 2; }
for b in "$SKQ" "$SIMPLE"; do
    [ -x "$b" ] || { echo "load-crosscheck: $b not built (see --help)" >&2; exit 2; }
done
OUT=${OUT:-$(mktemp -d /tmp/load-crosscheck.XXXXXX)}
mkdir -p "$OUT"

common=(--addr "$ADDR" --protocol "$PROTOCOL" --rate "$RATE" --connections "$CONNS"
        --duration "$DURATION" --warmup "$WARMUP" --seed "$SEED"
        --workload "$WORKLOAD" --mean-us "$MEAN_US" --kv-workload "$KV" --http-path "$HTTP_PATH")
if [ -n "$CPUS" ]; then common+=(--cpus "$CPUS"); fi

for rep in $(seq "$REPS"); do
    echo "== skq load (one epoll thread), run $rep of $REPS"
    # skq load exits 3 when one of its self-checks fails; that is reported below, not fatal here.
    rc=0; "$SKQ" load "${common[@]}" --max-lateness-us "$LATE_US" --quiet --json "$OUT/skq-$rep.json" || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "load-crosscheck: skq load failed ($rc)" >&2; exit 2; }
    echo "== simple client (non-blocking sender, one poll receiver reading only while the sender lends it the CPU, kernel receive stamps), run $rep of $REPS"
    "$SIMPLE" "${common[@]}" --spin-us "$SPIN_US" --json "$OUT/simple-$rep.json" \
        || { echo "load-crosscheck: simple client failed" >&2; exit 2; }
done

python3 - "$OUT" "$REPS" "$TOL_PCT" "$TOL_ABS_US" "$LATE_US" <<'EOF'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
tol_pct, tol_abs, late_us = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
A = [json.load(open(f"{out}/skq-{k}.json")) for k in range(1, reps + 1)]
B = [json.load(open(f"{out}/simple-{k}.json")) for k in range(1, reps + 1)]
rows = [  # name, skq load's figure, the simple client's, compared?
    ("latency p50 µs", lambda a: a["latency"]["p50"]["value"], lambda b: b["latency"]["p50_us"], True),
    ("latency p99 µs", lambda a: a["latency"]["p99"]["value"], lambda b: b["latency"]["p99_us"], True),
    ("latency p99.9 µs", lambda a: a["latency"]["p999"]["value"], lambda b: b["latency"]["p999_us"], False),
    ("from send p99 µs", lambda a: a["raw_latency"]["p99"]["value"], lambda b: b["raw_latency"]["p99_us"], False),
    ("lateness p50 µs", None, lambda b: b["lateness"]["p50_us"], False),
    ("lateness p99 µs", lambda a: a["checks"]["lateness_p99_us"], lambda b: b["lateness"]["p99_us"], True),
    ("send call p99 µs", None, lambda b: b["send_call"]["p99_us"], False),
    ("recv delay p99 µs", None, lambda b: b["recv_delay"]["p99_us"], False),
    ("achieved req/s", lambda a: a["achieved_rps"], lambda b: b["achieved_rps"], False),
]
med = statistics.median
if reps > 1:
    print(f"each run (skq load / simple), {reps} runs alternating:")
    for name, fa, fb, cmp in rows:
        if cmp:
            pairs = "  ".join(f"{fa(a):.1f}/{fb(b):.1f}" for a, b in zip(A, B))
            print(f"  {name:18}{pairs}")
    print(f"medians over the {reps} runs of each client:")
ok = True
medians = {}  # name -> (skq load's median, the simple client's)
print(f"{'':18}{'skq load':>12}{'simple':>12}{'ratio':>8}  verdict")
for name, fa, fb, cmp in rows:
    x = None if fa is None else med(fa(a) for a in A)
    y = med(fb(b) for b in B)
    medians[name] = (x, y)
    xs = "-" if x is None else f"{x:.1f}"
    ratio = f"{x / y:.2f}" if x is not None and y else "-"
    verdict = ""
    if cmp:
        agree = abs(x - y) <= max(tol_pct / 100 * max(x, y), tol_abs)
        ok &= agree
        verdict = "PASS" if agree else "FAIL"
    print(f"{name:18}{xs:>12}{y:>12.1f}{ratio:>8}  {verdict}")
bad_a = bad_b = 0
for k, (a, b) in enumerate(zip(A, B), 1):
    ea, eb = a["errors"], b["errors"]
    bad_a += ea["missing"] + ea["bad_reply"] + ea["duplicate"] + ea["connection_failures"]
    bad_b += eb["missing"] + eb["bad_reply"] + eb["connection_failures"]
    tag = f" (run {k})" if reps > 1 else ""
    print(f"errors{tag}: skq load {ea}; simple {eb}")
    print(f"skq load self-checks{tag}: {'pass' if a['checks']['pass'] else 'FAIL ' + '; '.join(a['checks']['notes'])}")
stamped = all(b["stamps"]["kernel"] == b["received"] and b["stamps"]["user"] == 0
              and b["stamps"]["before_send"] == 0 for b in B)
kernel = sum(b["stamps"]["kernel"] for b in B)
received = sum(b["received"] for b in B)
shared = sum(b["stamps"]["shared"] for b in B)
user = sum(b["stamps"]["user"] for b in B)
before = sum(b["stamps"]["before_send"] for b in B)
step = max(b["realtime_step_us"] for b in B)
print(f"simple client reply times: {kernel} of {received} kernel-stamped, {user} user-space, "
      f"{before} before their send; {shared} shared a read's stamp (an upper bound); receiver "
      f"SCHED_FIFO: {all(b['receivers_realtime'] for b in B)}; largest realtime clock step {step:.3f} µs")
cpu_a = med(a["client_cpu"]["user_s"] + a["client_cpu"]["sys_s"] for a in A)
cpu_b = med(sum(t["user_s"] + t["sys_s"] for t in b["thread_cpu"]) for b in B)
print(f"client CPU per run (median): skq load {cpu_a:.2f} s; simple {cpu_b:.2f} s "
      f"(its sender spins, see skq_load::simple)")
late_a, late_b = medians["lateness p99 µs"]
on_time = late_a <= late_us and late_b <= late_us
if not on_time:
    print(f"a client missed its schedule (lateness p99 over {late_us:g} µs): the comparison is void")
if not stamped:
    print("the simple client did not time every measured reply by a kernel stamp")
if step > 10:
    print("the realtime clock was stepped during a simple client run: its figures are void")
ok &= bad_a == 0 and bad_b == 0 and on_time and stamped and step <= 10
over = f" (medians over {reps} runs each)" if reps > 1 else ""
print(f"tolerance: |skq - simple| <= max({tol_pct:g}% of the larger, {tol_abs:g} µs) "
      f"on latency p50, p99 and lateness p99{over}; both lateness p99 <= {late_us:g} µs; "
      f"every simple reply kernel-stamped; no missing or bad replies")
print("CROSS-CHECK PASS" if ok else "CROSS-CHECK FAIL")
sys.exit(0 if ok else 1)
EOF
