//! Executor behaviour: exactly-once completion, no concurrent polls,
//! wakers from anywhere, JoinHandle (await, abort, detach, panic),
//! spawn_blocking's bound, yield_now, priority classes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use skq_async::{Builder, Class, JoinHandle, Runtime};

fn rt(mode: &str, workers: usize) -> Runtime {
    Builder::new().workers(workers).mode(mode).build().unwrap()
}

#[test]
fn every_task_runs_exactly_once_in_every_mode() {
    for mode in [
        "hybrid",
        "hybrid-steal",
        "best2",
        "best2+steal",
        "cpu",
        "queue",
        "shared",
        "vanilla",
    ] {
        let rt = rt(mode, 3);
        const N: usize = 3000;
        let runs: Arc<Vec<AtomicU32>> = Arc::new((0..N).map(|_| AtomicU32::new(0)).collect());
        let total = rt.block_on(async {
            let mut hs = Vec::new();
            for i in 0..N {
                let runs = runs.clone();
                hs.push(skq_async::spawn(async move {
                    // Nested spawn and a few trips through the scheduler.
                    let inner = skq_async::spawn(async move { i as u64 });
                    skq_async::yield_now().await;
                    runs[i].fetch_add(1, Ordering::SeqCst);
                    inner.await.unwrap() + 1
                }));
            }
            let mut sum = 0u64;
            for h in hs {
                sum += h.await.unwrap();
            }
            sum
        });
        assert_eq!(
            total,
            (0..N as u64).map(|i| i + 1).sum::<u64>(),
            "mode {mode}"
        );
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r.load(Ordering::SeqCst), 1, "mode {mode}: task {i}");
        }
    }
}

#[test]
fn spawned_from_workers_and_other_threads() {
    let rt = rt("hybrid", 2);
    let h = rt.handle().clone();
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (h, done) = (h.clone(), done.clone());
            std::thread::spawn(move || {
                let hs: Vec<JoinHandle<()>> = (0..250)
                    .map(|_| {
                        let done = done.clone();
                        h.spawn(async move {
                            done.fetch_add(1, Ordering::SeqCst);
                        })
                    })
                    .collect();
                hs
            })
        })
        .collect();
    let handles: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    rt.block_on(async {
        for h in handles {
            h.await.unwrap();
        }
    });
    assert_eq!(done.load(Ordering::SeqCst), 1000);
}

/// A future that is pending `left` times, storing its waker for others to
/// call, and checks it is never polled by two threads at once.
struct Probe {
    left: usize,
    in_poll: Arc<AtomicBool>,
    overlaps: Arc<AtomicUsize>,
    waker: Arc<Mutex<Option<Waker>>>,
}

impl Future for Probe {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.in_poll.swap(true, Ordering::SeqCst) {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
        std::thread::yield_now();
        *self.waker.lock().unwrap() = Some(cx.waker().clone());
        let r = if self.left == 0 {
            Poll::Ready(())
        } else {
            self.left -= 1;
            Poll::Pending
        };
        self.in_poll.store(false, Ordering::SeqCst);
        r
    }
}

#[test]
fn wakers_from_many_threads_never_poll_a_task_twice_at_once() {
    let rt = rt("hybrid", 3);
    let in_poll = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let waker = Arc::new(Mutex::new(None::<Waker>));
    let h = rt.spawn(Probe {
        left: 200,
        in_poll: in_poll.clone(),
        overlaps: overlaps.clone(),
        waker: waker.clone(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let wakers: Vec<_> = (0..3)
        .map(|_| {
            let (waker, stop) = (waker.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let w = waker.lock().unwrap().clone();
                    if let Some(w) = w {
                        w.wake_by_ref();
                        w.wake();
                        n += 1;
                    }
                    std::thread::yield_now();
                }
                n
            })
        })
        .collect();
    rt.block_on(h).unwrap();
    // Keep waking after completion: harmless.
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::SeqCst);
    let calls: u64 = wakers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(calls > 0);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    // A stale waker after completion does nothing.
    let stale = waker.lock().unwrap().take();
    if let Some(w) = stale {
        w.wake();
    }
}

struct SetOnDrop(Arc<AtomicBool>);
impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn abort_cancels_and_drops_the_future() {
    let rt = rt("hybrid", 2);
    rt.block_on(async {
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = SetOnDrop(dropped.clone());
        let mut h = skq_async::spawn(async move {
            let _g = guard;
            std::future::pending::<()>().await;
        });
        skq_async::time::sleep(Duration::from_millis(5)).await;
        assert!(!h.is_finished());
        h.abort();
        let e = h.await.unwrap_err();
        assert!(e.is_cancelled(), "{e}");
        assert!(dropped.load(Ordering::SeqCst));

        // Aborting a finished task keeps its output.
        let mut h = skq_async::spawn(async { 7 });
        while !h.is_finished() {
            skq_async::yield_now().await;
        }
        h.abort();
        assert_eq!(h.await.unwrap(), 7);

        // Aborting before the first poll: the future never runs.
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let mut hs: Vec<_> = (0..50)
            .map(|_| {
                let r = r.clone();
                skq_async::spawn(async move { r.store(true, Ordering::SeqCst) })
            })
            .collect();
        for h in &mut hs {
            h.abort();
        }
        for h in hs {
            // Either it ran first (Ok) or it was cancelled; never both.
            match h.await {
                Ok(()) => assert!(ran.load(Ordering::SeqCst)),
                Err(e) => assert!(e.is_cancelled()),
            }
        }
    });
}

