//! Reply bytes with store values referenced in place (zero-copy values).
//!
//! A [`Reply`] is the bytes a connection owes its client: a byte buffer the handlers
//! append to, and the large values of `get` replies as [`ValueRef`]s into the store's
//! segments, each standing at a position of the buffer. Writing one gathers the buffer's
//! pieces and the values into one `writev`, so a value goes from the store to the socket
//! with no copy on the way ([`Reply::write_from`]).
//!
//! Values shorter than [`ZERO_COPY_MIN`] are copied: a reference costs an atomic
//! increment and a slot in the gather list, more than copying a few KiB.
//!
//! Memory: a referenced value holds its whole segment ([`SEGMENT_SIZE`]) alive, also after
//! the store evicts it. So a reference counts against the connection's output ceiling as
//! at least [`PIN_CHARGE`] bytes ([`Reply::charge`]), and a connection whose pending output
//! stays under the ceiling `C` holds at most `C / PIN_CHARGE` segments beyond the store's
//! own memory, plus the one value a paused retrieval always answers (9 segments, 18 MiB,
//! at the default 2 MiB ceiling), and only while its client leaves replies unread after
//! those segments were evicted. Both architectures: the shared one hands the values to
//! skq-net's connection as shared regions (`skq_net::Cx::send_shared`).

use std::io::{self, IoSlice, Write};

use crate::arena::{ValueRef, SEGMENT_SIZE};

/// Values at least this long are referenced, shorter ones copied.
pub const ZERO_COPY_MIN: usize = 16 << 10;
/// What a referenced value counts against the output ceiling at least: an eighth of the
/// segment it may keep alive.
pub const PIN_CHARGE: usize = SEGMENT_SIZE / 8;
/// Most pieces one write gathers.
const GATHER: usize = 32;

/// What a value of `len` bytes counts against the output ceiling once in a [`Reply`].
pub fn value_charge(len: usize) -> usize {
    if len >= ZERO_COPY_MIN {
        len.max(PIN_CHARGE)
    } else {
        len
    }
}

/// Where [`crate::exec::get_one`] writes a reply: a plain byte buffer (values copied)
/// or a [`Reply`] (large values referenced).
pub trait ValueSink {
    /// The bytes, to append to.
    fn bytes_mut(&mut self) -> &mut Vec<u8>;
    /// Appends a value.
    fn push_value(&mut self, v: ValueRef);
    /// Whether values of `len` bytes are referenced rather than copied.
    fn references(&self, len: usize) -> bool;
    /// What the sink counts against the output ceiling now.
    fn charge(&self) -> usize;
    /// What a value of `len` bytes adds to [`Self::charge`].
    fn value_charge(&self, len: usize) -> usize;
}

impl ValueSink for Vec<u8> {
    fn bytes_mut(&mut self) -> &mut Vec<u8> {
        self
    }
    fn push_value(&mut self, v: ValueRef) {
        self.extend_from_slice(v.as_slice());
    }
    fn references(&self, _: usize) -> bool {
        false
    }
    fn charge(&self) -> usize {
        self.len()
    }
    fn value_charge(&self, len: usize) -> usize {
        len
    }
}

impl ValueSink for Reply {
    fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
    fn push_value(&mut self, v: ValueRef) {
        Reply::push_value(self, v)
    }
    fn references(&self, len: usize) -> bool {
        len >= ZERO_COPY_MIN
    }
    fn charge(&self) -> usize {
        Reply::charge(self)
    }
    fn value_charge(&self, len: usize) -> usize {
        value_charge(len)
    }
}

/// Reply bytes, with values referenced in place.
#[derive(Debug, Default)]
pub struct Reply {
    bytes: Vec<u8>,
    /// Values and the position of `bytes` each stands before (non-decreasing).
    refs: Vec<(usize, ValueRef)>,
    /// The values' lengths, summed.
    ref_len: usize,
    /// The values' [`value_charge`]s, summed.
    ref_charge: usize,
}

impl Reply {
    /// An empty reply (allocates nothing).
    pub fn new() -> Reply {
        Reply::default()
    }

    /// A reply of these bytes.
    pub fn from_bytes(bytes: Vec<u8>) -> Reply {
        Reply {
            bytes,
            ..Reply::default()
        }
    }

