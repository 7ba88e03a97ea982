//! # skq-async: an async executor scheduled by skq
//!
//! Tasks are `async` futures, as on tokio; *which worker polls a task, and
//! when,* is decided by skq's scheduling core: every task is an skq source,
//! and each wake-up is an activation through the configured policy (CPU
//! affinity, best of two by expected wait, hybrid, work stealing), with
//! skq's two-level priority queues, `rtshare` and diffusion applying to the
//! task's [`Class`]. Sockets are registered once, edge triggered, with
//! skq-rt's registry; a task woken by a socket is activated from the CPU
//! the socket's readiness was delivered on.
//!
//! ```
//! use std::time::Duration;
//! use skq_async::{time, Builder, Class};
//!
//! let rt = Builder::new().workers(2).mode("hybrid").build().unwrap();
//! let out = rt.block_on(async {
//!     let urgent = skq_async::spawn_with(Class::High, async { 1 });
//!     let slow = skq_async::spawn(async {
//!         time::sleep(Duration::from_millis(5)).await;
//!         2
//!     });
//!     let blocking = skq_async::spawn_blocking(|| 3);
//!     urgent.await.unwrap() + slow.await.unwrap() + blocking.await.unwrap()
//! });
//! assert_eq!(out, 6);
//! ```
//!
//! Modules: `driver` is the one coupling to skq-rt (what is interim until
//! the new worker loop lands is listed there and in `docs/ASYNC.md`);
//! `task` wraps async-task (allocation, wakers, `JoinHandle`); `time` keeps
//! a timer structure per worker; `net` has the TCP types; `blocking` the
//! bounded pool; `hyper_rt` (feature `hyper`) hyper's runtime traits.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
// Without the `runtime` feature (default on) only the task wake-up
// protocol and its loom model build: skq-rt does not build under
// `cfg(loom)`. The model runs with
// `RUSTFLAGS="--cfg loom" cargo test -p skq-async --no-default-features --release --lib loom`.
#![cfg_attr(not(feature = "runtime"), allow(dead_code, unused_imports))]

#[cfg(feature = "runtime")]
mod blocking;
#[cfg(feature = "runtime")]
mod driver;
#[cfg(feature = "hyper")]
mod hyper_rt;
#[cfg(all(test, loom))]
mod loom_model;
#[cfg(feature = "runtime")]
pub mod net;
#[cfg(feature = "runtime")]
mod runtime;
mod slot;
mod sync;
#[cfg(feature = "runtime")]
mod task;
#[cfg(feature = "runtime")]
pub mod time;

#[cfg(feature = "runtime")]
use std::future::Future;

#[cfg(feature = "hyper")]
pub use hyper_rt::{HyperExecutor, HyperTimer};
#[cfg(feature = "runtime")]
pub use runtime::{BuildError, Builder, Handle, Runtime};
pub use skq_core::{Class, ElasticConfig};
#[cfg(feature = "runtime")]
pub use task::{checkpoint, current_class, set_class, yield_now, JoinError, JoinHandle};

#[cfg(feature = "runtime")]
/// Spawns a regular-class task on the current runtime.
///
/// # Panics
/// Outside a runtime context (a worker, or inside `block_on`), and when the
/// task's skq source cannot be created (skq's source table full: raise
/// `Config::capacity`; see `docs/ASYNC.md`).
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Handle::current().spawn(fut)
}

#[cfg(feature = "runtime")]
/// Spawns a task of `class` on the current runtime.
///
/// # Panics
/// Outside a runtime context.
pub fn spawn_with<F>(class: Class, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Handle::current().spawn_with(class, fut)
}

#[cfg(feature = "runtime")]
/// Runs `f` on the current runtime's blocking pool.
///
/// # Panics
/// Outside a runtime context.
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    Handle::current().spawn_blocking(f)
}

#[cfg(feature = "runtime")]
/// The index of the worker the caller runs on (`None` off the workers,
/// for example inside `block_on` or on the blocking pool).
pub fn worker_id() -> Option<usize> {
    driver::worker_index()
}
