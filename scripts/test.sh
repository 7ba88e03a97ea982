#!/usr/bin/env bash
# The whole test suite: unit, loopback integration and real-client tests of
# every crate, then the loom model checks of the scheduling core, skq-kv's
# doorbell and skq-async's task wake-up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
# Each stage says how long the suite had run when it began (CI's time budget).
at() { echo "test.sh: $1 (at $(( $(date +%s) - t0 )) s)"; }
at "build"
cargo build --workspace --bins
at "cargo test --workspace"
cargo test --workspace
at "example smoke"
echo "smoke: the typed-API echo server example serves its built-in clients and exits"
cargo run -q -p skq-rt --example echo
at "loom"
echo "loom: model-checking the core's cross-thread state machine"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p skq-core --test loom --release
echo "loom: model-checking the thread-per-core doorbell of skq-kv"
LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p skq-kv --no-default-features --release --lib doorbell
echo "loom: model-checking skq-async's task wake-up protocol (wake/poll/steal)"
LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p skq-async --no-default-features --release --lib loom
if [ -x scripts/fuzz-smoke.sh ]; then
    at "fuzz smoke"
    bash scripts/fuzz-smoke.sh
fi
at "done"