    /// The byte buffer, to append to (values already pushed stay before what is appended).
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Bytes the client will receive.
    pub fn len(&self) -> usize {
        self.bytes.len() + self.ref_len
    }

    /// Whether there is nothing to send.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What this reply counts against the output ceiling: its bytes, and each value's
    /// [`value_charge`].
    pub fn charge(&self) -> usize {
        self.bytes.len() + self.ref_charge
    }

    /// Whether a value is referenced rather than copied.
    pub fn has_refs(&self) -> bool {
        !self.refs.is_empty()
    }

    /// Capacity of the byte buffer.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Appends a value: referenced if it is at least [`ZERO_COPY_MIN`] long, else copied.
    pub fn push_value(&mut self, v: ValueRef) {
        if v.len() < ZERO_COPY_MIN {
            self.bytes.extend_from_slice(v.as_slice());
            return;
        }
        self.ref_len += v.len();
        self.ref_charge += value_charge(v.len());
        self.refs.push((self.bytes.len(), v));
    }

    /// Appends `other`, leaving it empty (its byte buffer is kept when `self` is empty,
    /// so a reply moves without a copy).
    pub fn append(&mut self, other: &mut Reply) {
        if self.is_empty() && !self.has_refs() {
            std::mem::swap(self, other);
            other.clear();
            return;
        }
        let base = self.bytes.len();
        self.bytes.extend_from_slice(&other.bytes);
        self.refs
            .extend(other.refs.drain(..).map(|(at, v)| (at + base, v)));
        self.ref_len += other.ref_len;
        self.ref_charge += other.ref_charge;
        other.clear();
    }

