//! SIGINT/SIGTERM taken synchronously, for orderly shutdown of servers.
//!
//! A server blocks the two signals in its main thread before spawning workers
//! (every thread inherits the mask), then waits for them with
//! [`wait_for_termination`]; no handler runs asynchronously.

use std::io;
use std::mem::MaybeUninit;
use std::time::Duration;

/// The number of SIGINT (Ctrl-C), as [`wait_for_termination`] reports it.
pub const SIGINT: i32 = libc::SIGINT;
/// The number of SIGTERM.
pub const SIGTERM: i32 = libc::SIGTERM;

/// Blocks SIGINT and SIGTERM in the calling thread (and in every thread it
/// spawns afterwards), so that [`wait_for_termination`] can collect them.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: `set` is an initialised sigset_t; the old-mask pointer may be null.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Waits for a blocked SIGINT/SIGTERM, at most `timeout` (`None`: forever).
/// Returns the signal, or `None` when the time ran out.
pub fn wait_for_termination(timeout: Option<Duration>) -> io::Result<Option<i32>> {
    let set = termination_set();
    let r = match timeout {
        Some(t) => {
            let ts = libc::timespec {
                tv_sec: t.as_secs() as libc::time_t,
                tv_nsec: t.subsec_nanos() as libc::c_long,
            };
            // SAFETY: `set` and `ts` are live; the siginfo pointer may be null.
            unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) }
        }
        // SAFETY: `set` is live; the siginfo pointer may be null.
        None => unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) },
    };
    if r > 0 {
        return Ok(Some(r));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
        _ => Err(e),
    }
}

fn termination_set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set before sigaddset adds two valid
    // signal numbers to it; only then is it read.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGINT);
        libc::sigaddset(set.as_mut_ptr(), libc::SIGTERM);
        set.assume_init()
    }
}
