//! Non-blocking eventfd: the runtime's cross-thread doorbell and the backing
//! of user events.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::syscall;

/// An eventfd counter; closed on drop.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// `eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)`.
    pub fn new() -> io::Result<EventFd> {
        let fd = syscall!(eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC))?;
        // SAFETY: a fresh fd owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(EventFd { fd })
    }

    /// Adds one to the counter (makes the fd readable).
    pub fn notify(&self) -> io::Result<()> {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64.
        let r = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if r == 8 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        // EAGAIN: the counter is at its maximum; it is readable anyway.
        if e.kind() == io::ErrorKind::WouldBlock {
            Ok(())
        } else {
            Err(e)
        }
    }

    /// Blocks until the counter is non-zero (without resetting it), at most
    /// `timeout_ms` milliseconds (-1: forever). Returns whether it is.
    pub fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let n = syscall!(poll(&mut pfd, 1, timeout_ms))?;
        Ok(n > 0)
    }

    /// Reads and resets the counter; 0 if it was zero.
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if r == 8 {
            v
        } else {
            0
        }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
