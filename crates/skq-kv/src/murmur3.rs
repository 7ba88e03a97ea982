//! MurmurHash3, x86 32-bit variant (Austin Appleby, public domain algorithm),
//! written from the algorithm's description.
//!
//! The thread-per-core server assigns a key to worker `murmur3_x86_32(key, 0) % workers`,
//! as the Sphinx paper does; the shared store uses the same hash to pick a lock shard.

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

/// Mixes one 4-byte block before it is folded into the state.
#[inline]
fn scramble(mut k: u32) -> u32 {
    k = k.wrapping_mul(C1);
    k = k.rotate_left(15);
    k.wrapping_mul(C2)
}

/// Final avalanche: every input bit affects every output bit.
#[inline]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// MurmurHash3 x86_32 of `data` with `seed`.
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for b in &mut blocks {
        let k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        h ^= scramble(k);
        h = h.rotate_left(13);
        h = h.wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, &byte) in tail.iter().enumerate() {
            k ^= u32::from(byte) << (8 * i);
        }
        h ^= scramble(k);
    }
    // The length is mixed in modulo 2^32, as the reference does.
    h ^= data.len() as u32;
    fmix32(h)
}

#[cfg(test)]
mod tests {
    use super::murmur3_x86_32;

    /// Published test vectors for MurmurHash3_x86_32 (the widely reproduced set from the
    /// SMHasher discussion), covering empty input, every tail length and multi-block input.
    #[test]
    fn published_vectors() {
        let cases: &[(&[u8], u32, u32)] = &[
            (b"", 0, 0),
            (b"", 1, 0x514e_28b7),
            (b"", 0xffff_ffff, 0x81f1_6f39),
            (b"\xff\xff\xff\xff", 0, 0x7629_3b50),
            (b"\x21\x43\x65\x87", 0, 0xf55b_516b),
            (b"\x21\x43\x65\x87", 0x5082_edee, 0x2362_f9de),
            (b"\x21\x43\x65", 0, 0x7e4a_8634),
            (b"\x21\x43", 0, 0xa0f7_b07a),
            (b"\x21", 0, 0x7266_1cf4),
            (b"\x00\x00\x00\x00", 0, 0x2362_f9de),
            (b"\x00\x00\x00", 0, 0x85f0_b427),
            (b"\x00\x00", 0, 0x30f4_c306),
            (b"\x00", 0, 0x514e_28b7),
            (b"aaaa", 0x9747_b28c, 0x5a97_808a),
            (b"aaa", 0x9747_b28c, 0x283e_0130),
            (b"aa", 0x9747_b28c, 0x5d21_1726),
            (b"a", 0x9747_b28c, 0x7fa0_9ea6),
            (b"abcd", 0x9747_b28c, 0xf047_8627),
            (b"abc", 0x9747_b28c, 0xc84a_62dd),
            (b"ab", 0x9747_b28c, 0x7487_5592),
            (b"Hello, world!", 0x9747_b28c, 0x2488_4cba),
            (
                b"The quick brown fox jumps over the lazy dog",
                0x9747_b28c,
                0x2fa8_26cd,
            ),
        ];
        for &(input, seed, want) in cases {
            assert_eq!(
                murmur3_x86_32(input, seed),
                want,
                "input {input:?} seed {seed:#x}"
            );
        }
    }
}
