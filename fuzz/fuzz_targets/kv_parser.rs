//! Fuzzes the memcached text-protocol parser and session: no panic, and replies independent
//! of read boundaries (see `skq_kv::fuzzing::check`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| skq_kv::fuzzing::check(data));
