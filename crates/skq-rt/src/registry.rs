//! The typed registration path: [`Registry`] and [`Registered`].
//!
//! [`Skq::register`] takes a raw fd and hands back a bare [`SourceId`]; the
//! caller must remember to call [`Skq::deregister`] with the same fd, and
//! before closing it. This module makes that protocol a type:
//!
//! * a [`Registry`] is a cheap, cloneable, `Send + Sync` handle on one
//!   instance; any thread registers through it;
//! * [`Registry::register`] takes the source by value (anything that is
//!   [`AsFd`]: `TcpStream`, `TcpListener`, `UnixStream`, `OwnedFd`, a pipe
//!   end, or a caller's own type) and returns a [`Registered<S>`] that owns
//!   it. Nobody can close the fd while the registration lives, because
//!   nobody else holds it; the handle derefs to `S` for I/O;
//! * [`Worker::register`] does the same with the calling worker as the
//!   registrar, which [`Flags::PINNED`] needs and the locality policies use
//!   as the source's first home.
//!
//! The drop order and what a worker sees after deregistration are
//! documented on [`Registered`]; who may call what on [`Registry`].

use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::ptr;
use std::sync::Arc;

use crate::{Flags, Interest, Skq, SourceId, Worker, WorkerId};

/// A cloneable handle through which any thread registers sources with one
/// [`Skq`] instance. Obtain it with [`Skq::registry`].
///
/// # Threads
///
/// `Registry` is `Send + Sync`: any thread registers, including while
/// workers are blocked in `wait`. `Registered<S>` is `Send`/`Sync` exactly
/// when `S` is; it may be dropped, deregistered or [`Registered::modify`]d
/// (`&self`) on any thread, concurrently with workers waiting (a delivery
/// already queued carries the old token). `Worker::register` runs on the
/// worker's own thread, as every `Worker` method does.
#[derive(Clone)]
pub struct Registry {
    skq: Arc<Skq>,
}

impl Registry {
    pub(crate) fn new(skq: Arc<Skq>) -> Registry {
        Registry { skq }
    }

    /// The instance this registry registers with.
    pub fn skq(&self) -> &Arc<Skq> {
        &self.skq
    }

    /// Registers `source` (already non-blocking) edge-triggered with a user
    /// `token`, without a registrar: `flags` must not contain
    /// [`Flags::PINNED`] (register through [`Worker::register`] for that).
    /// On failure the source comes back inside the error.
    pub fn register<S: AsFd>(
        &self,
        source: S,
        token: u64,
        interest: Interest,
        flags: Flags,
    ) -> Result<Registered<S>, RegisterError<S>> {
        if flags.contains(Flags::PINNED) {
            let error = io::Error::new(
                io::ErrorKind::InvalidInput,
                "Flags::PINNED needs a registering worker: register through Worker::register",
            );
            return Err(RegisterError { error, source });
        }
        self.clone()
            .register_as(source, token, interest, flags, None)
    }

    /// Registers with `registrar`; the handle keeps `self`.
    fn register_as<S: AsFd>(
        self,
        source: S,
        token: u64,
        interest: Interest,
        flags: Flags,
        registrar: Option<WorkerId>,
    ) -> Result<Registered<S>, RegisterError<S>> {
        let fd = source.as_fd().as_raw_fd();
        match self.skq.register(fd, token, interest, flags, registrar) {
            Ok(id) => Ok(Registered {
                source: ManuallyDrop::new(source),
                id,
                registry: self,
            }),
            Err(error) => Err(RegisterError { error, source }),
        }
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("skq", &Arc::as_ptr(&self.skq))
            .finish()
    }
}

impl Worker {
    /// Registers `source` like [`Registry::register`], with this worker as
    /// the registrar: the target of [`Flags::PINNED`] and, under the
    /// locality policies, the source's first home.
    pub fn register<S: AsFd>(
        &self,
        source: S,
        token: u64,
        interest: Interest,
        flags: Flags,
    ) -> Result<Registered<S>, RegisterError<S>> {
        Registry::new(self.skq().clone()).register_as(
            source,
            token,
            interest,
            flags,
            Some(self.id()),
        )
    }

    /// A registry of this worker's instance.
    pub fn registry(&self) -> Registry {
        Registry::new(self.skq().clone())
    }
}

