#!/usr/bin/env bash
# Where the load generator's own CPU goes at a given rate: `skq load` against
# memcached (one thread, on CPU 0), the generator on CPU 1 under
# `perf record -g` (cpu-clock; these VMs have no hardware counters). Prints,
# per rate, the generator's CPU per request and the share of its samples
# under sending (`sendto`; on loopback that includes the receiving side's TCP
# processing, `net_rx_action`, run in the sender's context), reading
# (`recvmsg`), waiting (`epoll_wait`) and its own code, beside the point's
# send lateness, read lag and verdict (a share from a failing point is the
# share of an overloaded generator).
#
# Usage: bash scripts/bench/profile-generator.sh OUT_DIR RATE [RATE ...]
#   env: CONNS (default 384), MIX (memcached key/value mix, default etc),
#        SECS (default 4), FREQ (sampling Hz, default 4999),
#        SKQ (default target/release/skq).
# Run it on a quiet machine (flock /tmp/skq-measure.lock around it).
set -eu  # no pipefail: `grep -m`/`head` close perf report's pipe early
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
case "${1:-}" in
    -h|--help) sed -n 2,16p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
if [ $# -lt 2 ]; then
    sed -n 2,16p "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
command -v perf >/dev/null || { echo "profile-generator.sh: perf is not installed" >&2; exit 2; }
command -v memcached >/dev/null || { echo "profile-generator.sh: memcached is not installed (bash scripts/setup.sh)" >&2; exit 2; }
out=$1; shift
skq=${SKQ:-target/release/skq}
[ -x "$skq" ] || { echo "profile-generator.sh: no $skq: cargo build --release -p skq (or set SKQ)" >&2; exit 2; }
conns=${CONNS:-384}; mix=${MIX:-etc}; secs=${SECS:-4}; freq=${FREQ:-4999}
mkdir -p "$out"
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); memcached -t 1 on CPU 0, skq load on CPU 1; mix=$mix conns=$conns secs=$secs"
printf '%-8s %10s %8s %8s %8s %8s %8s %10s %10s %s\n' rate gen_us/req sendto net_rx recvmsg epoll own lateness read_lag checks
for rate in "$@"; do
    port=$((20000 + RANDOM % 20000))
    taskset -c 0 memcached -t 1 -m 64 -p "$port" -U 0 -u root >/dev/null 2>&1 &
    mc=$!
    sleep 0.5
    taskset -c 1 perf record -q -F "$freq" -g -o "$out/gen-$rate.data" "$skq" load \
        --addr "127.0.0.1:$port" --protocol memcached --kv-workload "$mix" --rate "$rate" \
        --connections "$conns" --duration "$secs" --quiet --json "$out/gen-$rate.json" \
        >/dev/null 2>&1 || true
    kill "$mc" 2>/dev/null || true
    wait "$mc" 2>/dev/null || true
    # Inclusive ("children") share of the call-graph entry points.
    perf report -i "$out/gen-$rate.data" --children --sort sym --stdio -g none 2>/dev/null \
        | grep '%' >"$out/gen-$rate.children.txt" || true
    share() { awk -v s="$1" '$NF == s { sub("%", "", $1); print $1; exit }' "$out/gen-$rate.children.txt"; }
    own=$(perf report -i "$out/gen-$rate.data" --no-children --sort dso --stdio 2>/dev/null \
        | awk '$2 == "skq" { sub("%", "", $1); print $1; exit }')
    read -r per lat lag verdict < <(python3 - "$out/gen-$rate.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["checks"]
per = (d.get("client_busy_s") or 0) * 1e6 / max(d.get("client_sent_total") or 0, 1)
print(f'{per:.2f} {c["lateness_p99_us"]:.1f} {c["read_lag_p99_us"]:.1f} {"pass" if c["pass"] else "FAIL"}')
PY
)
    printf '%-8s %10s %7s%% %7s%% %7s%% %7s%% %7s%% %10s %10s %s\n' "$rate" "$per" \
        "$(share __sys_sendto)" "$(share net_rx_action)" "$(share __sys_recvmsg)" \
        "$(share do_epoll_wait)" "${own:-?}" "$lat" "$lag" "$verdict"
done
echo "# gen_us/req: the generator's work per request (skq load's 'generator work': busy time over requests sent, warm-up included), under perf, whose call-graph sampling adds its own cost"
