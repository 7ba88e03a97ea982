//! Store semantics against memcached's documented behaviour.
use super::*;
use crate::arena::SEGMENT_SIZE;

fn part() -> Partition {
    Partition::new(4 * SEGMENT_SIZE)
}

fn val(p: &mut Partition, key: &str, now: u32) -> Option<Vec<u8>> {
    p.get(key.as_bytes(), now).map(|r| r.value.to_vec())
}

fn set(p: &mut Partition, key: &str, v: &str, now: u32) -> StoreOutcome {
    p.store(StoreMode::Set, key.as_bytes(), 0, 0, v.as_bytes(), now)
}

#[test]
fn set_add_replace() {
    let mut p = part();
    assert_eq!(
        p.store(StoreMode::Replace, b"k", 0, 0, b"x", 1),
        StoreOutcome::NotStored
    );
    assert_eq!(
        p.store(StoreMode::Add, b"k", 3, 0, b"a", 1),
        StoreOutcome::Stored
    );
    assert_eq!(
        p.store(StoreMode::Add, b"k", 0, 0, b"b", 1),
        StoreOutcome::NotStored
    );
    assert_eq!(val(&mut p, "k", 1).unwrap(), b"a");
    assert_eq!(p.get(b"k", 1).unwrap().meta.flags, 3);
    assert_eq!(
        p.store(StoreMode::Replace, b"k", 0, 0, b"c", 1),
        StoreOutcome::Stored
    );
    assert_eq!(val(&mut p, "k", 1).unwrap(), b"c");
    assert_eq!(p.stats().curr_items, 1);
    assert_eq!(p.stats().total_items, 2);
    assert_eq!(p.stats().bytes as usize, record_len(1, 1));
}

#[test]
fn append_prepend_keep_flags_and_expiry() {
    let mut p = part();
    assert_eq!(
        p.store(StoreMode::Append, b"k", 0, 0, b"x", 1),
        StoreOutcome::NotStored
    );
    assert_eq!(
        p.store(StoreMode::Prepend, b"k", 0, 0, b"x", 1),
        StoreOutcome::NotStored
    );
    p.store(StoreMode::Set, b"k", 9, 50, b"mid", 1);
    assert_eq!(
        p.store(StoreMode::Append, b"k", 1, 0, b">>", 1),
        StoreOutcome::Stored
    );
    assert_eq!(
        p.store(StoreMode::Prepend, b"k", 1, 0, b"<<", 1),
        StoreOutcome::Stored
    );
    let r = p.get(b"k", 1).unwrap();
    assert_eq!(
        (r.value, r.meta.flags, r.meta.exp_at),
        (&b"<<mid>>"[..], 9, 50)
    );
}

#[test]
fn cas_semantics() {
    let mut p = part();
    assert_eq!(
        p.store(StoreMode::Cas(1), b"k", 0, 0, b"x", 1),
        StoreOutcome::NotFound
    );
    set(&mut p, "k", "v1", 1);
    let c1 = p.get(b"k", 1).unwrap().meta.cas;
    assert_eq!(
        p.store(StoreMode::Cas(c1 + 1), b"k", 0, 0, b"no", 1),
        StoreOutcome::Exists
    );
    assert_eq!(
        p.store(StoreMode::Cas(c1), b"k", 0, 0, b"v2", 1),
        StoreOutcome::Stored
    );
    let c2 = p.get(b"k", 1).unwrap().meta.cas;
    assert_ne!(c1, c2, "every write gets a new unique");
    assert_eq!(
        p.store(StoreMode::Cas(c1), b"k", 0, 0, b"v3", 1),
        StoreOutcome::Exists
    );
    assert_eq!(val(&mut p, "k", 1).unwrap(), b"v2");
    // touch keeps the unique, as in memcached.
    assert!(p.touch(b"k", 100, 1));
    assert_eq!(p.get(b"k", 1).unwrap().meta.cas, c2);
}

