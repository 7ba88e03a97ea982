//! Elastic workers and cooperative checkpoints on the runtime side.
//!
//! * [`Skq::set_active`] says how many workers (`0..n`) should run. A worker
//!   whose index is at or above the target parks at the top of its next
//!   [`crate::Worker::wait`] loop: the core takes it out of the pool
//!   ([`skq_core::Scheduler::park_worker`], its queued work and pinned
//!   sources handled as at exit), then its thread blocks on its own
//!   condition variable with no timeout (no timers, no CPU) until the target
//!   rises above its index or the instance shuts down; then it rejoins.
//!   A parked worker sleeps through the timeout given to `wait`.
//! * [`spawn_resource_manager`] runs the core's
//!   [`skq_core::ResourceManager`] on a thread of its own: once per
//!   statistics period it reads the workers' summed busy time and sets the
//!   target. Its decisions are kept ([`Skq::elastic_history`]).
//! * [`checkpoint`] is called from inside a long handler on a worker
//!   thread. With nothing queued on the caller and a poller present it
//!   returns after a thread-local lookup and two relaxed loads. Otherwise it
//!   harvests readiness without blocking if nobody is polling or harvesting,
//!   then hands the caller's queued events to other workers and wakes them.
//!   The source being processed stays the caller's.

use std::cell::RefCell;
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use skq_core::{Decision, ElasticConfig, FastRng, ResourceManager, WorkerId};

use crate::sys::cpu::monotonic_ns;
use crate::Skq;

impl Skq {
    /// Sets how many workers should be active (workers `0..n`, at least 1,
    /// at most the worker count). Workers above it park at their next wait;
    /// parked workers below it are woken to rejoin.
    pub fn set_active(&self, n: usize) {
        for w in self.core.set_target(n) {
            // Rising: parked workers rejoin. Falling: idle ones notice now.
            self.wake(w, usize::MAX);
        }
    }

    /// Workers that should be active now.
    pub fn active_target(&self) -> usize {
        self.core.target()
    }

    /// Workers live in the core now (not parked, not exited).
    pub fn live_workers(&self) -> usize {
        self.core.live_workers()
    }

    /// Every decision of the resource manager so far, oldest first.
    pub fn elastic_history(&self) -> Vec<Decision> {
        self.elastic_log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Starts the resource manager thread for `skq`: it sets the target from
/// `cfg` once per `cfg.period_ns` until the instance shuts down.
pub fn spawn_resource_manager(skq: &Arc<Skq>, cfg: ElasticConfig) -> io::Result<JoinHandle<()>> {
    if cfg.max > skq.parkers.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "elastic workers: max {} above the {} workers",
                cfg.max,
                skq.parkers.len()
            ),
        ));
    }
    let mut rm = ResourceManager::new(cfg)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let skq = skq.clone();
    std::thread::Builder::new()
        .name("skq-elastic".into())
        .spawn(move || {
            let period = rm.config().period_ns;
            let check = rm.config().backlog_check_ns.clamp(1, period);
            skq.set_active(rm.active());
            let mut next_period = monotonic_ns() + period;
            loop {
                // Between periods, only the backlog: a few relaxed loads.
                while monotonic_ns() < next_period && !skq.is_shutdown() {
                    std::thread::sleep(Duration::from_nanos(check));
                    let queued = skq.core.queued_total();
                    if let Some(a) = rm.backlog(queued) {
                        skq.set_active(a);
                        let d = Decision {
                            at: monotonic_ns(),
                            demand: f64::NAN,
                            active: a,
                        };
                        skq.elastic_log
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(d);
                    }
                }
                next_period += period;
                let stats = skq.core.stats();
                let busy: u64 = stats.iter().map(|w| w.busy_ns).sum();
                let queued: usize = stats.iter().map(|w| w.queued).sum();
                if let Some(d) = rm.tick(monotonic_ns(), busy, queued) {
                    if d.active != skq.active_target() {
                        skq.set_active(d.active);
                    }
                    skq.elastic_log
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(d);
                }
                if skq.is_shutdown() {
                    return;
                }
            }
        })
}

/// What a worker thread needs for [`checkpoint`], installed by its first
/// `wait` and removed when it exits.
pub(crate) struct Current {
    pub(crate) skq: Arc<Skq>,
    pub(crate) id: WorkerId,
    rng: FastRng,
    wakes: Vec<WorkerId>,
    ep_buf: Vec<crate::sys::epoll::Event>,
}

thread_local! {
    static CURRENT: RefCell<Option<Current>> = const { RefCell::new(None) };
}

pub(crate) fn install(skq: &Arc<Skq>, id: WorkerId) {
    CURRENT.with(|c| {
        *c.borrow_mut() = Some(Current {
            skq: skq.clone(),
            id,
            rng: skq.core.activator_rng(0xC0FFEE ^ id as u64),
            wakes: Vec::new(),
            ep_buf: Vec::with_capacity(64),
        });
    });
}

pub(crate) fn uninstall(skq: &Skq, id: WorkerId) {
    let _ = CURRENT.try_with(|c| {
        let mut c = c.borrow_mut();
        if c.as_ref()
            .is_some_and(|cur| cur.id == id && std::ptr::eq(&*cur.skq, skq))
        {
            *c = None;
        }
    });
}

/// Runs `f` with the calling thread's worker index in `skq` (`None` if it
/// is not one of `skq`'s workers, or has not waited yet) and a scheduling
/// generator: the worker's own when it is one, else a thread-local one.
/// Used by direct activations (`virtual_source.rs`); `f` must not call back
/// into code that needs this thread's context (it only activates).
pub(crate) fn with_activator<R>(
    skq: &Skq,
    f: impl FnOnce(Option<WorkerId>, &mut FastRng) -> R,
) -> R {
    let mut f = Some(f);
    let r = CURRENT.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return None;
        };
        let cur = c.as_mut().filter(|cur| std::ptr::eq(&*cur.skq, skq))?;
        Some((f.take().expect("called once"))(Some(cur.id), &mut cur.rng))
    });
    match r {
        Ok(Some(r)) => r,
        _ => crate::virtual_source::with_foreign_rng(skq, |rng| {
            (f.take().expect("called once"))(None, rng)
        }),
    }
}

/// A cooperative checkpoint for a long handler running on an skq worker
/// thread (QStack's fastcalldown; see the module docs). Returns the events
/// handed to other workers. On any other thread it does nothing and returns
/// 0, so code shared with other runtimes may call it freely.
pub fn checkpoint() -> usize {
    CURRENT
        .try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return 0;
            };
            let Some(cur) = c.as_mut() else {
                return 0;
            };
            let skq = &*cur.skq;
            if skq.core.nothing_to_checkpoint(cur.id) {
                return 0;
            }
            if skq.core.try_harvest(cur.id) {
                let set = &skq.sets[skq.core.poll_group(cur.id)];
                if let Ok(n) = set.wait_ns(&mut cur.ep_buf, Some(0)) {
                    if n > 0 {
                        let _ = skq.activate_all(&mut cur.ep_buf, cur.id, &mut cur.rng);
                    }
                }
                skq.core.end_harvest(cur.id);
            }
            let moved =
                skq.core
                    .checkpoint_as(cur.id, monotonic_ns(), &mut cur.rng, &mut cur.wakes);
            for w in cur.wakes.drain(..) {
                skq.wake(w, cur.id);
            }
            moved
        })
        .unwrap_or(0)
}
