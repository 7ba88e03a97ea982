#!/usr/bin/env bash
# Instructions per request of the cache servers under callgrind: memcached and skq's
# cache, one server thread each, on the same memcached-protocol load (issue 22: where
# the cache's user-space work per request differs from memcached's, in a count that
# does not move with the host).
#
#   bash scripts/bench/kv-callgrind.sh OUT [RATE] [SECS] [MIX] [SERVERS]
#
# For each server in SERVERS (default "memcached kv-tpc kv-hybrid": `memcached -t 1`,
# `skq serve kv --arch tpc --workers 1`, `skq serve kv --arch shared --mode hybrid
# --workers 1`; also mc-skq-POLICY: memcached patched onto skq's C API,
# scripts/build-memcached-skq.sh, with MEMCACHED_SKQ=POLICY, e.g. mc-skq-cpu and
# mc-skq-hybrid, issue 21's C-server cost, and mc-off: the same build without
# MEMCACHED_SKQ, on libevent as stock memcached) the server runs under `valgrind --tool=callgrind`; `skq load --protocol
# memcached --kv-workload MIX` (default sphinx-ro) over 64 connections warms it for 3 s
# at RATE (default 2,000 req/s), the counters are zeroed, a window of SECS (default 6)
# runs at RATE and the counters are dumped. scripts/bench/callgrind-groups.py prints
# the instructions per request (every thread of the server counted: memcached's LRU
# maintainer and crawler too), and with BY_FUNCTION=N its N costliest functions side
# by side. Callgrind runs the servers about 50 times slower, so RATE stays low; the
# kernel's share of a request (most of it) is not counted.
#
# Environment: SKQ (default target/release/skq), MC_SKQ (the patched memcached, default
# target/capi/memcached-skq/memcached), THREADS (server threads of every server, default
# 1; callgrind runs them one at a time, which changes no count of work per request but
# not how requests spread over the threads), LABEL (appended to the output names).
set -euo pipefail
out=${1:?usage: kv-callgrind.sh OUT [RATE] [SECS] [MIX] [SERVERS]}
rate=${2:-2000}
secs=${3:-6}
mix=${4:-sphinx-ro}
servers=${5:-memcached kv-tpc kv-hybrid}
skq=${SKQ:-target/release/skq}
mc_skq=${MC_SKQ:-target/capi/memcached-skq/memcached}
threads=${THREADS:-1}
label=${LABEL:+-$LABEL}
for t in valgrind callgrind_control callgrind_annotate memcached; do
    command -v $t >/dev/null || { echo "$t is not installed (bash scripts/setup.sh; apt-get install valgrind)" >&2; exit 2; }
done
[ -x "$skq" ] || { echo "$skq is missing: cargo build --release -p skq" >&2; exit 2; }
CG_OPTS=()
. "$(dirname "$0")/callgrind-lib.sh"
mkdir -p "$out"
files=()
for who in $servers; do
    port=$(free_port)
    policy=
    case $who in
        # memcached sets its descriptor limit (soft and hard) to -c; valgrind
        # refuses any hard limit but its own (the hard limit less the 12
        # descriptors it keeps for itself), so -c is exactly that.
        memcached) cmd=(memcached -t "$threads" -m 64 -c $(( $(ulimit -Hn) - 12 )) -p "$port" -U 0 -u root) ;;
        mc-off)
            [ -x "$mc_skq" ] || { echo "$mc_skq is missing: bash scripts/build-memcached-skq.sh" >&2; exit 2; }
            cmd=("$mc_skq" -t "$threads" -m 64 -c $(( $(ulimit -Hn) - 12 )) -p "$port" -U 0 -u root) ;;
        mc-skq-*)
            [ -x "$mc_skq" ] || { echo "$mc_skq is missing: bash scripts/build-memcached-skq.sh" >&2; exit 2; }
            policy=${who#mc-skq-}
            cmd=("$mc_skq" -t "$threads" -m 64 -c $(( $(ulimit -Hn) - 12 )) -p "$port" -U 0 -u root) ;;
        kv-tpc) cmd=("$skq" serve kv --arch tpc --workers "$threads" --addr "127.0.0.1:$port") ;;
        kv-hybrid) cmd=("$skq" serve kv --arch shared --mode hybrid --workers "$threads" --addr "127.0.0.1:$port") ;;
        *) echo "kv-callgrind.sh: unknown server $who (memcached, mc-off, mc-skq-POLICY, kv-tpc, kv-hybrid)" >&2; exit 2 ;;
    esac
    load=("$skq" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload "$mix"
          --rate "$rate" --connections 64 --quiet)
    cg="$out/cg-$who-$mix$label.out"
    # The patched memcached's policy goes to valgrind's own environment
    # (valgrind follows no exec, so `env VAR=... memcached` would go uncounted).
    replies=$(if [ -n "$policy" ]; then export MEMCACHED_SKQ=$policy; else unset MEMCACHED_SKQ; fi
        callgrind_window "$cg" "$out/server-$who$label.log" "$port" 3 "$secs" \
        "$out/warm-$who-$mix$label.json" "$out/load-$who-$mix$label.json" "${cmd[@]}") || exit 1
    echo "$who$label: $replies replies in the window ($mix, $rate req/s offered, $secs s)"
    files+=("$cg.1:$replies")
done
extra=()
[ -n "${BY_FUNCTION:-}" ] && extra=(--by-function "$BY_FUNCTION")
python3 "$(dirname "$0")/callgrind-groups.py" "${files[@]}" "${extra[@]}" | tee "$out/groups-$mix$label.txt"
