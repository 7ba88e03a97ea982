//! User events: an eventfd registered like any other source, owned by its
//! handle the way [`Registered`] owns a socket.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::Arc;

use crate::registry::{Registered, Registry};
use crate::sys::eventfd::EventFd;
use crate::{Flags, Interest, Skq, SourceId};

/// The eventfd as an [`AsFd`] source.
struct Efd(EventFd);

impl AsFd for Efd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `EventFd` owns its fd and closes it only when dropped, so
        // the fd stays open for as long as `self` is borrowed.
        unsafe { BorrowedFd::borrow_raw(self.0.as_raw_fd()) }
    }
}

/// An eventfd-backed event source: [`UserEvent::notify`] from any thread
/// makes it ready; it is delivered like any other source with `Ready::USER`
/// semantics (readable). Dropping it deregisters it, then closes the eventfd
/// (the order of [`Registered`]).
pub struct UserEvent {
    reg: Registered<Efd>,
}

impl UserEvent {
    pub(crate) fn new(skq: &Arc<Skq>, token: u64, flags: Flags) -> io::Result<UserEvent> {
        let efd = Efd(EventFd::new()?);
        let reg = Registry::new(skq.clone()).register(efd, token, Interest::READABLE, flags)?;
        Ok(UserEvent { reg })
    }

    /// Triggers the event.
    pub fn notify(&self) -> io::Result<()> {
        self.reg.0.notify()
    }

    /// Resets the counter (call from the handler); returns how many
    /// notifications were folded into this delivery.
    pub fn reset(&self) -> u64 {
        self.reg.0.drain()
    }

    /// The registration.
    pub fn source(&self) -> SourceId {
        self.reg.id()
    }

    /// Deregisters the event and closes its eventfd, reporting a
    /// deregistration error (dropping it does the same silently). `skq` must
    /// be the instance that created it; the event remembers its instance, so
    /// the argument only remains for compatibility.
    pub fn close(self, skq: &Skq) -> io::Result<()> {
        debug_assert!(
            std::ptr::eq(skq, Arc::as_ptr(self.reg.registry().skq())),
            "UserEvent::close with another instance than its own"
        );
        self.reg.deregister().map(drop)
    }
}
