//! The doorbell: wake a worker through its eventfd only when it may be sleeping.
//!
//! One atomic word per worker holds two bits, `SLEEPING` (set by the worker before it
//! blocks) and `NOTIFIED` (set by any sender after a push). Every access is a
//! read-modify-write on that one word, so all of them are totally ordered (the word's
//! modification order) and the argument needs no fences:
//!
//! - sender, after pushing a message: `prev = fetch_or(NOTIFIED)`; if `prev` is exactly
//!   `SLEEPING` (asleep, and nobody rang since), write the eventfd;
//! - receiver, before blocking: `prev = swap(SLEEPING)`; if `prev` has `NOTIFIED`, a push
//!   happened since the last reset, so it does not block: `swap(0)` and drain the rings;
//! - receiver, after waking (or not blocking): `swap(0)`, then drain the rings.
//!
//! No lost wake-up: take a push and its sender's `fetch_or`. If the `fetch_or` precedes the
//! receiver's `swap(SLEEPING)` in the word's order, the receiver sees `NOTIFIED` and drains
//! (its acquiring swap synchronizes with the release half of the `fetch_or`, so the message
//! is visible); if it follows, the sender sees `SLEEPING` — either bare, and it writes the
//! eventfd, and even a write before `epoll_wait` wakes it (the write queues the readiness
//! report, level- or edge-triggered alike: the server watches it edge-triggered); or with
//! `NOTIFIED` already set, in which case an earlier sender has written it. The receiver's
//! `swap(0)` after waking acquires every push whose `fetch_or` came before it.
//!
//! Cost: one uncontended-by-the-receiver RMW per push (a busy receiver never touches the
//! word), and an eventfd write only for the first push to a sleeping worker.
//!
//! The loom model below checks this code:
//! `RUSTFLAGS="--cfg loom" cargo test -p skq-kv --no-default-features --release --lib doorbell`
//! (without the `runtime` feature: the skq runtime's crates do not build under `cfg(loom)`).

#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

use crossbeam_utils::CachePadded;

const SLEEPING: u8 = 1;
const NOTIFIED: u8 = 2;

/// How a sleeping worker is woken (an eventfd in the server).
pub trait Wake {
    /// Makes the sleeper's next (or current) blocking wait return.
    fn notify(&self);
}

impl Wake for skq_sys::eventfd::EventFd {
    fn notify(&self) {
        // A failed write means the counter is saturated: still readable.
        let _ = skq_sys::eventfd::EventFd::notify(self);
    }
}

/// A worker's wake-up state.
pub struct Doorbell<W = skq_sys::eventfd::EventFd> {
    /// `SLEEPING | NOTIFIED` bits. Padded: all senders write it after each push.
    state: CachePadded<AtomicU8>,
    /// The wake-up its blocking wait watches.
    pub efd: W,
}

impl<W: Wake> Doorbell<W> {
    /// A doorbell for a fresh, awake worker.
    pub fn new(efd: W) -> Doorbell<W> {
        Doorbell {
            state: CachePadded::new(AtomicU8::new(0)),
            efd,
        }
    }

    /// Sender side, after a push: wakes the owner if it is sleeping and nobody else rang
    /// since it fell asleep. Returns whether the wake-up was sent.
    pub fn ring_after_push(&self) -> bool {
        if self.state.fetch_or(NOTIFIED, Ordering::AcqRel) == SLEEPING {
            self.efd.notify();
            return true;
        }
        false
    }

    /// Receiver side, after draining its rings: returns true if it may block now; false
    /// if a push happened since the last reset (the state is reset; drain again).
    pub fn prepare_sleep(&self) -> bool {
        if self.state.swap(SLEEPING, Ordering::AcqRel) & NOTIFIED != 0 {
            self.state.swap(0, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Receiver side, after its blocking wait returned: resets the state; the caller then
    /// drains its rings.
    pub fn woke(&self) {
        self.state.swap(0, Ordering::AcqRel);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    /// A wake-up like an eventfd: a notify before the wait is not lost (loom's `Notify`
    /// keeps one pending notification, as a level-triggered eventfd stays readable).
    struct Flag(loom::sync::Notify);

    impl Wake for Flag {
        fn notify(&self) {
            self.0.notify();
        }
    }

    /// Senders each push one message (a counter stands in for the ring) and ring; the
    /// receiver drains and sleeps as the server's worker loop does. In every interleaving it
    /// must see all messages: a lost wake-up leaves it blocked in `Notify::wait` forever,
    /// which loom reports as a deadlock.
    fn model(senders: usize) {
        loom::model(move || {
            let bell = Arc::new(Doorbell::new(Flag(loom::sync::Notify::new())));
            let queue = Arc::new(AtomicUsize::new(0));
            let handles: Vec<_> = (0..senders)
                .map(|_| {
                    let (bell, queue) = (bell.clone(), queue.clone());
                    loom::thread::spawn(move || {
                        queue.fetch_add(1, Ordering::Release);
                        bell.ring_after_push();
                    })
                })
                .collect();
            loop {
                // Drain (here: look at the counter).
                if queue.load(Ordering::Acquire) == senders {
                    break;
                }
                if bell.prepare_sleep() {
                    bell.efd.0.wait();
                    bell.woke();
                }
            }
            for h in handles {
                h.join().unwrap();
            }
        });
    }

    #[test]
    fn one_sender_no_lost_wakeup() {
        model(1);
    }

    #[test]
    fn two_senders_no_lost_wakeup() {
        model(2);
    }

    #[test]
    fn three_senders_no_lost_wakeup() {
        model(3);
    }
}
