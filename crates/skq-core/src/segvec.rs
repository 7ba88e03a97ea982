//! A table that allocates its memory as it is used.
//!
//! [`SegVec`] holds up to `capacity` elements in segments of [`SEGMENT`]
//! elements each. Only the segment pointers are allocated up front (one
//! `OnceLock` per segment, 1,024 of them for a million elements); a segment
//! is allocated, with every element built by `T::default()`, the first time
//! an index inside it is asked for with [`SegVec::ensure`]. Lookups of an
//! index whose segment was never allocated answer `None`, so a stale or
//! foreign index costs nothing and never allocates.
//!
//! Segments are never freed while the table lives: an element may be read
//! at any time by a thread holding an index (a late readiness report for a
//! deregistered source), so returning a segment's memory would need a
//! reclamation scheme on every lookup. The table therefore grows to its
//! peak and stays there, as memcached's connection structures do; the
//! owners reuse freed indices lowest-first so the peak stays compact.

use std::sync::OnceLock;

/// Elements per segment.
pub const SEGMENT: usize = 1024;

/// A fixed-capacity table whose segments are allocated on first use.
pub struct SegVec<T> {
    segments: Box<[OnceLock<Box<[T]>>]>,
    capacity: usize,
}

impl<T: Default> SegVec<T> {
    /// A table of up to `capacity` elements; allocates no element yet.
    pub fn new(capacity: usize) -> Self {
        let n = capacity.div_ceil(SEGMENT);
        SegVec {
            segments: (0..n).map(|_| OnceLock::new()).collect(),
            capacity,
        }
    }

    /// Element `i` if its segment has been allocated.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i >= self.capacity {
            return None;
        }
        self.segments[i / SEGMENT].get().map(|s| &s[i % SEGMENT])
    }

    /// Element `i`, allocating its segment first if needed; `None` when `i`
    /// is beyond the capacity.
    #[inline]
    pub fn ensure(&self, i: usize) -> Option<&T> {
        if i >= self.capacity {
            return None;
        }
        let seg =
            self.segments[i / SEGMENT].get_or_init(|| (0..SEGMENT).map(|_| T::default()).collect());
        Some(&seg[i % SEGMENT])
    }
}

impl<T> SegVec<T> {
    /// The most elements the table can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Segments allocated so far.
    pub fn segments_allocated(&self) -> usize {
        self.segments.iter().filter(|s| s.get().is_some()).count()
    }

    /// Elements in allocated segments (the table's memory in elements).
    pub fn allocated(&self) -> usize {
        self.segments_allocated() * SEGMENT
    }

    /// Every element of every allocated segment, with its index.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.segments.iter().enumerate().flat_map(|(k, s)| {
            s.get().into_iter().flat_map(move |seg| {
                seg.iter()
                    .enumerate()
                    .map(move |(j, t)| (k * SEGMENT + j, t))
            })
        })
    }

    /// Bytes of memory the table holds now (pointers and allocated segments).
    pub fn memory_bytes(&self) -> usize {
        self.segments.len() * std::mem::size_of::<OnceLock<Box<[T]>>>()
            + self.allocated() * std::mem::size_of::<T>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn segments_are_allocated_only_where_used() {
        let t: SegVec<AtomicU32> = SegVec::new(10 * SEGMENT + 5);
        assert_eq!(t.segments_allocated(), 0);
        assert!(t.get(3).is_none());
        t.ensure(3).unwrap().store(7, Ordering::Relaxed);
        assert_eq!(t.get(3).unwrap().load(Ordering::Relaxed), 7);
        assert_eq!(t.segments_allocated(), 1);
        // The last, partial segment is still a whole segment of storage.
        t.ensure(10 * SEGMENT + 4).unwrap();
        assert_eq!(t.segments_allocated(), 2);
        assert!(t.ensure(10 * SEGMENT + 5).is_none(), "past the capacity");
        assert!(t.get(usize::MAX).is_none());
        let seen: Vec<usize> = t
            .iter()
            .filter(|(_, v)| v.load(Ordering::Relaxed) == 7)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(seen, vec![3]);
        assert_eq!(t.allocated(), 2 * SEGMENT);
    }

    #[test]
    fn racing_first_uses_of_a_segment_see_one_segment() {
        let t: SegVec<AtomicU32> = SegVec::new(4 * SEGMENT);
        std::thread::scope(|s| {
            for k in 0..4u32 {
                let t = &t;
                s.spawn(move || {
                    for i in 0..SEGMENT {
                        if i % 4 == k as usize {
                            t.ensure(SEGMENT + i)
                                .unwrap()
                                .store(k + 1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        for i in 0..SEGMENT {
            let v = t.get(SEGMENT + i).unwrap().load(Ordering::Relaxed);
            assert_eq!(v, (i % 4) as u32 + 1, "index {i}: a write was lost");
        }
        assert_eq!(t.segments_allocated(), 1);
    }
}
