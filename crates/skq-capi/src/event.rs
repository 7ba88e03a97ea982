//! A libevent-style layer (`skq_ev_*`) on one skq instance: an event base
//! that several threads run at once, libevent-skq's point.
//!
//! ## Model
//!
//! * A base owns an `Skq` with one worker per thread that may run it. A
//!   thread's first `skq_ev_base_loop` takes a free worker and keeps it in
//!   thread-local storage (with an eventfd *kick* registered `PINNED` to
//!   that worker) until `skq_ev_base_thread_exit` or thread exit.
//! * An fd event is registered with the base's instance when it is added
//!   (token = the event's address) and deregistered when it is deleted or,
//!   without `SKQ_EV_PERSIST`, when it fires. skq's lifecycle applies: one
//!   event's callback never runs on two threads at once for its I/O, and
//!   readiness is **edge-triggered** (libevent's `EV_ET`): a callback reads
//!   or accepts until `EAGAIN`.
//! * Timers live in one ordered map per base, keyed by (deadline, sequence),
//!   under the base's lock. After each wait, a thread runs the timers that
//!   are due; a thread waits at most until the earliest deadline, and adding
//!   an earlier one kicks every thread so they recompute it.
//! * `skq_ev_base_loopbreak` sets a flag and kicks every thread in the
//!   loop; each one returns after its current batch.
//!
//! ## Who may touch what
//!
//! An event's fields are written by `assign` (before it is added) and its
//! registration and timer state only under the base's lock. An event must
//! be deleted or freed either from its own callback or when no loop thread
//! can hold it in a batch (another thread may have received it in a batch
//! just before the delete); freeing it from another event's callback while
//! loops run is the caller's race, as in libevent without its finalizers.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_int, c_short, c_void};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use skq_rt::sys::cpu::monotonic_ns;
use skq_rt::sys::eventfd::EventFd;
use skq_rt::{Events, Flags, Interest, Ready, Skq, SourceId, Worker};

use crate::api::{config_of, skq_config, skq_config_init, SKQ_POLICY_HYBRID};
use crate::{
    fail, guard, handle, into_handle, io_code, take_handle, Handle, SKQ_EBADHANDLE, SKQ_EBUSY,
    SKQ_EINVAL, SKQ_OK,
};

/// Event kind: the timeout expired (passed to callbacks).
pub const SKQ_EV_TIMEOUT: c_short = 0x01;
/// Event kind: readable.
pub const SKQ_EV_READ: c_short = 0x02;
/// Event kind: writable.
pub const SKQ_EV_WRITE: c_short = 0x04;
/// Stay pending after firing.
pub const SKQ_EV_PERSIST: c_short = 0x10;
/// Loop flag: wait for events, run one batch, return.
pub const SKQ_EVLOOP_ONCE: c_int = 0x01;
/// Loop flag: run what is ready without waiting, return.
pub const SKQ_EVLOOP_NONBLOCK: c_int = 0x02;

/// An event callback: `fd`, the SKQ_EV_* bits that fired, the user's `arg`.
pub type skq_ev_cb = Option<unsafe extern "C" fn(fd: c_int, what: c_short, arg: *mut c_void)>;

/// Storage for one event, for embedding in the caller's structures (then
/// skq_ev_assign) or from skq_ev_new. Its contents are private.
#[repr(C)]
pub struct skq_ev {
    _opaque: [u64; 12],
}

/// A time interval, laid out as `struct timeval` on 64-bit Linux.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct skq_timeval {
    /// Seconds.
    pub tv_sec: i64,
    /// Microseconds.
    pub tv_usec: i64,
}

/// An event base (opaque).
pub struct skq_ev_base {
    _opaque: [u8; 0],
}

const NOT_REGISTERED: u64 = u64::MAX;
const PENDING_IO: u64 = 1;
const PENDING_TIMER: u64 = 2;
/// Token of a thread's kick eventfd (event addresses are never 0).
const KICK: u64 = 0;

