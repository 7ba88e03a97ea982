//! Behaviour of the runtime over real file descriptors: every readiness
//! delivered, per-source order kept, never two workers on one source, work
//! survives a worker's exit, user events and shutdown.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use skq_rt::{Config, Events, Flags, Interest, Skq};

struct Pipe {
    rx: UnixStream,
    buf: Vec<u8>,
    next: u32,
}

/// `pipes` socketpairs, each fed `msgs` sequence numbers by writer threads;
/// `workers` workers read them. Returns per-worker delivered counts.
fn run(
    mode: &str,
    workers: usize,
    pipes: usize,
    msgs: u32,
    exit_worker_after: Option<u64>,
) -> Vec<u64> {
    run_groups(mode, workers, 1, pipes, msgs, exit_worker_after, 7)
}

/// [`run`] with the workers split into `groups` poll groups (one epoll set
/// each); each worker sleeps 200 µs after every `pause_every`-th message it
/// reads (uneven service; 0: never).
fn run_groups(
    mode: &str,
    workers: usize,
    groups: usize,
    pipes: usize,
    msgs: u32,
    exit_worker_after: Option<u64>,
    pause_every: u64,
) -> Vec<u64> {
    // No retry timer: idle thieves are woken on demand only.
    let mut cfg = Config::parse_mode(mode, workers).unwrap();
    assert_eq!(cfg.steal_retry_ns, 0);
    cfg.poll_groups = groups;
    let skq = Skq::new(cfg).unwrap();
    let mut txs = Vec::new();
    let mut states = Vec::new();
    for i in 0..pipes {
        let (tx, rx) = UnixStream::pair().unwrap();
        rx.set_nonblocking(true).unwrap();
        skq.register(
            rx.as_raw_fd(),
            i as u64,
            Interest::READABLE,
            Flags::NONE,
            None,
        )
        .unwrap();
        txs.push(tx);
        states.push(Mutex::new(Pipe {
            rx,
            buf: Vec::new(),
            next: 0,
        }));
    }
    let states = Arc::new(states);
    let done = Arc::new(AtomicU64::new(0));
    let busy: Arc<Vec<AtomicBool>> = Arc::new((0..pipes).map(|_| AtomicBool::new(false)).collect());
    let total = pipes as u64 * msgs as u64;
    let mut handles = Vec::new();
    for w in 0..workers {
        let mut worker = skq.worker(w);
        let (states, done, busy, skq) = (states.clone(), done.clone(), busy.clone(), skq.clone());
        handles.push(thread::spawn(move || {
            let mut events = Events::with_capacity(8);
            let mut mine = 0u64;
            loop {
                if exit_worker_after.is_some_and(|n| w == 0 && mine >= n) {
                    let report = worker.exit();
                    assert!(report.stranded.is_empty());
                    return mine;
                }
                let n = worker
                    .wait(&mut events, Some(Duration::from_millis(20)))
                    .unwrap();
                if skq.is_shutdown() {
                    return mine;
                }
                for ev in events.iter().take(n) {
                    let t = ev.token as usize;
                    assert!(
                        !busy[t].swap(true, Ordering::AcqRel),
                        "source {t} on two workers at once"
                    );
                    // Per-source ownership: this lock is never contended.
                    let mut p = states[t].try_lock().expect("source state contended");
                    let p = &mut *p;
                    let mut chunk = [0u8; 4096];
                    loop {
                        match p.rx.read(&mut chunk) {
                            Ok(0) => break,
                            Ok(k) => p.buf.extend_from_slice(&chunk[..k]),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    let whole = p.buf.len() / 4 * 4;
                    for c in p.buf[..whole].chunks(4) {
                        let v = u32::from_le_bytes(c.try_into().unwrap());
                        assert_eq!(v, p.next, "source {t}: out of order");
                        p.next += 1;
                        mine += 1;
                        done.fetch_add(1, Ordering::AcqRel);
                    }
                    p.buf.drain(..whole);
                    if pause_every > 0 && mine.is_multiple_of(pause_every) {
                        thread::sleep(Duration::from_micros(200)); // uneven service
                    }
                    busy[t].store(false, Ordering::Release);
                }
                if done.load(Ordering::Acquire) == total {
                    skq.shutdown();
                }
            }
        }));
    }
    // Writers: pipelined bursts, interleaved over pipes.
    let writer = thread::spawn(move || {
        for m in 0..msgs {
            for tx in txs.iter_mut() {
                tx.write_all(&m.to_le_bytes()).unwrap();
            }
            if m.is_multiple_of(16) {
                thread::sleep(Duration::from_micros(100));
            }
        }
        txs
    });
    let start = Instant::now();
    while !skq.is_shutdown() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{mode}: stuck; stats {:?}",
            skq.stats()
        );
        thread::sleep(Duration::from_millis(5));
    }
    let _txs = writer.join().unwrap();
    let counts: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (i, s) in states.iter().enumerate() {
        assert_eq!(s.lock().unwrap().next, msgs, "{mode}: pipe {i} incomplete");
    }
    assert_eq!(counts.iter().sum::<u64>(), total);
    counts
}

