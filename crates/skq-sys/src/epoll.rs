//! A thin owned epoll instance.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use super::syscall;

/// Set once `epoll_pwait2` answered `ENOSYS` (a kernel before 5.11, or a
/// sandbox or tool that does not pass it through, as valgrind): every later
/// wait goes to the fallback at once instead of paying a failing system
/// call first.
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

/// Whether `epoll_pwait2` is known to be missing here.
#[inline]
fn pwait2_missing() -> bool {
    NO_PWAIT2.load(Ordering::Relaxed)
}

/// A nanosecond timeout as the fallback's milliseconds, rounded up (a wait
/// never ends before its deadline).
fn fallback_ms(ns: u64) -> i32 {
    ns.div_ceil(1_000_000).min(i32::MAX as u64) as i32
}

/// Makes every later wait of this process take the fallback, as after an
/// `ENOSYS`: for tests of that path on kernels that have `epoll_pwait2`.
#[doc(hidden)]
pub fn force_pwait2_fallback() {
    NO_PWAIT2.store(true, Ordering::Relaxed);
}

/// An epoll instance; closed on drop.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// Interest bits for [`Epoll::add`] (libc's `EPOLL*` values).
pub type EpollFlags = u32;

/// One ready event as the kernel reports it (`events` bits, `u64` token).
pub type Event = libc::epoll_event;
/// Error on the fd (always reported).
pub const ERR: EpollFlags = libc::EPOLLERR as u32;
/// Hang-up alone (always reported); [`HUP`] is hang-up or error.
pub const HANGUP: EpollFlags = libc::EPOLLHUP as u32;

/// Readable.
pub const IN: EpollFlags = libc::EPOLLIN as u32;
/// Writable.
pub const OUT: EpollFlags = libc::EPOLLOUT as u32;
/// The peer closed its writing side (ask for it together with [`IN`]).
pub const RDHUP: EpollFlags = libc::EPOLLRDHUP as u32;
/// Hang-up or error (always reported, never asked for).
pub const HUP: EpollFlags = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Report once, then disable until re-armed with [`Epoll::modify`].
pub const ONESHOT: EpollFlags = libc::EPOLLONESHOT as u32;
/// Edge-triggered.
pub const ET: EpollFlags = libc::EPOLLET as u32;
/// Wake one of the epoll instances that wait on a shared fd, not all (not
/// combinable with [`ONESHOT`]).
pub const EXCLUSIVE: EpollFlags = libc::EPOLLEXCLUSIVE as u32;

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub fn new() -> io::Result<Epoll> {
        let fd = syscall!(epoll_create1(libc::EPOLL_CLOEXEC))?;
        // SAFETY: epoll_create1 returned a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
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
        // SAFETY: `n` is what the kernel returned for this buffer.
        unsafe { filled(out, n as libc::c_long) }
    }
}

