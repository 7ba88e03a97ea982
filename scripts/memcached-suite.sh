#!/usr/bin/env bash
# memcached 1.6.18's own perl test suite (t/*.t, text protocol) against skq's cache server,
# in both architectures, with the real memcached as the reference. See docs/MEMCACHED-SUITE.md.
#
#   bash scripts/memcached-suite.sh [--all] [--files a.t,b.t] [--targets memcached,skq-tpc]
#                                   [--results FILE] [--jobs N]
#
# Fetches the source once into target/memcached-src (apt-get source, Debian's package),
# builds the skq-kv binary (the same code as `skq serve kv`), runs every text-protocol test
# file through scripts/memcached-suite/launcher.py and prints a table of passes per file.
# Exits 1 when an assertion that passes on memcached fails on skq and is not listed in
# scripts/memcached-suite/expected-failures.txt. Needs what scripts/setup.sh installs
# (setup.d/25-memcached-suite.sh): perl, dpkg-dev, memcached, a deb-src entry.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version=1.6.18
src_cache="$root/target/memcached-src"
src="$src_cache/memcached-$version"
work="$root/target/memcached-suite"
here="$root/scripts/memcached-suite"

all=0
fetch_only=0
pass=()
while [ $# -gt 0 ]; do
    case "$1" in
        --all) all=1 ;;
        --fetch-only) fetch_only=1 ;;
        --files | --targets | --results | --timeout | --jobs)
            pass+=("$1" "$2")
            shift
            ;;
        *)
            echo "memcached-suite: unknown argument $1" >&2
            exit 2
            ;;
    esac
    shift
done

need() {
    command -v "$1" >/dev/null || {
        echo "memcached-suite: $1 not found: run 'bash scripts/setup.sh' first ($2)" >&2
        exit 3
    }
}
need perl "runs the test files"
need python3 "runs the launcher and the report"
need memcached "the reference server"
perl -MTest::More -e1 2>/dev/null || {
    echo "memcached-suite: perl's Test::More is missing: run 'bash scripts/setup.sh' first" >&2
    exit 3
}
memcached -V | grep -q "memcached $version" || echo "memcached-suite: warning: reference is $(memcached -V), not $version" >&2

# The source package, once (idempotent: an unpacked tree with t/lib is reused).
if [ ! -f "$src/t/lib/MemcachedTest.pm" ]; then
    need apt-get "fetches the source package"
    need dpkg-source "unpacks the source package (dpkg-dev)"
    mkdir -p "$src_cache"
    (cd "$src_cache" && apt-get source -qq "memcached=$version*" >/dev/null 2>&1 \
        || apt-get source -qq memcached >/dev/null 2>&1) || {
        echo "memcached-suite: 'apt-get source memcached' failed: run 'bash scripts/setup.sh' (it adds a deb-src entry)" >&2
        exit 3
    }
    found="$(find "$src_cache" -maxdepth 4 -path '*/t/lib/MemcachedTest.pm' | head -1)"
    [ -n "$found" ] || {
        echo "memcached-suite: no t/lib/MemcachedTest.pm in $src_cache after apt-get source" >&2
        exit 3
    }
    if [ "$found" != "$src/t/lib/MemcachedTest.pm" ]; then
        echo "memcached-suite: warning: source is $(dirname "$(dirname "$(dirname "$found")")"), not memcached-$version" >&2
        src="$(dirname "$(dirname "$(dirname "$found")")")"
    fi
fi

[ "$fetch_only" = 1 ] && exit 0

skq_bin="${SKQ_KV_BIN:-}"
if [ -z "$skq_bin" ]; then
    cargo build -q -p skq-kv --bin skq-kv
    skq_bin="$(cargo metadata -q --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/skq-kv"
fi

args=(--src "$src" --work "$work" --skq-bin "$skq_bin")
[ "$all" = 1 ] && args+=(--all)
exec python3 "$here/run.py" "${args[@]}" "${pass[@]}"
