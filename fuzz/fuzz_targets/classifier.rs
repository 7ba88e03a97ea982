//! Fuzzes the request classifiers (skq-net's FlagByte and Prefixes, the
//! cache's --priority rules): no panic on any bytes, and no verdict that
//! depends on read boundaries (see `skq_net::classify::check_split`). The
//! first four bytes choose the read sizes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skq_net::classify::{check_split, Class, FlagByte, Prefixes};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let cuts: Vec<usize> = data[..4].iter().map(|&b| b as usize % 16 + 1).collect();
    let body = &data[4..];
    check_split(&FlagByte::new(5), body, &cuts);
    let prefixes = Prefixes::new(vec![
        (b"GET /api/".to_vec(), Class::High),
        (b"GET /".to_vec(), Class::Regular),
        (b"POST /report".to_vec(), Class::Batch),
    ])
    .unwrap();
    check_split(&prefixes, body, &cuts);
    let rules = skq_kv::priority::Rules::parse(&[
        "regular:multikey",
        "high:cmd=get|gets|mg&prefix=user:",
        "batch:cmd=set&prefix=report:",
    ])
    .unwrap();
    check_split(&rules, body, &cuts);
});
