#!/usr/bin/env bash
# Two builds of the generator against the same server, alternated: stock
# memcached with one thread on CPU 0, `skq load` on CPU 1 (sphinx-ro, 3 s
# after its 1 s warm-up), at each RATE:CONNS point, REPS times each. Prints
# per run the send lateness p99 and its verdict, the lateness without the
# machine's stalls, the read lag p99 and its verdict (where the build
# measures it), the generator's work per request and the p99 latency from
# schedule. It compares generator changes, so both builds must measure the
# same server. BEFORE_ARGS / AFTER_ARGS add `skq load` options to one side
# (one build with two settings: pass it twice).
#
# Usage: scripts/bench/generator-ab.sh BEFORE_SKQ AFTER_SKQ [REPS] RATE:CONNS ...
#   e.g. scripts/bench/generator-ab.sh /tmp/skq-before target/release/skq 2 128000:384
#        BEFORE_ARGS='--poll-events 256' scripts/bench/generator-ab.sh \
#            target/release/skq target/release/skq 2 128000:384
# Needs /usr/bin/memcached (bash scripts/setup.sh). Measure on a quiet machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [ $# -lt 3 ]; then sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
before=$1 after=$2; shift 2
reps=2
if [[ $1 =~ ^[0-9]+$ ]]; then reps=$1; shift; fi
for b in "$before" "$after"; do [ -x "$b" ] || { echo "no binary at $b" >&2; exit 2; }; done
out=$(mktemp); trap 'rm -f "$out"' EXIT
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load before $(cut -d' ' -f1-3 /proc/loadavg); before=$before ${BEFORE_ARGS:-} after=$after ${AFTER_ARGS:-}"
for point in "$@"; do
    rate=${point%%:*} conns=${point##*:}
    for i in $(seq "$reps"); do
        for which in before after; do
            bin=$before extra=${BEFORE_ARGS:-}
            [ "$which" = after ] && bin=$after extra=${AFTER_ARGS:-}
            port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
            taskset -c 0 /usr/bin/memcached -u root -U 0 -t 1 -l 127.0.0.1 -p "$port" -m 1024 -c 4096 &
            mc=$!
            sleep 0.4
            "$bin" load --addr "127.0.0.1:$port" --protocol memcached --kv-workload sphinx-ro \
                --connections "$conns" --rate "$rate" --cpus 1 --duration 3 $extra > "$out" 2>&1 || true
            kill "$mc"; wait "$mc" 2>/dev/null || true
            python3 - "$out" "$which" "$i" "$rate" "$conns" <<'PY'
import re
import sys

text = open(sys.argv[1]).read()
which, i, rate, conns = sys.argv[2:6]
def grab(pattern, default="?"):
    m = re.search(pattern, text)
    return m.group(1) if m else default
late = grab(r"lateness p99 ([\d.]+) us (?:ok|FAIL)")
verdict = grab(r"lateness p99 [\d.]+ us (ok|FAIL)")
without = grab(r"lateness p99 without them ([\d.]+) us")
work = grab(r"generator work ([\d.]+) us per request")
lag = grab(r"read lag p99 ((?:[\d.]+ us)|n/a) (?:ok|FAIL)", "-")
lag_verdict = grab(r"read lag p99 (?:[\d.]+ us|n/a) (ok|FAIL)", "")
p99 = grab(r"latency from schedule.*?p99 ([\d.]+)")
print(f"{which:6} rep {i}  {rate:>7} req/s  {conns:>4} conns  lateness p99 {late:>7} us {verdict:4}"
      f"  without stalls {without:>6} us  read lag p99 {lag:>10} {lag_verdict:4}"
      f"  work {work:>5} us/req  p99 from schedule {p99:>9} us")
PY
        done
    done
done
