//! Elastic workers: parked workers hand over their tasks and timers, and
//! come back whole. Counts and completion only; the waits are hang guards.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use skq_async::time::{self, Instant};
use skq_async::{BuildError, Builder, Runtime};

/// Polls `f` every 10 ms for up to 10 s.
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..1000 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

/// Runs `f` on a thread of its own; panics naming `what` if it has not
/// finished after 20 s (a hang guard, not a timing check).
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} never finished"))
}

#[test]
fn timers_of_parked_workers_still_fire_and_rejoined_workers_get_theirs() {
    // The shared queue, one event per wait: whichever worker is free takes
    // the next task, so tasks that hold their worker for a while spread
    // over all four.
    let rt = Arc::new(
        Builder::new()
            .workers(4)
            .mode("shared")
            .batch(1)
            .build()
            .unwrap(),
    );
    let on = Arc::new(Mutex::new(HashSet::new()));
    let armed = Arc::new(AtomicUsize::new(0));
    let fired = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_millis(600);
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let (on, armed, fired) = (on.clone(), armed.clone(), fired.clone());
            rt.spawn(async move {
                std::thread::sleep(Duration::from_millis(10));
                on.lock().unwrap().insert(skq_async::worker_id().unwrap());
                armed.fetch_add(1, Ordering::SeqCst);
                time::sleep_until(deadline).await;
                assert!(Instant::now() >= deadline);
                fired.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    assert!(eventually(|| armed.load(Ordering::SeqCst) == 16));
    assert!(
        on.lock().unwrap().iter().any(|&w| w >= 1),
        "no timer landed on a worker that parks: {:?}",
        on.lock().unwrap()
    );
    // Workers 1..4 park (the idle ones at once); their timers move.
    rt.handle().skq().set_active(1);
    assert!(eventually(|| rt.handle().live_workers() == 1));
    let r = rt.clone();
    within("the moved sleeps", move || {
        r.block_on(async {
            for h in handles {
                h.await.unwrap();
            }
        })
    });
    assert_eq!(fired.load(Ordering::SeqCst), 16);

    // Sleeps made from other threads while 1..4 are parked go round-robin
    // to open heaps only.
    let r = rt.clone();
    within("sleeps inserted while parked", move || {
        for _ in 0..8 {
            r.block_on(time::sleep(Duration::from_millis(2)));
        }
    });

    // They rejoin; round-robin sleeps from other threads land on each of
    // them, idle and blocked with no timer: each must be kicked (its kick,
    // unpinned by parking, pinned to it again).
    rt.handle().skq().set_active(4);
    assert!(eventually(|| rt.handle().live_workers() == 4));
    for round in 0..3 {
        let r = rt.clone();
        within(
            &format!("round {round} of sleeps on rejoined workers"),
            move || {
                let ts: Vec<_> = (0..8)
                    .map(|_| {
                        let r = r.clone();
                        std::thread::spawn(move || {
                            r.block_on(time::sleep(Duration::from_millis(5)))
                        })
                    })
                    .collect();
                for t in ts {
                    t.join().unwrap();
                }
            },
        );
    }
}

#[test]
fn the_resource_manager_parks_idle_workers_and_work_runs_exactly_once() {
    let rt: Runtime = Builder::new()
        .workers(4)
        .mode("hybrid")
        .min_workers(1)
        .build()
        .unwrap();
    // Idle: after the shrink streak the manager keeps only the minimum.
    assert!(
        eventually(|| rt.handle().live_workers() == 1),
        "live workers stayed at {}",
        rt.handle().live_workers()
    );
    let done = Arc::new(Mutex::new(Vec::new()));
    let rt = Arc::new(rt);
    let (r, d) = (rt.clone(), done.clone());
    within("tasks on an elastic runtime", move || {
        r.block_on(async {
            let hs: Vec<_> = (0..400u32)
                .map(|i| {
                    let d = d.clone();
                    skq_async::spawn(async move {
                        if i % 4 == 0 {
                            time::sleep(Duration::from_millis(u64::from(i % 7))).await;
                        }
                        skq_async::yield_now().await;
                        d.lock().unwrap().push(i);
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
        })
    });
    let mut done = done.lock().unwrap().clone();
    done.sort_unstable();
    assert_eq!(done, (0..400).collect::<Vec<_>>());
}

#[test]
fn elastic_settings_out_of_range_are_refused_by_name() {
    for min in [0, 5] {
        let e = Builder::new().workers(4).min_workers(min).build();
        match e {
            Err(BuildError::Invalid(m)) => assert!(
                m.contains(&format!("--min-workers {min} is out of range")),
                "{m}"
            ),
            Err(other) => panic!("min {min}: {other}"),
            Ok(_) => panic!("min {min} was accepted"),
        }
    }
    let mut cfg = skq_async::ElasticConfig::new(1, 4);
    cfg.period_ns = 0;
    let e = Builder::new().workers(4).elastic(cfg).build();
    assert!(
        matches!(&e, Err(BuildError::Config(c)) if c.to_string().contains("period")),
        "{:?}",
        e.err().map(|e| e.to_string())
    );
}
