//! Log-structured item arena: fixed-size segments, append-only, evicted whole and FIFO.
//!
//! Invariants:
//! - at most `max_segments` segments are held, so item data in the arena never exceeds
//!   `max_segments * SEGMENT_SIZE` bytes (the `-m` limit given to this arena);
//! - records are only appended to the newest segment, behind its fill mark; the bytes of
//!   a record's key and value are never written again (a touch rewrites its header only);
//! - a [`Loc`] stays valid until its segment is evicted; [`Arena::evict_oldest`] hands the
//!   evicted segment back so the caller can drop every index entry that points into it;
//! - each segment counts its live records: every record appended is live until the
//!   caller reports it dead ([`Arena::dead`], when no index entry points at it any more).
//!   When a new segment is needed and the oldest one (not the newest) holds no live
//!   record, that one is retired instead of growing the arena: nothing points into it,
//!   so nothing is lost and it is not an eviction. A log of updates to a few keys then
//!   stays a few segments long and reuses their memory, as memcached reuses the slot of
//!   the value an update replaces, rather than writing fresh pages (a page fault every
//!   ~16 records) until the `-m` limit is reached;
//! - when updates are spread over more keys than a segment holds, few segments ever
//!   become wholly dead: each keeps a scattering of live records, and the arena grows
//!   to many times the live data (10,000 keys of 200 bytes, rewritten at random, held
//!   14 segments, 28 MiB, for 2.5 MB live). The owner compacts instead: it moves the
//!   live records of a sparse oldest segment ([`Arena::sparse_oldest`]) to the newest
//!   one ([`Arena::relocate`]), unchanged, so that segment retires. The partition does
//!   it a few records per write while the arena holds more than about twice its live
//!   data (`store.rs`);
//! - a [`ValueRef`] ([`Arena::value_ref`]) shares its record's segment: a reply can send
//!   a value straight from the store, on any thread, without copying it. An evicted
//!   segment that a `ValueRef` still holds is freed when the last one drops; only a
//!   segment nobody else holds is reused for the next rotation.
//!
//! Record layout (little endian): `klen u8 | flags u32 | exp_at u32 | cas u64 | vlen u32 |
//! key | value` — [`HEADER`] bytes of metadata per item. The top bit of `vlen`
//! ([`DEAD_BIT`]; values are at most a segment long) marks a record reported dead, so
//! eviction and compaction pass over dead records by their header alone, without
//! hashing their keys to ask the index.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;

/// Segment size: 2 MiB, as in the Sphinx paper.
pub const SEGMENT_SIZE: usize = 2 << 20;
/// Metadata bytes stored in front of each record.
pub const HEADER: usize = 1 + 4 + 4 + 8 + 4;
/// The bit of a record's stored `vlen` that marks it dead (see the module docs).
const DEAD_BIT: u32 = 1 << 31;
/// Offset of `vlen` in the header.
const VLEN_AT: usize = 17;

/// Where a record lives: segment sequence number and byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Sequence number of the segment (wraps; only compared for equality).
    pub seg: u32,
    /// Offset of the record's header inside the segment.
    pub off: u32,
}

/// Metadata of one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Client flags.
    pub flags: u32,
    /// Server-relative expiry second (0 = never).
    pub exp_at: u32,
    /// CAS unique.
    pub cas: u64,
}

/// A record read back from the arena.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Its metadata.
    pub meta: Meta,
    /// Its key.
    pub key: &'a [u8],
    /// Its value.
    pub value: &'a [u8],
}

/// The memory of one segment: [`SEGMENT_SIZE`] bytes, written by the arena that owns it
/// (behind the fill mark, or a record's header) and read by anyone holding a
/// [`ValueRef`] into it.
struct SegBuf {
    ptr: NonNull<u8>,
}

// SAFETY: the buffer is plain bytes. The arena (one owner, `&mut self` for every write)
// writes only bytes no reader can see: those behind the fill mark, and header bytes,
// which no `ValueRef` covers. Readers on other threads see only the value bytes of
// records appended before their `ValueRef` was made, and the `Arc` clone that made it
// (behind the partition's lock or a ring's release/acquire) orders those writes before
// the reads.
unsafe impl Send for SegBuf {}
// SAFETY: as above.
unsafe impl Sync for SegBuf {}

