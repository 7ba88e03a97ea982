//! The Linux calls this crate makes: epoll, eventfd, listening sockets with `SO_REUSEPORT`,
//! and signal waiting. Everything returns `io::Result`; nothing else in the crate calls libc
//! directly (except `getrusage` in stats).

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Turns a `-1`-on-error libc return into `io::Result`.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Readiness bits.
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// Peer closed its writing side (ask for it together with [`IN`]).
pub const RDHUP: u32 = libc::EPOLLRDHUP as u32;
/// Hang-up or error (always reported).
pub const HUP: u32 = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
/// Deliver once, then disable until re-armed.
pub const ONESHOT: u32 = libc::EPOLLONESHOT as u32;

/// An epoll instance (level-triggered unless `ONESHOT` is passed).
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// Creates an epoll instance.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; a non-negative return is a fresh fd we now own.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by epoll_create1 and is owned by nobody else.
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Registers `fd` for `events` with `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes the interest of a registered `fd` (also re-arms a oneshot registration).
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Removes `fd` (call before closing it).
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits for events; `None` blocks indefinitely. Returns `(token, events)` pairs.
    pub fn wait(
        &self,
        buf: &mut Vec<libc::epoll_event>,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
        buf.clear();
        let cap = buf.capacity().max(1) as libc::c_int;
        buf.reserve(cap as usize);
        // SAFETY: the kernel writes at most `cap` events into the vector's spare capacity,
        // and we set the length to exactly the number it reports.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), buf.as_mut_ptr(), cap, ms) };
        match cvt(n) {
            Ok(n) => {
                // SAFETY: the first `n` entries were initialized by epoll_wait.
                unsafe { buf.set_len(n as usize) };
                Ok(n as usize)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }
}

/// A non-blocking eventfd used as a wake-up doorbell.
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// Creates a non-blocking eventfd.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall; the returned fd is fresh and ours.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by eventfd and is owned by nobody else.
        Ok(EventFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The fd, for epoll registration.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Rings the doorbell.
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64; failure (counter saturated) still leaves
        // the fd readable, which is all a wake-up needs.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Clears the doorbell.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live u64; EAGAIN when already clear is fine.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// A non-blocking listening socket; `reuse_port` sets `SO_REUSEPORT` before binding so
/// several workers can each own a listener on the same address.
pub fn listen(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain syscall; the fd is wrapped in OwnedFd right away.
    let fd = cvt(unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is fresh and owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    let set = |opt| {
        // SAFETY: passes a live c_int of the right size for a boolean socket option.
        cvt(unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as u32,
            )
        })
    };
    set(libc::SO_REUSEADDR)?;
    if reuse_port {
        set(libc::SO_REUSEPORT)?;
    }
    let (storage, len) = sockaddr(addr);
    // SAFETY: `storage` holds a valid sockaddr of `len` bytes for this address family.
    cvt(unsafe { libc::bind(fd, (&storage as *const libc::sockaddr_storage).cast(), len) })?;
    // SAFETY: plain syscall on our socket.
    cvt(unsafe { libc::listen(fd, 1024) })?;
    Ok(TcpListener::from(sock))
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid (unspecified) value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            (
                storage,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            (
                storage,
                std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        }
    }
}

/// Blocks SIGTERM and SIGINT in the calling thread (and threads it spawns afterwards), so
/// that [`wait_for_termination`] can take them synchronously.
pub fn block_termination_signals() -> io::Result<()> {
    let set = termination_set();
    // SAFETY: `set` is an initialized sigset_t; the old mask is not needed.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Waits until SIGTERM or SIGINT arrives (they must be blocked first).
pub fn wait_for_termination() -> io::Result<i32> {
    let set = termination_set();
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is initialized and `sig` is a live out-parameter.
    let r = unsafe { libc::sigwait(&set, &mut sig) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(sig)
}

fn termination_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initializes the zeroed set; sigaddset adds valid signal numbers.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

/// Pins the calling thread to the `n`-th CPU (wrapping) of those it may run on.
pub fn pin_to_nth_allowed_cpu(n: usize) -> io::Result<usize> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a live cpu_set_t of `size` bytes; pid 0 = the calling thread.
    cvt(unsafe { libc::sched_getaffinity(0, size, &mut set) })?;
    // SAFETY: CPU_ISSET reads the set we own, for indices below CPU_SETSIZE.
    let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    let cpu = *allowed
        .get(n % allowed.len().max(1))
        .ok_or_else(|| io::Error::other("no allowed CPU"))?;
    // SAFETY: as above; the new set holds exactly one valid CPU index.
    unsafe {
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        cvt(libc::sched_setaffinity(0, size, &one))?;
    }
    Ok(cpu)
}
