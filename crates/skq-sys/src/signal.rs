//! SIGINT/SIGTERM taken synchronously, for orderly shutdown of servers,
//! and the wake-up signal that ends one thread's blocking poll.
//!
//! A server blocks the two signals in its main thread before spawning workers
//! (every thread inherits the mask), then waits for them with
//! [`wait_for_termination`]; no handler runs asynchronously.
//!
//! The wake-up signal ([`WakeSignal`]) is a real-time signal with a handler
//! that does nothing. A thread that uses it keeps it blocked except inside
//! its blocking poll (`Epoll::wait_masked` with the [`PollMask`] that
//! [`WakeSignal::block_here`] returns),
//! so a wake-up sent while the thread runs stays pending and ends its next
//! poll at once: none is lost, and none interrupts anything else.

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

/// The signal mask a thread's blocking polls run with: its own mask
/// without the wake-up signal ([`WakeSignal::block_here`]).
#[derive(Clone, Copy)]
pub struct PollMask(pub(crate) libc::sigset_t);

impl std::fmt::Debug for PollMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PollMask")
    }
}

/// A real-time signal used as a per-thread doorbell (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct WakeSignal {
    sig: libc::c_int,
    /// This process's id, read once: glibc does not cache `getpid`, and a
    /// system call per wake-up showed in the async server's profile.
    pid: libc::pid_t,
}

extern "C" fn ignore_wake(_: libc::c_int) {}

impl WakeSignal {
    /// Installs the do-nothing handler for `SIGRTMIN + offset` (once per
    /// process; installing it again is harmless). No `SA_RESTART`: the
    /// signal is meant to end a wait.
    pub fn install(offset: i32) -> io::Result<WakeSignal> {
        let sig = libc::SIGRTMIN() + offset;
        if sig > libc::SIGRTMAX() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("wake-up signal SIGRTMIN+{offset} is above SIGRTMAX"),
            ));
        }
        // SAFETY: a zeroed sigaction is valid; the handler is an
        // async-signal-safe function that does nothing; `sa_mask` is
        // initialised by sigemptyset before use.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore_wake as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: getpid has no arguments and cannot fail.
        let pid = unsafe { libc::getpid() };
        Ok(WakeSignal { sig, pid })
    }

    /// The signal's number.
    pub fn number(&self) -> i32 {
        self.sig
    }

    /// Blocks the signal in the calling thread and returns the mask its
    /// blocking polls should run with (the thread's mask without it).
    pub fn block_here(&self) -> io::Result<PollMask> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        let mut old = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: both sets are initialised (sigemptyset, then by
        // pthread_sigmask for `old`) before they are read.
        unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            libc::sigaddset(set.as_mut_ptr(), self.sig);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), old.as_mut_ptr());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let mut poll = old.assume_init();
            libc::sigdelset(&mut poll, self.sig);
            Ok(PollMask(poll))
        }
    }

    /// Sends the signal to thread `tid` of this process.
    pub fn send(&self, tid: i32) -> io::Result<()> {
        // SAFETY: tgkill takes plain integers; a thread that exited makes it
        // fail with ESRCH, reported to the caller.
        let r = unsafe { libc::syscall(libc::SYS_tgkill, self.pid, tid, self.sig) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The calling thread's kernel thread id.
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}
