#!/usr/bin/env bash
# hyper on skq-async with an environment setting off and on, in alternating
# turns: the example server (one worker, hybrid) on CPU 0, `wrk -t1 -c8
# -d SECS` on CPU 1 on the JSON path, PAIRS pairs; the side that goes first
# alternates. Prints each run's requests/s and server CPU µs per reply, then
# the median of the per-pair ratios (on / off) with their range.
# Usage: bash scripts/bench/hyper-env-ab.sh VAR=VALUE [PAIRS] [SECS] [PATH]
#   e.g. bash scripts/bench/hyper-env-ab.sh SKQ_ASYNC_RUN_NOW=1 10 5
# SERVER (default target/release/examples/hyper_server). With SERVER_B=PATH as the
# setting, "on" is that other build of the example instead (a before/after pair of
# builds: SERVER the one before, SERVER_B the one after). Also prints the median of
# the per-pair ratios of CPU per reply. Measure on a quiet machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
setting=${1:?usage: hyper-env-ab.sh VAR=VALUE [PAIRS] [SECS] [PATH]}
pairs=${2:-10}; secs=${3:-5}; path=${4:-/api/hello?name=bench}
server=${SERVER:-target/release/examples/hyper_server}
[ -x "$server" ] || { echo "$server is missing: cargo build --release -p skq-async --example hyper_server" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk is not installed (bash scripts/setup.sh)" >&2; exit 2; }
server_b=
case "$setting" in
  SERVER_B=*) server_b=${setting#SERVER_B=}
              [ -x "$server_b" ] || { echo "$server_b is not an executable" >&2; exit 2; } ;;
esac
root=$(mktemp -d); trap 'rm -rf "$root"' EXIT
against="$setting against unset"
[ -n "$server_b" ] && against="on: $server_b, off: $server"
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); $against; $pairs pairs of ${secs}-s wrk runs on $path"
tick=$(getconf CLK_TCK)
port=18400
run() { # $1: on|off; prints "req/s cpu_us_per_reply"
  port=$((port + 1))
  if [ "$1" = on ] && [ -n "$server_b" ]; then taskset -c 0 "$server_b" --runtime skq --workers 1 --mode hybrid --port $port --root "$root" >/dev/null 2>&1 &
  elif [ "$1" = on ]; then env "$setting" taskset -c 0 "$server" --runtime skq --workers 1 --mode hybrid --port $port --root "$root" >/dev/null 2>&1 &
  else taskset -c 0 "$server" --runtime skq --workers 1 --mode hybrid --port $port --root "$root" >/dev/null 2>&1 & fi
  local pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  local c0; c0=$(awk '{print $14+$15}' /proc/$pid/stat)
  local out; out=$(taskset -c 1 wrk -t1 -c8 -d${secs}s "http://127.0.0.1:$port$path")
  local c1; c1=$(awk '{print $14+$15}' /proc/$pid/stat)
  kill $pid; wait $pid 2>/dev/null || true
  local rps; rps=$(echo "$out" | awk '/Requests\/sec:/ {print $2}')
  echo "$rps $(awk -v a="$c0" -v b="$c1" -v t="$tick" -v r="$rps" -v s="$secs" 'BEGIN {printf "%.2f", (b-a)/t*1e6/(r*s)}')"
}
ratios=(); cratios=()
for i in $(seq 1 "$pairs"); do
  if [ $((i % 2)) -eq 1 ]; then a=$(run off); b=$(run on); else b=$(run on); a=$(run off); fi
  r=$(awk -v x="${b%% *}" -v y="${a%% *}" 'BEGIN {printf "%.3f", x/y}')
  ratios+=("$r")
  cratios+=("$(awk -v x="${b##* }" -v y="${a##* }" 'BEGIN {printf "%.3f", x/y}')")
  echo "pair $i: off ${a%% *} req/s (${a##* } us/reply), on ${b%% *} req/s (${b##* } us/reply), on/off $r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "on/off req/s: median %.3f, range %.3f-%.3f over %d pairs\n", m, v[1], v[NR], NR}'
printf '%s\n' "${cratios[@]}" | sort -n | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "on/off CPU per reply: median %.3f, range %.3f-%.3f over %d pairs\n", m, v[1], v[NR], NR}'