#[repr(C)]
struct EvInner {
    magic: u64,
    base: *const Base,
    cb: skq_ev_cb,
    arg: *mut c_void,
    fd: c_int,
    what: c_short,
    heap: bool,
    /// Source id while registered (under the base's lock).
    source: AtomicU64,
    /// PENDING_* bits (under the base's lock).
    pending: AtomicU64,
    /// The timer's key while one is set (under the base's lock).
    deadline: AtomicU64,
    seq: AtomicU64,
    /// Interval of the last add with a timeout, re-armed for PERSIST.
    timeout_ns: AtomicU64,
}
const _: () = assert!(std::mem::size_of::<EvInner>() <= std::mem::size_of::<skq_ev>());
const _: () = assert!(std::mem::align_of::<EvInner>() <= std::mem::align_of::<skq_ev>());
const EV_MAGIC: u64 = 0x736b_715f_6576_656e; // "skq_even"

struct State {
    timers: BTreeMap<(u64, u64), usize>,
    seq: u64,
    free_workers: Vec<usize>,
    kicks: Vec<Arc<EventFd>>,
    /// Events with any pending bit.
    pending: usize,
}

#[repr(C)]
struct Base {
    magic: u64,
    id: u64,
    skq: Arc<Skq>,
    state: Mutex<State>,
    /// Earliest timer deadline (u64::MAX: none), readable without the lock.
    next_deadline: AtomicU64,
    brk: AtomicBool,
    running: AtomicUsize,
}
// SAFETY: repr(C) with the magic first.
unsafe impl Handle for Base {
    const MAGIC: u64 = 0x736b_715f_6261_7365; // "skq_base"
}

impl Base {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn kick_all(&self, st: &State) {
        for k in &st.kicks {
            let _ = k.notify();
        }
    }

    fn refresh_deadline(&self, st: &State) {
        let d = st.timers.keys().next().map_or(u64::MAX, |k| k.0);
        self.next_deadline.store(d, Ordering::Release);
    }
}

/// A thread's place in a base: its worker, batch buffer and kick.
struct Slot {
    base_id: u64,
    worker: Worker,
    events: Events,
    kick: Arc<EventFd>,
}

thread_local! {
    static SLOTS: RefCell<Vec<Slot>> = const { RefCell::new(Vec::new()) };
}

static NEXT_BASE: AtomicU64 = AtomicU64::new(1);

fn new_base(cfg: skq_rt::Config) -> Result<*mut skq_ev_base, c_int> {
    let n = cfg.workers;
    let skq = match Skq::new(cfg) {
        Ok(s) => s,
        Err(skq_rt::Error::Config(e)) => return Err(fail(crate::SKQ_ECONFIG, e.to_string())),
        Err(skq_rt::Error::Io(e)) => return Err(io_code(&e)),
    };
    let b = Base {
        magic: Base::MAGIC,
        id: NEXT_BASE.fetch_add(1, Ordering::Relaxed),
        skq,
        state: Mutex::new(State {
            timers: BTreeMap::new(),
            seq: 0,
            free_workers: (0..n).rev().collect(),
            kicks: Vec::new(),
            pending: 0,
        }),
        next_deadline: AtomicU64::new(u64::MAX),
        brk: AtomicBool::new(false),
        running: AtomicUsize::new(0),
    };
    Ok(into_handle(b) as *mut skq_ev_base)
}

/// A base with the hybrid policy and one worker per CPU this process may
/// use (at most 64), so that many threads may run it. NULL on failure
/// (skq_last_error says why).
#[no_mangle]
pub extern "C" fn skq_ev_base_new() -> *mut skq_ev_base {
    let mut out = std::ptr::null_mut();
    let n = std::thread::available_parallelism().map_or(1, |n| n.get().min(64)) as u32;
    guard(|| {
        let mut c = std::mem::MaybeUninit::<skq_config>::uninit();
        // SAFETY: writable storage for one config.
        let r = unsafe { skq_config_init(c.as_mut_ptr(), SKQ_POLICY_HYBRID, n) };
        if r != SKQ_OK {
            return r;
        }
        // SAFETY: initialised by skq_config_init.
        let cfg = match config_of(unsafe { &c.assume_init() }) {
            Ok(c) => c,
            Err(e) => return e,
        };
        match new_base(cfg) {
            Ok(b) => {
                out = b;
                SKQ_OK
            }
            Err(e) => e,
        }
    });
    out
}

