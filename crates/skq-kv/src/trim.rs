//! Returning freed heap memory to the system when a thread-per-core worker goes idle.
//!
//! Why (issue 26, defect 6): under repeated floods of pipelined gets the tpc server's RSS
//! crept up round after round (25 → 210 MB over 12 rounds of 100,000 gets of 10 KB
//! values) while the shared architecture stayed flat. It is allocator retention, not a
//! leak: the same run with `MALLOC_ARENA_MAX=1` stays flat (14–15 MB over six rounds of
//! 50,000, against 14 → 28 MB with glibc's default per-thread arenas). A reply is built
//! on the key's owner and freed on the connection's worker, so glibc's per-thread arenas
//! fill with free chunks that no thread reuses in order and that are never returned.
//!
//! What: a worker that did work and is about to sleep calls `malloc_trim(0)` (which
//! releases free pages of every arena, not only the top), at most once per
//! [`TRIM_INTERVAL_MS`] across the process; a worker that goes idle before the interval
//! has passed sleeps only until it has. A worker under load never idles, so never trims;
//! an idle server never trims either (nothing to return).
//!
//! `malloc_trim` cannot return the free memory at the top of a thread's arena (only
//! `free` trims a non-main arena's top, and only past `M_TRIM_THRESHOLD`). glibc's
//! dynamic mmap threshold puts large buffers exactly there: once a large mmapped buffer
//! is freed, the threshold rises to its size (up to 32 MiB) and later buffers that size
//! (a connection's output during a flood of pipelined gets) come from the arena and stay
//! at its top when freed. A worker that runs another worker's commands (`tpc.rs`,
//! "Borrowing") builds more of its replies in its own output buffers, and
//! `tests/bounded_output.rs`'s eight floods of pipelined gets then left the server's RSS
//! 31–34 MiB above its start in two runs of three. [`static_mmap_threshold`] fixes the
//! threshold at glibc's default of 128 KiB, which turns the adjustment off: larger
//! buffers are mapped and unmapped, and that test passed three runs in three.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Least time between two trims of the process, in milliseconds.
pub const TRIM_INTERVAL_MS: u64 = 1000;

/// A worker's trim state.
#[derive(Debug, Default)]
pub struct IdleTrim {
    /// Work was done since this worker's last trim (or its start).
    pub worked: bool,
}

impl IdleTrim {
    /// Called when the worker is about to sleep at `now_ms`; `last` is the process-wide
    /// time of the last trim. Trims when due and returns how long to sleep: `None` (until
    /// woken) or until the next trim is due.
    pub fn on_idle(&mut self, last: &AtomicU64, now_ms: u64) -> Option<Duration> {
        if !self.worked {
            return None;
        }
        let prev = last.load(Relaxed);
        let since = now_ms.saturating_sub(prev);
        if prev != 0 && since < TRIM_INTERVAL_MS {
            return Some(Duration::from_millis(TRIM_INTERVAL_MS - since));
        }
        self.worked = false;
        if last
            .compare_exchange(prev, now_ms.max(1), Relaxed, Relaxed)
            .is_ok()
        {
            trim();
        }
        None
    }
}

/// Fixes glibc's mmap threshold at 128 KiB (its default), which stops glibc from raising
/// it after a large buffer is freed (see the module docs). Process-wide; called when a
/// thread-per-core server starts. A failure only costs memory, so it is ignored.
pub fn static_mmap_threshold() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt takes two integers and changes only the allocator's parameters,
    // under its own lock; any thread may call it at any time.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// Returns the free pages of every malloc arena to the system.
fn trim() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointer and only walks glibc's own arenas under their
    // locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_once_per_interval_and_only_after_work() {
        let last = AtomicU64::new(0);
        let mut a = IdleTrim::default();
        assert_eq!(a.on_idle(&last, 5), None, "no work, no trim");
        assert_eq!(last.load(Relaxed), 0);
        a.worked = true;
        assert_eq!(a.on_idle(&last, 5), None);
        assert_eq!(last.load(Relaxed), 5, "trimmed");
        assert!(!a.worked);
        let mut b = IdleTrim { worked: true };
        assert_eq!(
            b.on_idle(&last, 405),
            Some(Duration::from_millis(600)),
            "another worker waits for the interval"
        );
        assert!(b.worked);
        assert_eq!(b.on_idle(&last, 1005), None);
        assert_eq!(last.load(Relaxed), 1005);
    }
}
