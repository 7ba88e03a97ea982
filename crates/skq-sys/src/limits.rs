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

#[cfg(test)]
mod tests {
    #[test]
    fn raised_soft_limit_reaches_the_hard_limit() {
        let soft = super::raise_nofile_limit().unwrap();
        assert_eq!(super::nofile_limit().unwrap(), (soft, soft));
    }
}