#[test]
fn incr_decr_wrap_and_floor() {
    let mut p = part();
    assert_eq!(p.arith(b"n", true, 1, 1), ArithOutcome::NotFound);
    set(&mut p, "n", "18446744073709551614", 1);
    assert_eq!(p.arith(b"n", true, 1, 1), ArithOutcome::Value(u64::MAX));
    assert_eq!(
        p.arith(b"n", true, 2, 1),
        ArithOutcome::Value(1),
        "incr wraps at 2^64"
    );
    assert_eq!(
        p.arith(b"n", false, 5, 1),
        ArithOutcome::Value(0),
        "decr stops at 0"
    );
    set(&mut p, "n", "100", 1);
    assert_eq!(p.arith(b"n", false, 1, 1), ArithOutcome::Value(99));
    // memcached keeps the value's length, space-padded.
    assert_eq!(val(&mut p, "n", 1).unwrap(), b"99 ");
    assert_eq!(p.arith(b"n", true, 901, 1), ArithOutcome::Value(1000));
    assert_eq!(val(&mut p, "n", 1).unwrap(), b"1000");
    set(&mut p, "s", "12a", 1);
    assert_eq!(p.arith(b"s", true, 1, 1), ArithOutcome::NonNumeric);
    set(&mut p, "pad", "7  ", 1);
    assert_eq!(
        p.arith(b"pad", true, 1, 1),
        ArithOutcome::Value(8),
        "trailing spaces (memcached's padding) accepted"
    );
}

#[test]
fn expiry_relative_absolute_negative() {
    let started = 1_700_000_000;
    assert_eq!(exp_at(0, 5, started), 0);
    assert_eq!(exp_at(10, 5, started), 15);
    assert_eq!(exp_at(-1, 5, started), 1);
    assert_eq!(
        exp_at(REALTIME_MAXDELTA, 5, started),
        5 + REALTIME_MAXDELTA as u32
    );
    assert_eq!(exp_at(started + 100, 5, started), 101, "absolute unix time");
    assert_eq!(
        exp_at(started - 100, 5, started),
        1,
        "absolute time in the past"
    );
    let mut p = part();
    p.store(StoreMode::Set, b"k", 0, exp_at(10, 5, started), b"v", 5);
    assert!(val(&mut p, "k", 14).is_some());
    assert!(
        val(&mut p, "k", 15).is_none(),
        "dead at exactly now + exptime"
    );
    assert_eq!(p.stats().curr_items, 0, "dropped on access");
    p.store(StoreMode::Set, b"neg", 0, exp_at(-1, 5, started), b"v", 5);
    assert!(val(&mut p, "neg", 5).is_none());
    // gat extends, touch on missing fails.
    p.store(StoreMode::Set, b"t", 0, 10, b"v", 5);
    assert!(p.get_and_touch(b"t", 100, 5).is_some());
    assert!(val(&mut p, "t", 50).is_some());
    assert!(!p.touch(b"missing", 100, 5));
}

#[test]
fn flush_all_now_and_delayed() {
    let mut p = part();
    set(&mut p, "a", "1", 1);
    p.flush_all(0, 1);
    assert!(val(&mut p, "a", 1).is_none());
    set(&mut p, "b", "2", 1);
    assert_eq!(
        val(&mut p, "b", 1).unwrap(),
        b"2",
        "items set after the flush live"
    );
    p.flush_all(10, 2);
    assert!(
        val(&mut p, "b", 11).is_some(),
        "delayed flush not yet effective"
    );
    set(&mut p, "c", "3", 11);
    assert!(val(&mut p, "b", 12).is_none());
    assert!(
        val(&mut p, "c", 12).is_none(),
        "set before the flush time: flushed too"
    );
    set(&mut p, "d", "4", 12);
    assert!(val(&mut p, "d", 12).is_some());
}

#[test]
fn delete_and_replace_free_bytes() {
    let mut p = part();
    set(&mut p, "a", "1234", 1);
    assert!(p.delete(b"a", 1));
    assert!(!p.delete(b"a", 1));
    assert_eq!((p.stats().curr_items, p.stats().bytes), (0, 0));
}

