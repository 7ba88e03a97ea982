//! [`Builder`], [`Runtime`] and [`Handle`]: the worker threads and the
//! thread-local context that `spawn`, `sleep` and the I/O types find.
//!
//! ## Shutdown (dropping the [`Runtime`] or [`Runtime::shutdown`])
//!
//! 1. the driver is marked shut down: from now on a woken task is dropped
//!    instead of queued; skq's waits return at once;
//! 2. the worker threads finish the task they are polling and leave; each
//!    worker's exit hands its queued events to the others (skq-core), which
//!    are leaving too;
//! 3. queued tasks, I/O wakers and timers are dropped, which drops the
//!    futures of tasks that nothing else holds (a task whose `JoinHandle`
//!    or waker is still held elsewhere is dropped when that goes);
//! 4. the blocking pool drops its queued jobs and joins its threads.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use skq_core::{Class, Config, ConfigError, ElasticConfig};
use skq_rt::{ElasticEvent, Events, Skq};

use crate::blocking::BlockingPool;
use crate::driver::Driver;
use crate::task::JoinHandle;
use crate::time::Timers;

/// What a runtime's threads share.
pub(crate) struct Shared {
    pub(crate) driver: Driver,
    pub(crate) timers: Timers,
    pub(crate) blocking: Arc<BlockingPool>,
    batch: usize,
}

