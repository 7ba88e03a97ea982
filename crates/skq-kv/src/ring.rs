//! Cross-worker message rings and the doorbell protocol of the thread-per-core server.
//!
//! Every ordered pair of workers `(src, dst)` has one bounded queue that only `src` pushes
//! to and only `dst` pops from (single producer, single consumer). It is crossbeam's
//! `ArrayQueue`: a hand-rolled SPSC ring would save one CAS per push, which is not worth a
//! second unsafe ring here. Because only `src` pushes, `src` can check free space before
//! dispatching a multi-key request and know it cannot shrink in between (only `dst`
//! popping changes it, and that only frees space).
//!
//! ## Doorbell: wake a worker only when it sleeps
//!
//! After each push the sender rings the receiver's [`Doorbell`], which writes the
//! receiver's eventfd only if the receiver is blocked (or about to block) and nobody rang
//! since; a busy receiver costs its senders one atomic read-modify-write per message and no
//! syscall. The protocol and its no-lost-wake-up argument are in [`crate::doorbell`], with
//! a loom model of that code.

use crossbeam_queue::ArrayQueue;

pub use crate::doorbell::{Doorbell, Wake};

/// All rings of a server: `queue(src, dst)`.
pub struct Rings<T> {
    n: usize,
    queues: Vec<ArrayQueue<T>>,
}

impl<T> Rings<T> {
    /// `n × n` rings of `capacity` messages (the diagonal is allocated but unused).
    pub fn new(n: usize, capacity: usize) -> Rings<T> {
        Rings {
            n,
            queues: (0..n * n)
                .map(|_| ArrayQueue::new(capacity.max(1)))
                .collect(),
        }
    }

    /// The ring from `src` to `dst`.
    pub fn queue(&self, src: usize, dst: usize) -> &ArrayQueue<T> {
        &self.queues[src * self.n + dst]
    }

    /// Free slots in `src → dst` (exact for the single producer `src`: can only grow).
    pub fn free(&self, src: usize, dst: usize) -> usize {
        let q = self.queue(src, dst);
        q.capacity() - q.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A sleeper and a sender race many times; every message must be seen (no lost wake-up):
    /// the receiver blocks in a real poll on the eventfd, with no timeout.
    #[test]
    fn no_lost_wakeup() {
        let bell = Arc::new(Doorbell::new(skq_sys::eventfd::EventFd::new().unwrap()));
        let rings = Arc::new(Rings::<u32>::new(2, 4));
        let rounds = 2000;
        let (b2, r2) = (bell.clone(), rings.clone());
        let sender = std::thread::spawn(move || {
            for i in 0..rounds {
                while r2.queue(0, 1).push(i).is_err() {
                    std::thread::yield_now();
                }
                b2.ring_after_push();
            }
        });
        let mut got = 0;
        while got < rounds {
            while let Some(v) = rings.queue(0, 1).pop() {
                assert_eq!(v, got, "FIFO order");
                got += 1;
            }
            if got == rounds {
                break;
            }
            if bell.prepare_sleep() {
                // Wait forever: a lost wake-up hangs the test, which is the point.
                bell.efd.wait_readable(-1).unwrap();
                bell.woke();
                bell.efd.drain();
            }
        }
        sender.join().unwrap();
    }
}
