#!/usr/bin/env bash
# The whole test suite: unit, loopback integration and real-client tests of
# every crate, then the loom model checks of the scheduling core.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --workspace --bins
cargo test --workspace
echo "loom: model-checking the core's cross-thread state machine"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p skq-core --test loom --release
if [ -x scripts/fuzz-smoke.sh ]; then
    bash scripts/fuzz-smoke.sh
fi
