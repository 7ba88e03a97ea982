#!/usr/bin/env bash
# The whole test suite: unit, loopback integration and real-client tests of
# every crate, then the loom model checks of the scheduling core, skq-kv's
# doorbell and skq-async's task wake-up, then the fuzz smoke.
#
# memcached's upstream suite (crates/skq-kv/tests/memcached_suite.rs) is one
# of the workspace's tests, but its ~200 s keep about one CPU busy: it runs
# beside the two loom models that keep the other one busy, rather than alone
# in `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
# Each stage says how long the suite had run when it began (CI's time budget).
at() { echo "test.sh: $1 (at $(( $(date +%s) - t0 )) s)"; }
# A first build (a clean clone, as in CI) gains nothing from incremental
# compilation's caches and pays for writing them.
[ -d target/debug ] || export CARGO_INCREMENTAL=0
at "build"
cargo build --workspace --bins
suite_test=memcached_upstream_text_suite_passes_on_both_architectures
at "cargo test --workspace (all but memcached's suite)"
cargo test --workspace -- --skip "$suite_test"
at "example smoke"
echo "smoke: the typed-API echo server example serves its built-in clients and exits"
cargo run -q -p skq-rt --example echo
at "loom: build"
# The three loom models, built in one go (they share their dependencies,
# built once with --cfg loom) and then run straight from their binaries.
echo "loom: building the model checks of the core, skq-kv's doorbell and skq-async's task wake-up"
loom_list=target/loom-binaries.txt
mkdir -p target
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --no-default-features \
    -p skq-core -p skq-kv -p skq-async --test loom --lib --no-run \
    --message-format=json-render-diagnostics |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["target"]["name"], m["executable"])
' >"$loom_list"
loom_bin() {
    local b
    b=$(awk -v n="$1" '$1 == n { print $2 }' "$loom_list")
    [ -x "$b" ] || { echo "test.sh: no loom binary for $1 in $loom_list" >&2; exit 1; }
    echo "$b"
}
core_loom=$(loom_bin loom)
kv_loom=$(loom_bin skq_kv)
async_loom=$(loom_bin skq_async)

at "loom: the core"
echo "loom: model-checking the core's cross-thread state machine"
(cd crates/skq-core && "$core_loom")

# skq-kv's and skq-async's models each keep one CPU busy; memcached's
# upstream suite (one of the workspace's tests, left out above) runs beside
# them on the other, and the models run at a lower priority so the suite's
# servers answer on time.
at "loom: skq-kv and skq-async, beside memcached's upstream suite"
loom_log=target/loom-kv-async.log
(
    set -e
    echo "loom: model-checking the thread-per-core doorbell of skq-kv"
    cd crates/skq-kv && LOOM_MAX_PREEMPTIONS=3 nice -n 10 "$kv_loom" doorbell
    echo "loom: model-checking skq-async's task wake-up protocol (wake/poll/steal)"
    cd ../skq-async && LOOM_MAX_PREEMPTIONS=2 nice -n 10 "$async_loom" loom_model
) >"$loom_log" 2>&1 &
loom_pid=$!
# A failure below ends the script: the models go with it.
trap 'pkill -P "$loom_pid" 2>/dev/null; kill "$loom_pid" 2>/dev/null || true' EXIT
# `--workspace`, as above: the same features, so the built binary is reused.
cargo test --workspace --test memcached_suite -- --exact "$suite_test"
at "loom: waiting for skq-kv's and skq-async's models"
loom_rc=0
wait "$loom_pid" || loom_rc=$?
trap - EXIT
cat "$loom_log"
[ "$loom_rc" = 0 ] || { echo "test.sh: a loom model failed (exit $loom_rc)" >&2; exit "$loom_rc"; }
if [ -x scripts/fuzz-smoke.sh ]; then
    at "fuzz smoke"
    bash scripts/fuzz-smoke.sh
fi
at "done"
