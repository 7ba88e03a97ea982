//! One partition of the cache: a hash index over a log-structured [`Arena`], with
//! memcached's item semantics (CAS, add/replace/append/prepend, incr/decr, touch, expiry,
//! flush_all). Single-threaded: the shared architecture puts each partition behind its own
//! lock, the thread-per-core architecture gives each worker one.
//!
//! Time is an argument (`now`, server-relative seconds, always ≥ 1), never read here.
//! An item is dead when its `exp_at` is non-zero and `now >= exp_at`, or when it was
//! written before a `flush_all` took effect (its CAS is at most the flush mark).
//! Dead items are dropped lazily, on access or when their segment is evicted.
//!
//! CAS uniques are unique across every partition of the process, as memcached's single
//! counter makes them (clients, and memcached's t/cas.t, compare the uniques of different
//! keys): a partition takes them [`CAS_BLOCK`] at a time from one process-wide counter, so
//! the shared atomic is touched once per [`CAS_BLOCK`] writes and a partition's own uniques
//! still rise, which the flush mark relies on.
//!
//! The index maps a 64-bit hash of the key to the record's [`Loc`]; the key itself lives
//! only in the arena, so a lookup compares the stored key (a hash that two live keys
//! share keeps their locations in a side table, see `Index`). The hash is foldhash's,
//! seeded at random per partition, so keys chosen to collide in one process do not
//! collide in another; an operation hashes its key once.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::arena::{record_len, Arena, Loc, Meta, Record, ValueRef, HEADER, SEGMENT_SIZE};
use crate::protocol::{item_size, Limits, StoreMode, REALTIME_MAXDELTA};

/// Outcome of a storage command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOutcome {
    /// `STORED`.
    Stored,
    /// `NOT_STORED` (add on present, replace/append/prepend on absent).
    NotStored,
    /// `EXISTS` (cas mismatch).
    Exists,
    /// `NOT_FOUND` (cas on absent).
    NotFound,
    /// `SERVER_ERROR object too large for cache` (record larger than a segment).
    TooLarge,
}

impl StoreOutcome {
    /// The reply line.
    pub fn reply(self) -> &'static [u8] {
        match self {
            StoreOutcome::Stored => b"STORED\r\n",
            StoreOutcome::NotStored => b"NOT_STORED\r\n",
            StoreOutcome::Exists => b"EXISTS\r\n",
            StoreOutcome::NotFound => b"NOT_FOUND\r\n",
            StoreOutcome::TooLarge => b"SERVER_ERROR object too large for cache\r\n",
        }
    }
}

/// Outcome of incr/decr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOutcome {
    /// The new value.
    Value(u64),
    /// No such item.
    NotFound,
    /// The item's value is not a decimal number.
    NonNumeric,
}

/// Counters a partition keeps about its items.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartStats {
    /// Live items in the index (some may be expired but not yet dropped).
    pub curr_items: u64,
    /// Items stored since start.
    pub total_items: u64,
    /// Bytes of live records (header + key + value).
    pub bytes: u64,
    /// Unexpired items dropped because their segment was evicted.
    pub evictions: u64,
    /// Segment memory allocated.
    pub allocated: u64,
}

/// Identity hasher: index keys are already 64-bit hashes.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys are hashed");
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// The index's key hash: foldhash, seeded at random per partition. Tests can keep only
/// a few bits of it, so that keys collide and the index's collision table is exercised.
#[derive(Default)]
struct KeyHasher {
    state: foldhash::fast::RandomState,
    #[cfg(test)]
    mask: Option<u64>,
}

impl KeyHasher {
    fn hash(&self, key: &[u8]) -> u64 {
        let h = self.state.hash_one(key);
        #[cfg(test)]
        let h = self.mask.map_or(h, |m| h & m);
        h
    }
}

/// The partition's index: key hash → the record's location. A hash almost always
/// belongs to one live key, and such a hash's entry is 16 bytes (hash and location) in
/// `one`; the rare hash shared by two or more live keys (a full 64-bit collision) has
/// its locations in `many` instead, and none in `one`. An entry able to hold a list took
/// 32 bytes; the common entry is half that, and so is the table a lookup probes.
#[derive(Default)]
struct Index {
    one: IdMap<Loc>,
    many: IdMap<Vec<Loc>>,
}

