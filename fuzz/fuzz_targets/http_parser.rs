//! Fuzzes skq-http's request path (httparse framing, target decoding, file
//! lookup, the connection state machine): no panic, replies independent of
//! read boundaries (see `skq_http::fuzzing::check`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| skq_http::fuzzing::check(data));
