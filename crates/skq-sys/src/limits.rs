//! Process resource limits.

use std::io;

use super::syscall;

/// The open-file limit as (soft, hard).
pub fn nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    syscall!(getrlimit(libc::RLIMIT_NOFILE, &mut lim))?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// Raises the soft open-file limit to the hard limit (thousands of
/// connections need more than the usual 1024); returns the new soft limit.
pub fn raise_nofile_limit() -> io::Result<u64> {
    let (soft, hard) = nofile_limit()?;
    if soft < hard {
        let lim = libc::rlimit {
            rlim_cur: hard,
            rlim_max: hard,
        };
        syscall!(setrlimit(libc::RLIMIT_NOFILE, &lim))?;
    }
    Ok(hard.max(soft))
}

/// Whether an error means the process (or system) is out of file
/// descriptors (`EMFILE`, `ENFILE`).
pub fn is_fd_exhaustion(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// One file descriptor held in reserve, so a listener that hit the fd
/// limit can still take a waiting connection off its backlog and close it
/// (refusing it) instead of leaving it stuck there: an edge-triggered
/// listener would see no new edge, a level-triggered one would spin.
///
/// Every accept of the listeners it guards goes through
/// [`FdReserve::accept`], under one lock: when the reserve fd is closed to
/// make room, no other thread's accept can take that room first (which
/// would spend the reserve for good while the process stays at its limit).
/// The lock is uncontended except when workers accept at the same instant,
/// which the kernel serialises on the listener anyway.
pub struct FdReserve {
    spare: std::sync::Mutex<Option<std::fs::File>>,
}

/// What [`FdReserve::accept`] did.
#[derive(Debug)]
pub enum Accepted<T> {
    /// A connection to serve.
    Conn(T),
    /// The process was out of fds: one waiting connection was taken with
    /// the reserve fd and handed to the refusal callback (then closed).
    Refused,
}

impl FdReserve {
    /// Opens the reserve fd (`/dev/null`).
    pub fn new() -> io::Result<FdReserve> {
        Ok(FdReserve {
            spare: std::sync::Mutex::new(Some(std::fs::File::open("/dev/null")?)),
        })
    }

    /// Accepts one connection with `accept`. Out of fds (`EMFILE`,
    /// `ENFILE`) with the reserve in hand, it closes the reserve, accepts
    /// again, hands that connection to `refuse` (which writes a busy
    /// message, say) and closes it, then reopens the reserve. Errors are
    /// `accept`'s: `WouldBlock` when nothing waits, and the fd-exhaustion
    /// error itself only when the reserve could not be restored (another
    /// part of the process holds every fd), so the caller backs off.
    pub fn accept<T>(
        &self,
        mut accept: impl FnMut() -> io::Result<T>,
        refuse: impl FnOnce(T),
    ) -> io::Result<Accepted<T>> {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.is_none() {
            *spare = std::fs::File::open("/dev/null").ok();
        }
        match accept() {
            Err(e) if is_fd_exhaustion(&e) && spare.is_some() => {
                drop(spare.take());
                let r = accept();
                let out = match r {
                    Ok(conn) => {
                        refuse(conn); // closes it: its fd is the reserve's
                        Ok(Accepted::Refused)
                    }
                    Err(e) => Err(e),
                };
                *spare = std::fs::File::open("/dev/null").ok();
                out
            }
            r => r.map(Accepted::Conn),
        }
    }

    /// Closes the reserve fd for a caller that cannot accept inside
    /// [`FdReserve::accept`] (an async accept loop that is the listener's
    /// only acceptor); false if it was spent. Call [`FdReserve::restore`]
    /// after the refused connection is closed.
    pub fn release(&self) -> bool {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        spare.take().is_some()
    }

    /// Reopens the reserve fd after [`FdReserve::release`].
    pub fn restore(&self) {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.is_none() {
            *spare = std::fs::File::open("/dev/null").ok();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reserve_lends_its_fd_to_refuse_and_takes_it_back() {
        let r = super::FdReserve::new().unwrap();
        // First call out of fds, the retry (with the reserve closed) gets one.
        let mut calls = 0;
        let mut refused = Vec::new();
        let got = r.accept(
            || {
                calls += 1;
                if calls == 1 {
                    Err(std::io::Error::from_raw_os_error(libc::EMFILE))
                } else {
                    Ok(calls)
                }
            },
            |c| refused.push(c),
        );
        assert!(matches!(got, Ok(super::Accepted::Refused)), "{got:?}");
        assert_eq!(refused, vec![2]);
        assert!(r.spare.lock().unwrap().is_some(), "reopened");
        let got = r.accept(|| Ok(7), |_| panic!("nothing to refuse"));
        assert!(matches!(got, Ok(super::Accepted::Conn(7))));
        let got = r.accept(
            || Err::<u8, _>(std::io::ErrorKind::WouldBlock.into()),
            |_| panic!("nothing to refuse"),
        );
        assert_eq!(got.unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(super::is_fd_exhaustion(&e));
        assert!(!super::is_fd_exhaustion(
            &std::io::Error::from_raw_os_error(libc::EAGAIN)
        ));
    }

    #[test]
    fn raised_soft_limit_reaches_the_hard_limit() {
        let soft = super::raise_nofile_limit().unwrap();
        assert_eq!(super::nofile_limit().unwrap(), (soft, soft));
    }
}