#[test]
fn an_overwrite_keeps_the_counts_and_frees_the_old_version() {
    let mut p = part();
    set(&mut p, "a", "1234", 1);
    set(&mut p, "b", "xy", 1);
    assert_eq!(set(&mut p, "a", "123456", 1), StoreOutcome::Stored);
    assert_eq!(val(&mut p, "a", 1).unwrap(), b"123456");
    assert_eq!(val(&mut p, "b", 1).unwrap(), b"xy");
    let s = p.stats();
    assert_eq!((s.curr_items, s.total_items), (2, 3));
    assert_eq!(s.bytes as usize, record_len(1, 6) + record_len(1, 2));
    assert!(p.delete(b"a", 1));
    assert!(p.delete(b"b", 1));
    assert_eq!((p.stats().curr_items, p.stats().bytes), (0, 0));
}

#[test]
fn an_overwrite_whose_eviction_takes_the_old_version_counts_it_once() {
    // Two segments: `k` and two thirds of a segment in the first, two thirds in the
    // second; the new `k` fits in neither, so writing it evicts the first segment and
    // the old `k` with it.
    let mut p = Partition::new(2 * SEGMENT_SIZE);
    let third = vec![b'f'; SEGMENT_SIZE / 3];
    set(&mut p, "k", "old", 1);
    for f in ["f1", "f2", "f3", "f4"] {
        assert_eq!(
            p.store(StoreMode::Set, f.as_bytes(), 0, 0, &third, 1),
            StoreOutcome::Stored
        );
    }
    assert_eq!(
        p.store(StoreMode::Set, b"k", 0, 0, &third, 1),
        StoreOutcome::Stored
    );
    assert_eq!(p.get(b"k", 1).unwrap().value, &third[..]);
    assert!(p.get(b"f1", 1).is_none() && p.get(b"f2", 1).is_none());
    assert!(p.get(b"f3", 1).is_some() && p.get(b"f4", 1).is_some());
    let s = p.stats();
    assert_eq!((s.curr_items, s.evictions), (3, 3));
    let (f, k) = (record_len(2, third.len()), record_len(1, third.len()));
    assert_eq!(s.bytes as usize, 2 * f + k);
}

#[test]
fn eviction_keeps_memory_under_limit_and_serving() {
    let limit = 3 * SEGMENT_SIZE;
    let mut p = Partition::new(limit);
    let value = vec![b'v'; 10_000];
    let n = 2000; // ~20 MB written into a 6 MiB partition
    for i in 0..n {
        assert_eq!(
            p.store(
                StoreMode::Set,
                format!("key{i}").as_bytes(),
                0,
                0,
                &value,
                1
            ),
            StoreOutcome::Stored
        );
        assert!(p.stats().allocated as usize <= limit);
        assert!(p.stats().bytes as usize <= limit);
    }
    let s = p.stats();
    assert!(s.evictions > 0);
    assert_eq!(
        s.curr_items + s.evictions,
        n as u64,
        "every item is either live or was evicted"
    );
    // FIFO: the newest items survive, the oldest are gone.
    assert!(p.get(format!("key{}", n - 1).as_bytes(), 1).is_some());
    assert!(p.get(b"key0", 1).is_none());
    // The index agrees with the arena: every counted item can be read.
    let live = (0..n)
        .filter(|i| p.get(format!("key{i}").as_bytes(), 1).is_some())
        .count();
    assert_eq!(live as u64, p.stats().curr_items);
}

