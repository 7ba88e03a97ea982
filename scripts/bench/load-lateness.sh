#!/usr/bin/env bash
# The generator's schedule-keeping sweep (issue 27): `skq load` against one
# server thread on CPU 0, the generator pinned to CPU 1, 4 s + 0.5 s warm-up
# per point; prints send-lateness p99 (and without the machine's stalls,
# with their count), the verdict, latency p99, the
# generator's work and CPU per request, and failed checks.
#   rpc:       skq serve rpc --mode epoll-1to1 --workers 1 --service spin (5 µs)
#   memcached: Debian's memcached -t 1 (etc mix)
#   http:      skq serve http --mode epoll-1to1 --workers 1 (a 640-byte page)
# Usage: bash scripts/bench/load-lateness.sh [RUNS] [PROTOCOLS] [RATES] [CONNS]
# WARM_US=N also runs, on each of CPUs 0 and 1, a thread that only sleeps N µs
# in a loop (as `skq serve kv --idle-tick-us`): whether a failing read lag
# comes from a CPU waking slowly from idle (docs/MEASUREMENT.md).
# Measure on a quiet machine (`uptime` load below ~0.3).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${SKQ:-target/release/skq}
runs=${1:-2}
protos=${2:-"rpc memcached http"}
rates=${3:-"1000 3200 8000 16000 32000"}
conns=${4:-"8 64 96"}
port=7979
www=$(mktemp -d)
head -c 480 /dev/urandom | base64 -w 0 > "$www/index.html"
trap 'rm -rf "$www"' EXIT
warm=()
if [ -n "${WARM_US:-}" ]; then
  for cpu in 0 1; do
    taskset -c $cpu python3 -c "import time
while True: time.sleep(${WARM_US} / 1e6)" &
    warm+=($!)
  done
  trap 'rm -rf "$www"; kill "${warm[@]}" 2>/dev/null' EXIT
  echo "# a ${WARM_US}-us sleeper on each of CPUs 0 and 1"
fi
for run in $(seq "$runs"); do
  for proto in $protos; do
    case $proto in
      rpc) taskset -c 0 "$B" serve rpc --mode epoll-1to1 --workers 1 --service spin \
             --addr 127.0.0.1:$port >/dev/null 2>&1 & largs=(--workload fixed --mean-us 5);;
      memcached) taskset -c 0 memcached -u root -p $port -l 127.0.0.1 -t 1 -U 0 -m 256 \
             >/dev/null 2>&1 & largs=(--kv-workload etc);;
      http) taskset -c 0 "$B" serve http --root "$www" --mode epoll-1to1 --workers 1 \
             --addr 127.0.0.1:$port >/dev/null 2>&1 & largs=(--http-path /index.html);;
      *) echo "unknown protocol $proto" >&2; exit 2;;
    esac
    sp=$!
    sleep 0.7
    for c in $conns; do for r in $rates; do
      json=$(mktemp)
      taskset -c 1 "$B" load --protocol "$proto" --addr 127.0.0.1:$port --rate "$r" \
          --connections "$c" "${largs[@]}" --duration 4 --warmup 0.5 --quiet --json "$json" \
          --cpus 1 2>/dev/null
      python3 - "$json" "$run" "$proto" "$r" "$c" <<'PY'
import json, sys
path, run, proto, rate, conns = sys.argv[1:]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"run={run} {proto} rate={rate} conns={conns} no result ({e})"); sys.exit()
c = r["checks"]; n = r.get("client_sent_total") or 1
cpu = r["client_cpu"]["user_s"] + r["client_cpu"]["sys_s"]
failed = [x.split(":")[0] for x in c["notes"] if not x.startswith("info")]
st = r.get("client_stalls") or {}
own = st.get("own_lateness_p99_us", float("nan"))
print(f"run={run} {proto:<9} rate={rate:>5} conns={conns:>2} lateness_p99={c['lateness_p99_us']:7.1f}us "
      f"without_stalls={own:6.1f}us stalls={st.get('count', 0)} "
      f"pass={str(c['pass']):<5} p99={r['latency']['p99']['value']:7.0f}us "
      f"work/req={r['client_busy_s']*1e6/n:5.1f}us cpu/req={cpu*1e6/n:6.1f}us "
      f"read_lag_p99={c.get('read_lag_p99_us') or float('nan'):.0f}us "
      f"errors={sum(r['errors'].values())} failed={','.join(failed) or '-'}")
PY
      rm -f "$json"
    done; done
    kill $sp; wait $sp 2>/dev/null
  done
done
