# skq-kv: real memcached clients and the memcached peer, for crates/skq-kv/tests/clients.rs
# and the kv benchmarks. Sourced by scripts/setup.sh (which defines apt_install).
#   memcached           — the peer (Debian 12 ships 1.6.18)
#   libmemcached-tools  — memcp, memcat, memrm, memstat, memslap (Debian names them memc*)
#   pymemcache          — Python client (pip; Debian's python3-pymemcache may lag)
apt_install memcached libmemcached-tools python3 python3-pip
if ! python3 -c 'import pymemcache' 2>/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check pymemcache 2>/dev/null \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages pymemcache
fi
# The Debian package starts a memcached on 11211 at install; the tests start their own.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet memcached 2>/dev/null; then
    systemctl stop memcached || true
fi
for tool in memcp memcat memrm memstat memslap; do
    command -v "$tool" >/dev/null || command -v "memc${tool#mem}" >/dev/null \
        || echo "setup: warning: $tool not found after installing libmemcached-tools" >&2
done
