#!/usr/bin/env bash
# The whole test suite: unit, loopback integration and real-client tests of
# every crate, then the loom model checks of the scheduling core, skq-kv's
# doorbell and skq-async's task wake-up, then the fuzz smoke.
#
# memcached's upstream suite (crates/skq-kv/tests/memcached_suite.rs) is one
# of the workspace's tests, but it spends most of its ~200 s waiting on its
# own sleeps: it runs in the background beside the loom models (which are
# CPU-bound and run at a lower priority, so the suite's servers answer on
# time) rather than alone in `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
# Each stage says how long the suite had run when it began (CI's time budget).
at() { echo "test.sh: $1 (at $(( $(date +%s) - t0 )) s)"; }
at "build"
cargo build --workspace --bins
suite_test=memcached_upstream_text_suite_passes_on_both_architectures
at "cargo test --workspace (all but memcached's suite)"
cargo test --workspace -- --skip "$suite_test"
at "example smoke"
echo "smoke: the typed-API echo server example serves its built-in clients and exits"
cargo run -q -p skq-rt --example echo
at "memcached's upstream suite (in the background) and loom"
# `--workspace`, as above: the same features, so the built binary is reused.
suite_log=target/memcached-suite-test.log
cargo test --workspace --test memcached_suite -- --exact "$suite_test" >"$suite_log" 2>&1 &
suite_pid=$!
# A failing loom model ends the script: the suite goes with it.
trap 'kill "$suite_pid" 2>/dev/null || true' EXIT
echo "loom: model-checking the core's cross-thread state machine"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    nice -n 10 cargo test -p skq-core --test loom --release
echo "loom: model-checking the thread-per-core doorbell of skq-kv"
LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    nice -n 10 cargo test -p skq-kv --no-default-features --release --lib doorbell
echo "loom: model-checking skq-async's task wake-up protocol (wake/poll/steal)"
LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    nice -n 10 cargo test -p skq-async --no-default-features --release --lib loom
at "memcached's upstream suite: waiting for its verdict"
suite_rc=0
wait "$suite_pid" || suite_rc=$?
echo "memcached's upstream suite (crates/skq-kv/tests/memcached_suite.rs, exit $suite_rc):"
cat "$suite_log"
[ "$suite_rc" = 0 ] || exit "$suite_rc"
if [ -x scripts/fuzz-smoke.sh ]; then
    at "fuzz smoke"
    bash scripts/fuzz-smoke.sh
fi
at "done"