#[test]
fn every_mode_delivers_everything_once_in_order() {
    for mode in [
        "vanilla",
        "shared",
        "queue",
        "cpu",
        "cpu+steal",
        "best2",
        "best2+steal",
        "hybrid",
    ] {
        run(mode, 4, 24, 400, None);
    }
}

#[test]
fn a_worker_exiting_mid_run_loses_nothing() {
    for mode in ["vanilla", "hybrid", "shared"] {
        let counts = run(mode, 3, 12, 600, Some(50));
        assert!(
            counts[0] >= 50,
            "{mode}: worker 0 did not reach its exit point"
        );
    }
}

#[test]
fn user_events_and_pinning() {
    let skq = Skq::new(Config::parse_mode("hybrid", 2).unwrap()).unwrap();
    let mut w0 = skq.worker(0);
    let mut w1 = skq.worker(1);
    let ue = skq.user_event(99, Flags::NONE).unwrap();
    let (mut tx, rx) = UnixStream::pair().unwrap();
    rx.set_nonblocking(true).unwrap();
    skq.register(
        rx.as_raw_fd(),
        5,
        Interest::READABLE,
        Flags::PINNED,
        Some(1),
    )
    .unwrap();
    ue.notify().unwrap();
    tx.write_all(b"x").unwrap();
    let mut ev = Events::with_capacity(4);
    let mut got0 = Vec::new();
    let mut got1 = Vec::new();
    for _ in 0..50 {
        w0.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        got0.extend(ev.iter().map(|e| e.token));
        w1.wait(&mut ev, Some(Duration::from_millis(10))).unwrap();
        got1.extend(ev.iter().map(|e| e.token));
        if got0.len() + got1.len() >= 2 {
            break;
        }
    }
    assert!(
        got1.contains(&5),
        "pinned source must go to worker 1: {got0:?} {got1:?}"
    );
    assert!(!got0.contains(&5));
    assert!(got0.contains(&99) || got1.contains(&99));
    assert_eq!(ue.reset(), 1);
}

#[test]
fn shutdown_wakes_blocked_waiters_and_wait_times_out() {
    let skq = Skq::new(Config::parse_mode("cpu", 2).unwrap()).unwrap();
    let mut w0 = skq.worker(0);
    let mut ev = Events::with_capacity(4);
    let t = Instant::now();
    assert_eq!(
        w0.wait(&mut ev, Some(Duration::from_millis(30))).unwrap(),
        0
    );
    assert!(t.elapsed() >= Duration::from_millis(30));
    let mut w1 = skq.worker(1);
    let h = thread::spawn(move || {
        let mut ev = Events::with_capacity(4);
        w1.wait(&mut ev, None).unwrap()
    });
    thread::sleep(Duration::from_millis(50));
    skq.shutdown();
    assert_eq!(h.join().unwrap(), 0);
    assert_eq!(w0.wait(&mut ev, None).unwrap(), 0);
}

