//! `Config::spin_ns`: an idle worker polls its set without blocking for a
//! while before it blocks. Checked here by behaviour, not by time: every
//! event is still delivered exactly once with every poller arrangement, a
//! spin that sees work ends (it is counted as found), an idle instance
//! stops spinning and sleeps, and shutdown ends a spinning worker.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use skq_rt::{Config, Events, Flags, Skq};

const SPIN_NS: u64 = 1_000_000;

fn instance(mode: &str, workers: usize, pollers: usize) -> Arc<Skq> {
    let mut cfg = Config::parse_mode(mode, workers).unwrap();
    cfg.pollers = pollers;
    cfg.spin_ns = SPIN_NS;
    Skq::new(cfg).unwrap()
}

/// Worker threads that count each delivery per source token.
fn serve(
    skq: &Arc<Skq>,
    workers: usize,
    stop: &Arc<AtomicBool>,
    per_token: &Arc<Vec<AtomicU64>>,
) -> Vec<thread::JoinHandle<()>> {
    (0..workers)
        .map(|w| {
            let mut worker = skq.worker(w);
            let (stop, per_token) = (stop.clone(), per_token.clone());
            thread::spawn(move || {
                let mut events = Events::with_capacity(4);
                while !stop.load(Ordering::Relaxed) {
                    worker
                        .wait(&mut events, Some(Duration::from_millis(500)))
                        .unwrap();
                    for ev in &events {
                        per_token[ev.token as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect()
}

#[test]
fn spinning_workers_deliver_every_event_once_and_spins_find_work() {
    for (mode, pollers) in [("hybrid", 0), ("hybrid", 1), ("hybrid", 2), ("cpu", 0)] {
        let workers = 3;
        let skq = instance(mode, workers, pollers);
        let stop = Arc::new(AtomicBool::new(false));
        let n = 200usize;
        let per_token: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
        let events: Vec<_> = (0..n)
            .map(|i| skq.user_event(i as u64, Flags::NONE).unwrap())
            .collect();
        let threads = serve(&skq, workers, &stop, &per_token);
        // One event at a time, the next as soon as the previous arrived:
        // each comes well inside a 1-ms spin of the worker that just went
        // idle, so spins must find work.
        for (k, ev) in events.iter().enumerate() {
            ev.notify().unwrap();
            let t0 = Instant::now();
            while per_token[k].load(Ordering::Relaxed) == 0 {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{mode}/{pollers}: event {k} never delivered"
                );
                std::hint::spin_loop();
            }
        }
        // Then a burst of all of them at once.
        for ev in &events {
            ev.notify().unwrap();
        }
        let t0 = Instant::now();
        while per_token.iter().any(|c| c.load(Ordering::Relaxed) < 2) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{mode}/{pollers}: the burst was not delivered"
            );
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(Duration::from_millis(20));
        let (spins, found) = skq.spins();
        stop.store(true, Ordering::Relaxed);
        skq.shutdown();
        for t in threads {
            t.join().unwrap();
        }
        for (k, c) in per_token.iter().enumerate() {
            assert_eq!(
                c.load(Ordering::Relaxed),
                2,
                "{mode}/{pollers}: event {k} delivered other than once per notify"
            );
        }
        assert!(spins > 0, "{mode}/{pollers}: no worker spun");
        assert!(
            found > 0 && found <= spins,
            "{mode}/{pollers}: {found} of {spins} spins found work"
        );
    }
}

#[test]
fn an_idle_instance_stops_spinning_and_shutdown_ends_it() {
    let workers = 2;
    let skq = instance("hybrid", workers, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let per_token: Arc<Vec<AtomicU64>> = Arc::new(vec![AtomicU64::new(0)]);
    let ev = skq.user_event(0, Flags::NONE).unwrap();
    let threads = serve(&skq, workers, &stop, &per_token);
    ev.notify().unwrap();
    while per_token[0].load(Ordering::Relaxed) == 0 {
        thread::sleep(Duration::from_millis(1));
    }
    // A spin lasts at most 1 ms; after 100 ms every worker blocks, and an
    // idle instance neither spins again nor wakes anyone (the waits'
    // timeout, 500 ms, is longer than what is watched here).
    thread::sleep(Duration::from_millis(100));
    let (spins, _) = skq.spins();
    let wakeups = skq.wakeups();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(skq.spins().0, spins, "an idle worker spun again");
    assert_eq!(skq.wakeups(), wakeups, "an idle instance woke a worker");
    // Shutdown ends every worker's wait, spinning or blocked, with nothing.
    stop.store(true, Ordering::Relaxed);
    skq.shutdown();
    let t0 = Instant::now();
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "shutdown did not end the waits"
    );
    assert_eq!(per_token[0].load(Ordering::Relaxed), 1);
}

#[test]
fn spin_us_above_a_millisecond_is_refused() {
    let mut cfg = Config::parse_mode("hybrid", 2).unwrap();
    cfg.spin_ns = 2_000_000;
    let e = Skq::new(cfg).err().expect("2 ms spin accepted").to_string();
    assert!(e.contains("--spin-us 2000"), "{e}");
    assert!(e.contains("0..=1000"), "{e}");
}
