//! The `skq_*` functions: an instance, its registrations, worker handles and
//! statistics, one-for-one over [`skq_rt`]'s raw path ([`Skq::register`]).
//!
//! Ownership follows the runtime: the caller keeps a registered fd open
//! until `skq_deregister`; an event returned by `skq_worker_wait` is
//! processing until the same worker's next wait or `skq_worker_release`.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use skq_rt::{Config, Event, Events, Flags, Interest, Policy, Ready, Skq, SourceId, UserEvent};

use crate::{
    fail, guard, handle, handle_mut, into_handle, io_code, take_handle, Handle, SKQ_EBADHANDLE,
    SKQ_EBUSY, SKQ_ECONFIG, SKQ_EINVAL, SKQ_ENOWORKER, SKQ_ESTALE, SKQ_OK,
};

/// Policy: 1:1, a private queue per worker, round-robin, never moved.
pub const SKQ_POLICY_VANILLA: c_int = 0;
/// Policy: 1:N, one shared queue.
pub const SKQ_POLICY_SHARED: c_int = 1;
/// Policy: queue affinity.
pub const SKQ_POLICY_QUEUE: c_int = 2;
/// Policy: CPU affinity (SO_INCOMING_CPU).
pub const SKQ_POLICY_CPU: c_int = 3;
/// Policy: best of two.
pub const SKQ_POLICY_BEST2: c_int = 4;
/// Policy: hybrid (CPU affinity, best-of-two rival, stealing).
pub const SKQ_POLICY_HYBRID: c_int = 5;

/// Interest: readable (and hang-up).
pub const SKQ_READ: u32 = 1;
/// Interest: writable.
pub const SKQ_WRITE: u32 = 2;

/// Flag: always delivered to the registering worker (needs a registrar).
pub const SKQ_PINNED: u32 = 1;
/// Flag: queued on its worker's high-priority queue.
pub const SKQ_HIGH_PRIORITY: u32 = 2;

/// Ready bit: data (or a connection) to read.
pub const SKQ_READY_READABLE: u32 = 1;
/// Ready bit: room to write.
pub const SKQ_READY_WRITABLE: u32 = 2;
/// Ready bit: the peer hung up.
pub const SKQ_READY_HUP: u32 = 4;
/// Ready bit: an error is pending on the source.
pub const SKQ_READY_ERROR: u32 = 8;
/// Ready bit: a user event was triggered.
pub const SKQ_READY_USER: u32 = 16;

/// No registrar (for skq_register's `registrar`).
pub const SKQ_NO_WORKER: c_int = -1;

/// An instance's configuration. Fill it with skq_config_init, then change
/// fields; skq_new validates it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct skq_config {
    /// SKQ_POLICY_*.
    pub policy: c_int,
    /// Worker handles, 1..=64.
    pub workers: u32,
    /// Work stealing by idle workers: 0 off, 1 on (refused with vanilla and
    /// shared). skq_config_init sets the policy's default (on for hybrid).
    pub steal: c_int,
    /// Most sources stolen per attempt, 1..=8.
    pub steal_k: u32,
    /// Optional safety-net retry interval of an idle stealing worker, ns: 0
    /// (off, the default: thieves are woken on demand) or 10 us ..= 100 ms.
    pub steal_retry_ns: u64,
    /// Most high-priority events per batch, percent of the buffer, 1..=100.
    pub rtshare: u32,
    /// Target waits per second per worker; 0 = unlimited batches.
    pub rtfreq: u32,
    /// Hybrid's cache-miss penalty charged to a non-local rival, ns.
    pub penalty_ns: u64,
    /// Most live sources, 1..=2^24.
    pub capacity: u32,
    /// Activations served from a socket's cached CPU hint, 1..=4096.
    pub hint_refresh: u32,
    /// Seed for scheduling randomness.
    pub seed: u64,
    /// Epoll sets the workers are split into, each polled and harvested by
    /// its own group, 0..=workers (1: one shared set; workers: one set per
    /// worker, fewer wake-ups, and under hybrid a longer tail). 0, the
    /// default, is the policy's choice: one set per worker for cpu without
    /// stealing when every worker has a CPU of its own, else one set.
    pub poll_groups: u32,
    /// A poller that wakes with work of its own hands the poll to a parked
    /// follower only if its processing per event is at least this, ns (0,
    /// the default: always; a long event after short ones then holds
    /// readiness back for its length).
    pub promote_min_ns: u64,
    /// Most workers blocked in one epoll set at once (0, the default: every
    /// idle worker; 1: leader/follower). With more than one, a worker is
    /// woken in its poll by the real-time signal SIGRTMIN+7, which ends that
    /// worker's poll in `skq_wait` (on x86-64 the signal stays unblocked in
    /// worker threads, with a handler, `SA_RESTART`; elsewhere it is blocked
    /// outside the poll).
    pub pollers: u32,
    /// With several pollers: in an epoll set of more than this many workers,
    /// a poller whose events are short (under 20 us on average) takes every
    /// ready event instead of one, so that the set's lock is not taken once
    /// per event; 0..=64 (64: never), default 8.
    pub batch_polls_above: u32,
}

