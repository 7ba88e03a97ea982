//! The lend window: how a receiver of the simple client shares a CPU with
//! the senders on it without ever taking it from a send that is due.
//!
//! **Protocol.** Each sender `t` owns one word, its *window*: the scheduled
//! time (realtime ns) of its next send while it waits for it, [`CLOSED`]
//! while it sends, [`DONE`] once it has sent its last request. Each
//! receiver `r` has a set of *partner* senders ([`partners`]: those that may
//! run on its CPU) and reads sockets only while every partner *lends*: its
//! window is more than `guard` away ([`decide`]).
//!
//! 1. A sender publishes its next send instant ([`Lending::lend`]) after it
//!    has built the request and before it sleeps and spins, and, if a
//!    borrowing receiver is parked and the slack exceeds the guard, wakes it.
//! 2. When the sleep and spin end it takes the CPU back
//!    ([`Lending::take`]: the window is [`CLOSED`]) and sends. Closing is
//!    also implied by time: a window `D` is closed for a receiver from
//!    `D − guard` on, so the spinning sender need not act to close it; the
//!    explicit close covers a sender that overruns its instant (a late wake,
//!    a long send call) and a step of the realtime clock.
//! 3. A receiver checks its partners' windows before `poll` and before every
//!    `recvmsg` ([`Lending::open`]). When they are closed it stops reading,
//!    leaves what is unread in the socket (the kernel has stamped it
//!    already) and parks ([`Lending::wait`]) instead of going back to
//!    `poll`, which would return at once for the unread data.
//! 4. Parking is a Dekker handshake: the receiver sets `waiting`, re-reads
//!    the windows, and parks only if they are still closed; a sender stores
//!    its window, then reads `waiting`. All four accesses are `SeqCst`, so at
//!    least one side sees the other's store: either the receiver sees the
//!    new window or the sender sees `waiting` and unparks it (an unpark
//!    before the park makes the park return at once). The park has a
//!    timeout, so the receiver still notices the end of the run.
//!
//! **Who may touch what.** Sender `t` alone stores `windows[t]`; receiver
//! `r` alone stores `waiters[r].waiting` and sets `waiters[r].thread`,
//! before it first sets `waiting`, so a sender that sees `waiting` finds the
//! thread to unpark. Everyone reads everything.
//!
//! **Guarantee.** A receiver holding the lend reads at most one more
//! `recvmsg` (and parses what it returned) after the window closes; with a
//! closed window it runs only to look at the clock and the windows after a
//! wake (a reply arriving, a timeout, a stale unpark) and parks again. So a
//! `SCHED_FIFO` receiver cannot starve its senders; the guard pays for that
//! one read and the switch back.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::{self, Thread};
use std::time::Duration;

/// Window of a sender that is sending (or has not started): no lend.
pub(super) const CLOSED: u64 = 0;
/// Window of a sender that has sent everything: lent for good.
pub(super) const DONE: u64 = u64::MAX;

/// Whether a receiver may read now.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lend {
    /// Every partner sender's next send is more than the guard away.
    Open,
    /// A partner sender sends, or will within the guard: do not read.
    Closed,
}

/// A receiver's decision for one sender whose window is `next_send`, at
/// `now` (all realtime ns): open while the send is more than `guard` away.
pub(super) fn decide(now: u64, next_send: u64, guard: u64) -> Lend {
    if next_send != CLOSED && next_send.saturating_sub(now) > guard {
        Lend::Open
    } else {
        Lend::Closed
    }
}

/// For each of `receivers` receivers, the senders (of `threads`) it must
/// wait for. Threads are pinned round-robin to `cpus` (senders and
/// receivers each from the first CPU on), so a receiver's partners are the
/// senders pinned to its CPU (none: it never waits); unpinned, any sender
/// may share its CPU, so all are.
pub(super) fn partners(threads: usize, receivers: usize, cpus: &[u32]) -> Vec<Vec<usize>> {
    (0..receivers)
        .map(|r| {
            (0..threads)
                .filter(|&t| cpus.is_empty() || cpus[t % cpus.len()] == cpus[r % cpus.len()])
                .collect()
        })
        .collect()
}

