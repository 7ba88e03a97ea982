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

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One repetition's delay from the spawn to the small task's first poll.
type Delays = Arc<Mutex<Vec<Duration>>>;

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

/// The body both runtimes run: spawn the small task with `spawn`, block
/// the worker, then wait for the small task.
fn reproduce(spawn: impl FnOnce(Box<dyn FnOnce() + Send>), block: Duration, delays: &Delays) {
    let start = Instant::now();
    let d = delays.clone();
    spawn(Box::new(move || d.lock().unwrap().push(start.elapsed())));
    std::thread::sleep(block); // blocks this worker, never yields
}

fn summary(name: &str, delays: &Delays) {
    let mut v: Vec<u128> = delays
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.as_micros())
        .collect();
    v.sort_unstable();
    println!(
        "{name:12} small task started after: min {} µs, median {} µs, max {} µs ({} repetitions)",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1],
        v.len()
    );
}

fn main() {
    let reps = arg("--reps", 20) as usize;
    let block = Duration::from_millis(arg("--block-ms", 50));

    let skq_delays: Delays = Arc::default();
    let rt = skq_async::Builder::new()
        .workers(2)
        .mode("hybrid")
        .build()
        .expect("skq-async runtime");
    for _ in 0..reps {
        let d = skq_delays.clone();
        rt.block_on(async move {
            skq_async::spawn(async move {
                let small: Arc<Mutex<Option<skq_async::JoinHandle<()>>>> = Arc::default();
                let s = small.clone();
                reproduce(
                    move |f| {
                        let me = skq_async::worker_id();
                        *s.lock().unwrap() = Some(skq_async::spawn(async move {
                            f();
                            // It ran on the other worker, never the blocked one.
                            assert_ne!(skq_async::worker_id(), me);
                        }));
                    },
                    block,
                    &d,
                );
                let h = small.lock().unwrap().take().expect("spawned");
                h.await.unwrap();
            })
            .await
            .unwrap();
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(rt);

    let tokio_delays: Delays = Arc::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio runtime");
    for _ in 0..reps {
        let d = tokio_delays.clone();
        rt.block_on(async move {
            tokio::spawn(async move {
                let small: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>> = Arc::default();
                let s = small.clone();
                reproduce(
                    move |f| {
                        *s.lock().unwrap() = Some(tokio::spawn(async move { f() }));
                    },
                    block,
                    &d,
                );
                let h = small.lock().unwrap().take().expect("spawned");
                h.await.unwrap();
            })
            .await
            .unwrap();
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(rt);

    println!(
        "tokio #4941: a task spawns a small task, then blocks its worker for {block:?}; 2 workers"
    );
    summary("skq-async", &skq_delays);
    summary("tokio", &tokio_delays);
}
