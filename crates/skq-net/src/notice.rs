//! What a running server has to tell its operator, kept instead of printed.
//!
//! The drivers run inside applications and tests, so they print nothing:
//! a failure they survive (a connection that could not be registered, an
//! `accept` error, a worker that could not be pinned) or end on (a worker's
//! wait failing, a panic found at shutdown) becomes a typed [`Notice`] in
//! the server's [`Notices`] log. Whoever runs the server reads the log:
//! the serve lifecycle ([`crate::serve`]) prints each notice as one line
//! on standard error while the server runs and after it stops.
//!
//! **Bounds.** A failure can repeat for as long as its cause lasts (an
//! `accept` error every millisecond), so the log holds at most
//! [`Notices::CAPACITY`] notices not yet drained; later ones are only
//! counted ([`Drained::dropped`]). [`Notices::total`] counts every notice
//! ever logged.
//!
//! **Who touches what.** Any driver thread may log (one short lock, on
//! paths that are already failing, never per request); the reader drains.

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How bad a notice is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    /// The server goes on as before (one connection may be lost).
    Warning,
    /// A worker stopped serving.
    Error,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Warning => "warning",
            Level::Error => "error",
        })
    }
}

/// One thing a driver noticed. `Display` is the message without its level
/// (the lifecycle prints `LEVEL: MESSAGE`).
#[derive(Debug, thiserror::Error)]
pub enum Notice {
    /// `accept` failed for a reason other than a reset peer or the fd
    /// limit (the listener backs off briefly and tries again).
    #[error("accept failed: {0}")]
    AcceptFailed(io::Error),
    /// An accepted connection could not be registered for readiness; it
    /// was closed.
    #[error("could not register a connection: {0}")]
    RegisterFailed(io::Error),
    /// `epoll-shared`: a connection could not be re-armed after an event.
    #[error("could not re-arm a connection: {0}")]
    RearmFailed(io::Error),
    /// skq: a closing connection could not be deregistered.
    #[error("deregister failed: {0}")]
    DeregisterFailed(io::Error),
    /// skq: a connection's new priority class could not be handed to the
    /// scheduler.
    #[error("could not change a connection's priority: {0}")]
    ClassFailed(io::Error),
    /// `--pin`: a worker thread could not be pinned; it runs unpinned.
    #[error("could not pin worker {worker}: {error}")]
    PinFailed {
        /// The worker.
        worker: usize,
        /// Why.
        error: io::Error,
    },
    /// A retired skq worker left sources no live worker can run.
    #[error("worker {worker} left {sources} sources with no worker to run them")]
    Stranded {
        /// The worker.
        worker: usize,
        /// How many sources.
        sources: usize,
    },
    /// A worker's wait for events failed; that worker stopped.
    #[error("worker {worker}: {call} failed: {error}")]
    WaitFailed {
        /// The worker.
        worker: usize,
        /// The call: `wait` (skq) or `epoll_wait`.
        call: &'static str,
        /// Why.
        error: io::Error,
    },
    /// A worker thread panicked (found when it was joined at shutdown).
    #[error("a worker panicked")]
    WorkerPanicked,
    /// The elastic resource manager's thread panicked.
    #[error("the resource manager panicked")]
    ManagerPanicked,
    /// The timeout sweep's thread panicked.
    #[error("the timeout sweep panicked")]
    SweepPanicked,
}

impl Notice {
    /// How bad it is: a worker that stopped serving is an error, the rest
    /// are warnings.
    pub fn level(&self) -> Level {
        match self {
            Notice::WaitFailed { .. } => Level::Error,
            _ => Level::Warning,
        }
    }
}

/// What [`Notices::drain`] returns.
#[derive(Debug, Default)]
pub struct Drained {
    /// The notices logged since the last drain, oldest first.
    pub notices: Vec<Notice>,
    /// Notices since the last drain that found the log full and were only
    /// counted.
    pub dropped: u64,
}

#[derive(Debug, Default)]
struct Inner {
    pending: Mutex<Vec<Notice>>,
    dropped: AtomicU64,
    total: AtomicU64,
}

/// A server's notice log: cheap to clone (all clones share one log).
#[derive(Clone, Debug, Default)]
pub struct Notices(Arc<Inner>);

impl Notices {
    /// Most notices held between two drains.
    pub const CAPACITY: usize = 256;

    /// An empty log.
    pub fn new() -> Self {
        Notices::default()
    }

    /// Logs `n` (or only counts it when [`Notices::CAPACITY`] are waiting).
    pub fn push(&self, n: Notice) {
        self.0.total.fetch_add(1, Ordering::Relaxed);
        let mut pending = self.0.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.len() < Self::CAPACITY {
            pending.push(n);
        } else {
            self.0.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Takes every notice logged since the last drain.
    pub fn drain(&self) -> Drained {
        let mut pending = self.0.pending.lock().unwrap_or_else(|p| p.into_inner());
        Drained {
            notices: std::mem::take(&mut *pending),
            dropped: self.0.dropped.swap(0, Ordering::Relaxed),
        }
    }

    /// Notices logged since the server started, drained or not.
    pub fn total(&self) -> u64 {
        self.0.total.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_keep_their_wording_and_level() {
        let n = Notice::WaitFailed {
            worker: 3,
            call: "epoll_wait",
            error: io::Error::other("bad fd"),
        };
        assert_eq!(n.level(), Level::Error);
        assert_eq!(
            format!("{}: {n}", n.level()),
            "error: worker 3: epoll_wait failed: bad fd"
        );
        let n = Notice::PinFailed {
            worker: 1,
            error: io::Error::new(io::ErrorKind::InvalidInput, "no CPU 1"),
        };
        assert_eq!(
            format!("{}: {n}", n.level()),
            "warning: could not pin worker 1: no CPU 1"
        );
    }

    #[test]
    fn the_log_is_bounded_and_counts_what_it_drops() {
        let log = Notices::new();
        let reader = log.clone();
        for _ in 0..Notices::CAPACITY + 5 {
            log.push(Notice::WorkerPanicked);
        }
        let d = reader.drain();
        assert_eq!((d.notices.len(), d.dropped), (Notices::CAPACITY, 5));
        assert_eq!(reader.total(), Notices::CAPACITY as u64 + 5);
        log.push(Notice::SweepPanicked);
        let d = reader.drain();
        assert_eq!(d.dropped, 0);
        assert!(matches!(d.notices[..], [Notice::SweepPanicked]));
        assert!(reader.drain().notices.is_empty());
    }
}
