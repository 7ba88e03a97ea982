//! Cost of request classification (QStack's fastcallup), in ns per request:
//!
//! * `call/*`: one classifier fed a whole request through a
//!   [`ClassTracker`] (feed + request_done), as the connection layer does;
//!   `call/none` is the same loop without a classifier (the baseline);
//! * `conn/*`: a connection serving 32 pipelined 20-byte requests from
//!   memory (`Conn::on_ready`), with no classifier (baseline), the RPC
//!   header's flag byte, and a keyword (prefix) match. The difference
//!   divided by 32 is what classification adds per request in place.
//!
//! Run: `flock /tmp/skq-measure.lock cargo bench -p skq-net --bench classify`.

use std::hint::black_box;
use std::io::{self, Read, Write};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skq_net::classify::{Class, ClassTracker, Classifier, FlagByte, Prefixes};
use skq_net::conn::{Conn, Transport};
use skq_net::stats::WorkerCounters;
use skq_net::{Cx, Protocol, Served};

const FRAME: usize = 20;
const PIPELINED: usize = 32;

/// Serves fixed 20-byte frames, no reply.
struct Frames {
    classifier: Option<Box<dyn Classifier>>,
}

impl Protocol for Frames {
    type Session = ();
    fn open(&self, _: usize) {}
    fn serve(&self, _: &mut (), input: &[u8], _out: &mut Vec<u8>, cx: &mut Cx<'_>) -> Served {
        if input.len() < FRAME {
            return Served::NeedInput { consumed: 0 };
        }
        black_box(cx.class());
        Served::Request { consumed: FRAME }
    }
    fn classifier(&self) -> Option<&dyn Classifier> {
        self.classifier.as_deref()
    }
    fn flush_each(&self) -> bool {
        false
    }
}

/// Reads `data` once, then EAGAIN; swallows writes.
struct Once<'a> {
    data: &'a [u8],
    done: bool,
}

impl Read for Once<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.done = true;
        let n = self.data.len().min(buf.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        Ok(n)
    }
}

impl Transport for Once<'_> {}
impl Write for Once<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A 20-byte frame starting `GET /api/` or `GET /img/`, class byte 1 or 0.
fn frame(i: usize) -> [u8; FRAME] {
    let mut f = *b"GET /img/xxxxxxxxxx\n";
    if i % 4 == 0 {
        f[5..9].copy_from_slice(b"api/");
    }
    f[5] = if i % 4 == 0 { 1 } else { 0 } + b'a';
    f
}

fn keywords() -> Prefixes {
    Prefixes::new(vec![
        (b"GET /bpi/".to_vec(), Class::High),
        (b"GET /aimg".to_vec(), Class::Batch),
        (b"POST /report".to_vec(), Class::Batch),
    ])
    .expect("valid rules")
}

fn flag() -> FlagByte {
    FlagByte {
        offset: 5,
        map: [Class::Regular, Class::High, Class::Batch],
    }
}

fn bench(c: &mut Criterion) {
    let frames: Vec<[u8; FRAME]> = (0..64).map(frame).collect();
    let mut g = c.benchmark_group("call");
    g.throughput(Throughput::Elements(1));
    let cases: [(&str, Option<Box<dyn Classifier>>); 3] = [
        ("none", None),
        ("flag-byte", Some(Box::new(flag()))),
        ("keyword", Some(Box::new(keywords()))),
    ];
    for (name, cl) in &cases {
        g.bench_function(*name, |b| {
            let mut t = ClassTracker::new();
            let mut i = 0usize;
            b.iter(|| {
                i = (i + 1) & 63;
                let f = black_box(&frames[i]);
                if let Some(cl) = cl {
                    black_box(t.feed(cl.as_ref(), f));
                    t.request_done();
                } else {
                    black_box(f);
                }
                black_box(t.level())
            })
        });
    }
    g.finish();

    let mut input = Vec::new();
    for f in frames.iter().take(PIPELINED) {
        input.extend_from_slice(f);
    }
    let mut g = c.benchmark_group("conn");
    g.throughput(Throughput::Elements(PIPELINED as u64));
    for (name, cl) in [
        ("none", None),
        ("flag-byte", Some(Box::new(flag()) as Box<dyn Classifier>)),
        ("keyword", Some(Box::new(keywords()) as Box<dyn Classifier>)),
    ] {
        let proto = Frames { classifier: cl };
        let counters = WorkerCounters::default();
        let mut scratch = vec![0u8; 64 * 1024];
        let mut conn = Conn::new(());
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut s = Once {
                    data: &input,
                    done: false,
                };
                let mut cx = Cx::new(0, &counters);
                let _ = black_box(conn.on_ready(&proto, &mut s, &mut scratch, &mut cx, false));
                black_box(conn.level())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
