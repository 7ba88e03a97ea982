#!/usr/bin/env bash
# hyper on skq-async against hyper on tokio, open loop, point by point: the
# same example server (crates/skq-async/examples/hyper_server.rs, one worker
# on CPU 0; skq in MODE, default hybrid, pinned), `skq load --protocol http`
# on CPU 1 over 8 connections on the JSON path, each RATE for 5 s after a 1 s
# warm-up, the runtimes alternating, REPS times. One line per point: p50,
# p99, p99.9 and max latency (µs), whether the generator's self-checks
# passed and its send lateness p99. Unlike hyper-vs-tokio.py's sweep, which
# stops at a runtime's first point over the SLO, every rate is measured for
# both in every repetition, so a single noisy point moves one cell, not a
# whole curve.
#
# Usage: bash scripts/bench/hyper-open-loop.sh [REPS] [RATE ...]
#   default: 3 reps, rates 20000 40000
# Build first: cargo build --release -p skq-async --example hyper_server
#              cargo build --release -p skq
# SERVER overrides the example binary. Measure on a quiet machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
reps=${1:-3}; shift || true
rates=("$@"); [ ${#rates[@]} -gt 0 ] || rates=(20000 40000)
server=${SERVER:-target/release/examples/hyper_server}
gen=target/release/skq
MODE=${MODE:-hybrid}
for b in "$server" "$gen"; do [ -x "$b" ] || { echo "hyper-open-loop.sh: $b is missing (see --help in the header)" >&2; exit 2; }; done
command -v wrk >/dev/null || { echo "hyper-open-loop.sh: wrk is not installed (bash scripts/setup.sh)" >&2; exit 2; }
work=$(mktemp -d); spid=
trap 'rm -rf "$work"; [ -n "$spid" ] && kill "$spid" 2>/dev/null || true' EXIT
mkdir "$work/root"; head -c 512 /dev/urandom | base64 > "$work/root/small.html"
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); skq mode $MODE; $(nproc) cores seen"
printf '%-3s %-6s %7s %7s %7s %7s %7s %-6s %9s\n' rep rt rate p50 p99 p99.9 max checks "late p99"
for rep in $(seq "$reps"); do
    for rt in skq tokio; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        extra=(); [ "$rt" = skq ] && extra=(--mode "$MODE" --pin)
        taskset -c 0 "$server" --runtime "$rt" --workers 1 --port "$port" --root "$work/root" "${extra[@]}" \
            > "$work/server-$rt.log" 2>&1 &
        spid=$!
        for _ in $(seq 100); do
            curl -sf "http://127.0.0.1:$port/api/hello?name=bench" >/dev/null 2>&1 && break
            sleep 0.1
        done
        taskset -c 1 wrk -t1 -c8 -d1s "http://127.0.0.1:$port/api/hello?name=bench" >/dev/null
        for rate in "${rates[@]}"; do
            rm -f "$work/point.json"
            taskset -c 1 "$gen" load --addr "127.0.0.1:$port" --protocol http --http-path "/api/hello?name=bench" \
                --rate "$rate" --duration 5 --warmup 1 --connections 8 --cpus 1 --quiet \
                --json "$work/point.json" >/dev/null 2>&1 || true
            python3 - "$work/point.json" "$rep" "$rt" "$rate" <<'PY' | tee -a "$work/lines"
import json, sys
path, rep, rt, rate = sys.argv[1:]
try:
    j = json.load(open(path))
except (OSError, ValueError):
    print(f"{rep:<3} {rt:<6} {rate:>7} (no result)")
    sys.exit(0)
l, c = j["latency"], j["checks"]
v = lambda x: x["value"] if isinstance(x, dict) else x  # quantiles carry bounds, max is a number
print(f"{rep:<3} {rt:<6} {rate:>7} {v(l['p50']):>7.0f} {v(l['p99']):>7.0f} "
      f"{v(l['p999']):>7.0f} {v(l['max']):>7.0f} {'pass' if c['pass'] else 'FAIL':<6} "
      f"{c['lateness_p99_us']:>9.1f}")
PY
        done
        kill "$spid"; wait "$spid" 2>/dev/null || true; spid=
    done
done
python3 - "$work/lines" <<'PY'
import statistics, sys
cells = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 9:
        continue
    cells.setdefault((int(f[2]), f[1]), []).append((float(f[4]), float(f[5]), f[7] == "pass"))
print("median over reps (points failing a self-check included, counted in brackets):")
for rate in sorted({r for r, _ in cells}):
    row = []
    for rt in ("skq", "tokio"):
        pts = cells.get((rate, rt), [])
        if pts:
            row.append(f"{rt} p99 {statistics.median(p for p, _, _ in pts):.0f} p99.9 "
                       f"{statistics.median(q for _, q, _ in pts):.0f} [{sum(not ok for *_, ok in pts)} failed]")
    print(f"  {rate:>6} req/s: " + "; ".join(row))
PY
