//! What a blocking poll that a wake-up signal can end costs the kernel, by
//! how it lets the signal in: the wake-up window (x86-64's default,
//! `skq_sys::signal`), the poll mask (other architectures), and a plain
//! `epoll_pwait2`/`epoll_wait` that no signal ends (epoll-shared's), on a set
//! whose one eventfd is always ready, so every call returns one event at
//! once. Rounds alternate the kinds on one thread; the median of the
//! rounds' ns per call is printed per kind.
//!
//!     cargo run --release -p skq-sys --example wake_cost [CALLS_PER_ROUND] [ROUNDS]
//!
//! Pin it to one CPU of a quiet machine (`taskset -c 1`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use skq_sys::epoll::{self, Epoll};
use skq_sys::signal::WakeSignal;

/// One kind of poll: its name and one call of it.
type Kind<'a> = (&'a str, &'a dyn Fn(&mut Vec<libc::epoll_event>));

fn main() {
    let mut args = std::env::args().skip(1);
    let calls: u32 = args
        .next()
        .map_or(200_000, |a| a.parse().expect("CALLS_PER_ROUND"));
    let rounds: usize = args.next().map_or(7, |a| a.parse().expect("ROUNDS"));
    let ep = Epoll::new().unwrap();
    // SAFETY: eventfd takes an initial count and flags; it returns a new fd.
    let efd = unsafe { libc::eventfd(1, libc::EFD_CLOEXEC) };
    assert!(efd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: eventfd just opened it; owned once.
    let efd = unsafe { OwnedFd::from_raw_fd(efd) };
    ep.add(efd.as_raw_fd(), epoll::IN, 1).unwrap();
    let sig = WakeSignal::install(6).unwrap();
    let window = sig.arm_here().unwrap();
    // Blocks the signal in this thread for the masked kind's calls; the
    // window's calls below then run with it blocked, which costs them
    // nothing (the window does not touch the mask).
    let masked = sig.mask_here().unwrap();
    let mut out = Vec::with_capacity(4);
    let kinds: [Kind; 4] = [
        ("window (epoll_pwait2, no mask)", &|o| {
            assert_eq!(ep.wait_wakeable(o, None, 1, &window).unwrap(), 1)
        }),
        ("mask (epoll_pwait2 with mask)", &|o| {
            assert_eq!(ep.wait_wakeable(o, None, 1, &masked).unwrap(), 1)
        }),
        ("epoll_pwait2 (nothing ends it)", &|o| {
            assert_eq!(ep.wait_ns(o, Some(1_000_000_000)).unwrap(), 1)
        }),
        ("epoll_wait (nothing ends it)", &|o| {
            assert_eq!(ep.wait(o, -1).unwrap(), 1)
        }),
    ];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for _ in 0..rounds {
        for (k, (_, f)) in kinds.iter().enumerate() {
            let t = Instant::now();
            for _ in 0..calls {
                f(&mut out);
            }
            ns[k].push(t.elapsed().as_nanos() as f64 / calls as f64);
        }
    }
    println!("# {calls} calls a round, {rounds} rounds, kinds alternating; ns per call, median (min-max)");
    for (k, (name, _)) in kinds.iter().enumerate() {
        let v = &mut ns[k];
        v.sort_by(f64::total_cmp);
        println!(
            "{name:<32} {:>7.0} ({:.0}-{:.0})",
            v[v.len() / 2],
            v[0],
            v[v.len() - 1]
        );
    }
}
