//! `poll(2)` over a small, fixed set of descriptors: [`PollSet`].
//!
//! For a thread that watches a few dozen sockets for input and nothing else
//! (the simple cross-check client's receiver), without an epoll instance. A
//! slot keeps its index for the set's life; [`PollSet::remove`] makes the
//! kernel skip it (a negative fd), so a hung-up socket is not reported again.
//! The set does not own the descriptors: the caller keeps them open while
//! they are in it.

use std::io;
use std::os::fd::RawFd;

use super::syscall;

/// What `poll` reported for one slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// Data (or EOF) to read.
    pub readable: bool,
    /// Hang-up, error or an invalid fd.
    pub failed: bool,
}

/// Descriptors watched for input.
#[derive(Debug, Default)]
pub struct PollSet {
    fds: Vec<libc::pollfd>,
}

impl PollSet {
    /// An empty set.
    pub fn new() -> PollSet {
        PollSet::default()
    }

    /// Watches `fd` for input; returns its slot.
    pub fn add(&mut self, fd: RawFd) -> usize {
        self.fds.push(libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        self.fds.len() - 1
    }

    /// Stops watching slot `i` (the kernel skips a negative fd).
    pub fn remove(&mut self, i: usize) {
        self.fds[i].fd = -1;
        self.fds[i].revents = 0;
    }

    /// Slots still watched.
    pub fn live(&self) -> usize {
        self.fds.iter().filter(|p| p.fd >= 0).count()
    }

    /// Number of slots, removed ones included.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// Whether the set has no slots at all.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }

    /// Waits up to `timeout_ms` (-1: forever) for input on any slot; returns
    /// how many slots have something to report (0 on timeout or `EINTR`).
    pub fn wait(&mut self, timeout_ms: i32) -> io::Result<usize> {
        match syscall!(poll(
            self.fds.as_mut_ptr(),
            self.fds.len() as libc::nfds_t,
            timeout_ms
        )) {
            Ok(n) => Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// [`PollSet::wait`] for at most `timeout`, to the nanosecond
    /// (`ppoll`): a caller that must not be woken after a deadline bounds
    /// its wait by it exactly.
    pub fn wait_for(&mut self, timeout: std::time::Duration) -> io::Result<usize> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        match syscall!(ppoll(
            self.fds.as_mut_ptr(),
            self.fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null()
        )) {
            Ok(n) => Ok(n as usize),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// What the last [`PollSet::wait`] reported for slot `i`.
    pub fn ready(&self, i: usize) -> Ready {
        let p = &self.fds[i];
        if p.fd < 0 {
            return Ready::default();
        }
        Ready {
            readable: p.revents & libc::POLLIN != 0,
            failed: p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PollSet;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn reports_the_readable_slot_and_skips_removed_ones() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (sa, _) = l.accept().unwrap();
        let b = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (sb, _) = l.accept().unwrap();
        let mut set = PollSet::new();
        let ia = set.add(sa.as_raw_fd());
        let ib = set.add(sb.as_raw_fd());
        assert_eq!(set.wait(0).unwrap(), 0, "nothing written yet");
        a.write_all(b"x").unwrap();
        assert_eq!(set.wait(5_000).unwrap(), 1);
        assert!(set.ready(ia).readable);
        assert!(!set.ready(ib).readable);
        set.remove(ia);
        assert_eq!(set.live(), 1);
        drop(b);
        assert_eq!(
            set.wait(5_000).unwrap(),
            1,
            "the closed peer of b, not a again"
        );
        assert!(set.ready(ib).readable || set.ready(ib).failed);
        assert_eq!(set.ready(ia), Default::default());
    }
}
