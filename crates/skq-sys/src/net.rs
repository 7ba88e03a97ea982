//! TCP sockets: listeners with a deep backlog (and optionally `SO_REUSEPORT`),
//! client connections, raw reads and writes, and kernel receive timestamps.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::syscall;

/// Accept backlog asked for; the kernel caps it at `net.core.somaxconn`.
/// `std` listens with 128, which a burst of connects (a load generator
/// opening hundreds at once) overflows into SYN retransmits.
pub const BACKLOG: libc::c_int = 65_535;

/// A non-blocking listening socket on `addr` with `SO_REUSEADDR`, a deep
/// backlog ([`BACKLOG`]) and, if `reuse_port`, `SO_REUSEPORT` set before
/// binding, so several workers can each own a listener on one address.
pub fn listen(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    let fd = syscall!(socket(
        domain,
        libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        0
    ))?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    set_flag(fd, libc::SO_REUSEADDR)?;
    if reuse_port {
        set_flag(fd, libc::SO_REUSEPORT)?;
    }
    let (storage, len) = sockaddr(addr);
    syscall!(bind(
        fd,
        (&storage as *const libc::sockaddr_storage).cast(),
        len
    ))?;
    syscall!(listen(fd, BACKLOG))?;
    Ok(TcpListener::from(sock))
}

fn set_flag(fd: RawFd, opt: libc::c_int) -> io::Result<()> {
    let one: libc::c_int = 1;
    syscall!(setsockopt(
        fd,
        libc::SOL_SOCKET,
        opt,
        (&one as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as libc::socklen_t
    ))?;
    Ok(())
}

fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid (unspecified) value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
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
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Connects a TCP stream (5 s timeout) with `TCP_NODELAY`, then makes it non-blocking.
pub fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    Ok(s)
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

/// `send(2)` with `MSG_NOSIGNAL` (a closed peer is `EPIPE`, never SIGPIPE).
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for `buf.len()` readable bytes.
    let r = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Asks the kernel to timestamp incoming data on `fd` (`SO_TIMESTAMPNS`).
pub fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    set_flag(fd, libc::SO_TIMESTAMPNS)
}

/// `recvmsg(2)` into `buf`, returning the byte count and the kernel's receive
/// timestamp (CLOCK_REALTIME ns) when `SO_TIMESTAMPNS` is on. For TCP the
/// stamp is that of the last segment the call read from (when segments were
/// merged in the receive queue, of the latest merged one).
pub fn recv_timestamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    recvmsg_stamped(fd, buf, 0)
}

/// [`recv_timestamped`] with `MSG_DONTWAIT`: `WouldBlock` instead of waiting,
/// whether or not the socket is non-blocking (so one thread may block in
/// `send` on it while another polls and reads it).
pub fn recv_timestamped_nowait(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    recvmsg_stamped(fd, buf, libc::MSG_DONTWAIT)
}

fn recvmsg_stamped(
    fd: RawFd,
    buf: &mut [u8],
    flags: libc::c_int,
) -> io::Result<(usize, Option<u64>)> {
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
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
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

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    /// This kernel delivers `SCM_TIMESTAMPNS` for TCP on loopback, on the
    /// realtime clock: the stamp lies between the write and the read (an
    /// ordering of three readings of one clock, not a timing threshold).
    /// The kernel switches stamping on from a work queue after the first
    /// socket of the system asks, so the first pings may come unstamped: it
    /// pings until one is stamped (at most 2,000 times, 1 ms apart), then
    /// requires a stamp on every read.
    #[test]
    fn tcp_loopback_reads_carry_a_realtime_kernel_stamp() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        super::enable_rx_timestamps(s.as_raw_fd()).unwrap();
        let mut buf = [0u8; 64];
        // One ping: (realtime before the write, the read's stamp, realtime after).
        let mut ping = |buf: &mut [u8]| {
            let before = crate::cpu::realtime_ns();
            c.write_all(b"ping").unwrap();
            let mut got = 0;
            let mut stamp = None;
            while got < 4 {
                let (n, st) = super::recv_timestamped(s.as_raw_fd(), &mut buf[got..]).unwrap();
                assert!(n > 0, "EOF");
                got += n;
                stamp = st;
            }
            assert_eq!(&buf[..4], b"ping");
            (before, stamp, crate::cpu::realtime_ns())
        };
        let mut on = false;
        for _ in 0..2000 {
            if ping(&mut buf).1.is_some() {
                on = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(on, "no TCP read carried a receive timestamp");
        for round in 0..3 {
            let (before, stamp, after) = ping(&mut buf);
            let stamp = stamp.expect("a kernel receive timestamp on every TCP read");
            assert!(
                before <= stamp && stamp <= after,
                "round {round}: stamp {stamp} outside [{before}, {after}]"
            );
        }
        // Nothing left: the non-blocking variant says so.
        let e = super::recv_timestamped_nowait(s.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }

    #[test]
    fn two_reuseport_listeners_share_an_address_and_accept() {
        let a = super::listen("127.0.0.1:0".parse().unwrap(), true).unwrap();
        let addr = a.local_addr().unwrap();
        let b = super::listen(addr, true).unwrap();
        assert_eq!(b.local_addr().unwrap(), addr);
        assert!(
            super::listen(addr, false).is_err(),
            "without SO_REUSEPORT the address is taken"
        );
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"x").unwrap();
        let mut got = None;
        for _ in 0..500 {
            if let Ok((s, _)) = a.accept().or_else(|_| b.accept()) {
                got = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let mut s = got.expect("one of the listeners accepts");
        s.set_nonblocking(false).unwrap();
        let mut buf = [0u8; 1];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"x");
    }
}