/// A base on an instance configured by `cfg` (policy, tunables; `workers`
/// is the most threads that may run the base over its life). NULL on
/// failure.
///
/// # Safety
/// `cfg` is NULL or a valid skq_config.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_base_new_with_config(cfg: *const skq_config) -> *mut skq_ev_base {
    let mut out = std::ptr::null_mut();
    guard(|| {
        if cfg.is_null() {
            return fail(SKQ_EINVAL, "cfg is NULL");
        }
        // SAFETY: non-NULL and valid.
        let cfg = match config_of(unsafe { &*cfg }) {
            Ok(c) => c,
            Err(e) => return e,
        };
        match new_base(cfg) {
            Ok(b) => {
                out = b;
                SKQ_OK
            }
            Err(e) => e,
        }
    });
    out
}

/// Borrows a live base.
///
/// # Safety
/// As [`crate::handle`].
unsafe fn base<'a>(b: *const skq_ev_base) -> Result<&'a Base, c_int> {
    // SAFETY: forwarded.
    unsafe { handle::<Base>(b.cast()) }.ok_or_else(|| fail(SKQ_EBADHANDLE, "not an skq_ev_base"))
}

/// Frees a base: its instance is shut down (loops still running return).
/// Free or delete its events first; call when no thread is inside its loop.
///
/// # Safety
/// `b` is NULL or a handle from skq_ev_base_new*.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_base_free(b: *mut skq_ev_base) -> c_int {
    guard(|| {
        // SAFETY: NULL or from skq_ev_base_new (possibly freed: checked).
        match unsafe { take_handle::<Base>(b.cast()) } {
            Some(bx) => {
                bx.skq.shutdown();
                SLOTS.with(|s| s.borrow_mut().retain(|sl| sl.base_id != bx.id));
                SKQ_OK
            }
            None => fail(SKQ_EBADHANDLE, "not a live skq_ev_base"),
        }
    })
}

/// The calling thread gives back its worker in the base (its queued work
/// moves to the other workers). A later loop call takes another worker.
///
/// # Safety
/// `b` is NULL or a live base.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_base_thread_exit(b: *mut skq_ev_base) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let bs = match unsafe { base(b) } {
            Ok(b) => b,
            Err(c) => return c,
        };
        SLOTS.with(|s| s.borrow_mut().retain(|sl| sl.base_id != bs.id));
        SKQ_OK
    })
}

/// Initialises caller-provided storage `ev` as an event on `b` for `fd`
/// (-1 for a pure timer) and `what` (SKQ_EV_READ, SKQ_EV_WRITE,
/// SKQ_EV_PERSIST); `cb(fd, fired, arg)` runs when it fires. `ev` must not
/// be pending.
///
/// # Safety
/// `ev` is NULL or writable storage for an skq_ev; `b` NULL or a live base.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_assign(
    ev: *mut skq_ev,
    b: *mut skq_ev_base,
    fd: c_int,
    what: c_short,
    cb: skq_ev_cb,
    arg: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        if let Err(c) = unsafe { base(b) } {
            return c;
        }
        // SAFETY: as above.
        unsafe { assign(ev, b as *const Base, fd, what, cb, arg, false) }
    })
}

