//! A source's CPU hint, cached between asks.
//!
//! Asking the kernel where a socket's packets are processed
//! (`getsockopt(SO_INCOMING_CPU)`) is a system call; doing it on every
//! activation cost the runtime one call per reply. A [`HintCell`] per source
//! keeps the last answer and serves it for `hint_refresh` activations
//! ([`crate::Config::hint_refresh`], default 16) before the runtime asks
//! again.
//!
//! **Bound on staleness**: after a flow moves to another CPU, its activations
//! still go where the old hint points for at most `hint_refresh − 1` further
//! activations. With `hint_refresh = 1` every activation asks (the behaviour
//! before the cache).
//!
//! The CPU of the harvesting thread is no sign that a flow moved: any idle
//! worker harvests a shared set, and unpinned workers change CPU between
//! harvests. An earlier rule that asked again whenever the harvester ran on
//! another CPU than the last asker made the main job's 8 floating workers
//! ask on about half of all activations (0.50 `getsockopt` per reply, strace)
//! instead of one in 16.
//!
//! The cell is one `AtomicU64` read and written with relaxed plain loads and
//! stores: two harvesters racing on one source can at worst ask once more or
//! once less than the count says. That is a cost question, never a
//! correctness one: the hint only steers placement. It is not part of the
//! scheduler's synchronisation protocol, so it uses `std` atomics directly
//! (not the loom-swappable `crate::sync`).
//!
//! ```text
//! bits  0-15  hint CPU (0xFFFF: the kernel gave none)
//! bits 16-31  unused (0)
//! bits 32-47  activations left before asking again (0: ask now)
//! bits 48-63  low 16 bits of the source's generation (a reused slot asks)
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::SourceId;

const NO_CPU: u64 = 0xFFFF;

/// One source's cached CPU hint (see the module documentation).
#[derive(Debug, Default)]
pub struct HintCell(AtomicU64);

impl HintCell {
    /// An empty cell: the first lookup asks.
    pub const fn new() -> HintCell {
        HintCell(AtomicU64::new(0))
    }

    /// The cached hint for `id`, counting one use; `None` when the caller
    /// must ask the kernel (then [`HintCell::store`] the answer).
    /// `Some(None)`: the kernel said it knows no CPU, and that answer is
    /// still fresh.
    #[inline]
    pub fn cached(&self, id: SourceId) -> Option<Option<u32>> {
        let w = self.0.load(Ordering::Relaxed);
        let left = (w >> 32) & 0xFFFF;
        if left == 0 || w >> 48 != u64::from(id.gen() as u16) {
            return None;
        }
        self.0.store(w - (1 << 32), Ordering::Relaxed);
        let hint = w & 0xFFFF;
        Some((hint != NO_CPU).then_some(hint as u32))
    }

    /// Records the kernel's answer `hint` for `id`, valid for `refresh`
    /// activations including this one (1..=4096).
    #[inline]
    pub fn store(&self, id: SourceId, hint: Option<u32>, refresh: u32) {
        let hint_field = cpu_field(hint);
        // A CPU number the cell cannot hold is simply asked for every time.
        let left = if hint.is_some() && hint_field == NO_CPU {
            0
        } else {
            u64::from(refresh.clamp(1, 0xFFFF) - 1)
        };
        let w = u64::from(id.gen() as u16) << 48 | left << 32 | hint_field;
        self.0.store(w, Ordering::Relaxed);
    }
}

fn cpu_field(cpu: Option<u32>) -> u64 {
    match cpu {
        Some(c) if u64::from(c) < NO_CPU => u64::from(c),
        _ => NO_CPU,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates the runtime's lookup: returns the hint used and whether the
    /// kernel was asked.
    fn lookup(cell: &HintCell, id: SourceId, kernel: u32, n: u32) -> (u32, bool) {
        match cell.cached(id) {
            Some(h) => (h.unwrap(), false),
            None => {
                cell.store(id, Some(kernel), n);
                (kernel, true)
            }
        }
    }

    #[test]
    fn a_hint_is_refreshed_after_n_activations() {
        let cell = HintCell::new();
        let id = SourceId::new(3, 7);
        let n = 8;
        // First activation asks; the next 7 use the cache even though the
        // flow moved to CPU 5 after the first.
        assert_eq!(lookup(&cell, id, 2, n), (2, true));
        for _ in 1..n {
            assert_eq!(lookup(&cell, id, 5, n), (2, false));
        }
        // The n+1-th asks again and follows the move.
        assert_eq!(lookup(&cell, id, 5, n), (5, true));
        let asks = (0..10 * n).filter(|_| lookup(&cell, id, 5, n).1).count();
        assert_eq!(asks, 10, "one ask per {n} activations");
    }

    #[test]
    fn a_reused_slot_asks_at_once_and_refresh_one_always_asks() {
        let cell = HintCell::new();
        let id = SourceId::new(3, 7);
        assert_eq!(lookup(&cell, id, 2, 16), (2, true));
        assert_eq!(lookup(&cell, id, 4, 16), (2, false));
        let reused = SourceId::new(3, 8);
        assert_eq!(lookup(&cell, reused, 6, 16), (6, true), "new generation");
        assert_eq!(lookup(&cell, reused, 7, 16), (6, false));
        // refresh = 1: every activation asks.
        let asks = (0..5).filter(|_| lookup(&cell, id, 6, 1).1).count();
        assert_eq!(asks, 5);
        // "No CPU known" is cached too.
        let c2 = HintCell::new();
        c2.store(id, None, 4);
        assert_eq!(c2.cached(id), Some(None));
        assert_eq!(c2.cached(id), Some(None));
        assert_eq!(c2.cached(id), Some(None));
        assert_eq!(c2.cached(id), None, "asked again after 4 activations");
    }
}