impl SegBuf {
    fn layout() -> Layout {
        Layout::array::<u8>(SEGMENT_SIZE).expect("a segment's layout")
    }

    fn new() -> SegBuf {
        // Uninitialised, as a reserved Vec was: only written bytes are ever read.
        // SAFETY: the layout's size is non-zero.
        let raw = unsafe { alloc(Self::layout()) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| handle_alloc_error(Self::layout()));
        SegBuf { ptr }
    }

    /// The bytes `[off, off + len)`.
    ///
    /// # Safety
    /// They must have been written, and no write to them may happen while the slice
    /// lives (the arena never rewrites a record's key or value).
    unsafe fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= SEGMENT_SIZE, "a slice inside the segment");
        // SAFETY: inside the allocation (checked above); the caller vouches for the rest.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(off), len) }
    }

    /// Copies `data` to `off`.
    ///
    /// # Safety
    /// No slice of these bytes may be alive (the arena writes behind its fill mark, or
    /// into a header).
    unsafe fn write(&self, off: usize, data: &[u8]) {
        assert!(
            off + data.len() <= SEGMENT_SIZE,
            "a write inside the segment"
        );
        // SAFETY: inside the allocation (checked above), and `data` cannot overlap bytes
        // nobody may be reading; the caller vouches for the rest.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len())
        }
    }
}

impl Drop for SegBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout()) }
    }
}

/// A record's value, shared with the segment that holds it: cloning it or sending it to
/// another thread copies no bytes, and it stays readable after its record is replaced,
/// deleted or evicted (the segment is freed when the last reference drops).
#[derive(Clone)]
pub struct ValueRef {
    seg: Arc<SegBuf>,
    off: u32,
    len: u32,
}

impl ValueRef {
    /// The value's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `Arena::value_ref` made this for a record's value, written before it
        // and never written again; a segment shared with a `ValueRef` is not reused.
        unsafe { self.seg.slice(self.off as usize, self.len as usize) }
    }

    /// The value's length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl AsRef<[u8]> for ValueRef {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for ValueRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ValueRef({} bytes at {})", self.len, self.off)
    }
}

/// Total bytes a record with this key and value occupies.
pub fn record_len(key: usize, value: usize) -> usize {
    HEADER + key + value
}

struct Segment {
    seq: u32,
    buf: Arc<SegBuf>,
    /// Fill mark: bytes appended so far.
    len: usize,
    /// Records appended here and not yet reported [`Arena::dead`].
    live: u32,
    /// Records appended here.
    records: u32,
}

impl Segment {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the bytes behind the fill mark were written; while `&self` lives the
        // arena (their only writer) writes none of them.
        unsafe { self.buf.slice(0, self.len) }
    }
}

/// The segments of one partition.
pub struct Arena {
    segments: VecDeque<Segment>,
    max_segments: usize,
    /// A retired segment buffer nobody else holds, reused to avoid page faults on
    /// every rotation.
    spare: Option<Arc<SegBuf>>,
    next_seq: u32,
}

impl Arena {
    /// An arena holding at most `max_segments` segments (≥ 1).
    pub fn new(max_segments: usize) -> Arena {
        assert!(max_segments >= 1, "an arena needs at least one segment");
        Arena {
            segments: VecDeque::new(),
            max_segments,
            spare: None,
            next_seq: 0,
        }
    }

    /// Bytes of segment memory allocated now.
    pub fn allocated(&self) -> usize {
        self.segments.len() * SEGMENT_SIZE
    }

    /// Whether the newest segment has room for `len` more bytes.
    fn head_fits(&self, len: usize) -> bool {
        self.segments
            .back()
            .is_some_and(|s| s.len + len <= SEGMENT_SIZE)
    }

    /// Whether the oldest segment can be retired without an eviction: it holds no live
    /// record and is not the newest (which appends still fill).
    fn front_is_dead(&self) -> bool {
        self.segments.len() > 1 && self.segments.front().is_some_and(|s| s.live == 0)
    }

    /// Whether appending `len` bytes needs a new segment and the arena is already full,
    /// i.e. whether the caller must [`evict_oldest`](Self::evict_oldest) first. A dead
    /// oldest segment makes room by itself ([`append`](Self::append) retires it).
    pub fn needs_eviction(&self, len: usize) -> bool {
        assert!(len <= SEGMENT_SIZE, "record larger than a segment");
        !self.head_fits(len) && self.segments.len() >= self.max_segments && !self.front_is_dead()
    }

