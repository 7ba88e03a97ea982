//! The parser fuzz body as a seeded randomized test (what CI runs: cargo-fuzz needs a nightly
//! toolchain). Inputs mix valid commands, mutations of them and raw bytes; see
//! `skq_kv::fuzzing::check` for the properties checked. Seeds are fixed, so a failure
//! reproduces; `SKQ_FUZZ_ITERS` raises the iteration count for longer local runs.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const PIECES: &[&[u8]] = &[
    b"get a\r\n",
    b"gets a b c\r\n",
    b"gat 10 a\r\n",
    b"gats -1 b\r\n",
    b"set a 1 0 3\r\nabc\r\n",
    b"set b 0 0 0\r\n\r\n",
    b"add a 0 0 1\r\nx\r\n",
    b"replace b 0 100 2\r\nxy\r\n",
    b"append a 0 0 2\r\nzz\r\n",
    b"prepend a 0 0 2\r\nzz\r\n",
    b"cas a 0 0 1 2\r\nq\r\n",
    b"incr n 5\r\n",
    b"decr n 18446744073709551615\r\n",
    b"set n 0 0 2\r\n10\r\n",
    b"delete a\r\n",
    b"delete a 0 noreply\r\n",
    b"touch a 5\r\n",
    b"flush_all\r\n",
    b"flush_all 3 noreply\r\n",
    b"stats\r\n",
    b"version\r\n",
    b"verbosity 1\r\n",
    b"set big 0 0 5000\r\n",
    b"set k 0 0 4 noreply\r\nabcd\r\n",
    b"quit\r\n",
    b"bogus\r\n",
    b"\r\n",
    b"set k 0 0 3\r\nabcdef\r\n",
    b"mg a v k f c t s Oo1\r\n",
    b"mg a v q T30 t\r\n",
    b"mg nope v q k\r\n",
    b"mg YWJj b v k\r\n",
    b"mg a x\r\n",
    b"ms a 3 F5 T0 c k q\r\nxyz\r\n",
    b"ms a 2 MA C1\r\nzz\r\n",
    b"ms b 2 ME\r\nzz\r\n",
    b"ms YWJj 2 b k MP\r\nhi\r\n",
    b"ms a 2 Mx\r\nzz\r\n",
    b"ms big 5000 q\r\n",
    b"ms a x\r\nzz\r\n",
    b"md a q C2 Oz k\r\n",
    b"md nope\r\n",
    b"mn\r\n",
];

fn random_input(rng: &mut SmallRng) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..rng.gen_range(0..12) {
        match rng.gen_range(0..10) {
            0 => v.extend((0..rng.gen_range(0..64)).map(|_| rng.gen::<u8>())),
            1 => v.extend(vec![b'x'; rng.gen_range(0..3000)]),
            2 => v.extend(vec![b'v'; rng.gen_range(0..5100)]),
            _ => v.extend_from_slice(PIECES[rng.gen_range(0..PIECES.len())]),
        }
    }
    // Mutations: flip, insert, delete bytes.
    for _ in 0..rng.gen_range(0..4) {
        if v.is_empty() {
            break;
        }
        let i = rng.gen_range(0..v.len());
        match rng.gen_range(0..3) {
            0 => v[i] = rng.gen(),
            1 => v.insert(i, *b" \r\n0-9a".get(rng.gen_range(0..7)).unwrap()),
            _ => {
                v.remove(i);
            }
        }
    }
    // Prefix: the two bytes that pick the chunk size.
    let mut data = vec![rng.gen(), rng.gen()];
    data.extend(v);
    data
}

#[test]
fn parser_fuzz_body_randomized() {
    let iters: u64 = std::env::var("SKQ_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    for seed in 0..iters {
        let mut rng = SmallRng::seed_from_u64(seed);
        let data = random_input(&mut rng);
        skq_kv::fuzzing::check(&data);
    }
}
