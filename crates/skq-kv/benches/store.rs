//! Cost of one partition's hot operations on the Sphinx shape (30-byte keys, 200-byte
//! values, 10,000 keys, as `kv-profile.py`'s sphinx-ro and sphinx-wo mixes), in ns per
//! operation:
//!
//! * `get_hit`: `locate` + `record` of a present key, what a `get` does before its reply
//!   is written;
//! * `set_existing`: `store(Set)` over a present key, what an update does (the old
//!   version marked dead, the new one appended, the index entry pointed at it,
//!   compaction's step after the write);
//! * `key_hash`: the index hash of one 30-byte key;
//! * `get_hit_200k`: `get_hit` on a partition of 200,000 such keys (about 50 MB of
//!   records in 25 segments and an index of several MB), so that the index probe and the
//!   record read miss the core's caches, as they do in a server whose kernel work
//!   between two requests evicts them (docs/KV-PROFILE.md).
//!
//! Run: `flock /tmp/skq-measure.lock cargo bench -p skq-kv --bench store`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use skq_kv::protocol::StoreMode;
use skq_kv::store::{Partition, StoreOutcome};

const KEYS: usize = 10_000;
const KEY_LEN: usize = 30;
const VALUE_LEN: usize = 200;

fn make_keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut k = format!("key:{i:08}").into_bytes();
            k.resize(KEY_LEN, b'x');
            k
        })
        .collect()
}

fn filled(keys: &[Vec<u8>]) -> Partition {
    let mut p = Partition::new(64 << 20);
    let value = vec![b'v'; VALUE_LEN];
    for k in keys {
        assert_eq!(
            p.store(StoreMode::Set, k, 0, 0, &value, 1),
            StoreOutcome::Stored
        );
    }
    p
}

fn store(c: &mut Criterion) {
    let keys = make_keys(KEYS);
    // A fixed stride through the keys, so consecutive operations touch different records
    // (as random requests do) without a generator in the loop.
    let stride = 7_919;
    let mut g = c.benchmark_group("store");
    let mut p = filled(&keys);
    g.bench_function("key_hash", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + stride) % KEYS;
            black_box(p.key_hash(black_box(&keys[i])))
        })
    });
    g.bench_function("get_hit", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + stride) % KEYS;
            let loc = p.locate(&keys[i], None, 1).expect("present");
            black_box(p.record(loc).value.len())
        })
    });
    let value = vec![b'w'; VALUE_LEN];
    g.bench_function("set_existing", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + stride) % KEYS;
            black_box(p.store(StoreMode::Set, &keys[i], 0, 0, &value, 1))
        })
    });
    drop(p);
    let many = make_keys(200_000);
    let mut p = filled(&many);
    g.bench_function("get_hit_200k", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + stride) % many.len();
            let loc = p.locate(&many[i], None, 1).expect("present");
            black_box(p.record(loc).value.len())
        })
    });
    g.finish();
}

/// The memcached text protocol's parser on the Sphinx shapes: a `get` of one 30-byte key,
/// and a `set` of a 200-byte value (line and data block).
fn parse(c: &mut Criterion) {
    use skq_kv::protocol::{Limits, Parser};
    let key = make_keys(1).remove(0);
    let mut get = b"get ".to_vec();
    get.extend_from_slice(&key);
    get.extend_from_slice(b"\r\n");
    let mut set = b"set ".to_vec();
    set.extend_from_slice(&key);
    set.extend_from_slice(format!(" 0 0 {VALUE_LEN}\r\n").as_bytes());
    set.resize(set.len() + VALUE_LEN, b'v');
    set.extend_from_slice(b"\r\n");
    let mut parser = Parser::new(Limits::default());
    let mut g = c.benchmark_group("parse");
    g.bench_function("get_line", |b| {
        b.iter(|| black_box(parser.parse(black_box(&get))))
    });
    g.bench_function("set_line", |b| {
        b.iter(|| black_box(parser.parse(black_box(&set))))
    });
    g.finish();
}

criterion_group!(benches, store, parse);
criterion_main!(benches);