#[test]
fn detached_tasks_run_to_completion() {
    let rt = rt("best2", 2);
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..100 {
        let tx = tx.clone();
        rt.spawn(async move {
            skq_async::yield_now().await;
            tx.send(i).unwrap();
        })
        .detach();
    }
    drop(tx);
    let mut got: Vec<i32> = rx.iter().collect();
    got.sort();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

#[test]
fn a_panicking_task_is_reported_and_the_runtime_keeps_serving() {
    let rt = rt("hybrid", 2);
    rt.block_on(async {
        let h = skq_async::spawn(async {
            if skq_async::worker_id().is_some() {
                panic!("boom");
            }
            1
        });
        let e = h.await.unwrap_err();
        assert!(e.is_panic());
        assert_eq!(e.to_string(), "task panicked: boom");
        let hs: Vec<_> = (0..100)
            .map(|i| skq_async::spawn(async move { i }))
            .collect();
        let mut sum = 0;
        for h in hs {
            sum += h.await.unwrap();
        }
        assert_eq!(sum, 4950);
    });
}

/// A count-down latch that gives up after a bound (so a broken pool fails
/// the test instead of hanging it).
struct Latch(Mutex<usize>, Condvar);
impl Latch {
    fn arrive_and_wait(&self) -> bool {
        let mut g = self.0.lock().unwrap();
        *g -= 1;
        self.1.notify_all();
        let (g, _) = self
            .1
            .wait_timeout_while(g, Duration::from_secs(10), |n| *n > 0)
            .unwrap();
        *g == 0
    }
}

#[test]
fn spawn_blocking_runs_on_a_bounded_pool() {
    const BOUND: usize = 3;
    let rt = Builder::new()
        .workers(2)
        .max_blocking_threads(BOUND)
        .build()
        .unwrap();
    rt.block_on(async {
        // BOUND jobs can run at once: each waits for all the others.
        let latch = Arc::new(Latch(Mutex::new(BOUND), Condvar::new()));
        let hs: Vec<_> = (0..BOUND)
            .map(|_| {
                let l = latch.clone();
                skq_async::spawn_blocking(move || l.arrive_and_wait())
            })
            .collect();
        for h in hs {
            assert!(
                h.await.unwrap(),
                "the pool did not run {BOUND} jobs at once"
            );
        }
        // Never more than BOUND at once, and every job runs exactly once.
        let (cur, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let runs: Arc<Vec<AtomicU32>> = Arc::new((0..40).map(|_| AtomicU32::new(0)).collect());
        let hs: Vec<_> = (0..40)
            .map(|i| {
                let (cur, max, runs) = (cur.clone(), max.clone(), runs.clone());
                skq_async::spawn_blocking(move || {
                    let now = cur.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    runs[i].fetch_add(1, Ordering::SeqCst);
                    cur.fetch_sub(1, Ordering::SeqCst);
                    i
                })
            })
            .collect();
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(h.await.unwrap(), i);
        }
        assert!(max.load(Ordering::SeqCst) <= BOUND);
        assert!(runs.iter().all(|r| r.load(Ordering::SeqCst) == 1));
        // A panicking job is reported through its handle.
        let e = skq_async::spawn_blocking(|| panic!("blocking boom"))
            .await
            .unwrap_err();
        assert!(e.is_panic());
        // Blocking jobs never run on a worker.
        assert_eq!(
            skq_async::spawn_blocking(skq_async::worker_id)
                .await
                .unwrap(),
            None
        );
    });
}

#[test]
fn yield_now_lets_the_other_tasks_of_a_worker_run() {
    // One worker. The spinner only yields; once the other task has been
    // spawned (its wake-up is then pending), the spinner's next trips
    // through the scheduler must let it run.
    let rt = rt("hybrid", 1);
    rt.block_on(async {
        let (spawned, flag) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (s, f) = (spawned.clone(), flag.clone());
        let spinner = skq_async::spawn(async move {
            while !s.load(Ordering::SeqCst) {
                skq_async::yield_now().await;
            }
            for i in 0..10 {
                if f.load(Ordering::SeqCst) {
                    return Some(i);
                }
                skq_async::yield_now().await;
            }
            None
        });
        let f = flag.clone();
        let setter = skq_async::spawn(async move { f.store(true, Ordering::SeqCst) });
        spawned.store(true, Ordering::SeqCst);
        assert!(
            spinner.await.unwrap().is_some(),
            "the other task did not run"
        );
        setter.await.unwrap();
    });
}

#[test]
fn high_priority_tasks_are_polled_first() {
    // One worker: while it is held by a blocker, queue regular then high
    // tasks; once released it must poll every high task before any regular.
    let rt = Builder::new()
        .workers(1)
        .mode("hybrid")
        .batch(64)
        .build()
        .unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (started, release) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, r) = (started.clone(), release.clone());
    let blocker = rt.spawn(async move {
        s.store(true, Ordering::SeqCst);
        while !r.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    });
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let mut hs = Vec::new();
    for (class, n) in [(Class::Regular, 10), (Class::High, 10), (Class::Regular, 5)] {
        for _ in 0..n {
            let o = order.clone();
            hs.push(rt.spawn_with(class, async move {
                assert_eq!(skq_async::current_class(), Some(class));
                o.lock().unwrap().push(class);
            }));
        }
    }
    release.store(true, Ordering::SeqCst);
    rt.block_on(async {
        blocker.await.unwrap();
        for h in hs {
            h.await.unwrap();
        }
    });
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 25);
    assert!(order[..10].iter().all(|c| *c == Class::High), "{order:?}");
    assert!(
        order[10..].iter().all(|c| *c == Class::Regular),
        "{order:?}"
    );
}

