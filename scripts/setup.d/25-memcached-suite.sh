# memcached's upstream perl suite (scripts/memcached-suite.sh, crates/skq-kv/tests/memcached_suite.rs).
# Sourced by scripts/setup.sh (which defines apt_install).
#   perl        — runs t/*.t (Test::More and the sockets modules MemcachedTest.pm uses are core)
#   dpkg-dev    — dpkg-source, which `apt-get source` needs to unpack the package
#   xz-utils    — the source tarballs are .tar.xz
#   memcached   — the reference server (also in 20-kv.sh)
apt_install perl dpkg-dev xz-utils memcached python3
# `apt-get source` needs a deb-src entry for the same suites as the binary packages.
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
            >/etc/apt/sources.list.d/skq-deb-src.sources
    else
        grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
            >/etc/apt/sources.list.d/skq-deb-src.list
    fi
    apt-get update -qq
    SKQ_APT_UPDATED=1
fi
# Fetch and unpack the source once, so the test suite does not need the network later.
bash "$(dirname "${BASH_SOURCE[0]}")/../memcached-suite.sh" --fetch-only