/// # Safety
/// `ev` is NULL or writable storage; `b` a live base.
unsafe fn assign(
    ev: *mut skq_ev,
    b: *const Base,
    fd: c_int,
    what: c_short,
    cb: skq_ev_cb,
    arg: *mut c_void,
    heap: bool,
) -> c_int {
    if ev.is_null() || cb.is_none() {
        return fail(SKQ_EINVAL, "ev or cb is NULL");
    }
    let known = SKQ_EV_READ | SKQ_EV_WRITE | SKQ_EV_PERSIST | SKQ_EV_TIMEOUT;
    if what & !known != 0 || (what & (SKQ_EV_READ | SKQ_EV_WRITE) != 0 && fd < 0) {
        return fail(
            SKQ_EINVAL,
            "unknown event bits, or READ/WRITE without an fd",
        );
    }
    let inner = EvInner {
        magic: EV_MAGIC,
        base: b,
        cb,
        arg,
        fd,
        what,
        heap,
        source: AtomicU64::new(NOT_REGISTERED),
        pending: AtomicU64::new(0),
        deadline: AtomicU64::new(0),
        seq: AtomicU64::new(0),
        timeout_ns: AtomicU64::new(0),
    };
    // SAFETY: writable storage, large and aligned enough (asserted above).
    unsafe { (ev as *mut EvInner).write(inner) };
    SKQ_OK
}

/// Allocates and assigns an event (see skq_ev_assign). NULL on failure.
///
/// # Safety
/// `b` is NULL or a live base.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_new(
    b: *mut skq_ev_base,
    fd: c_int,
    what: c_short,
    cb: skq_ev_cb,
    arg: *mut c_void,
) -> *mut skq_ev {
    let mut out = std::ptr::null_mut();
    guard(|| {
        // SAFETY: the caller's guarantee.
        if let Err(c) = unsafe { base(b) } {
            return c;
        }
        let p = Box::into_raw(Box::new(skq_ev { _opaque: [0; 12] }));
        // SAFETY: fresh storage; `b` checked.
        let r = unsafe { assign(p, b as *const Base, fd, what, cb, arg, true) };
        if r != SKQ_OK {
            // SAFETY: from Box::into_raw just above.
            drop(unsafe { Box::from_raw(p) });
            return r;
        }
        out = p;
        SKQ_OK
    });
    out
}

/// The size of skq_ev, for callers that allocate it themselves.
#[no_mangle]
pub extern "C" fn skq_ev_get_struct_event_size() -> usize {
    std::mem::size_of::<skq_ev>()
}

/// Borrows an assigned event.
///
/// # Safety
/// `ev` is NULL or assigned storage.
unsafe fn event<'a>(ev: *const skq_ev) -> Result<&'a EvInner, c_int> {
    if ev.is_null() {
        return Err(fail(SKQ_EINVAL, "ev is NULL"));
    }
    // SAFETY: non-NULL storage of an skq_ev (the caller's guarantee).
    let e = unsafe { &*(ev as *const EvInner) };
    if e.magic != EV_MAGIC {
        return Err(fail(SKQ_EBADHANDLE, "event not assigned"));
    }
    // SAFETY: an assigned event names the base it was assigned to.
    if unsafe { base(e.base as *const skq_ev_base) }.is_err() {
        return Err(fail(SKQ_EBADHANDLE, "the event's base was freed"));
    }
    Ok(e)
}

fn set_pending(st: &mut State, e: &EvInner, bits: u64) {
    let old = e.pending.fetch_or(bits, Ordering::AcqRel);
    if old == 0 && bits != 0 {
        st.pending += 1;
    }
}

fn clear_pending(st: &mut State, e: &EvInner, bits: u64) {
    let old = e.pending.fetch_and(!bits, Ordering::AcqRel);
    if old != 0 && old & !bits == 0 {
        st.pending -= 1;
    }
}

fn remove_timer(b: &Base, st: &mut State, e: &EvInner) {
    if e.pending.load(Ordering::Acquire) & PENDING_TIMER != 0 {
        let key = (
            e.deadline.load(Ordering::Relaxed),
            e.seq.load(Ordering::Relaxed),
        );
        st.timers.remove(&key);
        clear_pending(st, e, PENDING_TIMER);
        b.refresh_deadline(st);
    }
}