/// One delivered event.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct skq_event {
    /// The token given at registration.
    pub token: u64,
    /// The source's id (as returned by skq_register).
    pub source: u64,
    /// SKQ_READY_* bits accumulated since the last delivery.
    pub ready: u32,
    /// 1 if delivered from the high-priority queue.
    pub high: u32,
}

/// Per-worker counters (skq_stats).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct skq_worker_stats {
    /// Events delivered by this worker's waits.
    pub delivered: u64,
    /// Sources this worker stole.
    pub steals_made: u64,
    /// Sources stolen from this worker's queue.
    pub steals_suffered: u64,
    /// Arrivals because CPU affinity followed a flow.
    pub migrations_cpu: u64,
    /// Arrivals because best-of-two picked this worker.
    pub migrations_balance: u64,
    /// Arrivals by stealing.
    pub migrations_steal: u64,
    /// Arrivals because another worker exited.
    pub migrations_exit: u64,
    /// Wake-ups sent to this worker.
    pub wakeups: u64,
    /// High-priority events delivered.
    pub high_served: u64,
    /// Time spent processing batches, ns.
    pub busy_ns: u64,
    /// Events queued now.
    pub queued: u64,
    /// EWMA of processing time per event, ns.
    pub t_avg_ns: f64,
    /// 1 if the worker has exited.
    pub exited: u32,
}

/// What skq_worker_exit did with the worker's work.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct skq_exit_report {
    /// Queued or in-flight sources handed to other workers.
    pub rescheduled: u64,
    /// Pinned sources of the exiting worker that were unpinned.
    pub unpinned: u64,
    /// Sources left without a worker (none is left).
    pub stranded: u64,
}

/// An skq instance (opaque). Shared by all threads.
pub struct skq_t {
    _opaque: [u8; 0],
}

/// A worker handle (opaque). Used by one thread.
pub struct skq_worker_t {
    _opaque: [u8; 0],
}

/// A user event (opaque): an eventfd registered like any other source.
pub struct skq_user_event_t {
    _opaque: [u8; 0],
}

#[repr(C)]
pub(crate) struct Instance {
    magic: u64,
    pub(crate) skq: Arc<Skq>,
    taken: Box<[AtomicBool]>,
}
// SAFETY: repr(C) with the magic first.
unsafe impl Handle for Instance {
    const MAGIC: u64 = 0x736b_715f_696e_7374; // "skq_inst"
}

#[repr(C)]
struct WorkerBox {
    magic: u64,
    worker: skq_rt::Worker,
    events: Events,
}
// SAFETY: repr(C) with the magic first.
unsafe impl Handle for WorkerBox {
    const MAGIC: u64 = 0x736b_715f_776f_726b; // "skq_work"
}

#[repr(C)]
struct UserBox {
    magic: u64,
    ev: UserEvent,
}
// SAFETY: repr(C) with the magic first.
unsafe impl Handle for UserBox {
    const MAGIC: u64 = 0x736b_715f_7573_6572; // "skq_user"
}

