//! Log-structured item arena: fixed-size segments, append-only, evicted whole and FIFO.
//!
//! Invariants:
//! - at most `max_segments` segments are allocated, so item data never exceeds
//!   `max_segments * SEGMENT_SIZE` bytes (the `-m` limit given to this arena);
//! - records are only appended to the newest segment; an older segment is never written;
//! - a [`Loc`] stays valid until its segment is evicted; [`Arena::evict_oldest`] hands the
//!   evicted segment back so the caller can drop every index entry that points into it.
//!
//! Record layout (little endian): `klen u8 | flags u32 | exp_at u32 | cas u64 | vlen u32 |
//! key | value` — [`HEADER`] bytes of metadata per item.

use std::collections::VecDeque;

/// Segment size: 2 MiB, as in the Sphinx paper.
pub const SEGMENT_SIZE: usize = 2 << 20;
/// Metadata bytes stored in front of each record.
pub const HEADER: usize = 1 + 4 + 4 + 8 + 4;

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

/// Total bytes a record with this key and value occupies.
pub fn record_len(key: usize, value: usize) -> usize {
    HEADER + key + value
}

struct Segment {
    seq: u32,
    buf: Vec<u8>,
}

/// The segments of one partition.
pub struct Arena {
    segments: VecDeque<Segment>,
    max_segments: usize,
    /// Retired segment buffers, reused to avoid page faults on every rotation.
    spare: Option<Vec<u8>>,
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
            .is_some_and(|s| s.buf.len() + len <= SEGMENT_SIZE)
    }

    /// Whether appending `len` bytes needs a new segment and the arena is already full,
    /// i.e. whether the caller must [`evict_oldest`](Self::evict_oldest) first.
    pub fn needs_eviction(&self, len: usize) -> bool {
        assert!(len <= SEGMENT_SIZE, "record larger than a segment");
        !self.head_fits(len) && self.segments.len() >= self.max_segments
    }

    /// Removes the oldest segment and calls `f` on each of its records with its location.
    pub fn evict_oldest(&mut self, mut f: impl FnMut(Loc, Record<'_>)) {
        let Some(seg) = self.segments.pop_front() else {
            return;
        };
        let mut off = 0;
        while off < seg.buf.len() {
            let rec = decode(&seg.buf[off..]);
            f(
                Loc {
                    seg: seg.seq,
                    off: off as u32,
                },
                rec,
            );
            off += record_len(rec.key.len(), rec.value.len());
        }
        let mut buf = seg.buf;
        buf.clear();
        self.spare = Some(buf);
    }

    /// Appends a record whose value is the concatenation of `parts`. The caller must have
    /// evicted while [`needs_eviction`](Self::needs_eviction) said so.
    pub fn append(&mut self, meta: Meta, key: &[u8], parts: &[&[u8]]) -> Loc {
        let vlen: usize = parts.iter().map(|p| p.len()).sum();
        let len = record_len(key.len(), vlen);
        assert!(!self.needs_eviction(len), "arena full: evict first");
        if !self.head_fits(len) {
            let buf = self
                .spare
                .take()
                .unwrap_or_else(|| Vec::with_capacity(SEGMENT_SIZE));
            self.segments.push_back(Segment {
                seq: self.next_seq,
                buf,
            });
            self.next_seq = self.next_seq.wrapping_add(1);
        }
        let seg = self
            .segments
            .back_mut()
            .expect("a segment was just ensured");
        let off = seg.buf.len() as u32;
        let b = &mut seg.buf;
        b.push(key.len() as u8);
        b.extend_from_slice(&meta.flags.to_le_bytes());
        b.extend_from_slice(&meta.exp_at.to_le_bytes());
        b.extend_from_slice(&meta.cas.to_le_bytes());
        b.extend_from_slice(&(vlen as u32).to_le_bytes());
        b.extend_from_slice(key);
        for p in parts {
            b.extend_from_slice(p);
        }
        Loc { seg: seg.seq, off }
    }

    /// Reads the record at `loc`.
    pub fn get(&self, loc: Loc) -> Record<'_> {
        let first = self
            .segments
            .front()
            .expect("a live location implies a segment")
            .seq;
        let idx = loc.seg.wrapping_sub(first) as usize;
        decode(&self.segments[idx].buf[loc.off as usize..])
    }

    /// Rewrites the expiry of the record at `loc` in place (touch).
    pub fn set_exp(&mut self, loc: Loc, exp_at: u32) {
        let first = self
            .segments
            .front()
            .expect("a live location implies a segment")
            .seq;
        let idx = loc.seg.wrapping_sub(first) as usize;
        let at = loc.off as usize + 5;
        self.segments[idx].buf[at..at + 4].copy_from_slice(&exp_at.to_le_bytes());
    }
}

fn decode(b: &[u8]) -> Record<'_> {
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let klen = b[0] as usize;
    let meta = Meta {
        flags: u32_at(1),
        exp_at: u32_at(5),
        cas: u64::from_le_bytes(b[9..17].try_into().expect("8 bytes")),
    };
    let vlen = u32_at(17) as usize;
    Record {
        meta,
        key: &b[HEADER..HEADER + klen],
        value: &b[HEADER + klen..HEADER + klen + vlen],
    }
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
}