#[test]
fn updates_to_a_few_keys_reuse_dead_segments() {
    // 64 MiB allowed, 10 keys of 1 KB live: the log of their updates stays a few
    // segments long instead of writing fresh memory up to the limit.
    let mut p = Partition::new(32 * SEGMENT_SIZE);
    let n = 20_000; // ~20 MB of updates: ten segments' worth
    for i in 0..n {
        let value = vec![b'a' + (i % 26) as u8; 1000];
        let key = format!("key{}", i % 10);
        assert_eq!(
            p.store(StoreMode::Set, key.as_bytes(), 0, 0, &value, 1),
            StoreOutcome::Stored
        );
    }
    let s = p.stats();
    assert!(
        s.allocated as usize <= 3 * SEGMENT_SIZE,
        "{} bytes of segments for 10 live items",
        s.allocated
    );
    assert_eq!(
        (s.curr_items, s.evictions, s.total_items),
        (10, 0, n as u64)
    );
    for k in 0..10 {
        let last = n - 10 + k; // the last write of key{k}
        let want = vec![b'a' + (last % 26) as u8; 1000];
        assert_eq!(val(&mut p, &format!("key{k}"), 1), Some(want));
    }
}

#[test]
fn a_live_item_in_the_oldest_segment_is_kept_until_evicted() {
    // One item written once, then updates to other keys: its segment is never
    // retired as dead; with room to spare it stays readable, and when the arena is
    // full it leaves by eviction, counted.
    let mut p = Partition::new(3 * SEGMENT_SIZE);
    set(&mut p, "old", "kept", 1);
    let value = vec![b'v'; 1000];
    let mut i = 0;
    while p.stats().allocated < 3 * SEGMENT_SIZE as u64 {
        p.store(
            StoreMode::Set,
            format!("k{}", i % 10).as_bytes(),
            0,
            0,
            &value,
            1,
        );
        i += 1;
    }
    assert_eq!(val(&mut p, "old", 1), Some(b"kept".to_vec()));
    assert_eq!(p.stats().evictions, 0);
    for j in 0..6000 {
        p.store(
            StoreMode::Set,
            format!("k{}", j % 10).as_bytes(),
            0,
            0,
            &value,
            1,
        );
    }
    assert_eq!(val(&mut p, "old", 1), None);
    assert_eq!(
        p.stats().evictions,
        1,
        "only the old item was live in what was evicted"
    );
    assert_eq!(p.stats().curr_items, 10);
    assert!(p.stats().allocated as usize <= 3 * SEGMENT_SIZE);
}

#[test]
fn record_larger_than_segment_is_refused() {
    let mut p = part();
    let huge = vec![0u8; SEGMENT_SIZE];
    assert_eq!(
        p.store(StoreMode::Set, b"k", 0, 0, &huge, 1),
        StoreOutcome::TooLarge
    );
    let big = vec![0u8; 1 << 20];
    assert_eq!(
        p.store(StoreMode::Set, b"k", 0, 0, &big, 1),
        StoreOutcome::Stored
    );
}

#[test]
fn hash_collisions_chain() {
    // Force two keys under one hash by moving their entries into one collision list.
    let mut p = part();
    set(&mut p, "a", "1", 1);
    set(&mut p, "b", "2", 1);
    let (ha, hb) = (p.key_hash(b"a"), p.key_hash(b"b"));
    let loc_b = p.index.one.remove(&hb).unwrap();
    let loc_a = p.index.one.remove(&ha).unwrap();
    p.index.many.insert(ha, vec![loc_a, loc_b]);
    assert_eq!(p.lookup(ha, b"a"), Some(loc_a));
    assert_eq!(p.lookup(ha, b"b"), Some(loc_b));
    assert_eq!(p.lookup(ha, b"c"), None);
    assert!(p.index.points_at(ha, loc_a) && p.index.points_at(ha, loc_b));
    // An overwrite of one colliding key repoints its own entry only.
    let moved = Loc { seg: 9, off: 9 };
    p.repoint(ha, loc_b, moved);
    assert_eq!(p.index.many[&ha], vec![loc_a, moved]);
    p.repoint(ha, moved, loc_b);
    // A third key under the same hash joins the list; a lone entry moves to a list.
    let loc_c = Loc { seg: 0, off: 1 };
    p.index.insert(ha, loc_c);
    assert_eq!(p.index.many[&ha], vec![loc_a, loc_b, loc_c]);
    assert!(p.index.remove(ha, loc_c));
    assert!(p.remove_entry(ha, loc_a));
    // Down to one key: the entry is a plain one again, and the list is gone.
    assert_eq!(p.index.one.get(&ha), Some(&loc_b));
    assert!(p.index.many.is_empty());
    assert!(!p.index.remove(ha, loc_a));
    let hd = ha ^ 1;
    p.index.insert(hd, loc_c);
    p.index.insert(hd, loc_a);
    assert_eq!(p.index.many[&hd], vec![loc_c, loc_a]);
    assert_eq!(p.index.one.get(&hd), None);
}