pub(crate) fn policy_of(p: c_int) -> Option<Policy> {
    Some(match p {
        SKQ_POLICY_VANILLA => Policy::Vanilla,
        SKQ_POLICY_SHARED => Policy::Shared,
        SKQ_POLICY_QUEUE => Policy::Queue,
        SKQ_POLICY_CPU => Policy::Cpu,
        SKQ_POLICY_BEST2 => Policy::Best2,
        SKQ_POLICY_HYBRID => Policy::Hybrid,
        _ => return None,
    })
}

fn interest_of(i: u32) -> Option<Interest> {
    match i {
        SKQ_READ => Some(Interest::READABLE),
        SKQ_WRITE => Some(Interest::WRITABLE),
        3 => Some(Interest::READABLE | Interest::WRITABLE),
        _ => None,
    }
}

fn flags_of(f: u32) -> Option<Flags> {
    (f & !(SKQ_PINNED | SKQ_HIGH_PRIORITY) == 0).then_some(Flags(f as u8))
}

/// Builds and validates a runtime configuration (records the message).
pub(crate) fn config_of(c: &skq_config) -> Result<Config, c_int> {
    let policy = policy_of(c.policy)
        .ok_or_else(|| fail(SKQ_ECONFIG, format!("unknown policy {}", c.policy)))?;
    let mut cfg = Config::new(policy, c.workers as usize);
    cfg.steal = match c.steal {
        0 => false,
        1 => true,
        s => return Err(fail(SKQ_ECONFIG, format!("steal must be 0 or 1, not {s}"))),
    };
    cfg.steal_k = c.steal_k as usize;
    cfg.steal_retry_ns = c.steal_retry_ns;
    cfg.rtshare = c.rtshare;
    cfg.rtfreq = c.rtfreq;
    cfg.penalty_ns = c.penalty_ns;
    cfg.capacity = c.capacity as usize;
    cfg.hint_refresh = c.hint_refresh;
    cfg.seed = c.seed;
    cfg.poll_groups = c.poll_groups as usize;
    cfg.promote_min_ns = c.promote_min_ns;
    cfg.pollers = c.pollers as usize;
    cfg.batch_polls_above = c.batch_polls_above as usize;
    cfg.validate()
        .map_err(|e| fail(SKQ_ECONFIG, e.to_string()))?;
    Ok(cfg)
}

/// Fills `*cfg` with the defaults for `policy` and `workers` (the paper's
/// tunables; stealing on for hybrid). Returns SKQ_EINVAL for a NULL `cfg` or
/// an unknown policy; the worker count is checked by skq_new.
///
/// # Safety
/// `cfg` is NULL or points to writable memory for one skq_config.
#[no_mangle]
pub unsafe extern "C" fn skq_config_init(
    cfg: *mut skq_config,
    policy: c_int,
    workers: u32,
) -> c_int {
    guard(|| {
        let Some(p) = policy_of(policy) else {
            return fail(SKQ_EINVAL, format!("unknown policy {policy}"));
        };
        if cfg.is_null() {
            return fail(SKQ_EINVAL, "cfg is NULL");
        }
        let mut c = c_config_of(&Config::new(p, workers as usize));
        // Kept as given: skq_new checks the count.
        c.workers = workers;
        // SAFETY: non-NULL and writable (the caller's guarantee).
        unsafe { cfg.write(c) };
        SKQ_OK
    })
}

/// The C form of a runtime configuration (the inverse of [`config_of`]).
fn c_config_of(d: &Config) -> skq_config {
    skq_config {
        policy: match d.policy {
            Policy::Vanilla => SKQ_POLICY_VANILLA,
            Policy::Shared => SKQ_POLICY_SHARED,
            Policy::Queue => SKQ_POLICY_QUEUE,
            Policy::Cpu => SKQ_POLICY_CPU,
            Policy::Best2 => SKQ_POLICY_BEST2,
            Policy::Hybrid => SKQ_POLICY_HYBRID,
        },
        workers: d.workers as u32,
        steal: d.steal as c_int,
        steal_k: d.steal_k as u32,
        steal_retry_ns: d.steal_retry_ns,
        rtshare: d.rtshare,
        rtfreq: d.rtfreq,
        penalty_ns: d.penalty_ns,
        capacity: d.capacity as u32,
        hint_refresh: d.hint_refresh,
        seed: d.seed,
        poll_groups: d.poll_groups as u32,
        promote_min_ns: d.promote_min_ns,
        pollers: d.pollers as u32,
        batch_polls_above: d.batch_polls_above as u32,
    }
}

