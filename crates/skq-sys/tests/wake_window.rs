//! The wake-up signal ends exactly the blocking poll it is meant for
//! (`skq_sys::signal`): sent before the poll, during it, or racing its
//! start, it is never lost; a wake-up that lands while the thread blocks
//! in another (restartable) call does not fail that call.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use skq_sys::epoll::Epoll;
use skq_sys::signal::{thread_id, WakeSignal};

/// A poll that only a wake-up ends (an empty set, a long timeout): how
/// long it took, to tell a wake-up from the timeout.
const LONG: u64 = 30_000_000_000;

fn signal() -> WakeSignal {
    WakeSignal::install(5).unwrap()
}

#[test]
fn a_wake_up_sent_before_the_poll_ends_it_at_once() {
    let sig = signal();
    let mask = sig.arm_here().unwrap();
    let ep = Epoll::new().unwrap();
    let mut out = Vec::with_capacity(4);
    // Sent to this thread while it runs: delivered before the poll starts.
    sig.send(thread_id()).unwrap();
    let t = Instant::now();
    assert_eq!(ep.wait_wakeable(&mut out, Some(LONG), 4, &mask).unwrap(), 0);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the wake-up was lost"
    );
    // Consumed: the next poll times out.
    assert_eq!(
        ep.wait_wakeable(&mut out, Some(1_000_000), 4, &mask)
            .unwrap(),
        0
    );
}

#[test]
fn a_wake_up_ends_a_poll_in_progress_and_readiness_still_counts() {
    let sig = signal();
    let tid = Arc::new(AtomicI32::new(0));
    let t2 = tid.clone();
    let poller = thread::spawn(move || {
        let mask = sig.arm_here().unwrap();
        let ep = Epoll::new().unwrap();
        let mut out = Vec::with_capacity(4);
        t2.store(thread_id(), Ordering::Release);
        let t = Instant::now();
        let n = ep.wait_wakeable(&mut out, Some(LONG), 4, &mask).unwrap();
        (n, t.elapsed())
    });
    while tid.load(Ordering::Acquire) == 0 {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(50));
    sig.send(tid.load(Ordering::Acquire)).unwrap();
    let (n, took) = poller.join().unwrap();
    assert_eq!(n, 0);
    assert!(took < Duration::from_secs(10), "the wake-up was lost");

    // A wait with readiness returns it (no wake-up involved).
    let mask = sig.arm_here().unwrap();
    let ep = Epoll::new().unwrap();
    let (r, w) = pipe();
    ep.add(r.as_raw_fd(), skq_sys::epoll::IN, 9).unwrap();
    write_byte(&w);
    let mut out = Vec::with_capacity(4);
    assert_eq!(ep.wait_wakeable(&mut out, None, 4, &mask).unwrap(), 1);
    assert_eq!({ out[0].u64 }, 9);
}

#[test]
fn wake_ups_racing_the_start_of_each_poll_are_never_lost() {
    // The poller announces round i and polls; the waker sends as soon as
    // it sees the announcement, so its signal lands anywhere from before
    // the poll's check of its flag to inside the system call. Each round
    // ends by its own wake-up: a lost one leaves the poll to its timeout.
    const ROUNDS: u64 = 20_000;
    let sig = signal();
    let round = Arc::new(AtomicU64::new(0));
    let tid = Arc::new(AtomicI32::new(0));
    let (r2, t2) = (round.clone(), tid.clone());
    let poller = thread::spawn(move || {
        let mask = sig.arm_here().unwrap();
        let ep = Epoll::new().unwrap();
        let mut out = Vec::with_capacity(4);
        t2.store(thread_id(), Ordering::Release);
        let mut slowest = Duration::ZERO;
        for i in 1..=ROUNDS {
            r2.store(i, Ordering::Release);
            let t = Instant::now();
            assert_eq!(ep.wait_wakeable(&mut out, Some(LONG), 4, &mask).unwrap(), 0);
            slowest = slowest.max(t.elapsed());
        }
        slowest
    });
    while tid.load(Ordering::Acquire) == 0 {
        thread::yield_now();
    }
    let tid = tid.load(Ordering::Acquire);
    for i in 1..=ROUNDS {
        while round.load(Ordering::Acquire) < i {
            std::hint::spin_loop();
        }
        sig.send(tid).unwrap();
    }
    let slowest = poller.join().unwrap();
    assert!(slowest < Duration::from_secs(10), "a wake-up was lost");
    eprintln!(
        "{ROUNDS} rounds, slowest {slowest:?}; wake-ups moved past the call so far: {}",
        skq_sys::signal::window_cancels()
    );
}

#[test]
fn a_wake_up_landing_in_a_blocking_read_does_not_fail_it() {
    // The handler restarts what it interrupts (SA_RESTART) where the kernel
    // restarts it: a read from a pipe goes on and gets its byte. The
    // wake-up still ends the thread's next poll.
    let sig = signal();
    let (r, w) = pipe();
    let tid = Arc::new(AtomicI32::new(0));
    let t2 = tid.clone();
    let reader = thread::spawn(move || {
        let mask = sig.arm_here().unwrap();
        t2.store(thread_id(), Ordering::Release);
        let mut b = [0u8; 1];
        // SAFETY: one byte into a live buffer from the pipe's open read end.
        let n = unsafe { libc::read(r.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
        let err = std::io::Error::last_os_error();
        let ep = Epoll::new().unwrap();
        let mut out = Vec::with_capacity(4);
        let t = Instant::now();
        let polled = ep.wait_wakeable(&mut out, Some(LONG), 4, &mask).unwrap();
        (n, err.raw_os_error(), b[0], polled, t.elapsed())
    });
    while tid.load(Ordering::Acquire) == 0 {
        thread::yield_now();
    }
    thread::sleep(Duration::from_millis(50));
    sig.send(tid.load(Ordering::Acquire)).unwrap();
    thread::sleep(Duration::from_millis(50));
    write_byte(&w);
    let (n, err, byte, polled, took) = reader.join().unwrap();
    assert_eq!(n, 1, "read failed: {err:?}");
    assert_eq!(byte, b'x');
    assert_eq!(polled, 0);
    assert!(took < Duration::from_secs(10), "the wake-up was lost");
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pipe(2) just opened both; each is owned once.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

fn write_byte(w: &OwnedFd) {
    // SAFETY: one byte from a live buffer to the pipe's open write end.
    assert_eq!(
        unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) },
        1
    );
}
