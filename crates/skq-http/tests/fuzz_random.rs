//! The parser fuzz body as a seeded randomized test (what CI runs: cargo-fuzz
//! needs a nightly toolchain). Inputs mix valid requests, hostile ones,
//! mutations of them and raw bytes; see `skq_http::fuzzing::check` for the
//! properties checked. Seeds are fixed, so a failure reproduces;
//! `SKQ_FUZZ_ITERS` raises the iteration count for longer runs.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const PIECES: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: t\r\n\r\n",
    b"GET /index.html HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\r\n",
    b"HEAD /a.css HTTP/1.1\r\nHost: t\r\n\r\n",
    b"GET /sub/b.txt HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\n\r\n",
    b"GET /sub HTTP/1.1\r\nHost: t\r\n\r\n",
    b"GET /out HTTP/1.1\r\nHost: t\r\n\r\n",
    b"GET /%2e%2e/secret.txt HTTP/1.1\r\nHost: t\r\n\r\n",
    b"GET /a.css HTTP/1.1\r\nHost: t\r\nIf-Modified-Since: Tue, 14 Nov 2023 22:13:20 GMT\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc",
    b"GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 99999\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET / HTTP/2.0\r\n\r\n",
    b"GET / HTTP/1.1\r\n\r\n",
    b"\r\n",
    b"X-Junk: yes\r\n",
    b"GET /",
];

fn random_input(rng: &mut SmallRng) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..rng.gen_range(0..10) {
        match rng.gen_range(0..12) {
            0 => v.extend((0..rng.gen_range(0..64)).map(|_| rng.gen::<u8>())),
            1 => v.extend(vec![b'a'; rng.gen_range(0..9000)]),
            2 => v.extend(b"X-H: v\r\n".repeat(rng.gen_range(0..80))),
            _ => v.extend_from_slice(PIECES[rng.gen_range(0..PIECES.len())]),
        }
    }
    for _ in 0..rng.gen_range(0..4) {
        if v.is_empty() {
            break;
        }
        let i = rng.gen_range(0..v.len());
        match rng.gen_range(0..3) {
            0 => v[i] = rng.gen(),
            1 => v.insert(i, *b" \r\n%./:".get(rng.gen_range(0..7)).unwrap()),
            _ => {
                v.remove(i);
            }
        }
    }
    let mut data = vec![rng.gen(), rng.gen()];
    data.extend(v);
    data
}

#[test]
fn parser_fuzz_body_randomized() {
    let iters: u64 = std::env::var("SKQ_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let first: u64 = std::env::var("SKQ_FUZZ_FIRST")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for seed in first..first + iters {
        let mut rng = SmallRng::seed_from_u64(seed);
        let data = random_input(&mut rng);
        if std::env::var_os("SKQ_FUZZ_VERBOSE").is_some() {
            eprintln!("seed {seed}: {:?}", String::from_utf8_lossy(&data));
        }
        skq_http::fuzzing::check(&data);
    }
}

#[test]
fn every_split_point_of_a_pipelined_pair_gives_the_same_replies() {
    let input: &[u8] =
        b"GET /a.css HTTP/1.1\r\nHost: t\r\nIf-None-Match: \"x\"\r\n\r\nHEAD /index.html HTTP/1.1\r\nHost: t\r\n\r\n";
    let whole = skq_http::fuzzing::drive(input, &[]);
    assert!(whole.0.starts_with(b"HTTP/1.1 200 OK"));
    for cut in 1..input.len() {
        assert_eq!(skq_http::fuzzing::drive(input, &[cut]), whole, "cut {cut}");
    }
}
