//! The blocking pool: threads apart from the workers for calls that block.
//!
//! A job is an async-task task whose future runs the closure once; its
//! `Runnable` goes on the pool's FIFO queue. At most `max` threads exist at
//! once (the bound): a job queued while all of them are busy waits for one.
//! Threads start on demand and leave after `KEEP_ALIVE` idle. At shutdown
//! queued jobs are dropped (their handles report cancellation) and the
//! threads are joined once their current job returns.
//!
//! Invariant: `threads` counts started threads that have not yet decided to
//! leave; it only changes under the lock, so it never exceeds `max`.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use async_task::Runnable;

use crate::driver::lock;
use crate::runtime::Shared;
use crate::task::{CatchUnwind, JoinHandle};

const KEEP_ALIVE: Duration = Duration::from_secs(10);

#[derive(Default)]
struct State {
    queue: VecDeque<Runnable>,
    threads: usize,
    idle: usize,
    shutdown: bool,
    handles: Vec<thread::JoinHandle<()>>,
}

/// A bounded pool of threads for blocking calls.
pub(crate) struct BlockingPool {
    state: Mutex<State>,
    cv: Condvar,
    max: usize,
}

impl BlockingPool {
    pub(crate) fn new(max: usize) -> BlockingPool {
        BlockingPool {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            max,
        }
    }

    fn push(self: &Arc<Self>, r: Runnable) {
        let mut g = lock(&self.state);
        if g.shutdown {
            drop(g);
            drop(r);
            return;
        }
        g.queue.push_back(r);
        if g.idle > 0 {
            self.cv.notify_one();
        } else if g.threads < self.max {
            g.threads += 1;
            let pool = self.clone();
            let n = g.handles.len();
            let spawned = thread::Builder::new()
                .name(format!("skq-blocking-{n}"))
                .spawn(move || pool.run());
            match spawned {
                Ok(h) => {
                    g.handles.retain(|h| !h.is_finished());
                    g.handles.push(h);
                }
                // The job stays queued for a thread that exists; with none,
                // it waits for the next spawn to succeed.
                Err(_) => g.threads -= 1,
            }
        }
    }

    fn run(&self) {
        let mut g = lock(&self.state);
        loop {
            if let Some(r) = g.queue.pop_front() {
                drop(g);
                // The job's future catches panics: `run` does not unwind.
                r.run();
                g = lock(&self.state);
                continue;
            }
            if g.shutdown {
                break;
            }
            g.idle += 1;
            let (ng, to) = self
                .cv
                .wait_timeout(g, KEEP_ALIVE)
                .unwrap_or_else(|p| p.into_inner());
            g = ng;
            g.idle -= 1;
            if to.timed_out() && g.queue.is_empty() {
                break;
            }
        }
        g.threads -= 1;
    }

    /// Drops queued jobs and joins the threads.
    pub(crate) fn shutdown(&self) {
        let (queued, handles) = {
            let mut g = lock(&self.state);
            g.shutdown = true;
            (std::mem::take(&mut g.queue), std::mem::take(&mut g.handles))
        };
        self.cv.notify_all();
        drop(queued);
        for h in handles {
            if h.thread().id() != thread::current().id() {
                let _ = h.join();
            }
        }
    }
}

/// Runs `f` on the blocking pool of `shared`.
pub(crate) fn spawn_blocking<F, R>(shared: &Arc<Shared>, f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let pool = shared.blocking.clone();
    let fut = CatchUnwind(async move { f() });
    let (runnable, task) = async_task::spawn(fut, move |r| pool.push(r));
    runnable.schedule();
    JoinHandle::new(task)
}
