//! Every system call of the runtime lives under this module.
//!
//! Each file wraps one kernel facility in a small owned type: [`epoll::Epoll`],
//! [`eventfd::EventFd`], socket options ([`socket`]), CPU placement and timer
//! slack ([`cpu`]) and the CPU topology read from /sys ([`topology`](crate::topology)).
//! Above this module nothing calls libc.

pub mod cpu;
pub mod epoll;
pub mod eventfd;
pub mod socket;

/// Turns a libc `-1/errno` return into `io::Result`.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        // SAFETY: every caller passes arguments valid for this system call
        // (owned fds, pointers to live buffers of the stated length); see the
        // caller's own SAFETY note for the specifics.
        #[allow(unused_unsafe)]
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}
pub(crate) use syscall;