/// One sender's window. Padded: each sender stores into its own on every
/// send, and two senders' windows on one line would make them fight over
/// it (the receivers only read it).
#[repr(align(128))]
struct Window(AtomicU64);

/// Where one receiver parks. Padded apart from the windows and from other
/// receivers' flags, which other threads store into.
#[repr(align(128))]
struct Waiter {
    waiting: AtomicBool,
    thread: OnceLock<Thread>,
}

/// The windows of all senders and the parking spots of all receivers.
pub(super) struct Lending {
    /// Realtime ns a receiver leaves before a partner's send.
    guard: u64,
    /// One per sender.
    windows: Vec<Window>,
    /// One per receiver.
    waiters: Vec<Waiter>,
    /// `partners[r]`: the senders receiver `r` waits for.
    partners: Vec<Vec<usize>>,
    /// `borrowers[t]`: the receivers that wait for sender `t`.
    borrowers: Vec<Vec<usize>>,
}

impl Lending {
    /// Every window [`CLOSED`] until its sender first lends; `partners` as
    /// [`partners`] gives them.
    pub(super) fn new(guard: Duration, threads: usize, partners: Vec<Vec<usize>>) -> Lending {
        let mut borrowers = vec![Vec::new(); threads];
        for (r, ts) in partners.iter().enumerate() {
            for &t in ts {
                borrowers[t].push(r);
            }
        }
        Lending {
            guard: guard.as_nanos().min(u64::MAX as u128) as u64,
            windows: (0..threads)
                .map(|_| Window(AtomicU64::new(CLOSED)))
                .collect(),
            waiters: (0..partners.len())
                .map(|_| Waiter {
                    waiting: AtomicBool::new(false),
                    thread: OnceLock::new(),
                })
                .collect(),
            partners,
            borrowers,
        }
    }

    /// Sender `t` waits for its send at `next_send` ([`DONE`]: it has sent
    /// everything): publishes the window and wakes each parked borrower if
    /// the slack at `clock()` exceeds the guard (waking it for less would
    /// only make it park again right before the send).
    pub(super) fn lend(&self, t: usize, next_send: u64, clock: &dyn Fn() -> u64) {
        // SeqCst: step 4 of the protocol (the store, then the load of
        // `waiting`, must not be reordered).
        self.windows[t].0.store(next_send, Ordering::SeqCst);
        for &r in &self.borrowers[t] {
            let w = &self.waiters[r];
            if w.waiting.load(Ordering::SeqCst)
                && decide(clock(), next_send, self.guard) == Lend::Open
            {
                if let Some(th) = w.thread.get() {
                    th.unpark();
                }
            }
        }
    }

    /// Sender `t` is about to send: its window closes. (Release is enough:
    /// closing wakes nobody, and a receiver that still reads the old
    /// window finds it closed by time.)
    pub(super) fn take(&self, t: usize) {
        self.windows[t].0.store(CLOSED, Ordering::Release);
    }

    /// Receiver `r` is the calling thread (once, before any [`Lending::wait`]).
    pub(super) fn register(&self, r: usize) {
        let _ = self.waiters[r].thread.set(thread::current());
    }

    /// Whether receiver `r` may read at `now`: every partner lends.
    pub(super) fn open(&self, r: usize, now: u64) -> Lend {
        let all = self.partners[r].iter().all(|&t| {
            decide(now, self.windows[t].0.load(Ordering::SeqCst), self.guard) == Lend::Open
        });
        if all {
            Lend::Open
        } else {
            Lend::Closed
        }
    }