/// The result of an epoll wait that returned `n` into `out`: its length
/// set to `n`, or the error (an interrupted wait is zero events).
///
/// # Safety
/// `n` must be the wait's return value for `out`'s buffer: when it is not
/// negative, the kernel initialised that many entries.
unsafe fn filled(out: &mut Vec<libc::epoll_event>, n: libc::c_long) -> io::Result<usize> {
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    // SAFETY: the caller's contract: the kernel initialised the first n entries.
    unsafe { out.set_len(n as usize) };
    Ok(n as usize)
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Epoll {
    /// A blocking wait for at most `max` events (at least 1, at most the
    /// buffer's capacity) that the wake-up signal ends
    /// ([`crate::signal::WakeSignal`]; `mask` is what
    /// [`crate::signal::WakeSignal::arm_here`] returned to this thread): a
    /// wake-up sent to the thread since its previous such wait returned
    /// ends this one at once. Through the wake-up window on x86-64 (a
    /// plain `epoll_pwait2` with no signal mask), elsewhere `epoll_pwait2`
    /// with the thread's mask replaced by `mask` for the wait's duration.
    /// `None` waits forever. Falls back to `epoll_pwait` (millisecond
    /// timeout, rounded up) where the kernel lacks `epoll_pwait2`. An
    /// interrupted wait returns zero events.
    pub fn wait_wakeable(
        &self,
        out: &mut Vec<libc::epoll_event>,
        timeout_ns: Option<u64>,
        max: usize,
        mask: &crate::signal::PollMask,
    ) -> io::Result<usize> {
        out.clear();
        if out.capacity() == 0 {
            out.reserve(1);
        }
        let cap = max.clamp(1, out.capacity()).min(i32::MAX as usize) as libc::c_int;
        let ts = timeout_ns.map(|ns| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (ns % 1_000_000_000) as libc::c_long,
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        match mask.0 {
            #[cfg(target_arch = "x86_64")]
            crate::signal::PollWake::Window => {
                let (fd, buf) = (self.fd.as_raw_fd(), out.as_mut_ptr());
                // The wait `nr` whose fourth argument is `last` (epoll_pwait2's
                // timespec or epoll_pwait's milliseconds) and whose mask is null.
                let wait = |nr: libc::c_long, last: libc::c_long| {
                    // SAFETY: `out` has room for `cap` events; `last` is null,
                    // the address of a live timespec or a millisecond count as
                    // `nr` takes it; the mask is null.
                    unsafe {
                        crate::signal::window::syscall(
                            nr,
                            fd as libc::c_long,
                            buf as libc::c_long,
                            cap as libc::c_long,
                            last,
                        )
                    }
                };
                let enosys = -(libc::ENOSYS as libc::c_long);
                let mut n = enosys;
                if !pwait2_missing() {
                    n = wait(libc::SYS_epoll_pwait2, ts_ptr as libc::c_long);
                    if n == enosys {
                        NO_PWAIT2.store(true, Ordering::Relaxed);
                    }
                }
                if n == enosys {
                    let ms = timeout_ns.map_or(-1, fallback_ms);
                    n = wait(libc::SYS_epoll_pwait, ms as libc::c_long);
                }
                if n < 0 {
                    return if n == -(libc::EINTR as libc::c_long) {
                        Ok(0)
                    } else {
                        Err(io::Error::from_raw_os_error(-n as i32))
                    };
                }
                // SAFETY: the kernel initialised the first n entries.
                unsafe { out.set_len(n as usize) };
                Ok(n as usize)
            }
            crate::signal::PollWake::Mask(ref sigmask) => {
                if !pwait2_missing() {
                    // SAFETY: `out` has room for `cap` events; `ts_ptr` is null or
                    // points at a live timespec; `sigmask` is a live sigset_t whose
                    // size the last argument gives (the kernel's sigset is 8 bytes).
                    let n = unsafe {
                        libc::syscall(
                            libc::SYS_epoll_pwait2,
                            self.fd.as_raw_fd(),
                            out.as_mut_ptr(),
                            cap,
                            ts_ptr,
                            sigmask as *const libc::sigset_t,
                            8usize,
                        )
                    };
                    if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
                        // SAFETY: `n` is what the kernel returned for this buffer.
                        return unsafe { filled(out, n) };
                    }
                    // Once, not on every later wait: every thread polls here.
                    NO_PWAIT2.store(true, Ordering::Relaxed);
                }
                let ms = timeout_ns.map_or(-1, fallback_ms);
                // SAFETY: as above; epoll_pwait takes the same mask.
                let n = unsafe {
                    libc::epoll_pwait(self.fd.as_raw_fd(), out.as_mut_ptr(), cap, ms, sigmask)
                };
                // SAFETY: `n` is what the kernel returned for this buffer.
                unsafe { filled(out, n as libc::c_long) }
            }
        }
    }

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
        if pwait2_missing() {
            return self.wait(out, fallback_ms(ns));
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
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            NO_PWAIT2.store(true, Ordering::Relaxed);
            return self.wait(out, fallback_ms(ns));
        }
        // SAFETY: `n` is what the kernel returned for this buffer.
        unsafe { filled(out, n) }
    }
}

/// An epoll instance with its own event buffer: waits return the ready
/// `(token, events)` pairs. For loops that own their epoll (the load
/// generator, thread-per-core workers, the plain-epoll baselines).
#[derive(Debug)]
pub struct Poller {
    epoll: Epoll,
    events: Vec<libc::epoll_event>,
}

impl Poller {
    /// A new epoll instance with room for `capacity` events per wait.
    pub fn new(capacity: usize) -> io::Result<Poller> {
        Ok(Poller {
            epoll: Epoll::new()?,
            events: Vec::with_capacity(capacity.max(1)),
        })
    }

    /// The epoll instance, to register through (any thread may).
    pub fn epoll(&self) -> &Epoll {
        &self.epoll
    }

    /// [`Epoll::add`].
    pub fn add(&self, fd: RawFd, flags: EpollFlags, data: u64) -> io::Result<()> {
        self.epoll.add(fd, flags, data)
    }

    /// [`Epoll::modify`].
    pub fn modify(&self, fd: RawFd, flags: EpollFlags, data: u64) -> io::Result<()> {
        self.epoll.modify(fd, flags, data)
    }

    /// [`Epoll::delete`].
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.epoll.delete(fd)
    }

    /// Waits up to `timeout_ns` (`None`: forever, `Some(0)`: poll) and
    /// returns the ready `(token, events)` pairs.
    pub fn wait(
        &mut self,
        timeout_ns: Option<u64>,
    ) -> io::Result<impl Iterator<Item = (u64, EpollFlags)> + '_> {
        self.epoll.wait_ns(&mut self.events, timeout_ns)?;
        Ok(self.events.iter().map(|e| (e.u64, e.events)))
    }
}