thread_local! {
    static CURRENT: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// Restores the previous context when dropped.
struct Enter(Option<Handle>);

fn enter(h: Handle) -> Enter {
    Enter(CURRENT.with(|c| c.borrow_mut().replace(h)))
}

impl Drop for Enter {
    fn drop(&mut self) {
        let prev = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

/// Errors building a runtime, worded for a command line.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The scheduling configuration was refused (the message names the
    /// option).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A builder value out of range.
    #[error("{0}")]
    Invalid(String),
    /// Creating the instance or starting a worker failed.
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl From<skq_rt::Error> for BuildError {
    fn from(e: skq_rt::Error) -> BuildError {
        match e {
            skq_rt::Error::Config(c) => BuildError::Config(c),
            skq_rt::Error::Io(e) => BuildError::Io(e),
        }
    }
}

/// A tunable's adjustment of the parsed configuration.
type Tune = Box<dyn FnOnce(&mut Config)>;

/// Configures and starts a [`Runtime`].
///
/// ```
/// let rt = skq_async::Builder::new().workers(2).mode("hybrid").build().unwrap();
/// assert_eq!(rt.block_on(async { rt.spawn(async { 6 * 7 }).await.unwrap() }), 42);
/// ```
pub struct Builder {
    workers: usize,
    mode: String,
    config: Option<Config>,
    tune: Vec<Tune>,
    pin: bool,
    batch: usize,
    max_blocking: usize,
    elastic: Option<Elastic>,
}

/// The elastic worker count asked of the builder.
enum Elastic {
    Min(usize),
    Config(ElasticConfig),
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// Defaults: one worker per CPU this process may use, mode `hybrid`,
    /// no pinning, batches of 32 events, at most 64 blocking threads.
    pub fn new() -> Builder {
        Builder {
            workers: thread::available_parallelism().map_or(1, |n| n.get()),
            mode: "hybrid".into(),
            config: None,
            tune: Vec::new(),
            pin: false,
            batch: 32,
            max_blocking: 64,
            elastic: None,
        }
    }

    /// Number of worker threads, 1..=64.
    pub fn workers(mut self, n: usize) -> Builder {
        self.workers = n;
        self
    }

    /// Scheduling mode as `skq serve --mode` takes it (`vanilla`, `shared`,
    /// `queue`, `cpu`, `best2`, `hybrid`, optionally `+steal` / `-steal`),
    /// parsed by [`skq_core::Config::parse_mode`].
    pub fn mode(mut self, mode: &str) -> Builder {
        self.mode = mode.to_string();
        self
    }

    /// A complete scheduling configuration (for example a server's
    /// `core_config()`), replacing `workers` and `mode`.
    pub fn config(mut self, cfg: Config) -> Builder {
        self.config = Some(cfg);
        self
    }

    /// Adjusts the parsed configuration (tunables: `rtshare`, `steal_k`,
    /// `penalty_ns`, `batch_workers`, …); applied in order, then validated.
    pub fn tune(mut self, f: impl FnOnce(&mut Config) + 'static) -> Builder {
        self.tune.push(Box::new(f));
        self
    }

    /// Pins worker `w` to the CPU skq assigned it (`Config::worker_cpus`,
    /// by default the topology's spread order).
    pub fn pin_workers(mut self, pin: bool) -> Builder {
        self.pin = pin;
        self
    }

    /// Most events one worker takes per wait, 1..=1024.
    pub fn batch(mut self, n: usize) -> Builder {
        self.batch = n;
        self
    }

    /// Bound of the blocking pool, 1..=4096 threads.
    pub fn max_blocking_threads(mut self, n: usize) -> Builder {
        self.max_blocking = n;
        self
    }

    /// Elastic worker count: between `min` and the worker count, decided by
    /// skq's resource manager (QStack's dynamic detect; `docs/ELASTIC.md`)
    /// with its default settings. Workers above the current count park
    /// (no CPU, no wake-ups); their queued tasks and timers move to running
    /// workers first.
    ///
    /// ```
    /// let rt = skq_async::Builder::new().workers(4).min_workers(1).build().unwrap();
    /// assert_eq!(rt.block_on(async { skq_async::spawn(async { 7 }).await.unwrap() }), 7);
    /// ```
    pub fn min_workers(mut self, min: usize) -> Builder {
        self.elastic = Some(Elastic::Min(min));
        self
    }

    /// Elastic worker count with every setting of the resource manager
    /// (`cfg.max` must equal the worker count); see [`Builder::min_workers`].
    pub fn elastic(mut self, cfg: ElasticConfig) -> Builder {
        self.elastic = Some(Elastic::Config(cfg));
        self
    }

    /// Starts the workers.
    pub fn build(self) -> Result<Runtime, BuildError> {
        if !(1..=1024).contains(&self.batch) {
            return Err(BuildError::Invalid(format!(
                "--batch {} is out of range: allowed 1..=1024",
                self.batch
            )));
        }
        if !(1..=4096).contains(&self.max_blocking) {
            return Err(BuildError::Invalid(format!(
                "--max-blocking-threads {} is out of range: allowed 1..=4096",
                self.max_blocking
            )));
        }
        let mut cfg = match self.config {
            Some(c) => c,
            None => Config::parse_mode(&self.mode, self.workers)?,
        };
        for f in self.tune {
            f(&mut cfg);
        }
        cfg.validate()?;
        let workers = cfg.workers;
        let elastic = match self.elastic {
            None => None,
            Some(Elastic::Min(min)) => Some(ElasticConfig::new(min, workers)),
            Some(Elastic::Config(e)) => Some(e),
        };
        if let Some(e) = &elastic {
            if !(1..=workers).contains(&e.min) {
                return Err(BuildError::Invalid(format!(
                    "--min-workers {} is out of range: allowed 1..={workers} (--workers)",
                    e.min
                )));
            }
            if e.max != workers {
                return Err(BuildError::Invalid(format!(
                    "elastic workers: max {} differs from the {workers} workers",
                    e.max
                )));
            }
            e.validate()?;
        }
        let shared = Arc::new(Shared {
            driver: Driver::new(cfg)?,
            timers: Timers::new(workers),
            blocking: Arc::new(BlockingPool::new(self.max_blocking)),
            batch: self.batch,
        });
        let mut rt = Runtime {
            handle: Handle {
                shared: shared.clone(),
            },
            threads: Vec::with_capacity(workers),
            manager: None,
        };
        let (tx, rx) = mpsc::channel();
        for w in 0..workers {
            let worker = shared.driver.take_worker(w);
            let (s, tx, pin) = (shared.clone(), tx.clone(), self.pin);
            let t = thread::Builder::new()
                .name(format!("skq-async-{w}"))
                .spawn(move || worker_main(s, worker, pin, tx))?;
            rt.threads.push(t);
        }
        drop(tx);
        for _ in 0..workers {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(e.into()), // `rt` drops: shutdown
                Err(_) => return Err(io::Error::other("a worker thread died starting").into()),
            }
        }
        if let Some(e) = elastic {
            rt.manager = Some(skq_rt::spawn_resource_manager(shared.driver.skq(), e)?);
        }
        Ok(rt)
    }
}

fn worker_main(
    shared: Arc<Shared>,
    mut worker: skq_rt::Worker,
    pin: bool,
    started: mpsc::Sender<io::Result<()>>,
) {
    if let Err(e) = shared.driver.start_worker(&worker, pin) {
        let _ = started.send(Err(e));
        return;
    }
    let _ = started.send(Ok(()));
    let _enter = enter(Handle {
        shared: shared.clone(),
    });
    let me = worker.id();
    let hook = shared.clone();
    worker.on_elastic(move |e| on_elastic(&hook, me, e));
    let mut events = Events::with_capacity(shared.batch);
    loop {
        let timeout = shared.timers.plan(me);
        match shared.driver.wait(&mut worker, &mut events, timeout) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The worker leaves; skq hands its work to the others.
            Err(_) => break,
        }
        shared.timers.fire(me);
        let n = events.len();
        // The batch's last task event: after it, the rest of
        // the batch only wakes tasks (`driver.rs`, tasks run within the
        // event that woke them).
        let last_task = events.iter().rposition(crate::driver::runs_a_task);
        for (i, ev) in events.iter().enumerate() {
            if i > 0 {
                // Timers that expired while the previous event ran.
                shared.timers.fire_due(me);
            }
            crate::driver::set_batch_left(n - i - 1, last_task.is_none_or(|t| t < i));
            shared.driver.dispatch(ev);
        }
        crate::driver::set_batch_left(0, true);
    }
}

/// Worker `me` parks as elastic surplus or rejoins (`time.rs`, module doc).
fn on_elastic(shared: &Shared, me: usize, e: ElasticEvent) {
    match e {
        ElasticEvent::Parking => {
            let skq = shared.driver.skq();
            let core = skq.core();
            let moved = shared
                .timers
                .park(me, skq.active_target(), |w| core.wanted(w));
            if let Some((to, true)) = moved {
                shared.driver.kick(to);
            }
        }
        ElasticEvent::Rejoined => {
            shared.timers.reopen(me);
            shared.driver.repin_kick(me);
        }
    }
}

/// A running executor: its workers, its blocking pool, its timers.
/// Dropping it shuts it down (see the module doc).
pub struct Runtime {
    handle: Handle,
    threads: Vec<thread::JoinHandle<()>>,
    /// The resource manager's thread (elastic worker count).
    manager: Option<thread::JoinHandle<()>>,
}

impl Runtime {
    /// A runtime from [`Builder::new`]'s defaults.
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::new().build()
    }

    /// A handle (cloneable, `Send`) to spawn from anywhere.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `fut` on the calling thread until it completes, with this
    /// runtime as the context (`spawn`, `sleep` and the I/O types use it);
    /// spawned tasks run on the workers meanwhile.
    ///
    /// # Panics
    /// On a worker thread of any runtime (it would block that worker).
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        assert!(
            !crate::driver::on_worker_thread(),
            "block_on called on an skq-async worker thread: await the future instead"
        );
        let _enter = enter(self.handle.clone());
        let parker = Arc::new(Parker {
            thread: thread::current(),
            notified: AtomicBool::new(false),
        });
        let waker = Waker::from(parker.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = pin!(fut);
        loop {
            if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                return v;
            }
            while !parker.notified.swap(false, Ordering::Acquire) {
                thread::park();
            }
        }
    }

    /// Spawns a regular-class task.
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(fut)
    }

    /// Spawns a task of `class`.
    pub fn spawn_with<F>(&self, class: Class, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn_with(class, fut)
    }

    /// Runs `f` on the blocking pool.
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }

    /// Shuts down now (what dropping does).
    pub fn shutdown(self) {}

    fn shutdown_inner(&mut self) {
        let s = &self.handle.shared;
        s.driver.shutdown();
        for t in self.threads.drain(..).chain(self.manager.take()) {
            if t.thread().id() != thread::current().id() {
                let _ = t.join();
            }
        }
        s.driver.drain();
        s.timers.clear();
        s.blocking.shutdown();
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown_inner();
    }
}