/// Random sets, appends, deletes and reads over 64 keys whose hashes keep only 2 bits (4
/// distinct hashes, so nearly every key shares its hash with 15 others), in a partition
/// small enough to evict, against a map of what was last written: a key reads back its
/// last value or, once evicted, nothing, never an older value or another key's;
/// `curr_items` and `bytes` always equal what can be read.
#[test]
fn colliding_keys_read_back_their_own_latest_values() {
    for seed in [1u64, 7, 42] {
        let mut p = Partition::new(2 * SEGMENT_SIZE);
        p.hasher.mask = Some(0b11);
        let mut pick = picks(seed);
        let mut last: std::collections::HashMap<String, Vec<u8>> = Default::default();
        for step in 0..6_000 {
            let key = format!("key{}", pick(64));
            let len = 1 + pick(12_000);
            let value: Vec<u8> = (0..len).map(|i| b'a' + ((step + i) % 26) as u8).collect();
            match pick(10) {
                0 => {
                    p.delete(key.as_bytes(), 1);
                    last.remove(&key);
                }
                1 if p.get(key.as_bytes(), 1).is_some() => {
                    let tail = b"+tail";
                    let out = p.store(StoreMode::Append, key.as_bytes(), 0, 0, tail, 1);
                    assert_eq!(out, StoreOutcome::Stored);
                    last.get_mut(&key)
                        .expect("readable keys were written")
                        .extend(tail);
                }
                _ => {
                    let out = p.store(StoreMode::Set, key.as_bytes(), 0, 0, &value, 1);
                    assert_eq!(out, StoreOutcome::Stored);
                    last.insert(key.clone(), value);
                }
            }
            if step % 97 == 0 {
                let (mut items, mut bytes) = (0u64, 0u64);
                for k in 0..64 {
                    let key = format!("key{k}");
                    if let Some(r) = p.get(key.as_bytes(), 1) {
                        assert_eq!(
                            Some(&r.value.to_vec()),
                            last.get(&key),
                            "seed {seed}, {key}"
                        );
                        assert_eq!(r.key, key.as_bytes());
                        items += 1;
                        bytes += record_len(r.key.len(), r.value.len()) as u64;
                    }
                }
                let s = p.stats();
                assert_eq!(
                    (s.curr_items, s.bytes),
                    (items, bytes),
                    "seed {seed}, step {step}"
                );
            }
        }
        assert!(
            p.stats().evictions > 0,
            "the partition evicted (seed {seed})"
        );
        assert!(!p.index.many.is_empty(), "keys shared hashes (seed {seed})");
    }
}

#[test]
fn append_past_the_item_limit_is_not_stored() {
    // Limit 100 with key "k" and flags 0: 40 value bytes fit (protocol::item_size).
    let mut p = Partition::new(8 << 20).with_max_item(100);
    assert_eq!(
        p.store(StoreMode::Set, b"k", 0, 0, &[b'a'; 39], 1),
        StoreOutcome::Stored
    );
    let cas = p.last_cas();
    assert_eq!(
        p.store(StoreMode::Append, b"k", 0, 0, b"b", 1),
        StoreOutcome::Stored
    );
    assert_eq!(p.last_cas(), cas + 1);
    assert_eq!(
        p.store(StoreMode::Prepend, b"k", 0, 0, b"c", 1),
        StoreOutcome::NotStored
    );
    assert_eq!(val(&mut p, "k", 1).unwrap().len(), 40);
}

