//! The RocksDB front end: SKQ §6.6's imbalanced application.
//!
//! `skq serve rocksdb` serves GET, PUT and SEEK (seek to a key, return the
//! next N entries) over a real RocksDB, on every driver of `skq-net`: the skq
//! runtime in any scheduling mode, the plain-Linux baselines `epoll-1to1` and
//! `epoll-shared`, and tokio. The request path is [`protocol::DbProtocol`],
//! one value shared by all workers; the wire format (RPC frames carrying the
//! operation) is documented in `skq_proto::db`.
//!
//! The database lives in a memory-backed directory (`/dev/shm` by default,
//! as the paper keeps its database in memory) and is built by
//! `skq db preload` ([`preload()`]): keys `skq_proto::db::key_of(i)` for
//! `i < keys` (48 bytes, key order = index order), values of ZippyDB's size
//! distribution (`skq_proto::zippydb`). Writes skip the write-ahead log: the
//! directory is scratch, rebuilt by the preload.
//!
//! RocksDB itself is Debian's `librocksdb-dev` (7.8.3), linked through the
//! `rocksdb` crate 0.20.1 (`.cargo/config.toml` points `librocksdb-sys` at it;
//! `scripts/setup.d/50-rocksdb.sh` installs it). Nothing is compiled from
//! RocksDB's sources.
#![deny(missing_docs)]

pub mod cli;
pub mod protocol;

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rocksdb::{Options, WriteBatch, WriteOptions, DB};
use skq_proto::db::{key_of, KEY_LEN};
use skq_proto::zippydb::ZippyDb;

pub use protocol::DbProtocol;

/// Default database directory (memory-backed).
pub const DEFAULT_DB: &str = "/dev/shm/skq-rocksdb";

/// The options every open uses: create when missing, no compression and
/// memory-mapped reads (the files are in memory: a lookup reads the mapped
/// block instead of copying it into RocksDB's small default block cache,
/// which a database of this size would thrash), both cores for background
/// work.
pub fn options(create: bool) -> Options {
    let mut o = Options::default();
    o.create_if_missing(create);
    o.set_allow_mmap_reads(true);
    o.set_compression_type(rocksdb::DBCompressionType::None);
    o.increase_parallelism(2);
    o
}

/// Opens an existing database; the error says to preload one.
pub fn open(path: &Path) -> anyhow::Result<DB> {
    DB::open(&options(false), path).with_context(|| {
        format!(
            "opening RocksDB at {} (build one with `skq db preload --db {}`)",
            path.display(),
            path.display()
        )
    })
}

/// The value stored for record `index` when preloading: `len` bytes derived
/// from the index, so a reader can tell whose value it holds.
pub fn preload_value(index: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    let tag = index.to_le_bytes();
    out.extend((0..len).map(|i| tag[i % 8] ^ (i as u8)));
}

/// What a preload did.
#[derive(Clone, Copy, Debug)]
pub struct Preloaded {
    /// Records written.
    pub keys: u64,
    /// Key and value bytes written.
    pub bytes: u64,
    /// Wall-clock seconds.
    pub secs: f64,
}

/// Replaces whatever is at `path` with a database of `keys` records
/// (ZippyDB value sizes drawn from `seed`), calling `progress(done)` every
/// batch. The memtable is flushed and the whole key range compacted before
/// returning: the data survives without a write-ahead log, and a server
/// opening the database finds no compaction left to do (otherwise every
/// server start would resume it in the background, taking a CPU from the
/// measurement for seconds).
pub fn preload(
    path: &Path,
    keys: u64,
    seed: u64,
    mut progress: impl FnMut(u64),
) -> anyhow::Result<Preloaded> {
    let started = Instant::now();
    if path.exists() {
        DB::destroy(&options(false), path)
            .with_context(|| format!("removing the old database at {}", path.display()))?;
    }
    let db = DB::open(&options(true), path)
        .with_context(|| format!("creating RocksDB at {}", path.display()))?;
    let z = ZippyDb::new(keys.max(30), seed).map_err(anyhow::Error::msg)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut w = WriteOptions::default();
    w.disable_wal(true);
    let (mut key, mut value) = ([0u8; KEY_LEN], Vec::new());
    let mut bytes = 0u64;
    let mut i = 0u64;
    while i < keys {
        let mut batch = WriteBatch::default();
        let end = (i + 10_000).min(keys);
        for k in i..end {
            key_of(k, &mut key);
            preload_value(k, z.draw_value_len(&mut rng) as usize, &mut value);
            bytes += (KEY_LEN + value.len()) as u64;
            batch.put(key, &value);
        }
        db.write_opt(batch, &w)?;
        i = end;
        progress(i);
    }
    db.flush()?;
    db.compact_range(None::<&[u8]>, None::<&[u8]>);
    Ok(Preloaded {
        keys,
        bytes,
        secs: started.elapsed().as_secs_f64(),
    })
}
