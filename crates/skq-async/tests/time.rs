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
