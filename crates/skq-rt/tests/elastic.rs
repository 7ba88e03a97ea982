//! Elastic workers on real threads: workers above the target park inside
//! `wait` (their work goes to the others), rejoin when the target rises, and
//! every message is handled exactly once throughout.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use skq_rt::{checkpoint, Config, Events, Flags, Interest, Policy, Skq};

/// A liveness bound only: the condition is expected within milliseconds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn workers_park_below_the_target_and_rejoin_above_it_losing_nothing() {
    park_and_rejoin(1);
}

#[test]
fn with_a_poll_group_per_worker_parked_groups_sets_are_still_harvested() {
    // Each worker alone in its group: a parked worker leaves its epoll set
    // without a harvester, so a live group adopts it meanwhile.
    park_and_rejoin(4);
}

fn park_and_rejoin(groups: usize) {
    let workers = 4;
    let mut cfg = Config::new(Policy::Hybrid, workers);
    cfg.poll_groups = groups;
    let skq = Skq::new(cfg).unwrap();
    let pairs: Vec<(UnixStream, UnixStream)> = (0..16)
        .map(|_| {
            let (tx, rx) = UnixStream::pair().unwrap();
            rx.set_nonblocking(true).unwrap();
            (tx, rx)
        })
        .collect();
    let mut ids = Vec::new();
    for (i, (_, rx)) in pairs.iter().enumerate() {
        let id = skq
            .register(
                rx.as_raw_fd(),
                i as u64,
                Interest::READABLE,
                Flags::NONE,
                None,
            )
            .unwrap();
        ids.push(id);
    }
    let readers: Arc<Vec<Mutex<UnixStream>>> = Arc::new(
        pairs
            .iter()
            .map(|(_, rx)| Mutex::new(rx.try_clone().unwrap()))
            .collect(),
    );
    // (token) -> bytes received, and which workers handled anything.
    let got: Arc<Mutex<HashMap<u64, Vec<u8>>>> = Arc::default();
    let by_worker: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(vec![0; workers]));
    let stop = Arc::new(AtomicBool::new(false));
    // Park all but worker 0 before any thread waits.
    skq.set_active(1);
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let (skq, readers, got, by_worker, stop) = (
                skq.clone(),
                readers.clone(),
                got.clone(),
                by_worker.clone(),
                stop.clone(),
            );
            thread::spawn(move || {
                let mut worker = skq.worker(w);
                let mut events = Events::with_capacity(4);
                while !stop.load(Ordering::Relaxed) {
                    worker
                        .wait(&mut events, Some(Duration::from_millis(20)))
                        .unwrap();
                    for ev in events.iter() {
                        // The handler may call checkpoint at any point.
                        let _ = checkpoint();
                        let mut buf = [0u8; 64];
                        let mut r = readers[ev.token as usize].lock().unwrap();
                        loop {
                            match r.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => got
                                    .lock()
                                    .unwrap()
                                    .entry(ev.token)
                                    .or_default()
                                    .extend_from_slice(&buf[..n]),
                                Err(_) => break,
                            }
                        }
                        by_worker.lock().unwrap()[w] += 1;
                    }
                }
                worker.exit()
            })
        })
        .collect();
    eventually("three workers park", || skq.live_workers() == 1);
    let send = |round: u8| {
        for (tx, _) in &pairs {
            (&*tx).write_all(&[round]).unwrap();
        }
    };
    send(1);
    eventually("round 1 arrives", || {
        got.lock()
            .unwrap()
            .values()
            .filter(|v| v.contains(&1))
            .count()
            == 16
    });
    assert_eq!(
        by_worker.lock().unwrap()[1..].iter().sum::<u64>(),
        0,
        "parked workers handled nothing"
    );
    let stats = skq.stats();
    assert!(stats[1..].iter().all(|s| s.parked && !s.exited));
    // Everyone rejoins.
    skq.set_active(workers);
    eventually("all rejoin", || skq.live_workers() == workers);
    send(2);
    eventually("round 2 arrives", || {
        got.lock()
            .unwrap()
            .values()
            .filter(|v| v.contains(&2))
            .count()
            == 16
    });
    // Park again while traffic flows, then one more round.
    skq.set_active(2);
    send(3);
    eventually("two park again", || skq.live_workers() == 2);
    send(4);
    eventually("rounds 3 and 4 arrive", || {
        got.lock()
            .unwrap()
            .values()
            .filter(|v| v.contains(&3) && v.contains(&4))
            .count()
            == 16
    });
    stop.store(true, Ordering::Relaxed);
    skq.shutdown();
    for t in threads {
        let report = t.join().unwrap();
        assert!(report.stranded.is_empty());
    }
    // Exactly once and in order, per source.
    for (tok, bytes) in got.lock().unwrap().iter() {
        assert_eq!(bytes, &vec![1, 2, 3, 4], "source {tok}");
    }
    for (id, (_, rx)) in ids.into_iter().zip(&pairs) {
        skq.deregister(id, rx.as_raw_fd()).unwrap();
    }
}

#[test]
fn checkpoint_off_a_worker_thread_does_nothing() {
    assert_eq!(checkpoint(), 0);
}

#[test]
fn the_resource_manager_parks_idle_workers_down_to_the_minimum() {
    let workers = 4;
    let skq = Skq::new(Config::new(Policy::Hybrid, workers)).unwrap();
    let mut ecfg = skq_rt::ElasticConfig::new(2, workers);
    ecfg.period_ns = 5_000_000;
    let rm = skq_rt::spawn_resource_manager(&skq, ecfg).unwrap();
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let skq = skq.clone();
            thread::spawn(move || {
                let mut worker = skq.worker(w);
                let mut events = Events::with_capacity(4);
                while !skq.is_shutdown() {
                    worker
                        .wait(&mut events, Some(Duration::from_millis(20)))
                        .unwrap();
                }
            })
        })
        .collect();
    // No load at all: demand 0, so the minimum.
    eventually("parked down to 2", || skq.live_workers() == 2);
    assert_eq!(skq.active_target(), 2);
    let history = skq.elastic_history();
    assert!(history.iter().all(|d| d.active >= 2));
    skq.shutdown();
    rm.join().unwrap();
    for t in threads {
        t.join().unwrap();
    }
    // Bad settings are refused with a message.
    let err = skq_rt::spawn_resource_manager(&skq, skq_rt::ElasticConfig::new(3, 9)).unwrap_err();
    assert!(err.to_string().contains("max 9"));
}
