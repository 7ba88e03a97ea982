#!/usr/bin/env bash
# Builds stock memcached 1.6.18 (the same source Debian ships, no skq patch)
# with symbols and frame pointers into target/memcached-prof/, for profiles
# only: Debian's /usr/bin/memcached is stripped, so a flame graph of it names
# no function. Figures of CPU, system calls and context switches per reply
# come from Debian's binary; this build only names where its time goes.
#   bash scripts/build-memcached-prof.sh   (after bash scripts/setup.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/target/capi/memcached-src/memcached-1.6.18"
out="$root/target/memcached-prof"
if [ ! -f "$src/memcached.c" ]; then
    echo "memcached 1.6.18 source not found under $src: run \`bash scripts/setup.sh\` first" >&2
    exit 1
fi
pkg-config --exists libevent || { echo "libevent-dev missing: run \`bash scripts/setup.sh\` first" >&2; exit 1; }
if [ ! -x "$out/memcached" ]; then
    rm -rf "$out"
    cp -a "$src" "$out"
    (cd "$out" && ./configure -q CFLAGS="-O2 -g -fno-omit-frame-pointer" >/dev/null && make -s -j"$(nproc)" memcached >/dev/null)
fi
echo "$out/memcached"
