//! Every system call the generator makes, in one place.
//!
//! * [`now_ns`]: the one clock (CLOCK_MONOTONIC, nanoseconds).
//! * [`Epoll`]: a thin epoll wrapper with a nanosecond timeout (`epoll_pwait2`,
//!   falling back to millisecond `epoll_wait` where the kernel lacks it).
//! * [`sleep_until`]: absolute `clock_nanosleep`, so oversleeping never drifts.
//! * [`min_timer_slack`], [`cpu_time`], [`connect`]: the rest.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::RawFd;
use std::time::Duration;

/// Turns a `-1/errno` return into an `io::Error`.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Nanoseconds of CLOCK_MONOTONIC (the runtime's one clock).
pub use skq_rt::sys::cpu::monotonic_ns as now_ns;

/// Sleeps until the monotonic clock reads `deadline_ns` (absolute, so a late
/// wake-up is never carried into the next deadline).
pub use skq_rt::sys::cpu::sleep_until;
pub use skq_rt::sys::cpu::{allowed_cpus, pin_current_thread};

/// Sleeps until `deadline_ns − spin_ns`, then spins on the clock until
/// `deadline_ns`: the sleep's overshoot (tens of µs) is absorbed by the spin.
pub fn sleep_then_spin_until(deadline_ns: u64, spin_ns: u64) {
    sleep_until(deadline_ns.saturating_sub(spin_ns));
    while now_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// Moves the calling thread to `SCHED_FIFO` at `priority` (1..=99) so that
/// other processes on a busy machine cannot delay its wake-ups. Needs
/// CAP_SYS_NICE (or root); fails with `EPERM` otherwise.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) })?;
    Ok(())
}

/// Sets this thread's timer slack to 1 ns so timed waits overshoot as little
/// as the kernel allows (BRIEF §8). Best effort.
pub fn min_timer_slack() {
    let _ = skq_rt::sys::cpu::set_timer_slack(1);
}

/// User and system CPU time of the whole process so far, seconds.
pub fn cpu_time() -> (f64, f64) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable; RUSAGE_SELF is always accepted.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// User and kernel CPU time of the calling thread so far (ns).
pub fn thread_cpu_ns() -> (u64, u64) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is valid and writable; RUSAGE_THREAD exists on Linux.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    (ns(ru.ru_utime), ns(ru.ru_stime))
}

/// Raises the soft open-file limit to the hard limit (thousands of
/// connections need more than the usual 1024). Best effort.
pub fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max
    {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit; raising the soft limit up to the hard one is always allowed.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

/// Connects a TCP stream with `TCP_NODELAY`, then makes it non-blocking.
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Readable interest.
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable interest.
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// Error / hang-up bits reported without being asked for.
pub const ERR: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

/// An epoll instance (skq-rt's, level-triggered here) with its own event
/// buffer. Tokens are caller-chosen `u64`s.
pub struct Epoll {
    inner: skq_rt::sys::epoll::Epoll,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new epoll instance with room for `capacity` events per wait.
    pub fn new(capacity: usize) -> io::Result<Epoll> {
        Ok(Epoll {
            inner: skq_rt::sys::epoll::Epoll::new()?,
            events: Vec::with_capacity(capacity.max(1)),
        })
    }

    /// Registers `fd` (level-triggered; hang-ups always reported).
    pub fn add(&self, fd: RawFd, interest: u32, token: u64) -> io::Result<()> {
        self.inner
            .add(fd, interest | libc::EPOLLRDHUP as u32, token)
    }

    /// Changes the interest of a registered `fd`.
    pub fn modify(&self, fd: RawFd, interest: u32, token: u64) -> io::Result<()> {
        self.inner
            .modify(fd, interest | libc::EPOLLRDHUP as u32, token)
    }

    /// Removes `fd`.
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.inner.delete(fd)
    }

    /// Waits at most `timeout_ns` (0 = poll) and returns the ready
    /// `(token, events)` pairs.
    pub fn wait(&mut self, timeout_ns: u64) -> io::Result<impl Iterator<Item = (u64, u32)> + '_> {
        self.inner.wait_ns(&mut self.events, Some(timeout_ns))?;
        Ok(self.events.iter().map(|e| (e.u64, e.events)))
    }
}

/// Asks the kernel to timestamp incoming data on `fd` (`SO_TIMESTAMPNS`).
pub fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `on` is a valid c_int whose size we pass.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Nanoseconds of CLOCK_REALTIME.
pub fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `recvmsg(2)` into `buf`, returning the byte count and the kernel's receive
/// timestamp (CLOCK_REALTIME ns) when `SO_TIMESTAMPNS` is on.
pub fn recv_timestamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one cmsg carrying a timespec, 8-byte aligned.
    let mut control = [0u64; 8];
    // SAFETY: an all-zero msghdr is valid; the pointers are filled in below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (valid for `buf.len()` bytes) and at
    // `control` (valid for its size); both outlive the call.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* helpers walk the control buffer the kernel just
    // filled, within `msg_controllen`; a timestamp cmsg carries a timespec.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                stamp = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// `read(2)` on a raw fd into `buf`.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` writable bytes.
    let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `write(2)` on a raw fd from `buf` (MSG_NOSIGNAL semantics via `send`).
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` readable bytes.
    let r = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}
