#!/usr/bin/env bash
# Fuzz smoke run for the kv protocol parser (~30 s).
#
# With cargo-fuzz and a nightly toolchain: runs the libFuzzer target fuzz/kv_parser.
# Without them (the usual case in CI and on the dev VMs): runs the SAME fuzz body
# (skq_kv::fuzzing::check) as a seeded randomized test, with more iterations than the
# default test run. That is a randomized test, not coverage-guided fuzzing; it says so.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
secs="${FUZZ_SECONDS:-30}"

if cargo fuzz --version >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz-smoke: cargo-fuzz + nightly found: libFuzzer on kv_parser for ${secs}s"
    cd "$root"
    exec cargo +nightly fuzz run --fuzz-dir fuzz kv_parser -- -max_total_time="$secs" -max_len=8192
fi

echo "fuzz-smoke: cargo-fuzz or nightly missing: running the fuzz body as a seeded randomized test instead (not coverage-guided)"
cd "$root"
SKQ_FUZZ_ITERS="${SKQ_FUZZ_ITERS:-500000}" timeout "$((secs * 4))" \
    cargo test --release -p skq-kv --test fuzz_random -- --nocapture