#[test]
fn invalid_config_is_refused_with_the_option_named() {
    let mut cfg = Config::parse_mode("hybrid", 2).unwrap();
    cfg.rtshare = 101;
    let err = Skq::new(cfg).err().unwrap().to_string();
    assert_eq!(err, "--rtshare 101 is out of range: allowed 1..=100");
}

/// Shutdown racing workers on their way to sleep: every `wait(None)` must
/// return, whether the worker blocks as the poller or parks as a follower.
/// Modes without stealing, so nothing but shutdown wakes an idle worker.
/// (The interleaving the kv server hit, a doorbell edge consumed by another
/// worker's harvest just before a new poller blocks, is closed by
/// construction: the shutdown eventfd is level-triggered.)
#[test]
fn shutdown_wakes_every_blocked_worker() {
    for round in 0..200u64 {
        let mode = if round % 2 == 0 { "cpu" } else { "shared" };
        let skq = Skq::new(Config::parse_mode(mode, 3).unwrap()).unwrap();
        let handles: Vec<_> = (0..3)
            .map(|w| {
                let mut worker = skq.worker(w);
                thread::spawn(move || {
                    let mut ev = Events::with_capacity(4);
                    for _ in 0..3 {
                        worker.wait(&mut ev, None).unwrap();
                    }
                })
            })
            .collect();
        thread::sleep(Duration::from_micros(50 * (round % 7)));
        skq.shutdown();
        let start = Instant::now();
        for h in handles {
            while !h.is_finished() {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "round {round}: a worker never returned"
                );
                thread::sleep(Duration::from_millis(1));
            }
            h.join().unwrap();
        }
    }
}

#[test]
fn poll_groups_deliver_everything_once_in_order() {
    // One epoll set per group of workers: sources spread over the sets,
    // each harvested by its own group; stealing moves queued work between
    // groups. Everything is still delivered once, in order, and a worker
    // leaving mid-run loses nothing.
    for (mode, groups) in [("hybrid", 2), ("hybrid", 4), ("cpu", 4), ("shared", 2)] {
        let per = run_groups(mode, 4, groups, 16, 300, None, 7);
        assert_eq!(
            per.iter().sum::<u64>(),
            16 * 300,
            "{mode} × {groups} groups"
        );
    }
    let per = run_groups("hybrid", 4, 4, 12, 300, Some(200), 7);
    assert_eq!(per.iter().sum::<u64>(), 12 * 300);
}

#[test]
fn a_set_of_more_than_eight_workers_with_short_events_delivers_everything_once_in_order() {
    // Past `ONE_EVENT_POLLS_MAX_SET` workers on one set, a poller whose
    // events are short takes the whole batch and hands what it does not
    // keep to the others (targeted wake-ups); with no pauses every event
    // here is a few µs. Once each, in order, never two workers on a source,
    // in every mode; and with a worker leaving mid-run.
    let workers = skq_core::ONE_EVENT_POLLS_MAX_SET as usize + 4;
    for mode in ["hybrid", "cpu", "best2+steal", "shared"] {
        let per = run_groups(mode, workers, 1, 32, 300, None, 0);
        assert_eq!(per.iter().sum::<u64>(), 32 * 300, "{mode}");
    }
    let per = run_groups("hybrid", workers, 1, 32, 300, Some(500), 0);
    assert_eq!(per.iter().sum::<u64>(), 32 * 300);
}