struct Parker {
    thread: thread::Thread,
    notified: AtomicBool,
}

impl Wake for Parker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.notified.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// A cloneable handle on a runtime: spawns from any thread.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Handle {
    /// The runtime of the calling thread (a worker, or inside `block_on`).
    ///
    /// # Panics
    /// Outside a runtime context.
    pub fn current() -> Handle {
        Handle::try_current().expect("not inside an skq-async runtime (a worker or block_on)")
    }

    /// The runtime of the calling thread, if any.
    pub fn try_current() -> Option<Handle> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Spawns a regular-class task.
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::task::spawn(&self.shared, Class::Regular, fut)
    }

    /// Spawns a task of `class` (high, regular or batch): the class of its
    /// skq source, so it governs the task's queueing at every wake-up.
    pub fn spawn_with<F>(&self, class: Class, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::task::spawn(&self.shared, class, fut)
    }

    /// Runs `f` on the blocking pool.
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        crate::blocking::spawn_blocking(&self.shared, f)
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.shared.driver.workers()
    }

    /// Workers running now (below the worker count when some are parked as
    /// elastic surplus).
    pub fn live_workers(&self) -> usize {
        self.shared.driver.skq().live_workers()
    }

    /// The skq instance (statistics: `skq().stats()`, configuration).
    pub fn skq(&self) -> &Arc<Skq> {
        self.shared.driver.skq()
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.workers())
            .finish_non_exhaustive()
    }
}
