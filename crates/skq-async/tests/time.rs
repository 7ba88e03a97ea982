//! Timers: order and counts, never durations.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use skq_async::time::{self, Instant};
use skq_async::Builder;

#[test]
fn sleeps_fire_in_deadline_order() {
    // One worker: timers fire in deadline order (ties in insertion order),
    // and the woken tasks are queued and polled in that order.
    let rt = Builder::new().workers(1).build().unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let base = Instant::now() + Duration::from_millis(30);
    rt.block_on(async {
        let mut hs = Vec::new();
        // Spawned in reverse deadline order, with ties.
        for i in (0..30u64).rev() {
            let o = order.clone();
            let deadline = base + Duration::from_millis(2 * (i / 3));
            hs.push(skq_async::spawn(async move {
                time::sleep_until(deadline).await;
                assert!(Instant::now() >= deadline);
                o.lock().unwrap().push((i / 3, i));
            }));
        }
        for h in hs {
            h.await.unwrap();
        }
    });
    let order = order.lock().unwrap();
    assert_eq!(order.len(), 30);
    for w in order.windows(2) {
        assert!(w[0].0 <= w[1].0, "deadline order broken: {order:?}");
        if w[0].0 == w[1].0 {
            // Same deadline: insertion order, which was descending i.
            assert!(w[0].1 > w[1].1, "tie order broken: {order:?}");
        }
    }
}

#[test]
fn sleeps_on_many_workers_all_fire_once() {
    let rt = Builder::new().workers(3).build().unwrap();
    let fired = Arc::new(Mutex::new(Vec::new()));
    rt.block_on(async {
        let hs: Vec<_> = (0..300u64)
            .map(|i| {
                let f = fired.clone();
                skq_async::spawn(async move {
                    let d = Instant::now() + Duration::from_millis(i % 17);
                    time::sleep_until(d).await;
                    assert!(Instant::now() >= d);
                    f.lock().unwrap().push(i);
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
        // A sleep awaited on the block_on thread itself.
        time::sleep(Duration::from_millis(3)).await;
    });
    let mut f = fired.lock().unwrap().clone();
    f.sort();
    assert_eq!(f, (0..300).collect::<Vec<_>>());
}

#[test]
fn timeout_elapses_or_passes_the_output() {
    let rt = Builder::new().workers(2).build().unwrap();
    rt.block_on(async {
        let r = time::timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
        assert_eq!(r, Err(time::Elapsed));
        let r = time::timeout(Duration::from_secs(30), async { 5 }).await;
        assert_eq!(r, Ok(5));
        let r = skq_async::spawn(time::timeout(Duration::from_secs(30), async {
            time::sleep(Duration::from_millis(2)).await;
            6
        }))
        .await
        .unwrap();
        assert_eq!(r, Ok(6));
    });
}

#[test]
fn interval_ticks_on_schedule() {
    let rt = Builder::new().workers(2).build().unwrap();
    let ticks = rt.block_on(async {
        skq_async::spawn(async {
            let period = Duration::from_millis(3);
            let mut iv = time::interval(period);
            let mut ticks = Vec::new();
            for _ in 0..6 {
                let t = iv.tick().await;
                assert!(Instant::now() >= t);
                ticks.push(t);
            }
            (ticks, period)
        })
        .await
        .unwrap()
    });
    let (ticks, period) = ticks;
    assert_eq!(ticks.len(), 6);
    for w in ticks.windows(2) {
        assert_eq!(w[1] - w[0], period);
    }
}

#[test]
fn dropped_and_reset_sleeps_do_not_fire() {
    let rt = Builder::new().workers(1).build().unwrap();
    rt.block_on(async {
        skq_async::spawn(async {
            let mut s = time::sleep(Duration::from_secs(3600));
            // Register it, then move it close.
            assert!(time::timeout(Duration::from_millis(1), &mut s)
                .await
                .is_err());
            s.reset(Instant::now() + Duration::from_millis(2));
            s.await;
            // Many timers dropped before firing leave nothing behind that
            // could wake this task later.
            for _ in 0..100 {
                let r = time::timeout(
                    Duration::from_millis(1),
                    time::sleep(Duration::from_secs(60)),
                );
                assert!(r.await.is_err());
            }
        })
        .await
        .unwrap();
    });
}

#[test]
fn a_timer_that_expires_during_a_batch_fires_before_the_batch_ends() {
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Wake, Waker};

    /// Records "timer" in the shared log when woken.
    struct Logged(Arc<Mutex<Vec<String>>>, AtomicBool);
    impl Wake for Logged {
        fn wake(self: Arc<Self>) {
            if !self.1.swap(true, Ordering::SeqCst) {
                self.0.lock().unwrap().push("timer".into());
            }
        }
    }

    // One worker, batches of up to 32 events: the parent registers a 5 ms
    // sleep on the worker's heap (polled once with a logging waker), then
    // spawns ten tasks that each block the worker for 20 ms. They are
    // queued while the parent runs, so the worker takes them as one batch.
    // The sleep expires during the first of them; it must fire between two
    // of them, not after the tenth.
    let rt = Builder::new().workers(1).batch(32).build().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let keep: Arc<Mutex<Option<std::pin::Pin<Box<time::Sleep>>>>> = Arc::default();
    let (l, k) = (log.clone(), keep.clone());
    let blockers = rt.block_on(async move {
        skq_async::spawn(async move {
            let mut sleep = Box::pin(time::sleep(Duration::from_millis(5)));
            let waker = Waker::from(Arc::new(Logged(l.clone(), AtomicBool::new(false))));
            assert!(sleep
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            *k.lock().unwrap() = Some(sleep);
            (0..10)
                .map(|i| {
                    let l = l.clone();
                    skq_async::spawn(async move {
                        l.lock().unwrap().push(format!("b{i}"));
                        std::thread::sleep(Duration::from_millis(20));
                    })
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap()
    });
    rt.block_on(async move {
        for b in blockers {
            b.await.unwrap();
        }
    });
    // The timer fires by the worker's next wait at the latest.
    for _ in 0..500 {
        if log.lock().unwrap().iter().any(|e| e == "timer") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let log = log.lock().unwrap().clone();
    let timer = log
        .iter()
        .position(|e| e == "timer")
        .expect("the timer fired");
    let last = log.iter().position(|e| e == "b9").expect("b9 ran");
    assert!(
        timer < last,
        "the timer waited for the whole batch: {log:?}"
    );
    drop(keep);
}
