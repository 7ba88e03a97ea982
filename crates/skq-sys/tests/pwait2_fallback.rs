//! The waits' fallback for kernels without `epoll_pwait2` (before 5.11, or
//! under valgrind, which answers it with `ENOSYS`): once taken, every wait
//! goes there directly and still reports readiness and wake-ups. Its own test binary,
//! because the fallback is chosen for the whole process.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use skq_sys::epoll::{self, Epoll};
use skq_sys::signal::WakeSignal;

#[test]
fn the_fallback_waits_report_readiness_and_timeouts() {
    epoll::force_pwait2_fallback();
    let ep = Epoll::new().unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pipe(2) just opened both; each is owned once.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    ep.add(r.as_raw_fd(), epoll::IN, 7).unwrap();
    let mut out = Vec::with_capacity(4);
    // Nothing ready: both waits time out with no events.
    assert_eq!(ep.wait_ns(&mut out, Some(1_000)).unwrap(), 0);
    let sig = WakeSignal::install(3).unwrap();
    let mask = sig.arm_here().unwrap();
    assert_eq!(
        ep.wait_wakeable(&mut out, Some(1_000), 4, &mask).unwrap(),
        0
    );
    // A wake-up sent before the wait ends it at once there too.
    sig.send(skq_sys::signal::thread_id()).unwrap();
    let t = std::time::Instant::now();
    assert_eq!(
        ep.wait_wakeable(&mut out, Some(30_000_000_000), 4, &mask)
            .unwrap(),
        0
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(10),
        "the wake-up was lost"
    );
    // Ready: each reports the registration's token.
    // SAFETY: one byte from a live buffer to the pipe's open write end.
    assert_eq!(
        unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) },
        1
    );
    assert_eq!(ep.wait_ns(&mut out, Some(1_000_000)).unwrap(), 1);
    assert_eq!({ out[0].u64 }, 7);
    assert_eq!(ep.wait_wakeable(&mut out, None, 4, &mask).unwrap(), 1);
    assert_eq!({ out[0].u64 }, 7);
    assert!(out[0].events & epoll::IN != 0);
}