/// memcached gives every item a unique CAS from one counter; t/cas.t checks that two keys
/// never share one. Partitions (shards, thread-per-core workers) take theirs from blocks of
/// one process-wide counter, so two partitions never hand out the same unique, and each
/// partition's uniques keep rising (the flush mark depends on it).
#[test]
fn cas_uniques_are_unique_across_partitions() {
    let mut a = Partition::new(8 << 20);
    let mut b = Partition::new(8 << 20);
    let mut seen = std::collections::HashSet::new();
    let (mut last_a, mut last_b) = (0, 0);
    // Past one block each, interleaved, so blocks are taken while the other holds one.
    for i in 0..(CAS_BLOCK + 10) {
        let key = format!("k{i}");
        for (p, last) in [(&mut a, &mut last_a), (&mut b, &mut last_b)] {
            assert_eq!(
                p.store(StoreMode::Set, key.as_bytes(), 0, 0, b"v", 1),
                StoreOutcome::Stored
            );
            let cas = p.last_cas();
            assert!(
                cas > *last,
                "a partition's uniques rise: {cas} after {last}"
            );
            assert!(seen.insert(cas), "unique {cas} given twice");
            *last = cas;
        }
    }
    // A flush still covers exactly what was written before it.
    a.flush_all(0, 1);
    assert_eq!(val(&mut a, "k0", 1), None);
    assert_eq!(
        a.store(StoreMode::Set, b"after", 0, 0, b"v", 1),
        StoreOutcome::Stored
    );
    assert_eq!(val(&mut a, "after", 1).as_deref(), Some(&b"v"[..]));
    // A private partition numbers its own: the same uniques in every run.
    let mut p = Partition::new(8 << 20).with_private_cas();
    for want in 1..=3 {
        p.store(StoreMode::Set, b"k", 0, 0, b"v", 1);
        assert_eq!(p.last_cas(), want);
    }
}

/// Deterministic key picks for the churn tests (xorshift64).
fn picks(seed: u64) -> impl FnMut(usize) -> usize {
    let mut x = seed;
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    }
}

#[test]
fn updates_spread_over_many_keys_stay_compact() {
    // 20,000 keys of 200 bytes (~4.6 MB live) rewritten at random: without
    // compaction nearly every segment keeps a few live records and the arena grows
    // to ~20 segments; with it, the arena stays near twice the live data.
    let mut p = Partition::new(32 * SEGMENT_SIZE);
    let keys = 20_000;
    let mut pick = picks(0x9e37_79b9_7f4a_7c15);
    let mut last = vec![0u32; keys];
    let writes = 200_000u32;
    for k in 0..keys {
        let v = format!("{:0200}", 0);
        assert_eq!(set(&mut p, &format!("key{k}"), &v, 1), StoreOutcome::Stored);
    }
    let mut most = 0;
    for w in 1..=writes {
        let k = pick(keys);
        last[k] = w;
        let v = format!("{w:0200}");
        assert_eq!(set(&mut p, &format!("key{k}"), &v, 1), StoreOutcome::Stored);
        most = most.max(p.stats().allocated);
    }
    let s = p.stats();
    let bound = (COMPACT_RATIO as u64) * s.bytes + (COMPACT_SLACK as u64 + 2) * SEGMENT_SIZE as u64;
    assert!(
        most <= bound,
        "{most} bytes of segments at most for {} live bytes (bound {bound})",
        s.bytes
    );
    assert_eq!(
        (s.curr_items, s.evictions, s.total_items),
        (keys as u64, 0, keys as u64 + u64::from(writes))
    );
    for (k, w) in last.iter().enumerate() {
        assert_eq!(
            val(&mut p, &format!("key{k}"), 1),
            Some(format!("{w:0200}").into_bytes()),
            "key{k}"
        );
    }
}