    /// Reports that the record at `loc` is dead: no index entry points at it any more.
    /// Each live record must be reported at most once; a record of a segment already
    /// evicted or retired is ignored.
    pub fn dead(&mut self, loc: Loc) {
        let Some(first) = self.segments.front().map(|s| s.seq) else {
            return;
        };
        if let Some(seg) = self.segments.get_mut(loc.seg.wrapping_sub(first) as usize) {
            debug_assert_eq!(seg.seq, loc.seg);
            debug_assert!(seg.live > 0, "a record reported dead twice");
            seg.live = seg.live.saturating_sub(1);
            let at = loc.off as usize + VLEN_AT;
            let vlen = u32::from_le_bytes(seg.bytes()[at..at + 4].try_into().expect("4 bytes"));
            debug_assert_eq!(vlen & DEAD_BIT, 0, "a record reported dead twice");
            // SAFETY: a header's bytes, which no `ValueRef` covers, and `&mut self`
            // rules out any slice of the arena's own.
            unsafe { seg.buf.write(at, &(vlen | DEAD_BIT).to_le_bytes()) };
        }
    }

    /// Removes the oldest segment and calls `f` on each of its records still live (not
    /// reported [`dead`](Self::dead)) with its location.
    pub fn evict_oldest(&mut self, mut f: impl FnMut(Loc, Record<'_>)) {
        let Some(seg) = self.segments.pop_front() else {
            return;
        };
        let mut off = 0;
        while off < seg.len {
            let (rec, dead) = decode(&seg.bytes()[off..]);
            if !dead {
                let loc = Loc {
                    seg: seg.seq,
                    off: off as u32,
                };
                f(loc, rec);
            }
            off += record_len(rec.key.len(), rec.value.len());
        }
        self.keep_spare(seg.buf);
    }

    /// Keeps the buffer of a segment that left the arena for the next new segment,
    /// unless a reply still holds a value in it: that buffer is left to the reply and
    /// freed when the reply is written. `get_mut` (not a count) also orders that
    /// reply's last reads before our writes.
    fn keep_spare(&mut self, mut buf: Arc<SegBuf>) {
        if Arc::get_mut(&mut buf).is_some() {
            self.spare = Some(buf);
        }
    }

    /// Appends a record whose value is the concatenation of `parts`. The caller must have
    /// evicted while [`needs_eviction`](Self::needs_eviction) said so.
    pub fn append(&mut self, meta: Meta, key: &[u8], parts: &[&[u8]]) -> Loc {
        let vlen: usize = parts.iter().map(|p| p.len()).sum();
        let len = record_len(key.len(), vlen);
        assert!(!self.needs_eviction(len), "arena full: evict first");
        if !self.head_fits(len) {
            if self.front_is_dead() {
                // Nothing points into it (module docs): retire it and reuse its memory.
                let old = self.segments.pop_front().expect("checked").buf;
                self.keep_spare(old);
            }
            let buf = self.spare.take().unwrap_or_else(|| Arc::new(SegBuf::new()));
            self.segments.push_back(Segment {
                seq: self.next_seq,
                buf,
                len: 0,
                live: 0,
                records: 0,
            });
            self.next_seq = self.next_seq.wrapping_add(1);
        }
        let seg = self
            .segments
            .back_mut()
            .expect("a segment was just ensured");
        let off = seg.len;
        let mut header = [0u8; HEADER];
        header[0] = key.len() as u8;
        header[1..5].copy_from_slice(&meta.flags.to_le_bytes());
        header[5..9].copy_from_slice(&meta.exp_at.to_le_bytes());
        header[9..17].copy_from_slice(&meta.cas.to_le_bytes());
        header[17..21].copy_from_slice(&(vlen as u32).to_le_bytes());
        let mut at = off;
        for piece in [&header[..], key].into_iter().chain(parts.iter().copied()) {
            // SAFETY: behind the fill mark, which no slice or `ValueRef` reaches.
            unsafe { seg.buf.write(at, piece) };
            at += piece.len();
        }
        seg.len = at;
        seg.live += 1;
        seg.records += 1;
        Loc {
            seg: seg.seq,
            off: off as u32,
        }
    }

    /// Segments held now.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The most segments this arena may hold.
    pub fn max_segments(&self) -> usize {
        self.max_segments
    }

    /// The first record of the oldest segment, when that segment is worth compacting:
    /// it is not the newest, some of its records are live, and (unless `dense_too`)
    /// at most half of the records appended to it are (see [`Self::relocate`]; one
    /// with none retires at the next rotation by itself).
    pub fn sparse_oldest(&self, dense_too: bool) -> Option<Loc> {
        let front = self.segments.front()?;
        let sparse = front.live > 0 && (dense_too || front.live * 2 <= front.records);
        (self.segments.len() > 1 && sparse).then_some(Loc {
            seg: front.seq,
            off: 0,
        })
    }

    /// The record at `at` in the oldest segment, whether it is still live (not reported
    /// [`dead`](Self::dead)), and the location just after it; `None` when `at` is past
    /// the segment's last record or the segment is no longer the oldest (it was
    /// retired or evicted).
    pub fn scan_oldest(&self, at: Loc) -> Option<(Record<'_>, bool, Loc)> {
        let front = self.segments.front()?;
        if front.seq != at.seg || at.off as usize >= front.len {
            return None;
        }
        let (rec, dead) = decode(&front.bytes()[at.off as usize..]);
        let next = Loc {
            seg: at.seg,
            off: at.off + record_len(rec.key.len(), rec.value.len()) as u32,
        };
        Some((rec, !dead, next))
    }

    /// Copies the live record at `loc` to the newest segment, unchanged (metadata
    /// included), and reports the old copy dead; returns the new location. Moving the
    /// few live records of a sparse oldest segment lets it retire, so the arena holds
    /// about the live data instead of every segment any live record is left in. The
    /// caller repoints its index entry and must not need an eviction for the record's
    /// length ([`Self::needs_eviction`]).
    pub fn relocate(&mut self, loc: Loc) -> Loc {
        let buf = Arc::clone(&self.segment(loc).buf);
        let rec_at = loc.off as usize;
        // SAFETY (both slices): a live record's bytes were written and its key and
        // value are never written again; the one write below (`append`) goes behind
        // the newest segment's fill mark, past this record even when it is in that
        // segment. The slices borrow `buf`, our own reference, not the arena.
        let head = unsafe { buf.slice(rec_at, HEADER) };
        let klen = head[0] as usize;
        let vlen = u32::from_le_bytes(head[VLEN_AT..VLEN_AT + 4].try_into().expect("4 bytes"));
        debug_assert_eq!(vlen & DEAD_BIT, 0, "relocating a dead record");
        // SAFETY: as above.
        let (rec, _) = decode(unsafe { buf.slice(rec_at, record_len(klen, vlen as usize)) });
        // The old copy is still live during the append, so its segment (the oldest)
        // is not retired under it; `buf` keeps the bytes alive regardless.
        let new = self.append(rec.meta, rec.key, &[rec.value]);
        self.dead(loc);
        new
    }

    fn segment(&self, loc: Loc) -> &Segment {
        let first = self
            .segments
            .front()
            .expect("a live location implies a segment")
            .seq;
        &self.segments[loc.seg.wrapping_sub(first) as usize]
    }

    /// Reads the record at `loc`.
    pub fn get(&self, loc: Loc) -> Record<'_> {
        decode(&self.segment(loc).bytes()[loc.off as usize..]).0
    }