#[test]
fn a_listener_is_accepted_from_every_poll_group() {
    // A listening socket lives in every set: whichever group's worker is
    // idle accepts, and each connection is accepted exactly once.
    let mut cfg = Config::new(skq_rt::Policy::Hybrid, 2);
    cfg.poll_groups = 2;
    let skq = Skq::new(cfg).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    skq.register(
        listener.as_raw_fd(),
        1,
        Interest::READABLE,
        Flags::NONE,
        None,
    )
    .unwrap();
    let listener = Arc::new(listener);
    let accepted = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let mut worker = skq.worker(w);
            let (l, accepted, skq) = (listener.clone(), accepted.clone(), skq.clone());
            thread::spawn(move || {
                let mut events = Events::with_capacity(4);
                let mut conns = Vec::new();
                while !skq.is_shutdown() {
                    let n = worker
                        .wait(&mut events, Some(Duration::from_millis(20)))
                        .unwrap();
                    for _ in events.iter().take(n) {
                        while let Ok((c, _)) = l.accept() {
                            conns.push(c);
                            accepted.fetch_add(1, Ordering::AcqRel);
                        }
                    }
                }
                conns.len()
            })
        })
        .collect();
    let clients: Vec<_> = (0..20)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let start = Instant::now();
    while accepted.load(Ordering::Acquire) < 20 {
        assert!(start.elapsed() < Duration::from_secs(30), "accepts stalled");
        thread::sleep(Duration::from_millis(5));
    }
    skq.shutdown();
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, 20, "each connection accepted once");
    drop(clients);
}

#[test]
fn a_source_moves_to_its_homes_poll_set_once() {
    // Vanilla keeps each source with a round-robin home. Registered by worker
    // 0, every pipe starts in worker 0's readiness set; one whose home is
    // worker 1 is moved into worker 1's set at its first activation, once,
    // and from then on its readiness is harvested there. Every message is
    // still delivered once, in order, by its home.
    let mut cfg = Config::new(skq_rt::Policy::Vanilla, 2);
    cfg.poll_groups = 2;
    assert!(
        !cfg.steal,
        "vanilla without stealing: each source stays with its home"
    );
    let skq = Skq::new(cfg).unwrap();
    let pipes = 6;
    let mut txs = Vec::new();
    let mut ids = Vec::new();
    let mut rxs = Vec::new();
    for i in 0..pipes {
        let (tx, rx) = UnixStream::pair().unwrap();
        rx.set_nonblocking(true).unwrap();
        let id = skq
            .register(
                rx.as_raw_fd(),
                i as u64,
                Interest::READABLE,
                Flags::NONE,
                Some(0),
            )
            .unwrap();
        assert_eq!(skq.poll_set_of(id), Some(0), "registered in worker 0's set");
        txs.push(tx);
        ids.push(id);
        rxs.push(Mutex::new((rx, 0u32)));
    }
    let rxs = Arc::new(rxs);
    // Per source: the worker that delivered its messages (u64::MAX: none yet).
    let by: Arc<Vec<AtomicU64>> = Arc::new((0..pipes).map(|_| AtomicU64::new(u64::MAX)).collect());
    let done = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let mut worker = skq.worker(w);
            let (rxs, by, done, skq) = (rxs.clone(), by.clone(), done.clone(), skq.clone());
            thread::spawn(move || {
                let mut events = Events::with_capacity(4);
                while !skq.is_shutdown() {
                    let n = worker
                        .wait(&mut events, Some(Duration::from_millis(20)))
                        .unwrap();
                    for ev in events.iter().take(n) {
                        let t = ev.token as usize;
                        let prev = by[t].swap(w as u64, Ordering::AcqRel);
                        assert!(
                            prev == u64::MAX || prev == w as u64,
                            "source {t} left its home"
                        );
                        let mut g = rxs[t].try_lock().expect("one worker per source");
                        let (rx, next) = &mut *g;
                        let mut b = [0u8; 4];
                        loop {
                            match rx.read_exact(&mut b) {
                                Ok(()) => {
                                    assert_eq!(u32::from_le_bytes(b), *next, "source {t} in order");
                                    *next += 1;
                                    done.fetch_add(1, Ordering::AcqRel);
                                }
                                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                }
            })
        })
        .collect();
    let wait_for = |n: u64| {
        let start = Instant::now();
        while done.load(Ordering::Acquire) < n {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "deliveries stalled"
            );
            thread::sleep(Duration::from_millis(2));
        }
    };
    // Round one: one message each.
    for tx in &mut txs {
        tx.write_all(&0u32.to_le_bytes()).unwrap();
    }
    wait_for(pipes as u64);
    let on_1 = (0..pipes)
        .filter(|&t| by[t].load(Ordering::Acquire) == 1)
        .count();
    assert!(
        on_1 > 0 && on_1 < pipes,
        "round-robin homes on both workers"
    );
    for (t, id) in ids.iter().enumerate() {
        assert_eq!(
            skq.poll_set_of(*id),
            Some(by[t].load(Ordering::Acquire) as usize),
            "source {t} lives in its home's set"
        );
    }
    assert_eq!(
        skq.set_moves(),
        on_1 as u64,
        "one move per source away from its set"
    );
    // More rounds: no further moves, everything delivered once, in order.
    for round in 1..50u32 {
        for tx in &mut txs {
            tx.write_all(&round.to_le_bytes()).unwrap();
        }
    }
    wait_for(pipes as u64 * 50);
    assert_eq!(
        skq.set_moves(),
        on_1 as u64,
        "a source at home is not moved again"
    );
    for (t, id) in ids.iter().enumerate() {
        skq.deregister(*id, rxs[t].lock().unwrap().0.as_raw_fd())
            .unwrap();
        assert_eq!(skq.poll_set_of(*id), None, "deregistered");
    }
    skq.shutdown();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(done.load(Ordering::Acquire), pipes as u64 * 50);
}

