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
pub struct FdReserve {
    spare: std::sync::Mutex<Option<std::fs::File>>,
}

impl FdReserve {
    /// Opens the reserve fd (`/dev/null`).
    pub fn new() -> io::Result<FdReserve> {
        Ok(FdReserve {
            spare: std::sync::Mutex::new(Some(std::fs::File::open("/dev/null")?)),
        })
    }

    /// Closes the reserve fd, runs `f` (which may use one fd), and reopens
    /// the reserve. Returns `None` when the reserve was already spent (a
    /// failed reopen, or another thread inside) so the caller backs off.
    pub fn with_spare<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        let had = spare.take().is_some();
        let out = had.then(f);
        *spare = std::fs::File::open("/dev/null").ok();
        out
    }

    /// Closes the reserve fd for a caller that cannot run its use inside
    /// [`FdReserve::with_spare`] (an async accept); false if it was spent.
    /// Call [`FdReserve::restore`] after.
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
    fn the_reserve_lends_its_fd_and_takes_it_back() {
        let r = super::FdReserve::new().unwrap();
        let got = r.with_spare(|| std::fs::File::open("/dev/null").is_ok());
        assert_eq!(got, Some(true));
        assert!(r.spare.lock().unwrap().is_some(), "reopened");
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
