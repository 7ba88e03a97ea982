#!/usr/bin/env bash
# Builds memcached 1.6.18 from Debian's source package with
# patches/memcached-1.6.18-skq.patch applied, linked against libskq
# (crates/skq-capi, static, release profile).
#
#   bash scripts/build-memcached-skq.sh      -> target/capi/memcached-skq/memcached
#
# SKQ_CAPI_LIB=path/libskq_capi.a links that library instead of building the
# release one (the test suite passes its own debug build); SKQ_MEMCACHED_OUT=dir
# builds there. A build directory whose patch is unchanged is only re-linked.
#
# The patched binary behaves as stock memcached unless MEMCACHED_SKQ names a
# policy (vanilla, shared, queue, cpu, best2, hybrid): then its -t worker
# threads wait on one shared skq instance instead of one libevent base each.
# The source comes from `apt-get source memcached` (scripts/setup.d/40-capi.sh,
# run by `bash scripts/setup.sh`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$root/target/capi/memcached-src/memcached-1.6.18"
out="${SKQ_MEMCACHED_OUT:-$root/target/capi/memcached-skq}"
patch_file="$root/patches/memcached-1.6.18-skq.patch"

if [ ! -f "$src/memcached.c" ]; then
    echo "memcached 1.6.18 source not found under $src: run \`bash scripts/setup.sh\` first" >&2
    exit 1
fi
for tool in cc make patch pkg-config; do
    command -v "$tool" >/dev/null || { echo "$tool missing: run \`bash scripts/setup.sh\` first" >&2; exit 1; }
done
pkg-config --exists libevent || { echo "libevent-dev missing: run \`bash scripts/setup.sh\` first" >&2; exit 1; }

lib="${SKQ_CAPI_LIB:-}"
if [ -z "$lib" ]; then
    (cd "$root" && cargo build --release -p skq-capi --quiet)
    lib="$root/target/release/libskq_capi.a"
fi

if ! cmp -s "$patch_file" "$out/skq.patch" 2>/dev/null || [ ! -f "$out/Makefile" ]; then
    rm -rf "$out"
    cp -a "$src" "$out"
    patch -d "$out" -p1 --quiet <"$patch_file"
    cp "$patch_file" "$out/skq.patch"
    # Extstore, TLS, SASL and the proxy stay off (their defaults but
    # extstore's): the skq path covers TCP text/binary protocol workers.
    (cd "$out" && ./configure --disable-extstore CPPFLAGS="-I$root/crates/skq-capi/include" \
        >configure.log 2>&1) || { tail -20 "$out/configure.log" >&2; exit 1; }
fi
cd "$out"
rm -f memcached # LIBS is not a make prerequisite: always re-link
make -j"$(nproc)" memcached LIBS="-levent $lib -lpthread -ldl -lm" >make.log 2>&1 \
    || { tail -40 make.log >&2; exit 1; }
echo "built $out/memcached ($(wc -l <"$patch_file") patch lines)"