fn insert_timer(b: &Base, st: &mut State, e: &EvInner, ns: u64) {
    remove_timer(b, st, e);
    let deadline = monotonic_ns().saturating_add(ns);
    st.seq += 1;
    e.deadline.store(deadline, Ordering::Relaxed);
    e.seq.store(st.seq, Ordering::Relaxed);
    let seq = st.seq;
    st.timers
        .insert((deadline, seq), e as *const EvInner as usize);
    set_pending(st, e, PENDING_TIMER);
    let earlier = deadline < b.next_deadline.load(Ordering::Acquire);
    b.refresh_deadline(st);
    if earlier {
        b.kick_all(st);
    }
}

fn unregister(b: &Base, st: &mut State, e: &EvInner) -> Result<(), std::io::Error> {
    let src = e.source.swap(NOT_REGISTERED, Ordering::AcqRel);
    clear_pending(st, e, PENDING_IO);
    if src != NOT_REGISTERED {
        b.skq.deregister(SourceId::from_u64(src), e.fd)?;
    }
    Ok(())
}

/// Makes the event pending: its fd is watched for its READ/WRITE bits and,
/// if `tv` is not NULL, it fires with SKQ_EV_TIMEOUT after `tv` (replacing
/// an earlier timeout). Adding a pending event again only changes the
/// timeout. One fd may be watched by one event at a time.
///
/// # Safety
/// `ev` is NULL or an assigned event; `tv` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_add(ev: *mut skq_ev, tv: *const skq_timeval) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let e = match unsafe { event(ev) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        let ns = if tv.is_null() {
            None
        } else {
            // SAFETY: non-NULL and valid.
            let t = unsafe { *tv };
            if t.tv_sec < 0 || !(0..1_000_000).contains(&t.tv_usec) {
                return fail(SKQ_EINVAL, "negative or unnormalised timeval");
            }
            Some((t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_usec as u64 * 1000)
        };
        // SAFETY: checked live by `event`.
        let b = unsafe { &*e.base };
        let mut st = b.lock();
        let io = e.what & (SKQ_EV_READ | SKQ_EV_WRITE);
        if io != 0 && e.source.load(Ordering::Acquire) == NOT_REGISTERED {
            let int = match (io & SKQ_EV_READ != 0, io & SKQ_EV_WRITE != 0) {
                (true, true) => Interest::READABLE | Interest::WRITABLE,
                (true, false) => Interest::READABLE,
                _ => Interest::WRITABLE,
            };
            let token = e as *const EvInner as u64;
            match b.skq.register(e.fd, token, int, Flags::NONE, None) {
                Ok(id) => e.source.store(id.as_u64(), Ordering::Release),
                Err(err) => return io_code(&err),
            }
            set_pending(&mut st, e, PENDING_IO);
        }
        if let Some(ns) = ns {
            e.timeout_ns.store(ns, Ordering::Relaxed);
            insert_timer(b, &mut st, e, ns);
        }
        SKQ_OK
    })
}

/// Makes the event non-pending (fd no longer watched, timeout cancelled).
///
/// # Safety
/// `ev` is NULL or an assigned event.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_del(ev: *mut skq_ev) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let e = match unsafe { event(ev) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        // SAFETY: checked live by `event`.
        let b = unsafe { &*e.base };
        let mut st = b.lock();
        remove_timer(b, &mut st, e);
        match unregister(b, &mut st, e) {
            Ok(()) => SKQ_OK,
            Err(err) => io_code(&err),
        }
    })
}

/// Which of `what` (SKQ_EV_READ, SKQ_EV_WRITE, SKQ_EV_TIMEOUT) are pending;
/// 0 when none (or on an invalid event).
///
/// # Safety
/// `ev` is NULL or an assigned event.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_pending(ev: *const skq_ev, what: c_short) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let Ok(e) = (unsafe { event(ev) }) else {
            return 0;
        };
        let p = e.pending.load(Ordering::Acquire);
        let mut r = 0;
        if p & PENDING_IO != 0 {
            r |= e.what & (SKQ_EV_READ | SKQ_EV_WRITE);
        }
        if p & PENDING_TIMER != 0 {
            r |= SKQ_EV_TIMEOUT;
        }
        (r & what) as c_int
    })
}