impl Index {
    /// The location under `h` that `is_key` accepts.
    fn find(&self, h: u64, is_key: impl Fn(Loc) -> bool) -> Option<Loc> {
        if let Some(&l) = self.one.get(&h) {
            return is_key(l).then_some(l);
        }
        if self.many.is_empty() {
            return None;
        }
        self.many.get(&h)?.iter().copied().find(|&l| is_key(l))
    }

    /// Whether the entry for `h` includes `loc`.
    fn points_at(&self, h: u64, loc: Loc) -> bool {
        match self.one.get(&h) {
            Some(&l) => l == loc,
            None => self.many.get(&h).is_some_and(|v| v.contains(&loc)),
        }
    }

    /// Adds `h → loc` for a key the index does not hold.
    fn insert(&mut self, h: u64, loc: Loc) {
        if let Some(other) = self.one.remove(&h) {
            self.many.insert(h, vec![other, loc]);
        } else if let Some(v) = self.many.get_mut(&h) {
            v.push(loc);
        } else {
            self.one.insert(h, loc);
        }
    }

    /// Removes `h → loc`; whether it was there.
    fn remove(&mut self, h: u64, loc: Loc) -> bool {
        if self.one.get(&h) == Some(&loc) {
            self.one.remove(&h);
            return true;
        }
        let Some(v) = self.many.get_mut(&h) else {
            return false;
        };
        let before = v.len();
        v.retain(|l| *l != loc);
        let removed = v.len() < before;
        if v.len() == 1 {
            let only = v[0];
            self.many.remove(&h);
            self.one.insert(h, only);
        }
        removed
    }

    /// Points `h → from` at `to` instead.
    fn repoint(&mut self, h: u64, from: Loc, to: Loc) {
        if let Some(l) = self.one.get_mut(&h).filter(|l| **l == from) {
            *l = to;
        } else if let Some(l) = self
            .many
            .get_mut(&h)
            .and_then(|v| v.iter_mut().find(|l| **l == from))
        {
            *l = to;
        } else {
            debug_assert!(false, "repointing an entry the index does not hold");
        }
    }

    /// Hashes indexed.
    fn len(&self) -> usize {
        self.one.len() + self.many.len()
    }

    /// Bytes of table the index holds (entries and one control byte each), lists aside.
    fn table_bytes(&self) -> usize {
        self.one.capacity() * (std::mem::size_of::<(u64, Loc)>() + 1)
            + self.many.capacity() * (std::mem::size_of::<(u64, Vec<Loc>)>() + 1)
    }
}

/// Converts a protocol exptime into a server-relative expiry second, as memcached does:
/// 0 = never; negative = already expired; up to 30 days = offset from `now`; larger =
/// unix time, which is in the past (expired) if not after the server's start.
/// `started_unix` is the unix second at which server-relative time was 1.
pub fn exp_at(exptime: i64, now: u32, started_unix: i64) -> u32 {
    const EXPIRED: u32 = 1;
    if exptime == 0 {
        0
    } else if exptime < 0 {
        EXPIRED
    } else if exptime > REALTIME_MAXDELTA {
        if exptime <= started_unix {
            EXPIRED
        } else {
            u32::try_from(exptime - started_unix + 1).unwrap_or(u32::MAX)
        }
    } else {
        now.saturating_add(exptime as u32)
    }
}

/// CAS uniques a partition takes from [`NEXT_CAS_BLOCK`] at a time.
pub const CAS_BLOCK: u64 = 4096;

/// The first unique of the next block any partition takes (uniques start at 1; 0 is
/// "no CAS" in the protocol).
static NEXT_CAS_BLOCK: AtomicU64 = AtomicU64::new(1);

/// One partition.
pub struct Partition {
    index: Index,
    /// The index's key hash (see [`Self::key_hash`]).
    hasher: KeyHasher,
    arena: Arena,
    /// The next unique to give, and the end (exclusive) of the block it comes from.
    next_cas: u64,
    cas_end: u64,
    /// The unique given to the most recent write (0 before any).
    last_cas: u64,
    /// Items with a CAS at most this were written before the last effective flush.
    flushed_below: u64,
    /// A delayed `flush_all` taking effect at this second.
    pending_flush: Option<u32>,
    stats: PartStats,
    /// Item size limit (memcached's `-I`, counted by [`item_size`]) that append and
    /// prepend must respect; the parser enforces it for every other write.
    max_item: usize,
    /// Where compaction goes on in the oldest segment (see [`Self::compact_step`]).
    compact_at: Option<Loc>,
}

