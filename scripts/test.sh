#!/usr/bin/env bash
# The whole test suite: unit, loopback integration and real-client tests of
# every crate, then the loom model checks of the scheduling core, skq-kv's
# doorbell and skq-async's task wake-up.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --workspace --bins
cargo test --workspace
echo "smoke: the typed-API echo server example serves its built-in clients and exits"
cargo run -q -p skq-rt --example echo
echo "loom: model-checking the core's cross-thread state machine"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p skq-core --test loom --release
echo "loom: model-checking the thread-per-core doorbell of skq-kv"
LOOM_MAX_PREEMPTIONS=3 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p skq-kv --no-default-features --release --lib doorbell
echo "loom: model-checking skq-async's task wake-up protocol (wake/poll/steal)"
LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p skq-async --no-default-features --release --lib loom
if [ -x scripts/fuzz-smoke.sh ]; then
    bash scripts/fuzz-smoke.sh
fi