/// Creates an instance. On success stores the handle in `*out`.
/// SKQ_ECONFIG names the refused option in skq_last_error().
///
/// # Safety
/// `cfg` is NULL or a valid skq_config; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_new(cfg: *const skq_config, out: *mut *mut skq_t) -> c_int {
    guard(|| {
        if cfg.is_null() || out.is_null() {
            return fail(SKQ_EINVAL, "cfg or out is NULL");
        }
        // SAFETY: non-NULL and valid (the caller's guarantee).
        let cfg = match config_of(unsafe { &*cfg }) {
            Ok(c) => c,
            Err(code) => return code,
        };
        let n = cfg.workers;
        let skq = match Skq::new(cfg) {
            Ok(s) => s,
            Err(skq_rt::Error::Config(e)) => return fail(SKQ_ECONFIG, e.to_string()),
            Err(skq_rt::Error::Io(e)) => return io_code(&e),
        };
        let inst = Instance {
            magic: Instance::MAGIC,
            skq,
            taken: (0..n).map(|_| AtomicBool::new(false)).collect(),
        };
        // SAFETY: `out` is non-NULL and writable.
        unsafe { out.write(into_handle(inst) as *mut skq_t) };
        SKQ_OK
    })
}

/// Releases the caller's reference to the instance. Worker handles and user
/// events still alive keep it running until they are exited or freed; call
/// skq_shutdown first to make their waits return.
///
/// # Safety
/// `skq` is NULL or a handle from skq_new.
#[no_mangle]
pub unsafe extern "C" fn skq_free(skq: *mut skq_t) -> c_int {
    guard(|| {
        // SAFETY: NULL or from skq_new (possibly already freed: checked).
        match unsafe { take_handle::<Instance>(skq.cast()) } {
            Some(b) => {
                drop(b);
                SKQ_OK
            }
            None => fail(SKQ_EBADHANDLE, "not a live skq_t"),
        }
    })
}

/// Whether a source id's slot index is within the instance's capacity.
fn in_range(inst: &Instance, id: u64) -> bool {
    (id as u32 as usize) < inst.skq.config().capacity
}

/// Borrows a live instance handle.
///
/// # Safety
/// As [`crate::handle`].
pub(crate) unsafe fn instance<'a>(skq: *const skq_t) -> Result<&'a Instance, c_int> {
    // SAFETY: forwarded.
    unsafe { handle::<Instance>(skq.cast()) }.ok_or_else(|| fail(SKQ_EBADHANDLE, "not an skq_t"))
}

/// Makes every current and future skq_worker_wait on the instance return 0
/// at once (permanent).
///
/// # Safety
/// `skq` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn skq_shutdown(skq: *mut skq_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        match unsafe { instance(skq) } {
            Ok(i) => {
                i.skq.shutdown();
                SKQ_OK
            }
            Err(c) => c,
        }
    })
}