/// Deletes the event and, if it came from skq_ev_new, frees it. Storage
/// assigned with skq_ev_assign is left to the caller.
///
/// # Safety
/// `ev` is NULL or an assigned event not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_free(ev: *mut skq_ev) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let heap = match unsafe { event(ev) } {
            Ok(e) => e.heap,
            Err(c) => return c,
        };
        // SAFETY: as above.
        let r = unsafe { skq_ev_del(ev) };
        // SAFETY: still assigned; clearing the magic makes a second free
        // fail for as long as the storage is not reused.
        unsafe { (*(ev as *mut EvInner)).magic = 0 };
        if heap {
            // SAFETY: allocated by skq_ev_new with Box.
            drop(unsafe { Box::from_raw(ev) });
        }
        r
    })
}

/// Takes (or finds) the calling thread's slot in `b`.
fn take_slot(b: &Base) -> Result<Slot, c_int> {
    if let Some(s) = SLOTS.with(|s| {
        let mut v = s.borrow_mut();
        let i = v.iter().position(|sl| sl.base_id == b.id)?;
        Some(v.swap_remove(i))
    }) {
        return Ok(s);
    }
    let mut st = b.lock();
    let Some(w) = st.free_workers.pop() else {
        return Err(fail(SKQ_EBUSY, "more threads than the base's workers"));
    };
    let kick = match EventFd::new() {
        Ok(k) => Arc::new(k),
        Err(e) => return Err(io_code(&e)),
    };
    if let Err(e) = b.skq.register(
        kick.as_raw_fd(),
        KICK,
        Interest::READABLE,
        Flags::PINNED,
        Some(w),
    ) {
        return Err(io_code(&e));
    }
    st.kicks.push(kick.clone());
    Ok(Slot {
        base_id: b.id,
        worker: b.skq.worker(w),
        events: Events::with_capacity(64),
        kick,
    })
}

/// Runs the timers that are due.
fn run_timers(b: &Base) -> usize {
    let now = monotonic_ns();
    if b.next_deadline.load(Ordering::Acquire) > now {
        return 0;
    }
    let mut due = Vec::new();
    {
        let mut st = b.lock();
        while let Some((&key, &p)) = st.timers.iter().next() {
            if key.0 > now {
                break;
            }
            st.timers.remove(&key);
            // SAFETY: events in the map are assigned and live (delete and
            // free remove them under this lock).
            let e = unsafe { &*(p as *const EvInner) };
            clear_pending(&mut st, e, PENDING_TIMER);
            if e.what & SKQ_EV_PERSIST != 0 {
                let ns = e.timeout_ns.load(Ordering::Relaxed);
                st.seq += 1;
                let d = now.saturating_add(ns.max(1));
                e.deadline.store(d, Ordering::Relaxed);
                e.seq.store(st.seq, Ordering::Relaxed);
                let seq = st.seq;
                st.timers.insert((d, seq), p);
                set_pending(&mut st, e, PENDING_TIMER);
            } else if let Err(err) = unregister(b, &mut st, e) {
                io_code(&err);
            }
            due.push((e.cb, e.fd, e.arg));
        }
        b.refresh_deadline(&st);
    }
    for &(cb, fd, arg) in &due {
        if let Some(f) = cb {
            // SAFETY: the user's callback with the user's argument.
            unsafe { f(fd, SKQ_EV_TIMEOUT, arg) };
        }
    }
    due.len()
}

