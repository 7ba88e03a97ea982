# skq-capi: the C toolchain for libskq's C tests and examples (cc with AddressSanitizer),
# cbindgen (regenerates include/skq.h; the header test diffs against it), libevent-dev and
# pkg-config (memcached's build needs them), dpkg-dev (`apt-get source`), and memcached
# 1.6.18's Debian source package for scripts/build-memcached-skq.sh. Sourced by
# scripts/setup.sh, which defines apt_install. Idempotent.
apt_install build-essential pkg-config cbindgen libevent-dev dpkg-dev

# A deb-src entry mirroring the binary entries, so `apt-get source memcached` works.
skq_src_list=/etc/apt/sources.list.d/skq-deb-src.sources
if [ ! -e "$skq_src_list" ] && ! grep -rqs '^Types:.*deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    if [ -e /etc/apt/sources.list.d/debian.sources ]; then
        sed -n 's/^Types: deb$/Types: deb-src/; /^#/d; p' /etc/apt/sources.list.d/debian.sources >"$skq_src_list"
    else
        # One-line format: every `deb` line again as `deb-src`.
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"${skq_src_list%.sources}.list"
    fi
    apt-get update -qq
fi

# The source tree lives under target/ (ignored); the build script patches a copy of it.
skq_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
skq_mc_dir="$skq_root/target/capi/memcached-src"
if ! ls -d "$skq_mc_dir"/memcached-1.6.18 >/dev/null 2>&1; then
    mkdir -p "$skq_mc_dir"
    (cd "$skq_mc_dir" && apt-get source -qq memcached=1.6.18-1+deb12u1 >/dev/null 2>&1 \
        || apt-get source -qq memcached >/dev/null)
fi
ls -d "$skq_mc_dir"/memcached-1.6.18 >/dev/null 2>&1 \
    || echo "setup: warning: memcached 1.6.18 source not found under $skq_mc_dir" >&2
