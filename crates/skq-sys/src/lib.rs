//! # skq-sys: every system call skq makes
//!
//! One home for the OS boundary of every skq crate (the runtime, the servers,
//! the cache, the load generator, the bench harness). Each module wraps one
//! kernel facility in small owned types or safe functions: [`epoll::Epoll`]
//! and [`epoll::Poller`], [`eventfd::EventFd`], socket options ([`socket`]),
//! listeners, connections and raw socket I/O ([`net`]), CPU placement, clocks,
//! sleeps, timer slack and CPU time ([`cpu`]), termination signals
//! ([`signal`]), `poll(2)` ([`poll`]), resource limits ([`limits`]) and child processes
//! ([`process`]).
//!
//! **Conventions.** Every fallible call returns `std::io::Result`, built from
//! the kernel's `-1`/errno by the crate's one `syscall!` macro (or, for the few calls
//! that return an error number directly, `io::Error::from_raw_os_error`).
//! Owned descriptors are `OwnedFd` and close on drop. Every `unsafe` block
//! states its reason in a `// SAFETY:` comment. Above this crate nothing calls
//! libc: crates that need a new system call add it here.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod cpu;
pub mod epoll;
pub mod eventfd;
pub mod fs;
pub mod limits;
pub mod net;
pub mod netns;
pub mod poll;
pub mod process;
pub mod signal;
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