/// Registers `fd` (non-blocking; edge-triggered) with `token`, `interest`
/// (SKQ_READ and/or SKQ_WRITE) and `flags` (SKQ_PINNED, SKQ_HIGH_PRIORITY).
/// `registrar` is the registering worker's index or SKQ_NO_WORKER (PINNED
/// needs one). Stores the source id in `*out_id`. The fd must stay open
/// until skq_deregister.
///
/// # Safety
/// `skq` is NULL or a live handle; `out_id` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_register(
    skq: *mut skq_t,
    fd: c_int,
    token: u64,
    interest: u32,
    flags: u32,
    registrar: c_int,
    out_id: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        let (Some(int), Some(fl)) = (interest_of(interest), flags_of(flags)) else {
            return fail(SKQ_EINVAL, "unknown interest or flag bits");
        };
        if fd < 0 || out_id.is_null() {
            return fail(SKQ_EINVAL, "negative fd or NULL out_id");
        }
        let reg = match registrar {
            SKQ_NO_WORKER => None,
            w if w >= 0 && (w as usize) < inst.taken.len() => Some(w as usize),
            w => return fail(SKQ_ENOWORKER, format!("registrar {w} out of range")),
        };
        match inst.skq.register(fd, token, int, fl, reg) {
            Ok(id) => {
                // SAFETY: non-NULL and writable.
                unsafe { out_id.write(id.as_u64()) };
                SKQ_OK
            }
            Err(e) => io_code(&e),
        }
    })
}

/// Changes a registration's token, interest and flags (`fd` is the
/// registered fd). A new interest re-arms the edge: readiness present now is
/// reported.
///
/// # Safety
/// `skq` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn skq_modify(
    skq: *mut skq_t,
    id: u64,
    fd: c_int,
    token: u64,
    interest: u32,
    flags: u32,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        let (Some(int), Some(fl)) = (interest_of(interest), flags_of(flags)) else {
            return fail(SKQ_EINVAL, "unknown interest or flag bits");
        };
        if fd < 0 {
            return fail(SKQ_EINVAL, "negative fd");
        }
        if !in_range(inst, id) {
            return fail(SKQ_ESTALE, "source id out of range");
        }
        match inst.skq.modify(SourceId::from_u64(id), fd, token, int, fl) {
            Ok(()) => SKQ_OK,
            Err(e) => io_code(&e),
        }
    })
}

/// Removes a registration; call before closing `fd`. Pending and in-flight
/// deliveries of the source are dropped.
///
/// # Safety
/// `skq` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn skq_deregister(skq: *mut skq_t, id: u64, fd: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        if fd < 0 {
            return fail(SKQ_EINVAL, "negative fd");
        }
        if !in_range(inst, id) {
            return fail(SKQ_ESTALE, "source id out of range");
        }
        match inst.skq.deregister(SourceId::from_u64(id), fd) {
            Ok(()) => SKQ_OK,
            Err(e) => io_code(&e),
        }
    })
}

/// Creates a user event registered with `token` and `flags` (not PINNED: it
/// has no registrar). skq_user_event_notify makes it ready; it is delivered
/// with SKQ_READY_READABLE.
///
/// # Safety
/// `skq` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_user_event_new(
    skq: *mut skq_t,
    token: u64,
    flags: u32,
    out: *mut *mut skq_user_event_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        let Some(fl) = flags_of(flags).filter(|f| !f.contains(Flags::PINNED)) else {
            return fail(SKQ_EINVAL, "unknown flag bits (or PINNED) for a user event");
        };
        if out.is_null() {
            return fail(SKQ_EINVAL, "out is NULL");
        }
        match inst.skq.user_event(token, fl) {
            Ok(ev) => {
                let b = into_handle(UserBox {
                    magic: UserBox::MAGIC,
                    ev,
                });
                // SAFETY: non-NULL and writable.
                unsafe { out.write(b as *mut skq_user_event_t) };
                SKQ_OK
            }
            Err(e) => io_code(&e),
        }
    })
}

/// Triggers a user event (any thread).
///
/// # Safety
/// `ev` is NULL or a live user-event handle.
#[no_mangle]
pub unsafe extern "C" fn skq_user_event_notify(ev: *mut skq_user_event_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        match unsafe { handle::<UserBox>(ev.cast()) } {
            Some(u) => match u.ev.notify() {
                Ok(()) => SKQ_OK,
                Err(e) => io_code(&e),
            },
            None => fail(SKQ_EBADHANDLE, "not an skq_user_event_t"),
        }
    })
}

