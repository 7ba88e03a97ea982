//! The fuzz body shared by the `cargo fuzz` target (`fuzz/fuzz_targets/parser.rs`) and the
//! seeded randomized test (`tests/fuzz_random.rs`, what CI runs).
//!
//! [`check`] feeds arbitrary bytes through a [`Session`] (parser + reply ordering) executing
//! every command — classic and meta (mg/ms/md/mn, including `ms` data blocks swallowed after
//! errors and refused too-large items) — against an in-memory [`Partition`], once in one piece and once cut into chunks chosen by
//! the input itself, and asserts:
//! 1. nothing panics (parser, store, session);
//! 2. the replies are identical however the input is split (the parser is truly
//!    incremental: no reply depends on where a read boundary fell);
//! 3. a connection closed for a protocol violation reports the same reason both ways.

use std::io::{self, Read};

use crate::exec::{apply, get_one, Now};
use crate::protocol::{Command, Limits};
use crate::session::{Dispatch, Handler, Session};
use crate::stats::Counters;
use crate::store::Partition;

/// Deterministic handler: one partition, a fixed clock, constant replies for keyless commands.
struct Mem {
    part: Partition,
    counters: Counters,
}

impl Handler for Mem {
    fn handle(&mut self, s: &mut Session, cmd: Command) -> Dispatch {
        let now = Now {
            rel: 1,
            started_unix: 1_700_000_000,
        };
        match &cmd {
            Command::Get { keys, cas, touch } => {
                let out = s.reply_out();
                for k in keys {
                    get_one(&mut self.part, k, *cas, *touch, now, &self.counters, out);
                }
                out.bytes_mut().extend_from_slice(b"END\r\n");
            }
            Command::FlushAll { delay, .. } => {
                self.part
                    .flush_all(crate::exec::flush_delay(*delay, now), now.rel);
                s.reply(b"OK\r\n");
            }
            Command::Stats { .. } => s.reply(b"END\r\n"),
            Command::Version => s.reply(b"VERSION fuzz\r\n"),
            Command::MetaNoop => s.reply(b"MN\r\n"),
            Command::Verbosity { .. } => s.reply(b"OK\r\n"),
            Command::Quit => unreachable!("the session handles quit"),
            _ => apply(&mut self.part, &cmd, now, &self.counters, s.reply_buf()),
        }
        Dispatch::Done
    }
}

/// A reader that yields one chunk, then reports "would block".
struct Chunk<'a>(&'a [u8]);

impl Read for Chunk<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.0.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = self.0.len().min(buf.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn run(input: &[u8], cuts: &[usize]) -> (Vec<u8>, Option<crate::protocol::CloseReason>) {
    let limits = Limits {
        max_item_size: 4096,
        max_line: 2048,
        max_get_line: 8192,
        max_conn_output: crate::protocol::DEFAULT_MAX_CONN_OUTPUT,
    };
    let mut s = Session::new(limits);
    let mut h = Mem {
        part: Partition::new(4 << 20).with_private_cas(),
        counters: Counters::default(),
    };
    let mut out = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&input.len())) {
        let end = end.clamp(start, input.len());
        s.fill(&mut Chunk(&input[start..end]), true)
            .expect("in-memory reads do not fail");
        s.process(&mut h);
        out.extend(s.take_output());
        start = end;
    }
    (out, s.violation)
}

/// The fuzz body: see the module docs for what it asserts. The first two bytes choose the
/// chunk size (so the fuzzer explores read boundaries); the rest is the connection's input.
pub fn check(data: &[u8]) {
    let (step, input) = match data {
        [a, b, rest @ ..] => ((usize::from(*a) << 8 | usize::from(*b)) % 97 + 1, rest),
        _ => (1, data),
    };
    let whole = run(input, &[]);
    let cuts: Vec<usize> = (1..input.len().div_ceil(step)).map(|i| i * step).collect();
    let chunked = run(input, &cuts);
    assert_eq!(
        whole,
        chunked,
        "replies depend on read boundaries (chunk {step}) for input {:?}",
        String::from_utf8_lossy(input)
    );
}