    /// How long receiver `r` may still read from `now` (realtime ns): until
    /// the earliest partner window comes within the guard. 0 when it may
    /// not read now; `u64::MAX` when no partner will send again.
    pub(super) fn open_for(&self, r: usize, now: u64) -> u64 {
        let mut left = u64::MAX;
        for &t in &self.partners[r] {
            let w = self.windows[t].0.load(Ordering::SeqCst);
            if w == DONE {
                continue;
            }
            if decide(now, w, self.guard) == Lend::Closed {
                return 0;
            }
            left = left.min(w - now - self.guard);
        }
        left
    }

    /// Receiver `r` (registered) returns at once when it may read;
    /// otherwise parks until a partner lends or `timeout` passes, and says
    /// whether it may read then. Spurious wakes return [`Lend::Closed`]:
    /// the caller checks its own end conditions and calls again.
    pub(super) fn wait(&self, r: usize, timeout: Duration, clock: &dyn Fn() -> u64) -> Lend {
        if self.open(r, clock()) == Lend::Open {
            return Lend::Open;
        }
        let w = &self.waiters[r];
        // SeqCst: step 4 (the store, then the loads of the windows).
        w.waiting.store(true, Ordering::SeqCst);
        if self.open(r, clock()) == Lend::Open {
            w.waiting.store(false, Ordering::SeqCst);
            return Lend::Open;
        }
        thread::park_timeout(timeout);
        w.waiting.store(false, Ordering::SeqCst);
        self.open(r, clock())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const US: u64 = 1_000;

    #[test]
    fn open_for_is_the_time_to_the_earliest_window_less_the_guard() {
        let (now, guard) = (1_000_000 * US, 30 * US);
        let l = Lending::new(Duration::from_nanos(guard), 2, vec![vec![0, 1], vec![]]);
        assert_eq!(l.open_for(0, now), 0, "closed until the senders lend");
        assert_eq!(l.open_for(1, now), u64::MAX, "no partner: never closes");
        l.lend(0, now + 500 * US, &|| now);
        l.lend(1, now + 200 * US, &|| now);
        assert_eq!(l.open_for(0, now), 170 * US);
        l.lend(1, DONE, &|| now);
        assert_eq!(l.open_for(0, now), 470 * US);
        assert_eq!(l.open_for(0, now + 470 * US), 0, "within the guard");
        l.take(0);
        assert_eq!(l.open_for(0, now), 0, "sending");
        l.lend(0, DONE, &|| now);
        assert_eq!(l.open_for(0, now), u64::MAX);
    }

    #[test]
    fn a_send_more_than_the_guard_away_lends() {
        let (now, guard) = (1_000_000 * US, 30 * US);
        assert_eq!(decide(now, now + guard + 1, guard), Lend::Open);
        assert_eq!(decide(now, now + 10_000 * US, guard), Lend::Open);
    }

    #[test]
    fn a_send_within_the_guard_or_overdue_does_not() {
        let (now, guard) = (1_000_000 * US, 30 * US);
        assert_eq!(
            decide(now, now + guard, guard),
            Lend::Closed,
            "exactly the guard"
        );
        assert_eq!(decide(now, now + 1, guard), Lend::Closed);
        assert_eq!(decide(now, now, guard), Lend::Closed, "due now");
        assert_eq!(decide(now, now - 5 * US, guard), Lend::Closed, "overdue");
    }

    #[test]
    fn a_sending_sender_never_lends_and_a_finished_one_always_does() {
        for now in [0, 1, 1_000_000 * US, u64::MAX / 2] {
            for guard in [0, 30 * US] {
                assert_eq!(decide(now, CLOSED, guard), Lend::Closed, "{now} {guard}");
                assert_eq!(decide(now, DONE, guard), Lend::Open, "{now} {guard}");
            }
        }
    }

    #[test]
    fn a_zero_guard_lends_until_the_send_instant() {
        assert_eq!(decide(100, 101, 0), Lend::Open);
        assert_eq!(decide(100, 100, 0), Lend::Closed);
    }

    #[test]
    fn partners_are_the_senders_pinned_to_the_receivers_cpu() {
        // Unpinned: every sender may share the receiver's CPU.
        assert_eq!(partners(2, 1, &[]), vec![vec![0, 1]]);
        // Both on CPU 1 (the cross-check's layout).
        assert_eq!(partners(1, 1, &[1]), vec![vec![0]]);
        // CPUs 0,1: sender 0 and receiver 0 on 0, sender 1 and receiver 1 on 1.
        assert_eq!(partners(2, 2, &[0, 1]), vec![vec![0], vec![1]]);
        // One sender on CPU 0; receiver 1 alone on CPU 1 never waits.
        assert_eq!(partners(1, 2, &[0, 1]), vec![vec![0], vec![]]);
    }

    #[test]
    fn a_receiver_reads_only_while_every_partner_lends() {
        let guard = Duration::from_micros(30);
        let l = Lending::new(guard, 2, partners(2, 2, &[0, 0]));
        let now = 1_000_000 * US;
        assert_eq!(
            l.open(0, now),
            Lend::Closed,
            "closed until the senders lend"
        );
        l.lend(0, now + 100 * US, &|| now);
        assert_eq!(l.open(0, now), Lend::Closed, "sender 1 has not lent");
        l.lend(1, now + 200 * US, &|| now);
        assert_eq!(l.open(0, now), Lend::Open);
        assert_eq!(l.open(1, now), Lend::Open);
        // Time alone closes it 30 µs before sender 0's send.
        assert_eq!(l.open(0, now + 70 * US - 1), Lend::Open);
        assert_eq!(l.open(0, now + 70 * US), Lend::Closed);
        l.take(1);
        assert_eq!(l.open(0, now), Lend::Closed, "sender 1 sends");
        l.lend(0, DONE, &|| now);
        l.lend(1, DONE, &|| now);
        assert_eq!(l.open(0, now + 3_600_000_000 * US), Lend::Open, "both done");
    }

    #[test]
    fn a_receiver_without_partners_is_never_held() {
        let l = Lending::new(Duration::from_micros(30), 1, partners(1, 2, &[0, 1]));
        assert_eq!(l.open(1, 0), Lend::Open);
        l.register(1);
        assert_eq!(l.wait(1, Duration::from_secs(60), &|| 0), Lend::Open);
    }

    #[test]
    fn a_parked_receiver_is_woken_by_a_lend() {
        // The clock stands still: only the windows change. The timeout is
        // a backstop against a lost wake, not part of what is checked.
        let now = 1_000_000 * US;
        let l = Arc::new(Lending::new(
            Duration::from_micros(30),
            1,
            partners(1, 1, &[]),
        ));
        let l2 = l.clone();
        let rx = thread::spawn(move || {
            l2.register(0);
            let mut wakes = 0;
            while l2.wait(0, Duration::from_secs(60), &|| now) == Lend::Closed {
                wakes += 1;
                assert!(wakes < 1_000, "woken again and again while closed");
            }
        });
        // Wait until it is parked (or about to), then lend.
        while !l.waiters[0].waiting.load(Ordering::SeqCst) && !rx.is_finished() {
            thread::yield_now();
        }
        // A send within the guard wakes nobody, and does not open.
        l.lend(0, now + 10 * US, &|| now);
        assert_eq!(l.open(0, now), Lend::Closed);
        l.lend(0, now + 500 * US, &|| now);
        rx.join().expect("the receiver saw the lend");
        assert!(!l.waiters[0].waiting.load(Ordering::SeqCst));
    }

    #[test]
    fn a_finished_sender_releases_a_parked_receiver() {
        let l = Arc::new(Lending::new(
            Duration::from_micros(30),
            1,
            partners(1, 1, &[]),
        ));
        let l2 = l.clone();
        let rx = thread::spawn(move || {
            l2.register(0);
            while l2.wait(0, Duration::from_secs(60), &|| 5) == Lend::Closed {}
        });
        while !l.waiters[0].waiting.load(Ordering::SeqCst) && !rx.is_finished() {
            thread::yield_now();
        }
        l.lend(0, DONE, &|| 5);
        rx.join().expect("the receiver saw the end");
    }
}