/// Resets a user event's counter (call from its handler); stores how many
/// notifications the delivery folded in `*out_count` if it is not NULL.
///
/// # Safety
/// `ev` is NULL or a live user-event handle; `out_count` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_user_event_reset(
    ev: *mut skq_user_event_t,
    out_count: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        match unsafe { handle::<UserBox>(ev.cast()) } {
            Some(u) => {
                let n = u.ev.reset();
                if !out_count.is_null() {
                    // SAFETY: non-NULL and writable.
                    unsafe { out_count.write(n) };
                }
                SKQ_OK
            }
            None => fail(SKQ_EBADHANDLE, "not an skq_user_event_t"),
        }
    })
}

/// Stores a user event's source id in `*out_id`.
///
/// # Safety
/// `ev` is NULL or a live user-event handle; `out_id` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_user_event_source(
    ev: *mut skq_user_event_t,
    out_id: *mut u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let Some(u) = (unsafe { handle::<UserBox>(ev.cast()) }) else {
            return fail(SKQ_EBADHANDLE, "not an skq_user_event_t");
        };
        if out_id.is_null() {
            return fail(SKQ_EINVAL, "out_id is NULL");
        }
        // SAFETY: non-NULL and writable.
        unsafe { out_id.write(u.ev.source().as_u64()) };
        SKQ_OK
    })
}

/// Deregisters a user event and closes its eventfd.
///
/// # Safety
/// `ev` is NULL or a handle from skq_user_event_new.
#[no_mangle]
pub unsafe extern "C" fn skq_user_event_free(ev: *mut skq_user_event_t) -> c_int {
    guard(|| {
        // SAFETY: NULL or from skq_user_event_new (possibly freed: checked).
        match unsafe { take_handle::<UserBox>(ev.cast()) } {
            Some(b) => {
                drop(b);
                SKQ_OK
            }
            None => fail(SKQ_EBADHANDLE, "not a live skq_user_event_t"),
        }
    })
}

/// Takes worker `id`'s handle (once per worker, for the thread that will
/// run it). SKQ_ENOWORKER if `id` is out of range, SKQ_EBUSY if taken.
///
/// # Safety
/// `skq` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_worker_new(
    skq: *mut skq_t,
    id: u32,
    out: *mut *mut skq_worker_t,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        if out.is_null() {
            return fail(SKQ_EINVAL, "out is NULL");
        }
        let Some(flag) = inst.taken.get(id as usize) else {
            return fail(SKQ_ENOWORKER, format!("worker {id} out of range"));
        };
        if flag.swap(true, Ordering::AcqRel) {
            return fail(SKQ_EBUSY, format!("worker {id} already taken"));
        }
        let w = into_handle(WorkerBox {
            magic: WorkerBox::MAGIC,
            worker: inst.skq.worker(id as usize),
            events: Events::with_capacity(64),
        });
        // SAFETY: non-NULL and writable.
        unsafe { out.write(w as *mut skq_worker_t) };
        SKQ_OK
    })
}

/// Borrows a worker handle mutably.
///
/// # Safety
/// As [`crate::handle_mut`].
unsafe fn worker<'a>(w: *mut skq_worker_t) -> Result<&'a mut WorkerBox, c_int> {
    // SAFETY: forwarded.
    unsafe { handle_mut::<WorkerBox>(w.cast()) }
        .ok_or_else(|| fail(SKQ_EBADHANDLE, "not an skq_worker_t"))
}