/// Runs one delivered I/O event.
fn run_io(b: &Base, token: u64, source: SourceId, ready: Ready) {
    // SAFETY: the token is the address of an event registered on this base;
    // delete/free deregister it first, which drops undelivered events (see
    // the module docs for the one race left to the caller).
    let e = unsafe { &*(token as *const EvInner) };
    if e.magic != EV_MAGIC || e.source.load(Ordering::Acquire) != source.as_u64() {
        return;
    }
    let mut fired = 0;
    if ready.is_readable() || ready.contains(Ready::HUP) || ready.contains(Ready::ERROR) {
        fired |= e.what & SKQ_EV_READ;
    }
    if ready.contains(Ready::WRITABLE) || ready.contains(Ready::ERROR) {
        fired |= e.what & SKQ_EV_WRITE;
    }
    if fired == 0 {
        return;
    }
    {
        let mut st = b.lock();
        if e.what & SKQ_EV_PERSIST == 0 {
            remove_timer(b, &mut st, e);
            if let Err(err) = unregister(b, &mut st, e) {
                io_code(&err);
            }
        } else if e.pending.load(Ordering::Acquire) & PENDING_TIMER != 0 {
            let ns = e.timeout_ns.load(Ordering::Relaxed);
            insert_timer(b, &mut st, e, ns);
        }
    }
    if let Some(f) = e.cb {
        // SAFETY: the user's callback with the user's argument.
        unsafe { f(e.fd, fired, e.arg) };
    }
}

fn run_loop(b: &Base, slot: &mut Slot, flags: c_int) -> c_int {
    loop {
        if b.brk.load(Ordering::Acquire) {
            return 0;
        }
        if b.lock().pending == 0 {
            return 1;
        }
        let timeout = if flags & SKQ_EVLOOP_NONBLOCK != 0 {
            Some(Duration::ZERO)
        } else {
            let d = b.next_deadline.load(Ordering::Acquire);
            (d != u64::MAX).then(|| Duration::from_nanos(d.saturating_sub(monotonic_ns())))
        };
        let n = match slot.worker.wait(&mut slot.events, timeout) {
            Ok(n) => n,
            Err(e) => return io_code(&e),
        };
        if b.skq.is_shutdown() {
            return 0;
        }
        let mut ran = 0;
        for ev in slot.events.iter() {
            if ev.token == KICK {
                slot.kick.drain();
                continue;
            }
            run_io(b, ev.token, ev.source, ev.ready);
            ran += 1;
        }
        ran += run_timers(b);
        if flags & SKQ_EVLOOP_NONBLOCK != 0 || (flags & SKQ_EVLOOP_ONCE != 0 && (ran > 0 || n > 0))
        {
            return 0;
        }
    }
}

/// Runs the base on the calling thread until skq_ev_base_loopbreak, until
/// no event is pending (returns 1), or per `flags` (SKQ_EVLOOP_ONCE,
/// SKQ_EVLOOP_NONBLOCK). Any number of threads (up to the base's workers)
/// may run it at once. Returns 0, 1, or a negative SKQ_E* code.
///
/// # Safety
/// `b` is NULL or a live base.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_base_loop(b: *mut skq_ev_base, flags: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let bs = match unsafe { base(b) } {
            Ok(b) => b,
            Err(c) => return c,
        };
        if flags & !(SKQ_EVLOOP_ONCE | SKQ_EVLOOP_NONBLOCK) != 0 {
            return fail(SKQ_EINVAL, "unknown loop flags");
        }
        let mut slot = match take_slot(bs) {
            Ok(s) => s,
            Err(c) => return c,
        };
        bs.running.fetch_add(1, Ordering::AcqRel);
        let r = run_loop(bs, &mut slot, flags);
        slot.worker.release();
        if bs.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            bs.brk.store(false, Ordering::Release);
        }
        SLOTS.with(|s| s.borrow_mut().push(slot));
        r
    })
}

/// skq_ev_base_loop with no flags.
///
/// # Safety
/// `b` is NULL or a live base.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_base_dispatch(b: *mut skq_ev_base) -> c_int {
    // SAFETY: forwarded.
    unsafe { skq_ev_base_loop(b, 0) }
}

/// Makes every thread running the base's loop return after its current
/// batch (any thread, including from a callback).
///
/// # Safety
/// `b` is NULL or a live base.
#[no_mangle]
pub unsafe extern "C" fn skq_ev_base_loopbreak(b: *mut skq_ev_base) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let bs = match unsafe { base(b) } {
            Ok(b) => b,
            Err(c) => return c,
        };
        bs.brk.store(true, Ordering::Release);
        let st = bs.lock();
        bs.kick_all(&st);
        SKQ_OK
    })
}
