# skq-db: the RocksDB front end links Debian's RocksDB (7.8.3 on Debian 12)
# instead of building the bundled copy (which would take most of CI's budget).
# librocksdb-sys runs bindgen over rocksdb/c.h, so it needs libclang; the
# compression libraries are the ones Debian's librocksdb was built against.
# Sourced by scripts/setup.sh, which defines apt_install.
apt_install librocksdb-dev libclang-dev clang libsnappy-dev liblz4-dev libzstd-dev zlib1g-dev libbz2-dev
