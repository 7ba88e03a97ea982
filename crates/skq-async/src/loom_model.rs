//! loom model of the wake/poll/steal race on a task (issue 23): the real
//! wake-up protocol of `slot.rs` ([`Entry::schedule`] as async-task's
//! `schedule`, [`Entry::take_runnable`] on the worker that skq-core
//! delivered the source to), async-task's task, and skq-core's scheduler
//! (activation, the per-source state, stealing), all under loom.
//!
//! What stands in for skq-rt: the task's notifier activates its source in
//! skq-core (the activation `VirtualSource::activate` makes; its wake-up
//! of a claimed idle worker is not modelled, since the workers here never
//! sleep), and each worker is a bounded loop of skq-core's
//! `wait` (which releases the previous batch, dequeues, and steals when
//! its queues are empty), `take_runnable` and `run`.
//!
//! Threads: a foreign thread fires the task's waker twice; worker 0 (the
//! source's home: its activations name CPU 0) and worker 1 (a thief) both
//! try to take and run the task; after all of them, the main thread runs
//! what they left queued, then fires the waker once more from another
//! thread after completion. Checked: the future is never polled by two
//! threads at once (an "in poll" flag), no wake-up is lost (the task
//! completes, having seen both wake-ups), a wake after completion schedules
//! nothing and leaves the source idle.
//!
//! Limit: async-task's own state word uses std atomics, which loom does
//! not interleave inside; the interleavings explored are those of this
//! crate's lock, skq-core's atomics and locks, and the modelled future's
//! flags (so a wake-up lands before, inside or after a poll). For the same
//! reason the flags are read with read-modify-writes (see `Probe::poll`).
//!
//! Run: `LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" cargo test -p skq-async
//! --no-default-features --release --lib loom` (default bound 2).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;
use skq_core::{Config, Flags, Phase, Policy, Ready, Scheduler, SourceId, WorkerCtx};

use crate::slot::{Entry, Notify, Slot};

/// The task's notifier: an activation of its source, naming CPU 0 (the
/// source's home worker under the CPU policy).
struct Activate {
    s: Arc<Scheduler>,
    id: SourceId,
}

impl Notify for Activate {
    fn notify(&self) {
        let mut rng = self.s.activator_rng(7);
        let _ = self
            .s
            .activate(self.id, Ready::READABLE, Some(0), 0, &mut rng);
    }
}

type TaskEntry = Entry<Activate, ()>;

/// The task's future: ready once the foreign thread has fired twice;
/// asserts it is never polled by two threads at once.
struct Probe {
    in_poll: Arc<AtomicBool>,
    polls: Arc<AtomicUsize>,
    fired: Arc<AtomicUsize>,
}

impl Future for Probe {
    type Output = usize;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<usize> {
        assert!(
            !self.in_poll.swap(true, SeqCst),
            "the task is polled by two threads at once"
        );
        let polls = self.polls.fetch_add(1, SeqCst) + 1;
        // A read-modify-write reads the latest value: the happens-before
        // edge from the waker to this poll runs through async-task's std
        // atomics, which loom does not see (a plain load could read a
        // value older than reality allows).
        let fired = self.fired.fetch_add(0, SeqCst);
        self.in_poll.store(false, SeqCst);
        if fired == 2 {
            Poll::Ready(polls)
        } else {
            Poll::Pending
        }
    }
}

/// One worker's dispatch of a delivered event (the driver's `TASK` arm).
fn dispatch(entry: &TaskEntry, ev: &skq_core::Event) {
    if let Some(r) = entry.take_runnable(ev.source) {
        r.run();
    }
}

/// `rounds` waits of worker `ctx`, dispatching what each delivers, then a
/// release; returns the deliveries.
fn work(s: &Scheduler, entry: &TaskEntry, ctx: &mut WorkerCtx, rounds: u64) -> usize {
    let mut ev = Vec::new();
    let mut n = 0;
    for r in 0..rounds {
        n += s.wait(ctx, 1 + r, &mut ev, 1);
        for e in &ev {
            dispatch(entry, e);
        }
    }
    s.release(ctx, 1 + rounds);
    n
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
}

#[test]
fn loom_wake_poll_steal() {
    model(|| {
        let mut cfg = Config::new(Policy::Cpu, 2);
        cfg.capacity = 2;
        cfg.steal = true;
        cfg.steal_k = 1;
        let s = Arc::new(Scheduler::new(cfg).unwrap());
        let id = s.register(1, Flags::NONE, None).unwrap();
        let entry: Arc<TaskEntry> = Arc::new(Entry::default());
        *entry.lock() = Slot::Task {
            id,
            runnable: None,
            ev: std::sync::Arc::new(Activate { s: s.clone(), id }),
        };

        let in_poll = Arc::new(AtomicBool::new(false));
        let polls = Arc::new(AtomicUsize::new(0));
        let fired = Arc::new(AtomicUsize::new(0));
        let schedules = Arc::new(AtomicUsize::new(0));
        let probe = Probe {
            in_poll: in_poll.clone(),
            polls: polls.clone(),
            fired: fired.clone(),
        };
        let (e2, sc) = (entry.clone(), schedules.clone());
        // The driver's `schedule` callback, as `task::spawn` passes it.
        let (runnable, mut task) = async_task::spawn(probe, move |r| {
            sc.fetch_add(1, SeqCst);
            e2.schedule(id, r)
        });
        let waker = runnable.waker();
        runnable.schedule();

        let (w, f) = (waker.clone(), fired.clone());
        let foreign = thread::spawn(move || {
            f.fetch_add(1, SeqCst);
            w.wake_by_ref();
            f.fetch_add(1, SeqCst);
            w.wake();
        });
        let spawn_worker = |w: usize| {
            let (s, entry) = (s.clone(), entry.clone());
            thread::spawn(move || {
                let mut ctx = s.worker(w);
                work(&s, &entry, &mut ctx, 1);
                ctx
            })
        };
        let owner = spawn_worker(0);
        let thief = spawn_worker(1);
        foreign.join().unwrap();
        let mut ctxs = [owner.join().unwrap(), thief.join().unwrap()];

        // What the threads left queued runs now; a lost wake-up leaves the
        // task pending with nothing queued.
        for _ in 0..3 {
            for c in ctxs.iter_mut() {
                work(&s, &entry, c, 1);
            }
        }
        assert!(task.is_finished(), "a wake-up was lost");
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(n) = Pin::new(&mut task).poll(&mut cx) else {
            panic!("a finished task's output is not ready");
        };
        assert!((1..=3).contains(&n), "{n} polls for three schedulings");
        assert_eq!(polls.load(SeqCst), n);
        assert_eq!(s.phase(id), Phase::Idle);

        // A wake-up after completion schedules nothing.
        let before = schedules.load(SeqCst);
        thread::spawn(move || waker.wake()).join().unwrap();
        assert_eq!(
            schedules.load(SeqCst),
            before,
            "a finished task was scheduled"
        );
        let mut delivered = 0;
        for c in ctxs.iter_mut() {
            delivered += work(&s, &entry, c, 1);
        }
        assert_eq!(delivered, 0);
        assert_eq!(s.phase(id), Phase::Idle);
        assert!(!in_poll.load(SeqCst));
    });
}