/// Records of the oldest segment [`Partition::compact_step`] looks at per write: the
/// work a write adds is bounded by this (dead records cost a header read each). With
/// records of one size, a segment of N records at most half live is done after N/32
/// writes, which with the moves fill at most N/32 + N/2 records: compaction frees a
/// segment while filling about half of one, so it keeps ahead of the writes.
pub const COMPACT_BATCH: usize = 32;

/// Bytes of records one [`Partition::compact_step`] moves at most (it always moves at
/// least the record it reaches, so a large item moves in one step of its own): the
/// copying a write adds stays about as large as the write itself.
pub const COMPACT_BYTES: usize = 16 << 10;

/// Compaction runs while the arena holds more than this many times its live bytes,
/// plus [`COMPACT_SLACK`] segments.
pub const COMPACT_RATIO: usize = 2;

/// Segments the arena may hold beyond [`COMPACT_RATIO`] × its live bytes before
/// compaction starts: a small cache is not compacted at all.
pub const COMPACT_SLACK: usize = 2;

impl Partition {
    /// A partition whose item data never exceeds `limit_bytes` (rounded down to whole
    /// segments; at least one segment).
    pub fn new(limit_bytes: usize) -> Partition {
        Partition {
            index: Index::default(),
            hasher: KeyHasher::default(),
            arena: Arena::new((limit_bytes / SEGMENT_SIZE).max(1)),
            next_cas: 0,
            cas_end: 0,
            last_cas: 0,
            flushed_below: 0,
            pending_flush: None,
            stats: PartStats::default(),
            max_item: Limits::default().max_item_size,
            compact_at: None,
        }
    }

    /// Sets the item size limit append and prepend respect (default: 1 MiB).
    pub fn with_max_item(mut self, max_item_size: usize) -> Partition {
        self.max_item = max_item_size;
        self
    }

    /// Numbers this partition's CAS uniques 1, 2, 3, ... on its own instead of taking blocks
    /// of the process-wide counter: for a partition that is alone in its cache and must
    /// give the same uniques whatever other partitions the process holds (the fuzz body
    /// compares two runs of one input).
    pub fn with_private_cas(mut self) -> Partition {
        self.next_cas = self.last_cas + 1;
        self.cas_end = u64::MAX;
        self
    }

    /// The CAS unique given to the most recent write (0 before any).
    pub fn last_cas(&self) -> u64 {
        self.last_cas
    }

    /// A new CAS unique, larger than every one this partition gave before and unique in the
    /// process.
    fn new_cas(&mut self) -> u64 {
        if self.next_cas == self.cas_end {
            // Relaxed: only uniqueness matters, and fetch_add gives it in any order.
            self.next_cas = NEXT_CAS_BLOCK.fetch_add(CAS_BLOCK, Ordering::Relaxed);
            self.cas_end = self.next_cas + CAS_BLOCK;
        }
        self.last_cas = self.next_cas;
        self.next_cas += 1;
        self.last_cas
    }

