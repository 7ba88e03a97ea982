//! `skq_async::checkpoint()`: a long task calling it lets another task of
//! its worker run at the next call once that task waits, and costs only
//! the budget's yields while nothing waits. Counts, not timing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use skq_async::{checkpoint, Builder, Runtime};

fn one_worker(mode: &str) -> Runtime {
    Builder::new().workers(1).mode(mode).build().unwrap()
}

/// Counts the polls of the future it wraps.
struct CountPolls {
    inner: Pin<Box<dyn Future<Output = ()> + Send>>,
    polls: Arc<AtomicUsize>,
}

impl Future for CountPolls {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

#[test]
fn a_long_task_lets_a_waiting_task_of_its_worker_run_at_the_next_checkpoint() {
    for mode in ["hybrid", "cpu", "vanilla"] {
        let rt = one_worker(mode);
        let started = Arc::new(AtomicBool::new(false));
        let spawned = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (s, sp, d) = (started.clone(), spawned.clone(), done.clone());
        // Loops (bounded) until the other task has run; records the
        // iteration at which it saw the other task spawned, and the one at
        // which it saw it done.
        let long = rt.spawn(async move {
            s.store(true, Ordering::SeqCst);
            let mut seen_spawned = None;
            for i in 0..50_000_000u64 {
                if d.load(Ordering::SeqCst) {
                    return seen_spawned.map(|at| (at, i));
                }
                if seen_spawned.is_none() && sp.load(Ordering::SeqCst) {
                    seen_spawned = Some(i);
                }
                checkpoint().await;
            }
            None
        });
        let t0 = Instant::now();
        while !started.load(Ordering::SeqCst) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{mode}: never started"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // The only worker is busy with `long`: this task waits for it.
        let other = rt.spawn(async move { done.store(true, Ordering::SeqCst) });
        spawned.store(true, Ordering::SeqCst);
        let (at, ran) = rt
            .block_on(long)
            .unwrap()
            .unwrap_or_else(|| panic!("{mode}: the other task never ran"));
        // The checkpoint right after the spawn became visible yielded, the
        // other task ran, and the long task saw it at its next iteration.
        assert!(ran - at <= 2, "{mode}: seen spawned at {at}, done at {ran}");
        rt.block_on(other).unwrap();
    }
}

#[test]
fn alone_a_task_yields_only_when_its_budget_is_spent() {
    const N: usize = 10_000;
    let rt = one_worker("hybrid");
    let polls = Arc::new(AtomicUsize::new(0));
    let task = CountPolls {
        inner: Box::pin(async {
            for _ in 0..N {
                checkpoint().await;
            }
        }),
        polls: polls.clone(),
    };
    rt.block_on(rt.spawn(task)).unwrap();
    // 128 units per poll: one yield per 128 checkpoints, no others.
    let p = polls.load(Ordering::Relaxed);
    assert!(
        (N / 128..=N / 128 + 2).contains(&p),
        "{p} polls for {N} checkpoints"
    );
}

struct Noop;
impl std::task::Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn outside_a_task_it_returns_at_once() {
    let rt = one_worker("hybrid");
    let polls = Arc::new(AtomicUsize::new(0));
    let f = CountPolls {
        inner: Box::pin(async {
            for _ in 0..1_000 {
                checkpoint().await;
            }
        }),
        polls: polls.clone(),
    };
    rt.block_on(f);
    assert_eq!(polls.load(Ordering::Relaxed), 1);
    // On the blocking pool too.
    let n = rt
        .block_on(rt.spawn_blocking(|| {
            let polls = Arc::new(AtomicUsize::new(0));
            let f = CountPolls {
                inner: Box::pin(async {
                    for _ in 0..1_000 {
                        checkpoint().await;
                    }
                }),
                polls: polls.clone(),
            };
            let waker = std::task::Waker::from(Arc::new(Noop));
            let mut f = std::pin::pin!(f);
            assert!(f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
            polls.load(Ordering::Relaxed)
        }))
        .unwrap();
    assert_eq!(n, 1);
}
