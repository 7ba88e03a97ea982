//! The pending-event set: a binary min-heap on (time, sequence number).
//!
//! The sequence number breaks ties in insertion order, which makes the order of
//! simultaneous events — and so every run — deterministic. Entries are small
//! `Copy` values and the heap keeps its capacity, so steady-state operation
//! allocates nothing.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug)]
struct Entry<T> {
    time: u64,
    seq: u64,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Entry<T> {
    /// Reversed: the heap's maximum is the earliest entry.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

/// Events of type `T` ordered by virtual time, FIFO among equal times.
#[derive(Debug)]
pub struct EventQueue<T> {
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
}

impl<T: Copy> EventQueue<T> {
    /// An empty queue with room for `cap` events.
    pub fn with_capacity(cap: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(cap),
            seq: 0,
        }
    }

    /// Schedules `item` at `time`.
    #[inline]
    pub fn push(&mut self, time: u64, item: T) {
        self.seq += 1;
        self.heap.push(Entry {
            time,
            seq: self.seq,
            item,
        });
    }

    /// Time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.time)
    }

    /// Removes the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, T)> {
        self.heap.pop().map(|e| (e.time, e.item))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::with_capacity(4);
        q.push(5, 'a');
        q.push(3, 'b');
        q.push(5, 'c');
        q.push(1, 'd');
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(order, vec![(1, 'd'), (3, 'b'), (5, 'a'), (5, 'c')]);
        assert!(q.is_empty());
    }
}