#[test]
fn set_class_changes_the_calling_task_class() {
    let rt = rt("hybrid", 2);
    rt.block_on(async {
        assert!(!skq_async::set_class(Class::High), "block_on is not a task");
        skq_async::spawn(async {
            assert_eq!(skq_async::current_class(), Some(Class::Regular));
            assert!(skq_async::set_class(Class::High));
            skq_async::yield_now().await;
            assert_eq!(skq_async::current_class(), Some(Class::High));
        })
        .await
        .unwrap();
    });
}

#[test]
fn batch_tasks_never_run_on_reserved_workers() {
    // Diffusion: worker 1 is the batch worker, worker 0 is reserved.
    let rt = Builder::new()
        .workers(2)
        .mode("hybrid")
        .tune(|c| c.batch_workers = 0b10)
        .build()
        .unwrap();
    rt.block_on(async {
        let hs: Vec<_> = (0..200)
            .map(|_| {
                skq_async::spawn_with(Class::Batch, async {
                    let mut seen = Vec::new();
                    for _ in 0..3 {
                        seen.push(skq_async::worker_id());
                        skq_async::yield_now().await;
                    }
                    seen
                })
            })
            .collect();
        for h in hs {
            for w in h.await.unwrap() {
                assert_eq!(w, Some(1));
            }
        }
    });
}

#[test]
fn builder_errors_name_the_option() {
    let e = Builder::new().mode("fastest").build().err().unwrap();
    assert!(e.to_string().contains("--mode `fastest` is unknown"), "{e}");
    let e = Builder::new().workers(0).build().err().unwrap();
    assert!(e.to_string().contains("--workers 0"), "{e}");
    let e = Builder::new()
        .max_blocking_threads(0)
        .build()
        .err()
        .unwrap();
    assert!(e.to_string().contains("--max-blocking-threads 0"), "{e}");
    let e = Builder::new()
        .mode("shared+steal")
        .workers(2)
        .build()
        .err()
        .unwrap();
    assert!(e.to_string().contains("shared+steal"), "{e}");
}

#[test]
fn pinned_workers_run_tasks() {
    let rt = Builder::new().workers(2).pin_workers(true).build().unwrap();
    let n = rt.block_on(async {
        let hs: Vec<_> = (0..10)
            .map(|i| skq_async::spawn(async move { i }))
            .collect();
        let mut s = 0;
        for h in hs {
            s += h.await.unwrap();
        }
        s
    });
    assert_eq!(n, 45);
}

#[test]
fn a_task_spawned_by_a_blocked_task_runs_on_another_worker() {
    // tokio #4941: a task spawns a small task, then blocks its worker. With
    // stealing (hybrid) the small task must run on the other worker while
    // the first one still blocks (the blocker waits up to 10 s for it, never
    // yielding its worker).
    let rt = rt("hybrid", 2);
    let (me, other, done_while_blocked) = rt.block_on(async {
        skq_async::spawn(async {
            let me = skq_async::worker_id().unwrap();
            let done = Arc::new(AtomicBool::new(false));
            let d = done.clone();
            let small = skq_async::spawn(async move {
                d.store(true, Ordering::SeqCst);
                skq_async::worker_id().unwrap()
            });
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !done.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1)); // blocks the worker
            }
            let done_while_blocked = done.load(Ordering::SeqCst);
            (me, small.await.unwrap(), done_while_blocked)
        })
        .await
        .unwrap()
    });
    assert!(
        done_while_blocked,
        "the small task waited for the blocked worker"
    );
    assert_ne!(me, other);
}
