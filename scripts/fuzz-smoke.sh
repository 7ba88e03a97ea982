#!/usr/bin/env bash
# Fuzz smoke run for the kv protocol parser and the HTTP server's request path (~30 s each).
#
# With cargo-fuzz and a nightly toolchain: runs the libFuzzer target fuzz/kv_parser.
# Without them (the usual case in CI and on the dev VMs): runs the SAME fuzz body
# (skq_kv::fuzzing::check) as a seeded randomized test, with more iterations than the
# default test run. That is a randomized test, not coverage-guided fuzzing; it says so.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
secs="${FUZZ_SECONDS:-30}"

if cargo fuzz --version >/dev/null 2>&1 && rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "fuzz-smoke: cargo-fuzz + nightly found: libFuzzer on kv_parser and http_parser for ${secs}s each"
    cd "$root"
    cargo +nightly fuzz run --fuzz-dir fuzz kv_parser -- -max_total_time="$secs" -max_len=8192
    cargo +nightly fuzz run --fuzz-dir fuzz classifier -- -max_total_time="$secs" -max_len=4096
    exec cargo +nightly fuzz run --fuzz-dir fuzz http_parser -- -max_total_time="$secs" -max_len=20000
fi

echo "fuzz-smoke: cargo-fuzz or nightly missing: running the fuzz body as a seeded randomized test instead (not coverage-guided)"
cd "$root"
# Build first, outside the time limit: on a clean clone the release build of the
# test binaries alone can take longer than the limit, which bounds the run only.
# (One package at a time, as they run: building them together could unify
# features differently and make the timed run build again.)
cargo test --release -p skq-kv --test fuzz_random --no-run
cargo test --release -p skq-http --test fuzz_random --no-run
SKQ_FUZZ_ITERS="${SKQ_FUZZ_ITERS:-500000}" timeout "$((secs * 4))" \
    cargo test --release -p skq-kv --test fuzz_random -- --nocapture
echo "fuzz-smoke: the classifiers' body (skq_net::classify::check_split) runs seeded in cargo test (classify and kv priority tests)"
echo "fuzz-smoke: the same for skq-http's request path (skq_http::fuzzing::check, seeded, not coverage-guided)"
SKQ_FUZZ_ITERS="${SKQ_HTTP_FUZZ_ITERS:-50000}" timeout "$((secs * 4))" \
    cargo test --release -p skq-http --test fuzz_random -- --nocapture
