//! A thin owned epoll instance.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::syscall;

/// An epoll instance; closed on drop.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// Interest bits for [`Epoll::add`] (libc's `EPOLL*` values).
pub type EpollFlags = u32;

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> io::Result<Epoll> {
        let fd = syscall!(epoll_create1(libc::EPOLL_CLOEXEC))?;
        // SAFETY: epoll_create1 returned a fresh fd that nothing else owns.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ctl(&self, op: i32, fd: RawFd, flags: EpollFlags, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: flags,
            u64: data,
        };
        syscall!(epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev))?;
        Ok(())
    }

    /// Adds `fd` with `flags`, tagging its events with `data`.
    pub fn add(&self, fd: RawFd, flags: EpollFlags, data: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, flags, data)
    }

    /// Changes `fd`'s flags and data.
    pub fn modify(&self, fd: RawFd, flags: EpollFlags, data: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, flags, data)
    }

    /// Removes `fd`.
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout_ms` (-1 forever, 0 poll) and fills `out`.
    /// An interrupted wait returns zero events.
    pub fn wait(&self, out: &mut Vec<libc::epoll_event>, timeout_ms: i32) -> io::Result<usize> {
        out.clear();
        let cap = out.capacity().max(1) as i32;
        if out.capacity() == 0 {
            out.reserve(1);
        }
        // SAFETY: `out` has room for `cap` events; the kernel writes at most
        // that many and we set the length to what it reports.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), out.as_mut_ptr(), cap, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
        // SAFETY: the kernel initialised the first n entries.
        unsafe { out.set_len(n as usize) };
        Ok(n as usize)
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Epoll {
    /// Like [`Epoll::wait`] with a nanosecond timeout (`epoll_pwait2`,
    /// Linux 5.11+), falling back to millisecond `epoll_wait` (rounded up)
    /// where the kernel lacks it. `None` waits forever.
    pub fn wait_ns(
        &self,
        out: &mut Vec<libc::epoll_event>,
        timeout_ns: Option<u64>,
    ) -> io::Result<usize> {
        let Some(ns) = timeout_ns else {
            return self.wait(out, -1);
        };
        if ns == 0 {
            return self.wait(out, 0);
        }
        out.clear();
        if out.capacity() == 0 {
            out.reserve(1);
        }
        let ts = libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: `out` has room for `capacity` events; `ts` is a live
        // timespec; a null sigmask means "leave the mask alone".
        let n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.fd.as_raw_fd(),
                out.as_mut_ptr(),
                out.capacity() as libc::c_int,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOSYS) => {
                    self.wait(out, ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32)
                }
                Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        // SAFETY: the kernel initialised the first n entries.
        unsafe { out.set_len(n as usize) };
        Ok(n as usize)
    }
}