/// A lone worker harvests on the way only once per
/// `skq_core::LONE_HARVEST_EVERY` events, so a source that is redelivered
/// again and again (its handler stops before `EAGAIN`) may hold new
/// readiness back, but for no more than that many of its deliveries.
#[test]
fn a_lone_worker_serves_new_readiness_beside_a_source_it_keeps_redelivering() {
    for mode in ["hybrid", "cpu", "shared"] {
        let skq = Skq::new(Config::parse_mode(mode, 1).unwrap()).unwrap();
        let mut w0 = skq.worker(0);
        let (mut a_tx, a_rx) = UnixStream::pair().unwrap();
        let (mut b_tx, b_rx) = UnixStream::pair().unwrap();
        for (rx, token) in [(&a_rx, 1), (&b_rx, 2)] {
            rx.set_nonblocking(true).unwrap();
            skq.register(rx.as_raw_fd(), token, Interest::READABLE, Flags::NONE, None)
                .unwrap();
        }
        // A has far more than the test reads, one byte per delivery.
        a_tx.write_all(&[b'a'; 4096]).unwrap();
        let mut ev = Events::with_capacity(1);
        let (mut a_seen, mut b_seen) = (0usize, None);
        for _ in 0..1000 {
            let n = w0.wait(&mut ev, Some(Duration::from_secs(5))).unwrap();
            assert_eq!(n, 1, "{mode}");
            let e = *ev.iter().next().unwrap();
            let mut byte = [0u8; 1];
            match e.token {
                1 => {
                    assert_eq!((&a_rx).read(&mut byte).unwrap(), 1);
                    a_seen += 1;
                    w0.still_ready(&e);
                    if a_seen == 1 {
                        // B becomes ready once A is being redelivered.
                        b_tx.write_all(b"b").unwrap();
                    }
                }
                2 => {
                    assert_eq!((&b_rx).read(&mut byte).unwrap(), 1);
                    assert_eq!(byte[0], b'b');
                    b_seen = Some(a_seen);
                    break;
                }
                t => panic!("{mode}: unexpected token {t}"),
            }
        }
        let after = b_seen.unwrap_or_else(|| panic!("{mode}: B was never delivered"));
        assert!(
            after <= skq_core::LONE_HARVEST_EVERY + 2,
            "{mode}: B waited behind {after} deliveries of A"
        );
        assert!(after >= 1, "{mode}");
        let mut rest = [0u8; 1];
        assert!(
            (&b_rx).read(&mut rest).is_err(),
            "{mode}: B's byte was read once"
        );
    }
}
