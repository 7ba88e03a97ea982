//! `skq_async::checkpoint()`: a long task calling it lets another task of
//! its worker run at the next call once that task waits, and costs only
//! the budget's yields while nothing waits. Counts, not timing.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
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
        // The long task's iteration, published before each checkpoint.
        let iter = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (it, d) = (iter.clone(), done.clone());
        // Loops (bounded) until the other task has run.
        let long = rt.spawn(async move {
            for i in 1..50_000_000u64 {
                if d.load(Ordering::SeqCst) {
                    return true;
                }
                it.store(i, Ordering::SeqCst);
                checkpoint().await;
            }
            false
        });
        let t0 = Instant::now();
        while iter.load(Ordering::SeqCst) == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{mode}: never started"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // The only worker is busy with `long`: this task waits for it, and
        // records the long task's iteration when it runs.
        let it = iter.clone();
        let other = rt.spawn(async move {
            let ran = it.load(Ordering::SeqCst);
            done.store(true, Ordering::SeqCst);
            ran
        });
        // The spawn is complete (its wake-up written): the long task's
        // next checkpoint finds it waiting and yields.
        let at = iter.load(Ordering::SeqCst);
        assert!(
            rt.block_on(long).unwrap(),
            "{mode}: the other task never ran"
        );
        let ran = rt.block_on(other).unwrap();
        assert!(
            ran.saturating_sub(at) <= 2,
            "{mode}: spawned at iteration {at}, ran at {ran}"
        );
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

/// A future making 1,000 `checkpoint()` calls, and the count of its polls.
fn thousand_checkpoints() -> (CountPolls, Arc<AtomicUsize>) {
    let polls = Arc::new(AtomicUsize::new(0));
    let f = CountPolls {
        inner: Box::pin(async {
            for _ in 0..1_000 {
                checkpoint().await;
            }
        }),
        polls: polls.clone(),
    };
    (f, polls)
}

struct Noop;
impl std::task::Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn outside_a_task_it_returns_at_once() {
    let rt = one_worker("hybrid");
    let (f, polls) = thousand_checkpoints();
    rt.block_on(f);
    assert_eq!(polls.load(Ordering::Relaxed), 1);
    // On the blocking pool too.
    let n = rt
        .block_on(rt.spawn_blocking(|| {
            let (f, polls) = thousand_checkpoints();
            let waker = std::task::Waker::from(Arc::new(Noop));
            let mut f = std::pin::pin!(f);
            assert!(f.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
            polls.load(Ordering::Relaxed)
        }))
        .unwrap();
    assert_eq!(n, 1);
}
