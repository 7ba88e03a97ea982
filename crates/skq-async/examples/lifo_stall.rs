//! tokio #4941 measured on both runtimes: a task spawns a small task and
//! then blocks its worker for `--block-ms` (default 50) without yielding.
//! How long after the spawn does the small task start? On tokio the small
//! task sits in the blocked worker's LIFO slot, which no other worker may
//! steal; on skq-async (hybrid) it is queued like any other event and an
//! idle worker steals it.
//!
//! ```text
//! cargo run --release -p skq-async --example lifo_stall -- [--reps N] [--block-ms MS]
//! ```
//!
//! Two workers per runtime, nothing else running on them; prints each
//! runtime's delays (min, median, max over the repetitions, in µs).

use std::time::{Duration, Instant};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} takes a positive integer")),
        None => default,
    }
}

fn summary(name: &str, mut delays: Vec<Duration>) {
    delays.sort_unstable();
    let us = |d: Duration| d.as_micros();
    println!(
        "{name:12} small task started after: min {} µs, median {} µs, max {} µs ({} repetitions)",
        us(delays[0]),
        us(delays[delays.len() / 2]),
        us(delays[delays.len() - 1]),
        delays.len()
    );
}

fn main() {
    let reps = arg("--reps", 20) as usize;
    let block = Duration::from_millis(arg("--block-ms", 50));

    // Each repetition: a task spawns the small task, which returns how long
    // after the spawn it started, then blocks its worker (never yielding).
    let rt = skq_async::Builder::new()
        .workers(2)
        .mode("hybrid")
        .build()
        .expect("skq-async runtime");
    let skq: Vec<Duration> = (0..reps)
        .map(|_| {
            let d = rt.block_on(async move {
                skq_async::spawn(async move {
                    let (start, me) = (Instant::now(), skq_async::worker_id());
                    let small = skq_async::spawn(async move {
                        // It ran on the other worker, never the blocked one.
                        assert_ne!(skq_async::worker_id(), me);
                        start.elapsed()
                    });
                    std::thread::sleep(block);
                    small.await.unwrap()
                })
                .await
                .unwrap()
            });
            std::thread::sleep(Duration::from_millis(5));
            d
        })
        .collect();
    drop(rt);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio runtime");
    let tokio: Vec<Duration> = (0..reps)
        .map(|_| {
            let d = rt.block_on(async move {
                tokio::spawn(async move {
                    let start = Instant::now();
                    let small = tokio::spawn(async move { start.elapsed() });
                    std::thread::sleep(block);
                    small.await.unwrap()
                })
                .await
                .unwrap()
            });
            std::thread::sleep(Duration::from_millis(5));
            d
        })
        .collect();
    drop(rt);

    println!(
        "tokio #4941: a task spawns a small task, then blocks its worker for {block:?}; 2 workers"
    );
    summary("skq-async", skq);
    summary("tokio", tokio);
}