/// Releases the worker's previous batch and waits for the next: fills at
/// most `cap` events into `events` and returns their number, 0 on timeout
/// or after skq_shutdown, or a negative SKQ_E* code. `timeout_ns` < 0 waits
/// without limit.
///
/// # Safety
/// `w` is NULL or a live worker handle used by this thread only; `events`
/// is NULL or writable for `cap` events.
#[no_mangle]
pub unsafe extern "C" fn skq_worker_wait(
    w: *mut skq_worker_t,
    events: *mut skq_event,
    cap: usize,
    timeout_ns: i64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let wb = match unsafe { worker(w) } {
            Ok(w) => w,
            Err(c) => return c,
        };
        if events.is_null() || cap == 0 || cap > c_int::MAX as usize {
            return fail(SKQ_EINVAL, "events is NULL or cap is 0");
        }
        if wb.events.capacity() != cap {
            wb.events = Events::with_capacity(cap);
        }
        let timeout = (timeout_ns >= 0).then(|| Duration::from_nanos(timeout_ns as u64));
        match wb.worker.wait(&mut wb.events, timeout) {
            Ok(n) => {
                // SAFETY: writable for `cap` ≥ n events.
                let out = unsafe { std::slice::from_raw_parts_mut(events, n) };
                for (o, e) in out.iter_mut().zip(wb.events.iter()) {
                    *o = skq_event {
                        token: e.token,
                        source: e.source.as_u64(),
                        ready: e.ready.0 as u32,
                        high: e.high as u32,
                    };
                }
                n as c_int
            }
            Err(e) => io_code(&e),
        }
    })
}

/// Releases the worker's previous batch now, before its next wait.
///
/// # Safety
/// `w` is NULL or a live worker handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn skq_worker_release(w: *mut skq_worker_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        match unsafe { worker(w) } {
            Ok(wb) => {
                wb.worker.release();
                SKQ_OK
            }
            Err(c) => c,
        }
    })
}

/// Says the handler of `ev` (from this worker's last wait) stopped before
/// EAGAIN: the source is redelivered after release even without new
/// readiness.
///
/// # Safety
/// `w` is NULL or a live worker handle used by this thread only; `ev` NULL
/// or a valid skq_event.
#[no_mangle]
pub unsafe extern "C" fn skq_worker_still_ready(
    w: *mut skq_worker_t,
    ev: *const skq_event,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let wb = match unsafe { worker(w) } {
            Ok(w) => w,
            Err(c) => return c,
        };
        if ev.is_null() {
            return fail(SKQ_EINVAL, "ev is NULL");
        }
        // SAFETY: non-NULL and valid.
        let ev = unsafe { &*ev };
        if ev.source as u32 as usize >= wb.worker.skq().config().capacity {
            return fail(SKQ_ESTALE, "source id out of range");
        }
        let e = Event {
            token: ev.token,
            source: SourceId::from_u64(ev.source),
            ready: Ready(ev.ready as u8),
            high: ev.high != 0,
        };
        wb.worker.still_ready(&e);
        SKQ_OK
    })
}

/// A cooperative checkpoint for a long handler (docs/ELASTIC.md), called on
/// a worker's thread between pieces of its work: unless another worker
/// polls this worker's readiness set and nothing is queued on it, it
/// harvests the set without blocking, then hands this worker's queued,
/// unpinned events to other workers (waking idle ones). The source being
/// handled stays with the caller. With a readiness set per worker
/// (`skq_config.poll_groups`) this keeps readiness that arrives for a busy
/// worker from waiting until it is back. Returns the events handed on; 0
/// off a worker's thread (a thread that never waited on a worker) or when
/// nothing moved.
#[no_mangle]
pub extern "C" fn skq_checkpoint() -> c_int {
    guard(|| c_int::try_from(skq_rt::checkpoint()).unwrap_or(c_int::MAX))
}

/// This worker's index.
///
/// # Safety
/// `w` is NULL or a live worker handle.
#[no_mangle]
pub unsafe extern "C" fn skq_worker_id(w: *mut skq_worker_t) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        match unsafe { worker(w) } {
            Ok(wb) => wb.worker.id() as c_int,
            Err(c) => c,
        }
    })
}

/// The worker leaves the pool and its handle is freed: queued and in-flight
/// work goes to other workers; pinned sources are unpinned. Fills `*report`
/// if it is not NULL.
///
/// # Safety
/// `w` is NULL or a handle from skq_worker_new, not in use by another
/// thread; `report` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_worker_exit(
    w: *mut skq_worker_t,
    report: *mut skq_exit_report,
) -> c_int {
    guard(|| {
        // SAFETY: NULL or from skq_worker_new (possibly exited: checked).
        let Some(b) = (unsafe { take_handle::<WorkerBox>(w.cast()) }) else {
            return fail(SKQ_EBADHANDLE, "not a live skq_worker_t");
        };
        let r = b.worker.exit();
        if !report.is_null() {
            // SAFETY: non-NULL and writable.
            unsafe {
                report.write(skq_exit_report {
                    rescheduled: r.rescheduled as u64,
                    unpinned: r.unpinned.len() as u64,
                    stranded: r.stranded.len() as u64,
                })
            };
        }
        SKQ_OK
    })
}