/// A source registered with an instance, owning the source. Derefs to `S`.
///
/// # Drop order
///
/// Dropping a `Registered<S>` first removes the fd from the shared epoll
/// and frees the scheduler slot, and only then drops `S` (closing the fd).
/// The other order would be a bug: once the fd is closed its number may be
/// handed to a new socket by another thread, and the late `EPOLL_CTL_DEL`
/// would remove *that* socket's registration. [`Registered::deregister`]
/// and [`Registered::into_inner`] deregister the same way and hand `S` back
/// open. No other path closes the fd: the handle is its only owner (for
/// `S = &T` or `Arc<T>` the borrow or the other owners keep it open longer,
/// which is fine).
///
/// # What a worker sees after deregistration
///
/// Deregistration bumps the slot's generation, so the old [`SourceId`] is
/// stale from then on (`skq.core().phase(id) == Phase::Free`):
///
/// * readiness harvested but not yet activated, and queue entries of the
///   source, are dropped: no worker receives a *new* event for it;
/// * an event already returned by [`Worker::wait`] stays in that worker's
///   [`Events`](crate::Events) buffer (the runtime cannot take it back). Its
///   release at the next `wait` is a no-op: no redelivery, even if the
///   handler called `still_ready` or more data arrived. A handler that looks
///   its token up in a table after another thread dropped the handle simply
///   finds nothing; if tokens are reused, compare `ev.source` with
///   [`Registered::id`];
/// * a new registration may reuse the slot (and the fd number) at once; it
///   has a new generation, so it never receives the old source's events.
///
/// Dropping the handle of the source a worker is processing right now (for
/// example on EOF, from inside the handler) is therefore fine.
pub struct Registered<S: AsFd> {
    /// Dropped by hand in `Drop`, after deregistration; never dropped twice
    /// (`into_parts` moves it out of a `ManuallyDrop<Self>`).
    source: ManuallyDrop<S>,
    id: SourceId,
    registry: Registry,
}

impl<S: AsFd> Registered<S> {
    /// The registration's id (as carried by [`crate::Event::source`]).
    pub fn id(&self) -> SourceId {
        self.id
    }

    /// The registry the source is registered with.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The source.
    pub fn get_ref(&self) -> &S {
        &self.source
    }

    /// The source, mutably. Do not replace its fd: the registration is tied
    /// to the fd it had when registered.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// Changes the token, interest and flags. `Flags::PINNED` needs a
    /// registration made through [`Worker::register`].
    pub fn modify(&self, token: u64, interest: Interest, flags: Flags) -> io::Result<()> {
        self.registry
            .skq
            .modify(self.id, self.raw_fd(), token, interest, flags)
    }

    /// Deregisters and returns the source, still open. On error the source
    /// was dropped; the slot is freed in either case.
    pub fn deregister(self) -> io::Result<S> {
        let (registry, id, source) = self.into_parts();
        registry
            .skq
            .deregister(id, source.as_fd().as_raw_fd())
            .map(|()| source)
    }

    /// Deregisters (ignoring errors) and returns the source, still open.
    pub fn into_inner(self) -> S {
        let (registry, id, source) = self.into_parts();
        let _ = registry.skq.deregister(id, source.as_fd().as_raw_fd());
        source
    }

    fn raw_fd(&self) -> RawFd {
        self.source.as_fd().as_raw_fd()
    }

    /// Takes the fields out without running `Drop` (so without
    /// deregistering): the caller deregisters.
    fn into_parts(self) -> (Registry, SourceId, S) {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped nor used again, so each field is
        // read exactly once and the values read have one owner each: (1)
        // `registry` is moved out (its Arc count is not duplicated); (2)
        // `source` is moved out of its `ManuallyDrop`, which `Drop` would
        // otherwise have dropped, and `Drop` does not run on `this`.
        unsafe {
            (
                ptr::read(&this.registry),
                this.id,
                ManuallyDrop::into_inner(ptr::read(&this.source)),
            )
        }
    }
}

impl<S: AsFd> Drop for Registered<S> {
    fn drop(&mut self) {
        // Deregister first, while the fd is still ours: closing first could
        // let another thread reuse the fd number before `EPOLL_CTL_DEL`.
        let _ = self.registry.skq.deregister(self.id, self.raw_fd());
        // SAFETY: `source` is dropped here only; `into_parts` (the only
        // other place that takes it) forgets `self`, so `drop` does not run
        // after it, and no field access follows this line.
        unsafe { ManuallyDrop::drop(&mut self.source) };
    }
}

impl<S: AsFd> Deref for Registered<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.source
    }
}

impl<S: AsFd> DerefMut for Registered<S> {
    fn deref_mut(&mut self) -> &mut S {
        &mut self.source
    }
}

impl<S: AsFd + fmt::Debug> fmt::Debug for Registered<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registered")
            .field("id", &self.id)
            .field("source", &*self.source)
            .finish()
    }
}

/// A failed registration: the error and the source, handed back unharmed.
/// Converts into [`io::Error`], so `?` works in functions returning
/// `io::Result` (the source is then dropped).
pub struct RegisterError<S> {
    error: io::Error,
    source: S,
}

impl<S> RegisterError<S> {
    /// The error.
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    /// The source that was not registered.
    pub fn into_source(self) -> S {
        self.source
    }

    /// Both parts.
    pub fn into_parts(self) -> (io::Error, S) {
        (self.error, self.source)
    }
}

impl<S> From<RegisterError<S>> for io::Error {
    fn from(e: RegisterError<S>) -> io::Error {
        e.error
    }
}

impl<S> fmt::Debug for RegisterError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegisterError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<S> fmt::Display for RegisterError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "registration failed: {}", self.error)
    }
}

impl<S> std::error::Error for RegisterError<S> {}