#[test]
fn compaction_moves_items_unchanged_and_drops_expired_ones() {
    let mut p = Partition::new(32 * SEGMENT_SIZE);
    // In the first segment: items to keep (flags and CAS to compare), items that
    // expire at second 5, and items written before a flush.
    let mut kept = Vec::new();
    for i in 0..100u32 {
        let key = format!("keep{i}");
        p.store(StoreMode::Set, key.as_bytes(), i, 0, b"kept value", 1);
        let r = p.get(key.as_bytes(), 1).expect("just stored");
        kept.push((key, r.meta));
        p.store(
            StoreMode::Set,
            format!("short{i}").as_bytes(),
            0,
            5,
            b"x",
            1,
        );
    }
    let first = p.locate(b"keep0", None, 1).expect("stored").seg;
    // Churn on 20,000 other keys at second 10, past the short items' expiry.
    let mut pick = picks(7);
    for _ in 0..200_000 {
        let k = pick(20_000);
        set(&mut p, &format!("churn{k}"), &format!("{k:0200}"), 10);
    }
    for (key, meta) in &kept {
        let loc = p.locate(key.as_bytes(), None, 10).expect("kept");
        assert_ne!(loc.seg, first, "{key} was moved out of the first segment");
        let r = p.record(loc);
        assert_eq!((r.meta, r.value), (*meta, &b"kept value"[..]), "{key}");
    }
    assert!(
        p.arena.scan_oldest(Loc { seg: first, off: 0 }).is_none(),
        "the first segment retired"
    );
    let s = p.stats();
    let churned = (0..20_000)
        .filter(|k| p.get(format!("churn{k}").as_bytes(), 10).is_some())
        .count() as u64;
    // Compaction unlinked the expired items (none was read after its expiry).
    assert_eq!(s.curr_items, 100 + churned);
    assert_eq!(s.evictions, 0);
    for i in 0..100 {
        assert_eq!(val(&mut p, &format!("short{i}"), 10), None);
    }
}

#[test]
fn a_cold_segment_moves_only_when_the_arena_is_far_over_its_target() {
    // Cold items that fill the first segment and are never rewritten, then churn
    // behind them: their segment is left alone while the arena is within twice its
    // target (moving it would free little), then moved once so that compaction
    // reaches the sparse segments behind it, and the arena stays bounded.
    let mut p = Partition::new(32 * SEGMENT_SIZE);
    let mut cold = 0;
    while p.stats().allocated <= SEGMENT_SIZE as u64 {
        set(&mut p, &format!("cold{cold}"), &format!("{cold:0200}"), 1);
        cold += 1;
    }
    let first = p.locate(b"cold0", None, 1).expect("stored").seg;
    let target = |p: &Partition| {
        COMPACT_RATIO as u64 * p.stats().bytes + (COMPACT_SLACK * SEGMENT_SIZE) as u64
    };
    let (mut moved_at, mut most) = (None, 0);
    let mut pick = picks(11);
    for _ in 0..300_000 {
        let k = pick(20_000);
        set(&mut p, &format!("churn{k}"), &format!("{k:0200}"), 1);
        let s = p.stats();
        most = most.max(s.allocated);
        if moved_at.is_none() && p.locate(b"cold0", None, 1).expect("kept").seg != first {
            moved_at = Some((s.allocated, target(&p)));
        }
    }
    let (allocated, target_then) = moved_at.expect("the cold segment was moved");
    assert!(
        allocated > 2 * target_then - 2 * SEGMENT_SIZE as u64,
        "moved at {allocated} bytes held, target {target_then}"
    );
    // Twice the target, plus what fills while the dense segment moves (its own
    // records and the writes meanwhile: about one segment) and rotation's rounding.
    let bound = 2 * target(&p) + 4 * SEGMENT_SIZE as u64;
    assert!(most <= bound, "{most} bytes held at most, bound {bound}");
    for c in 0..cold - 1 {
        assert_eq!(
            val(&mut p, &format!("cold{c}"), 1),
            Some(format!("{c:0200}").into_bytes())
        );
    }
    assert_eq!(p.stats().evictions, 0);
}