/// Pins the calling thread to the CPU assigned to worker `worker`; stores
/// the CPU in `*out_cpu` if it is not NULL.
///
/// # Safety
/// `skq` is NULL or a live handle; `out_cpu` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_pin_current_thread(
    skq: *mut skq_t,
    worker: u32,
    out_cpu: *mut u32,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        if worker as usize >= inst.taken.len() {
            return fail(SKQ_ENOWORKER, format!("worker {worker} out of range"));
        }
        match inst.skq.pin_current_thread(worker as usize) {
            Ok(cpu) => {
                if !out_cpu.is_null() {
                    // SAFETY: non-NULL and writable.
                    unsafe { out_cpu.write(cpu) };
                }
                SKQ_OK
            }
            Err(e) => io_code(&e),
        }
    })
}

/// Copies per-worker counters into `out` (at most `cap` entries) and
/// returns the number of workers (which may exceed `cap`). `out` may be NULL
/// when `cap` is 0, to ask for the count.
///
/// # Safety
/// `skq` is NULL or a live handle; `out` writable for `cap` entries.
#[no_mangle]
pub unsafe extern "C" fn skq_stats(
    skq: *mut skq_t,
    out: *mut skq_worker_stats,
    cap: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        if out.is_null() && cap > 0 {
            return fail(SKQ_EINVAL, "out is NULL with cap > 0");
        }
        let stats = inst.skq.stats();
        for (i, s) in stats.iter().take(cap).enumerate() {
            let o = skq_worker_stats {
                delivered: s.delivered,
                steals_made: s.steals_made,
                steals_suffered: s.steals_suffered,
                migrations_cpu: s.migrations.cpu_follow,
                migrations_balance: s.migrations.balance,
                migrations_steal: s.migrations.steal,
                migrations_exit: s.migrations.exit,
                wakeups: s.wakeups,
                high_served: s.high_served,
                busy_ns: s.busy_ns,
                queued: s.queued as u64,
                t_avg_ns: s.t_avg_ns,
                exited: s.exited as u32,
            };
            // SAFETY: i < cap; writable for `cap` entries.
            unsafe { out.add(i).write(o) };
        }
        stats.len() as c_int
    })
}

/// Stores the configuration the instance was built with in `*out`, with
/// every choice left to the library made: `poll_groups` is the number of
/// epoll sets built (never 0), whatever skq_config.poll_groups asked for.
///
/// # Safety
/// `skq` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_get_config(skq: *mut skq_t, out: *mut skq_config) -> c_int {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { read_into(skq, out, |inst| c_config_of(inst.skq.config())) }
}

/// Stores (max − min) / max of per-worker processing time in `*out`.
///
/// # Safety
/// `skq` is NULL or a live handle; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn skq_imbalance(skq: *mut skq_t, out: *mut f64) -> c_int {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { read_into(skq, out, |inst| inst.skq.imbalance()) }
}

/// Stores what `read` takes from a live instance in `*out`: the body of the
/// instance's read-only getters.
///
/// # Safety
/// `skq` is NULL or a live handle; `out` NULL or writable.
unsafe fn read_into<T>(skq: *mut skq_t, out: *mut T, read: impl FnOnce(&Instance) -> T) -> c_int {
    guard(|| {
        // SAFETY: the caller's guarantee.
        let inst = match unsafe { instance(skq) } {
            Ok(i) => i,
            Err(c) => return c,
        };
        if out.is_null() {
            return fail(SKQ_EINVAL, "out is NULL");
        }
        let v = read(inst);
        // SAFETY: non-NULL and writable.
        unsafe { out.write(v) };
        SKQ_OK
    })
}
