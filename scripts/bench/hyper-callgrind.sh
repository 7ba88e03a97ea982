#!/usr/bin/env bash
# Instructions per reply of hyper_server (crates/skq-async/examples/hyper_server.rs,
# 1 worker) under callgrind, per runtime: a count that does not move with the host
# (no steal, no frequency, no neighbours), for changes too small for wrk to see.
#
#   bash scripts/bench/hyper-callgrind.sh OUT [RATE] [SECS]
#
# For each runtime in RUNTIMES (default "skq tokio"): the server runs under
# `valgrind --tool=callgrind`; `skq load --protocol http` on /api/hello?name=bench, 8
# connections, warms it for 2 s at RATE (default 500 req/s), the counters are zeroed
# (callgrind_control -z), a window of SECS (default 6) s runs at RATE, and the counters
# are dumped (callgrind_control -d). scripts/bench/callgrind-groups.py then prints the
# instructions per reply by crate (skq-core, skq-rt, skq-async, tokio, hyper, malloc...).
# Callgrind runs the server about 50 times slower, so RATE must stay well under what it
# then serves (about 4,000 req/s on the 2026-12 VMs); the generator runs natively.
# Instructions are not time: an atomic read-modify-write or a cache miss costs more
# than its one instruction, so the count ranks code paths, it does not replace the
# CPU per reply of scripts/bench/hyper-vs-tokio.py.
#
# Environment:
#   SERVER    the example binary (default target/release/examples/hyper_server)
#   SKQ       the generator (default target/release/skq)
#   RUNTIMES  runtimes to run (default "skq tokio")
#   LABEL     appended to the output names (to keep two builds apart in one OUT)
#   MODE      skq-async's mode (default hybrid)
set -euo pipefail
out=${1:?usage: hyper-callgrind.sh OUT [RATE] [SECS]}
rate=${2:-500}
secs=${3:-6}
server=${SERVER:-target/release/examples/hyper_server}
skq=${SKQ:-target/release/skq}
label=${LABEL:+-$LABEL}
for t in valgrind callgrind_control callgrind_annotate; do
    command -v $t >/dev/null || { echo "$t is not installed (apt-get install valgrind)" >&2; exit 2; }
done
[ -x "$server" ] || { echo "$server is missing: cargo build --release -p skq-async --example hyper_server" >&2; exit 2; }
[ -x "$skq" ] || { echo "$skq is missing: cargo build --release -p skq" >&2; exit 2; }
CG_OPTS=()
. "$(dirname "$0")/callgrind-lib.sh"
mkdir -p "$out"
root=$(mktemp -d)
echo '<html>hi</html>' > "$root/index.html"
files=()
for rt in ${RUNTIMES:-skq tokio}; do
    port=$(free_port)
    extra=()
    [ "$rt" = skq ] && extra=(--mode "${MODE:-hybrid}")
    load=("$skq" load --addr "127.0.0.1:$port" --protocol http --http-path '/api/hello?name=bench'
          --rate "$rate" --connections 8 --quiet)
    cg="$out/cg-$rt$label.out"
    replies=$(callgrind_window "$cg" "$out/server-$rt$label.log" "$port" 2 "$secs" \
        "$out/warm-$rt$label.json" "$out/load-$rt$label.json" \
        "$server" --runtime "$rt" --workers 1 --port "$port" --root "$root" "${extra[@]}") || exit 1
    echo "$rt$label: $replies replies in the window ($rate req/s offered, $secs s)"
    files+=("$cg.1:$replies")
done
rm -rf "$root"
python3 "$(dirname "$0")/callgrind-groups.py" "${files[@]}" | tee "$out/groups$label.txt"