    /// Empties the reply, keeping the byte buffer's capacity.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.refs.clear();
        self.ref_len = 0;
        self.ref_charge = 0;
    }

    /// Calls `f` on each piece of the reply from byte `pos` on, in order, until it
    /// returns false.
    fn each_piece_from<'a>(&'a self, mut pos: usize, mut f: impl FnMut(&'a [u8]) -> bool) {
        let mut at = 0;
        for (stand, v) in &self.refs {
            for piece in [&self.bytes[at..*stand], v.as_slice()] {
                if pos >= piece.len() {
                    pos -= piece.len();
                    continue;
                }
                if !f(&piece[pos..]) {
                    return;
                }
                pos = 0;
            }
            at = *stand;
        }
        let tail = &self.bytes[at..];
        if pos < tail.len() {
            f(&tail[pos..]);
        }
    }

    /// The reply's bytes from `pos` on, copied into one buffer (tests, in-memory drivers).
    pub fn to_vec_from(&self, pos: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len().saturating_sub(pos));
        self.each_piece_from(pos, |p| {
            v.extend_from_slice(p);
            true
        });
        v
    }

    /// Writes what follows byte `pos` with one `write` (a `writev` of up to 32 pieces
    /// when values are referenced); returns the bytes written.
    pub fn write_from(&self, w: &mut impl Write, pos: usize) -> io::Result<usize> {
        if self.refs.is_empty() {
            return w.write(&self.bytes[pos..]);
        }
        let mut iov = [IoSlice::new(&[]); GATHER];
        let mut n = 0;
        self.each_piece_from(pos, |p| {
            if !p.is_empty() {
                iov[n] = IoSlice::new(p);
                n += 1;
            }
            n < GATHER
        });
        w.write_vectored(&iov[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::{Arena, Meta};

    fn arena_with(values: &[&[u8]]) -> (Arena, Vec<ValueRef>) {
        let mut a = Arena::new(4);
        let meta = Meta {
            flags: 0,
            exp_at: 0,
            cas: 1,
        };
        let refs = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let loc = a.append(meta, format!("k{i}").as_bytes(), &[v]);
                a.value_ref(loc)
            })
            .collect();
        (a, refs)
    }

    /// A writer taking at most `max` bytes per call, gathering like a socket.
    struct Trickle {
        got: Vec<u8>,
        max: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.calls += 1;
            let mut room = self.max;
            for b in bufs {
                let n = b.len().min(room);
                self.got.extend_from_slice(&b[..n]);
                room -= n;
                if room == 0 {
                    break;
                }
            }
            Ok(self.max - room)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn values_are_referenced_from_the_minimum_and_copied_below_it() {
        let big = vec![b'b'; ZERO_COPY_MIN];
        let small = vec![b's'; ZERO_COPY_MIN - 1];
        let (_a, refs) = arena_with(&[&big, &small]);
        let mut r = Reply::new();
        r.bytes_mut().extend_from_slice(b"VALUE a\r\n");
        r.push_value(refs[0].clone());
        r.bytes_mut().extend_from_slice(b"\r\nVALUE b\r\n");
        r.push_value(refs[1].clone());
        r.bytes_mut().extend_from_slice(b"\r\nEND\r\n");
        assert_eq!(
            r.refs.len(),
            1,
            "only the value at the minimum is referenced"
        );
        let want = [
            &b"VALUE a\r\n"[..],
            &big,
            b"\r\nVALUE b\r\n",
            &small,
            b"\r\nEND\r\n",
        ]
        .concat();
        assert_eq!(r.len(), want.len());
        assert_eq!(r.to_vec_from(0), want);
        assert_eq!(r.to_vec_from(5), want[5..]);
        assert_eq!(r.charge(), want.len() - big.len() + PIN_CHARGE);
    }

    #[test]
    fn written_in_any_pieces_the_bytes_arrive_whole_and_in_order() {
        let v1 = vec![1u8; ZERO_COPY_MIN + 7];
        let v2 = vec![2u8; ZERO_COPY_MIN * 2];
        let (_a, refs) = arena_with(&[&v1, &v2]);
        for max in [1, 7, 1000, ZERO_COPY_MIN - 1, ZERO_COPY_MIN + 9, 1 << 20] {
            let mut r = Reply::new();
            r.bytes_mut().extend_from_slice(b"head");
            r.push_value(refs[0].clone());
            // Two values back to back: nothing between them.
            r.push_value(refs[1].clone());
            r.bytes_mut().extend_from_slice(b"tail");
            let want = r.to_vec_from(0);
            let mut w = Trickle {
                got: Vec::new(),
                max,
                calls: 0,
            };
            let mut pos = 0;
            while pos < r.len() {
                pos += r.write_from(&mut w, pos).unwrap();
            }
            assert_eq!(w.got, want, "write size {max}");
        }
    }

    #[test]
    fn append_moves_values_with_their_positions() {
        let v = vec![9u8; ZERO_COPY_MIN];
        let (_a, refs) = arena_with(&[&v]);
        let mut a = Reply::from_bytes(b"one ".to_vec());
        let mut b = Reply::from_bytes(b"two ".to_vec());
        b.push_value(refs[0].clone());
        b.bytes_mut().extend_from_slice(b" three");
        let want = [&b"one two "[..], &v, b" three"].concat();
        a.append(&mut b);
        assert!(b.is_empty() && !b.has_refs());
        assert_eq!(a.to_vec_from(0), want);
        // Appending to an empty reply moves the whole thing.
        let mut c = Reply::new();
        c.append(&mut a);
        assert_eq!(c.to_vec_from(0), want);
        assert_eq!(c.charge(), want.len() - v.len() + PIN_CHARGE);
    }

    #[test]
    fn a_referenced_value_outlives_its_eviction_and_its_segment_is_not_reused() {
        let meta = Meta {
            flags: 0,
            exp_at: 0,
            cas: 1,
        };
        let mut a = Arena::new(1);
        let old = vec![b'o'; SEGMENT_SIZE / 2];
        let loc = a.append(meta, b"old", &[&old]);
        let held = a.value_ref(loc);
        // Fill the arena's only segment so the next record evicts it.
        let new = vec![b'n'; SEGMENT_SIZE / 2 + 1];
        assert!(a.needs_eviction(new.len()));
        a.evict_oldest(|_, _| {});
        let l2 = a.append(meta, b"new", &[&new]);
        assert_eq!(a.get(l2).value, &new[..]);
        // The evicted segment still holds the old value, untouched by the new record.
        assert_eq!(held.as_slice(), &old[..]);
        // Once nobody holds it, the next rotation may reuse it.
        drop(held);
        a.evict_oldest(|_, _| {});
        let l3 = a.append(meta, b"third", &[b"x"]);
        assert_eq!(a.get(l3).value, b"x");
    }
}
