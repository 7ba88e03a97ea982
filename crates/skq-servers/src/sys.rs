//! The Linux system calls the servers need, each behind a safe function.
//!
//! Everything that touches `libc` lives here: the monotonic clock, the
//! absolute-deadline sleep and timer slack used by emulated service, CPU
//! pinning, the file-descriptor limit, the listen backlog and the signal mask
//! used for orderly shutdown.

use std::io;
use std::mem::MaybeUninit;
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Turns a `-1`/errno return into an `io::Error`.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock the emulated sleep uses).
pub use skq_rt::sys::cpu::monotonic_ns;

/// Sleeps until `CLOCK_MONOTONIC` reads at least `deadline_ns`
/// (`clock_nanosleep` with `TIMER_ABSTIME`, restarted after signals).
pub use skq_rt::sys::cpu::sleep_until as sleep_until_ns;

/// Sets the calling thread's timer slack to 1 ns so absolute sleeps wake as
/// close to their deadline as the kernel allows (BRIEF §8).
pub fn set_min_timer_slack() -> io::Result<()> {
    skq_rt::sys::cpu::set_timer_slack(1)
}

/// Number of CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    skq_rt::sys::cpu::pin_current_thread(cpu as u32)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit to write into.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) })?;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit; raising soft up to hard is always allowed.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) })?;
    }
    Ok(lim.rlim_cur)
}

/// Binds a listening socket with a deep accept backlog.
///
/// `std` listens with a small backlog; calling `listen` again on a listening
/// socket only updates the backlog on Linux, so bursts of connects (the
/// 10,000-connection test, a load generator opening hundreds at once) do not
/// overflow the accept queue and stall in SYN retransmits. The kernel caps the
/// value at `net.core.somaxconn`.
pub fn bind_listener(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
    let listener = TcpListener::bind(addr)?;
    // SAFETY: the fd is a valid, bound, listening socket owned by `listener`.
    check(unsafe { libc::listen(listener.as_raw_fd(), 65_535) })?;
    Ok(listener)
}

/// Blocks SIGINT and SIGTERM in the calling thread (and every thread it
/// spawns afterwards), so that [`wait_for_termination`] can collect them.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: `set` is a valid sigset_t; the old-mask pointer may be null.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Waits up to `timeout` for a blocked SIGINT/SIGTERM; returns whether one came.
pub fn wait_for_termination(timeout: Duration) -> bool {
    let set = termination_set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` and `ts` are valid; the siginfo pointer may be null.
    let r = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    r > 0
}

fn termination_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset adds valid signal numbers to it.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        set.assume_init()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_sleep_never_wakes_early() {
        set_min_timer_slack().unwrap();
        for _ in 0..20 {
            let deadline = monotonic_ns() + 50_000;
            sleep_until_ns(deadline);
            assert!(monotonic_ns() >= deadline);
        }
    }

    #[test]
    fn nofile_limit_is_at_hard_limit() {
        let soft = raise_nofile_limit().unwrap();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid rlimit to write into.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
        assert_eq!(soft, lim.rlim_max);
    }
}
