//! Socket options the scheduler uses.

use std::io;
use std::os::fd::RawFd;

use super::syscall;

/// `SO_INCOMING_CPU`: the CPU that processed the socket's latest incoming
/// packets (on loopback, the sender's CPU). `None` if the kernel has no value
/// yet or the fd is not a socket.
pub fn incoming_cpu(fd: RawFd) -> Option<u32> {
    let mut v: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let r = syscall!(getsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_INCOMING_CPU,
        (&mut v as *mut libc::c_int).cast(),
        &mut len
    ));
    match r {
        Ok(_) if v >= 0 => Some(v as u32),
        _ => None,
    }
}

/// Whether `fd` is a listening socket (`SO_ACCEPTCONN`); false for
/// anything else, including non-sockets.
pub fn is_listening(fd: RawFd) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let r = syscall!(getsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_ACCEPTCONN,
        (&mut v as *mut libc::c_int).cast(),
        &mut len
    ));
    r.is_ok() && v != 0
}

/// Whether `fd` is a socket (fstat).
pub fn is_socket(fd: RawFd) -> io::Result<bool> {
    // SAFETY: zeroed stat is a valid out-parameter for fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    syscall!(fstat(fd, &mut st))?;
    Ok(st.st_mode & libc::S_IFMT == libc::S_IFSOCK)
}

/// Sets `SO_INCOMING_CPU` on a listening socket so that, with
/// `SO_REUSEPORT`, the kernel prefers this listener for connections whose
/// packets arrive on `cpu`.
pub fn set_incoming_cpu(fd: RawFd, cpu: u32) -> io::Result<()> {
    let v = cpu as libc::c_int;
    syscall!(setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_INCOMING_CPU,
        (&v as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as libc::socklen_t
    ))?;
    Ok(())
}

/// Makes the next close of `fd` reset the connection (`SO_LINGER` 0): the
/// peer sees `ECONNRESET`, as when a client vanishes.
pub fn set_linger_zero(fd: RawFd) -> io::Result<()> {
    let lin = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    syscall!(setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_LINGER,
        (&lin as *const libc::linger).cast(),
        std::mem::size_of::<libc::linger>() as libc::socklen_t
    ))?;
    Ok(())
}