    /// The 64-bit hash of `key` the index is keyed by (seeded per partition).
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash(key)
    }

    /// Current counters.
    pub fn stats(&self) -> PartStats {
        PartStats {
            allocated: self.arena.allocated() as u64,
            ..self.stats
        }
    }

    /// Estimated index bytes per stored item (hash table entry + control byte at the
    /// table's current load) plus the record header.
    pub fn overhead_per_item(&self) -> f64 {
        let items = self.index.len().max(1) as f64;
        self.index.table_bytes() as f64 / items + HEADER as f64
    }

    /// Applies a pending delayed flush once its second has come.
    fn tick(&mut self, now: u32) {
        if self.pending_flush.is_some_and(|at| now >= at) {
            self.pending_flush = None;
            self.flushed_below = self.last_cas;
        }
    }

    /// `flush_all [delay]`: invalidate every item now, or at `now + delay`.
    pub fn flush_all(&mut self, delay: u32, now: u32) {
        self.tick(now);
        if delay == 0 {
            self.flushed_below = self.last_cas;
            self.pending_flush = None;
        } else {
            self.pending_flush = Some(now.saturating_add(delay));
        }
    }

    fn is_live(&self, meta: &Meta, now: u32) -> bool {
        meta.cas > self.flushed_below && (meta.exp_at == 0 || now < meta.exp_at)
    }

    /// Finds the live record for `key`, dropping it from the index if it is dead.
    fn find(&mut self, key: &[u8], now: u32) -> Option<Loc> {
        self.find_hashed(self.key_hash(key), key, now)
    }

    /// [`Self::find`] with the key's hash already computed.
    fn find_hashed(&mut self, h: u64, key: &[u8], now: u32) -> Option<Loc> {
        self.tick(now);
        let loc = self.lookup(h, key)?;
        let meta = self.arena.get(loc).meta;
        if self.is_live(&meta, now) {
            Some(loc)
        } else {
            self.unlink(h, loc);
            None
        }
    }

    fn lookup(&self, h: u64, key: &[u8]) -> Option<Loc> {
        self.index.find(h, |l| self.arena.get(l).key == key)
    }

    /// Removes the index entry `h → loc` if present and tells the arena its record is
    /// dead (so a segment of dead records is reused); the counters are the caller's job.
    fn remove_entry(&mut self, h: u64, loc: Loc) -> bool {
        let removed = self.index.remove(h, loc);
        if removed {
            self.arena.dead(loc);
        }
        removed
    }

    /// Removes the index entry `h → loc` (if present) and updates the counters.
    fn unlink(&mut self, h: u64, loc: Loc) -> bool {
        let len = {
            let r = self.arena.get(loc);
            record_len(r.key.len(), r.value.len())
        };
        let removed = self.remove_entry(h, loc);
        if removed {
            self.stats.curr_items -= 1;
            self.stats.bytes -= len as u64;
        }
        removed
    }

    /// Reads a live item.
    pub fn get(&mut self, key: &[u8], now: u32) -> Option<Record<'_>> {
        let loc = self.find(key, now)?;
        Some(self.arena.get(loc))
    }

    /// Where the live item `key` is, with a new expiry set first when `touch` says so
    /// (`gat`); read it with [`Self::record`] and [`Self::value_ref`].
    pub fn locate(&mut self, key: &[u8], touch: Option<u32>, now: u32) -> Option<Loc> {
        let loc = self.find(key, now)?;
        if let Some(exp_at) = touch {
            self.arena.set_exp(loc, exp_at);
        }
        Some(loc)
    }

    /// The record at `loc` (from [`Self::locate`], before any write to this partition).
    pub fn record(&self, loc: Loc) -> Record<'_> {
        self.arena.get(loc)
    }

    /// The value at `loc`, shared with the store instead of copied (see [`ValueRef`]).
    pub fn value_ref(&self, loc: Loc) -> ValueRef {
        self.arena.value_ref(loc)
    }

    /// `gat`: sets a new expiry on a live item and reads it.
    pub fn get_and_touch(&mut self, key: &[u8], exp_at: u32, now: u32) -> Option<Record<'_>> {
        let loc = self.find(key, now)?;
        self.arena.set_exp(loc, exp_at);
        Some(self.arena.get(loc))
    }

    /// `touch`: sets a new expiry on a live item.
    pub fn touch(&mut self, key: &[u8], exp_at: u32, now: u32) -> bool {
        self.get_and_touch(key, exp_at, now).is_some()
    }

    /// `delete`.
    pub fn delete(&mut self, key: &[u8], now: u32) -> bool {
        let h = self.key_hash(key);
        match self.find_hashed(h, key, now) {
            Some(loc) => self.unlink(h, loc),
            None => false,
        }
    }

    /// Storage commands. `exp_at` is already server-relative (see [`exp_at`]).
    pub fn store(
        &mut self,
        mode: StoreMode,
        key: &[u8],
        flags: u32,
        exp_at: u32,
        data: &[u8],
        now: u32,
    ) -> StoreOutcome {
        let h = self.key_hash(key);
        let old = self.find_hashed(h, key, now);
        let old_rec = old.map(|l| self.arena.get(l));
        match (mode, old_rec) {
            (StoreMode::Add, Some(_)) => return StoreOutcome::NotStored,
            (StoreMode::Replace | StoreMode::Append | StoreMode::Prepend, None) => {
                return StoreOutcome::NotStored
            }
            (StoreMode::Cas(_), None) => return StoreOutcome::NotFound,
            (StoreMode::Cas(c), Some(r)) if r.meta.cas != c => return StoreOutcome::Exists,
            _ => {}
        }
        if let (StoreMode::Append | StoreMode::Prepend, Some(r)) = (mode, old_rec) {
            // As in memcached, growing an item past the limit is NOT_STORED.
            if item_size(key.len(), r.meta.flags, r.value.len() + data.len()) > self.max_item {
                return StoreOutcome::NotStored;
            }
        }
        let outcome = match (mode, old_rec) {
            (StoreMode::Append, Some(r)) => {
                let (old_value, meta) = (r.value.to_vec(), r.meta);
                self.write(h, old, key, meta.flags, meta.exp_at, &[&old_value, data])
            }
            (StoreMode::Prepend, Some(r)) => {
                let (old_value, meta) = (r.value.to_vec(), r.meta);
                self.write(h, old, key, meta.flags, meta.exp_at, &[data, &old_value])
            }
            _ => self.write(h, old, key, flags, exp_at, &[data]),
        };
        self.compact_step(now);
        outcome
    }

    /// `incr`/`decr`: incr wraps at 2^64, decr stops at 0 (memcached semantics).
    pub fn arith(&mut self, key: &[u8], incr: bool, delta: u64, now: u32) -> ArithOutcome {
        let h = self.key_hash(key);
        let Some(loc) = self.find_hashed(h, key, now) else {
            return ArithOutcome::NotFound;
        };
        let r = self.arena.get(loc);
        let Some(cur) = parse_counter(r.value) else {
            return ArithOutcome::NonNumeric;
        };
        let new = if incr {
            cur.wrapping_add(delta)
        } else {
            cur.saturating_sub(delta)
        };
        let meta = r.meta;
        // As memcached 1.6.18: a result no longer than the old value keeps the value's
        // length, padded with spaces (`10` decremented by 1 reads `9 `).
        let mut text = new.to_string().into_bytes();
        if text.len() < r.value.len() {
            text.resize(r.value.len(), b' ');
        }
        let outcome = self.write(h, Some(loc), key, meta.flags, meta.exp_at, &[&text]);
        self.compact_step(now);
        match outcome {
            StoreOutcome::Stored => ArithOutcome::Value(new),
            // A counter always fits in a segment.
            _ => unreachable!("a 20-byte value always fits"),
        }
    }

    /// Whether the arena holds more than its target, [`COMPACT_RATIO`] × the live
    /// bytes plus [`COMPACT_SLACK`] segments, and has room for compaction's appends
    /// without an eviction (near the `-m` limit, eviction makes room instead); and
    /// whether it holds more than twice that target.
    fn wants_compaction(&self) -> (bool, bool) {
        let held = self.arena.segment_count() * SEGMENT_SIZE;
        let target = COMPACT_RATIO * self.stats.bytes as usize + COMPACT_SLACK * SEGMENT_SIZE;
        let room = self.arena.segment_count() + 2 <= self.arena.max_segments();
        (room && held > target, room && held > 2 * target)
    }

    /// One bounded step of compaction, run after each write: looks at up to
    /// [`COMPACT_BATCH`] records of a sparse oldest segment (moving at most about
    /// [`COMPACT_BYTES`]), moves each live one to the newest segment (same metadata:
    /// CAS, flags and expiry do not change) and unlinks the ones that expired or were
    /// flushed. Once every record of the segment has been looked at, none is live and
    /// the arena retires it at its next rotation. See the arena's module docs for why.
    ///
    /// A segment more than half live is compacted only while the arena holds more than
    /// twice its target: moving it frees little, but a cold segment left at the front
    /// would keep compaction from the sparse ones behind it for good. Cold items are
    /// then copied about once per pass of the log, not at every step.
    fn compact_step(&mut self, now: u32) {
        let (wanted, far_over) = self.wants_compaction();
        if !wanted {
            return;
        }
        let mut at = match self.compact_at {
            Some(at) if self.arena.scan_oldest(at).is_some() => at,
            _ => match self.arena.sparse_oldest(far_over) {
                Some(start) => start,
                None => {
                    self.compact_at = None;
                    return;
                }
            },
        };
        let mut moved_bytes = 0;
        for _ in 0..COMPACT_BATCH {
            if moved_bytes >= COMPACT_BYTES {
                break;
            }
            let Some((rec, live, next)) = self.arena.scan_oldest(at) else {
                self.compact_at = None;
                return;
            };
            if live {
                // The arena's live records are exactly those the index points at.
                let (h, unexpired, len) = (
                    self.key_hash(rec.key),
                    self.is_live(&rec.meta, now),
                    record_len(rec.key.len(), rec.value.len()),
                );
                debug_assert!(self.points_at(h, at), "a live record the index lost");
                if !unexpired {
                    self.unlink(h, at);
                } else if self.arena.needs_eviction(len) {
                    break;
                } else {
                    let moved = self.arena.relocate(at);
                    self.repoint(h, at, moved);
                    moved_bytes += len;
                }
            }
            at = next;
        }
        self.compact_at = Some(at);
    }

    /// Whether the index entry for hash `h` includes `loc`.
    fn points_at(&self, h: u64, loc: Loc) -> bool {
        self.index.points_at(h, loc)
    }

    /// Points the index entry `h → from` at `to` instead.
    fn repoint(&mut self, h: u64, from: Loc, to: Loc) {
        self.index.repoint(h, from, to);
    }

    /// Appends a new version of `key` (hash `h`) and points the index at it. `old` is
    /// the live version [`Self::find_hashed`] just found, if any: without an eviction
    /// first, its index entry is pointed at the new version in place.
    fn write(
        &mut self,
        h: u64,
        mut old: Option<Loc>,
        key: &[u8],
        flags: u32,
        exp_at: u32,
        parts: &[&[u8]],
    ) -> StoreOutcome {
        let vlen: usize = parts.iter().map(|p| p.len()).sum();
        let len = record_len(key.len(), vlen);
        if len > SEGMENT_SIZE {
            return StoreOutcome::TooLarge;
        }
        // Parts may borrow the old record (append/prepend copied it already): evict first.
        if self.arena.needs_eviction(len) {
            while self.arena.needs_eviction(len) {
                self.evict_segment();
            }
            // The old version may have gone with an evicted segment.
            old = self.lookup(h, key);
        }
        let cas = self.new_cas();
        if let Some(old) = old {
            let old_len = {
                let r = self.arena.get(old);
                record_len(r.key.len(), r.value.len())
            };
            self.arena.dead(old);
            let loc = self.arena.append(Meta { flags, exp_at, cas }, key, parts);
            self.repoint(h, old, loc);
            self.stats.bytes = self.stats.bytes - old_len as u64 + len as u64;
            self.stats.total_items += 1;
            return StoreOutcome::Stored;
        }
        let loc = self.arena.append(Meta { flags, exp_at, cas }, key, parts);
        self.index.insert(h, loc);
        self.stats.curr_items += 1;
        self.stats.total_items += 1;
        self.stats.bytes += len as u64;
        StoreOutcome::Stored
    }

    /// Evicts the oldest segment, dropping the index entries that still point into it.
    /// Items already flushed are not counted as evictions (memcached counts only valid ones;
    /// expiry is not checked here because the arena has no clock).
    fn evict_segment(&mut self) {
        let mut dead: Vec<(u64, Loc, usize, bool)> = Vec::new();
        let (index, hasher, flushed_below) = (&self.index, &self.hasher, self.flushed_below);
        self.arena.evict_oldest(|loc, rec| {
            let h = hasher.hash(rec.key);
            // The index alone (the arena is borrowed for the walk).
            if index.points_at(h, loc) {
                dead.push((
                    h,
                    loc,
                    record_len(rec.key.len(), rec.value.len()),
                    rec.meta.cas > flushed_below,
                ));
            }
        });
        for (h, loc, len, valid) in dead {
            if self.remove_entry(h, loc) {
                self.stats.curr_items -= 1;
                self.stats.bytes -= len as u64;
                self.stats.evictions += u64::from(valid);
            }
        }
    }
}

/// Parses a stored counter as memcached 1.6.18 does (`safe_strtoull` over the item's
/// data, which `\r\n` follows): leading white space, an optional sign, decimal digits,
/// then white space or the end (so trailing padding and `5 x` pass, `12a` does not);
/// an empty value fails; no digits at all reads 0 when the value starts with white
/// space; a `-` passes only for 0; overflow fails.
fn parse_counter(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let space = |b: u8| b.is_ascii_whitespace() || b == 0x0b;
    // The byte after the number: the value's, or the `\r` memcached keeps behind it.
    let ends_ok = |i: usize| v.get(i).is_none_or(|&b| space(b));
    let mut i = v.iter().position(|&b| !space(b)).unwrap_or(v.len());
    let neg = v.get(i) == Some(&b'-');
    if matches!(v.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits = v[i..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return ends_ok(0).then_some(0);
    }
    if !ends_ok(i + digits) {
        return None;
    }
    let n = v[i..i + digits].iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    (!neg || n == 0).then_some(n)
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