    /// The value of the record at `loc`, shared with its segment (no copy).
    pub fn value_ref(&self, loc: Loc) -> ValueRef {
        let seg = self.segment(loc);
        let (rec, _) = decode(&seg.bytes()[loc.off as usize..]);
        let off = loc.off as usize + HEADER + rec.key.len();
        ValueRef {
            seg: Arc::clone(&seg.buf),
            off: off as u32,
            len: rec.value.len() as u32,
        }
    }

    /// Rewrites the expiry of the record at `loc` in place (touch).
    pub fn set_exp(&mut self, loc: Loc, exp_at: u32) {
        let seg = self.segment(loc);
        // SAFETY: a header's bytes, which no `ValueRef` covers, and `&mut self` rules
        // out any slice of the arena's own.
        unsafe { seg.buf.write(loc.off as usize + 5, &exp_at.to_le_bytes()) };
    }
}

/// The record at the start of `b`, and whether it was reported dead.
fn decode(b: &[u8]) -> (Record<'_>, bool) {
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let klen = b[0] as usize;
    let meta = Meta {
        flags: u32_at(1),
        exp_at: u32_at(5),
        cas: u64::from_le_bytes(b[9..17].try_into().expect("8 bytes")),
    };
    let stored = u32_at(VLEN_AT);
    let vlen = (stored & !DEAD_BIT) as usize;
    let rec = Record {
        meta,
        key: &b[HEADER..HEADER + klen],
        value: &b[HEADER + klen..HEADER + klen + vlen],
    };
    (rec, stored & DEAD_BIT != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_read_evict_roundtrip() {
        let mut a = Arena::new(2);
        let meta = Meta {
            flags: 7,
            exp_at: 0,
            cas: 1,
        };
        let big = vec![b'x'; SEGMENT_SIZE / 2];
        let l1 = a.append(meta, b"k1", &[&big]);
        let l2 = a.append(meta, b"k2", &[b"ab", b"cd"]);
        assert_eq!(a.get(l2).value, b"abcd");
        assert_eq!(a.get(l1).key, b"k1");
        // A second half-segment record does not fit in segment 0: segment 1 opens.
        let l3 = a.append(meta, b"k3", &[&big]);
        assert_ne!(l3.seg, l1.seg);
        assert!(a.needs_eviction(SEGMENT_SIZE / 2 + 100));
        let mut seen = Vec::new();
        a.evict_oldest(|loc, r| seen.push((loc, r.key.to_vec())));
        assert_eq!(seen, vec![(l1, b"k1".to_vec()), (l2, b"k2".to_vec())]);
        assert_eq!(a.allocated(), SEGMENT_SIZE);
        a.set_exp(l3, 99);
        assert_eq!(a.get(l3).meta.exp_at, 99);
        assert_eq!(a.get(l3).meta.flags, 7);
    }

    const META: Meta = Meta {
        flags: 0,
        exp_at: 0,
        cas: 1,
    };

    #[test]
    fn a_dead_oldest_segment_is_retired_not_evicted() {
        // Half a segment per record: each append opens a new segment.
        let big = vec![b'x'; SEGMENT_SIZE / 2];
        let mut a = Arena::new(2);
        let l1 = a.append(META, b"k1", &[&big]);
        let l2 = a.append(META, b"k2", &[&big]);
        assert_ne!(l1.seg, l2.seg);
        // Full, and its oldest segment holds a live record: an eviction is needed.
        assert!(a.needs_eviction(big.len() + 100));
        a.dead(l1);
        // Now the dead oldest segment makes room by itself.
        assert!(!a.needs_eviction(big.len() + 100));
        let l3 = a.append(META, b"k3", &[&big]);
        assert_eq!(a.allocated(), 2 * SEGMENT_SIZE);
        assert_eq!(a.get(l2).key, b"k2");
        assert_eq!(a.get(l3).key, b"k3");
        // A dead record of a segment already gone is ignored; the newest segment is
        // never retired, even dead.
        a.dead(l1);
        a.dead(l3);
        assert!(a.needs_eviction(big.len() + 100), "l2's segment is live");
        a.dead(l2);
        let l4 = a.append(META, b"k4", &[&big]);
        assert_eq!(a.get(l4).key, b"k4");
        assert_eq!(a.get(l3).key, b"k3", "the dead newest segment was kept");
        assert_eq!(a.allocated(), 2 * SEGMENT_SIZE);
    }

    #[test]
    fn a_retired_segment_a_reply_still_reads_is_not_reused() {
        let big = vec![b'y'; SEGMENT_SIZE / 2];
        let mut a = Arena::new(4);
        let l1 = a.append(META, b"k1", &[&big]);
        let held = a.value_ref(l1);
        let _l2 = a.append(META, b"k2", &[&big]);
        a.dead(l1);
        // The next segment retires l1's, but the reply's reference keeps its bytes.
        let l3 = a.append(META, b"k3", &[&vec![b'z'; SEGMENT_SIZE / 2]]);
        assert_eq!(a.get(l3).value[0], b'z');
        assert_eq!(a.allocated(), 2 * SEGMENT_SIZE);
        assert!(held.as_slice().iter().all(|&b| b == b'y'));
        assert_eq!(held.len(), SEGMENT_SIZE / 2);
    }
}
