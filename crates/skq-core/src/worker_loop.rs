//! The worker loop as a sans-I/O state machine: what a worker does next.
//!
//! A driver (skq-rt on Linux, skq-sim in virtual time) runs each worker's
//! `wait` as a conversation with this module. It opens the call with
//! [`Scheduler::begin_wait`], then repeatedly asks [`Scheduler::next_step`]
//! what to do, does it, and says what it did ([`Done`]) in the next call:
//!
//! | [`Step`]          | the driver                                               | then reports        |
//! |-------------------|----------------------------------------------------------|---------------------|
//! | `Harvest`         | polls the readiness set without blocking, activates      | `Done::Harvested`   |
//! | `Deliver(n)`      | returns the `n` events now in `out`                       | (the call ends)     |
//! | `Poll(t)`         | blocks in the readiness set for at most `t` ns, activates | `Done::Polled`      |
//! | `Park(t)`         | sleeps on the worker's own doorbell for at most `t` ns    | `Done::Woke`        |
//! | `Surplus`         | sleeps until [`Scheduler::wanted`] or shutdown            | `Done::Rejoined`    |
//! | `Wake`            | nothing more than the rule below                          | `Done::Woke`        |
//! | `Return`          | returns no events (deadline passed, or shut down)         | (the call ends)     |
//!
//! **The one rule for drivers:** before executing any step, wake every worker
//! the context owes a wake-up (`WorkerCtx::drain_wakes_into`), each by the
//! means [`Scheduler::wake_via`] names. `Wake` is returned only to have that
//! done before the worker sleeps. Nothing else is decided by the driver, so
//! the runtime and the simulator execute the same loop.
//!
//! ## Who polls
//!
//! With [`Readiness::Polled`] (readiness waits in a kernel set until someone
//! harvests it), at most `Config::pollers` idle workers, *the pollers*,
//! block in the set at once (0: every idle worker of the group); other idle
//! workers park on their own doorbells (followers). A poller that wakes
//! with work of its own and leaves the set without a poller hands the role
//! on: it owes a wake-up to one parked follower ([`Scheduler::follower`]).
//! With one poller (leader/follower) that hand-over is a second wake-up per
//! request at low load; with several, another poller is normally still
//! blocked in the set, the kernel wakes one of them per readiness, and the
//! woken one keeps the event when the policy allows (`policy.rs`; the
//! driver activates through [`Scheduler::activate_by`] and takes at most
//! [`WaitCall::poll_max`] events per blocking poll, so that a burst wakes
//! several pollers rather than one; in sets of more than
//! `Config::batch_polls_above` workers, only while events are long). A
//! worker about to deliver while nobody polls harvests on the way (one at a
//! time), so readiness is never stuck behind busy workers where an idle
//! worker could not reach it: with a cap
//! on pollers, several sets, elastic workers parked or high-priority
//! sources. Otherwise ([`Scheduler::kernel_fifo`]: one set that every idle
//! worker polls) readiness nobody polls for stays in the kernel's list, one
//! FIFO over all flows, for the first worker that finishes its queue, as in
//! a stock shared-epoll server. With [`Readiness::Pushed`] (activations come from
//! outside, as from SKQ in the kernel) there is no poller: idle workers only
//! park.
//!
//! With `Config::poll_groups` = G > 1 there are G readiness sets, each
//! harvested only by its own group of workers (contiguous worker indices):
//! one poller per group, followers promoted within the group, harvest on
//! the way of the own group's set. A source lives in one set (the driver
//! decides which, by its flow's CPU); work moves between groups only as
//! queue entries (stealing), never between sets. skq-rt keeps one epoll
//! set per group; the simulator models G sets (`skq sim --poll-groups`).
//! With G = workers every worker polls its own set and the kernel wakes the
//! worker that owns the readiness directly: no poller to hand over, one
//! hop per wake-up.
//!
//! ## The kept event
//!
//! A poller that takes one event per blocking poll (`poll_max` = 1: several
//! pollers per set) and keeps what it harvests (the policy chose it, still
//! idle, `policy.rs`) would push that event onto its own empty queue and
//! pop it straight back. Instead it opens its *hand* when it goes to poll;
//! the one activation that claims its idle bit puts the source, QUEUED on
//! no queue, there ([`Scheduler::activate_harvested`]; only the worker's
//! own thread touches its hand); `Done::Polled` shuts the hand and delivers
//! the kept event first, then whatever the queue holds, in the same step.
//! Everything else an activation does stays: its routing, its accounting,
//! the claim of the idle bit that makes later activations of the harvest
//! look elsewhere, and the hand-over to a follower. A lone worker (one
//! worker in all, whose poll takes the whole batch) keeps up to
//! `HAND_ROOM` events of its harvest the same way: the first claims its
//! idle bit, the rest follow it into the hand, and what the batch cap
//! (`rtfreq`) leaves out of the delivery goes onto its queue. High-priority
//! sources, `Policy::Shared`, a lone worker once a source is high priority
//! (its queued high-priority events must go first) and polls of several
//! workers that take several events keep the queue. A source in the hand
//! cannot be stolen; it is delivered in the step that ends the poll. In the
//! main job's setting this took about 200 of the ~3,660 user-space
//! instructions hybrid spends per reply (callgrind; docs/ARCHITECTURE.md,
//! "Where hybrid's extra CPU per reply goes").
//!
//! ## Guarantees (checked by loom in `tests/loom.rs`)
//!
//! 1. A worker sleeps (`Poll`/`Park`) only after `prepare_park` found its
//!    queues empty with its idle bit set under their locks; a push that
//!    races with it names it for a wake-up (`sched.rs`). No lost wake-up.
//! 2. A follower sleeps only while a poller exists: it sets its sleeper bit,
//!    then checks the pollers (both SeqCst); the last poller leaving with
//!    work reads the sleeper bits after clearing its bit (SeqCst), so either
//!    the follower sees no poller and loops, or the poller sees the follower
//!    and promotes it.
//! 3. `wake_via` names the set's way in only for a worker blocked in the set
//!    at that moment: the set's doorbell with one poller, a doorbell of that
//!    worker alone with several ([`WakeVia::Targeted`]: it stays pending
//!    while the worker runs and ends its next blocking poll at once). A
//!    wake-up sent as a worker leaves the set wakes its next poll once,
//!    spuriously, which is harmless.

use crate::config::Policy;
use crate::sched::Scheduler;
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use crate::types::{Event, Nanos, SourceId, WorkerId};
use crate::worker::{Counters, WorkerCtx, HAND_ROOM};

/// Shortest average event (ns, the harvesting worker's `t_avg`) for which
/// readiness nobody polls for is left in the kernel's FIFO
/// ([`Scheduler::kernel_fifo`]). Below it the harvest on the way stays: with
/// µs-scale events at saturation, workers that leave readiness in the
/// kernel fetch it one event per blocking poll, and each event costs a
/// system call (and, when its home is busy, a push and a steal back), while
/// the wait behind a busy worker's current event is short. `skq pipes`
/// (2 workers, 5 µs spun, 2 runs) lost 3.6% of hybrid's events per second
/// without this bound (0.965–0.969 → 0.929–0.933 of epoll-1to1,
/// `docs/results/pipes-2026-11-28.txt`). 20 µs is about what a wake-up and
/// hand-over cost on these VMs (`Config::promote_min_ns`'s suggestion).
pub const KERNEL_FIFO_MIN_NS: f64 = 20_000.0;

/// Most events a lone worker (`Config::workers` = 1) delivers from its
/// queue before it harvests on the way again. With nobody to hand
/// readiness to, the harvest before every batch only appends to the back
/// of the same queue what the blocking poll after the queue runs dry would
/// have found, in the same order: an `epoll_wait` per batch for nothing
/// (`skq-async`'s hyper server made 0.59–0.89 per reply, tokio 0.22–0.31;
/// `scripts/bench/hyper-profile.sh`, docs/ASYNC.md).
/// The bound keeps a source that is redelivered again and again (it had
/// more input than one event's share) from holding new readiness in the
/// kernel for longer than this many events; tokio checks its driver every
/// 61 tasks for the same reason. High-priority sources keep the harvest
/// before every batch (their readiness must not wait behind regular work).
pub const LONE_HARVEST_EVERY: usize = 32;

/// The default of `Config::batch_polls_above`: most workers on one
/// readiness set for which every blocking poll takes one event whatever the
/// events' length (with several pollers per set).
/// Beyond it a poller whose events are short (its `t_avg` under
/// [`KERNEL_FIFO_MIN_NS`]) takes the whole batch and hands what it does not
/// keep to other workers through the policy. One event per poll spreads a
/// burst over several pollers, each woken by the kernel, which at low load
/// costs less than a harvester's targeted wake-ups; but every poll takes
/// the set's lock, and with µs-scale events the set's readiness rate grows
/// with its workers until that lock is the bottleneck. In the simulator
/// (`scripts/bench/poll-batch-sim.sh`, `docs/ARCHITECTURE.md`, "Several
/// pollers at many cores"), with each poll holding the lock 500 ns plus
/// 50 ns per source, one shared set of 64 workers at 10 µs service met the
/// SLO up to 0.25–0.26 of capacity with one-event polls and ≥ 0.90 with
/// batches; at 16 to 64 workers batches cost 4.7–5.7% more CPU per request
/// at load 0.2 (except where the lock saturates: 24–26% less at 64 workers)
/// and 5–19% less at 0.8. At 8 workers the model's max load moves
/// both ways (bimodal-1 −0.02 to −0.04, exponential with a dear lock +0.16),
/// and on the runtime the batch cost 0.22 targeted wake-ups per reply (the
/// cache at two workers, `docs/KV-PROFILE.md`), so sets of up to 8 keep one
/// event per poll.
pub const ONE_EVENT_POLLS_MAX_SET: u32 = 8;

/// What the driver must do next (see the module table).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Poll the readiness set without blocking and activate what it holds.
    Harvest,
    /// Return this many events (already in `out`).
    Deliver(usize),
    /// Block in the readiness set for at most this long (`None`: no limit).
    Poll(Option<Nanos>),
    /// Sleep on the worker's own doorbell for at most this long.
    Park(Option<Nanos>),
    /// The worker is above the elastic target and left the pool: sleep
    /// until [`Scheduler::wanted`] says it may run again, or shutdown.
    Surplus,
    /// Wake the owed workers (the driver's one rule) before going on.
    Wake,
    /// Return no events: the deadline passed or the instance shut down.
    Return,
}

/// What the driver did since the previous step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// Nothing yet: the first `next_step` of a call.
    Begin,
    /// Executed `Harvest`.
    Harvested,
    /// Came back from `Poll` (readiness, doorbell, or timeout).
    Polled,
    /// Came back from `Park` (woken or timed out), or executed `Wake`.
    Woke,
    /// Came back from `Surplus`.
    Rejoined,
}

/// How readiness reaches the scheduler, fixed for the driver's lifetime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Readiness {
    /// It waits in a kernel set until harvested (epoll): leader/follower.
    #[default]
    Polled,
    /// Activations are pushed from outside as they happen: no poller.
    Pushed,
}

/// How to wake a sleeping worker (see [`Scheduler::wake_via`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeVia {
    /// It is the set's one poller: ring the readiness set's doorbell.
    Doorbell,
    /// It blocks in the set beside other pollers: wake that thread alone,
    /// with a wake-up that stays pending until its next blocking poll if it
    /// is not blocked yet (skq-rt: a thread-directed signal that ends only
    /// the thread's blocking poll, `skq_sys::signal`).
    Targeted,
    /// Signal its own doorbell (parker).
    Parker,
}

/// One `wait` call in progress, owned by the driver.
#[derive(Clone, Debug)]
pub struct WaitCall {
    deadline: Option<Nanos>,
    readiness: Readiness,
    /// This call harvested already (as the poller, or before its fill with
    /// high-priority sources): no harvest on the way.
    harvested: bool,
    /// Events filled and waiting for the on-the-way harvest to finish.
    ready: usize,
    /// This worker's sleeper bit is set (it is parked as a follower).
    follower: bool,
    /// This worker holds the harvesting flag.
    harvesting: bool,
    surplus: bool,
    /// Sources this call stole (they are the first events it delivers).
    stolen: usize,
    /// Most events the current `Poll` should take ([`WaitCall::poll_max`]).
    poll_max: usize,
}

impl WaitCall {
    /// Sources this call obtained by stealing; they are the first events
    /// of its delivery (a thief takes them to the front of its queue).
    pub fn stolen(&self) -> usize {
        self.stolen
    }

    /// The deadline of this call, if any.
    pub fn deadline(&self) -> Option<Nanos> {
        self.deadline
    }

    /// Most events the `Step::Poll` just returned should take from the
    /// set: one when several workers may block in it, no limit with one
    /// poller per set or a single worker. Readiness arriving together then wakes several
    /// pollers (the kernel wakes one per readiness) rather than one that
    /// must wake the others, and readiness nobody polls for stays in the
    /// kernel's list, in arrival order, for the first worker to come back,
    /// instead of being queued behind busy workers. Exceptions: the
    /// set's only poller takes the whole batch while elastic workers are
    /// parked (target below the pool), because the resource manager sees
    /// a backlog only in the core's queues, and a backlog left in the
    /// kernel would not call the parked workers back; every poller takes it
    /// once a source is high priority; and a poller of a set of more than
    /// `Config::batch_polls_above` workers takes it while its events are
    /// short, so that the set's lock is not taken once per event.
    pub fn poll_max(&self) -> usize {
        self.poll_max
    }
}

/// One readiness set and the workers that harvest it
/// ([`crate::Config::poll_groups`]).
struct Group {
    /// Bit w: worker w blocks (or is about to) in this group's set. Read by
    /// every waker (`wake_via`) and written by each poller twice per sleep.
    pollers: crossbeam_utils::CachePadded<AtomicU64>,
    /// Held by the worker doing a non-blocking harvest of this set.
    harvesting: AtomicBool,
    /// Bit w: worker w belongs to this group.
    members: u64,
    /// How many workers belong to it (`members`' count, kept so that the
    /// poll path does not count bits: without `popcnt` in the baseline
    /// x86-64 target a count is a dozen instructions).
    size: u32,
}

/// The loop's shared state (part of the [`Scheduler`]).
pub(crate) struct LoopShared {
    groups: Box<[Group]>,
    /// Most pollers per set (`Config::pollers`; 0 = no limit).
    cap: u32,
    /// Worker → its group.
    group_of: Box<[usize]>,
    /// Bit w: worker w is parked as a follower.
    sleepers: AtomicU64,
    shutdown: AtomicBool,
    /// Workers `0..target` should run (elastic); all by default.
    target: AtomicUsize,
    /// Some source was ever registered or set high priority.
    prioritized: AtomicBool,
}

impl Group {
    /// Takes a place among the set's pollers for `me`, unless `cap` are
    /// there already (`u32::MAX`: no limit, and no count); returns the
    /// others that were there (bit w: worker w).
    fn join(&self, me: WorkerId, cap: u32) -> Option<u64> {
        let bit = 1u64 << me;
        let mut m = self.pollers.load(Ordering::SeqCst);
        loop {
            if cap != u32::MAX && m.count_ones() >= cap {
                return None;
            }
            match self
                .pollers
                .compare_exchange(m, m | bit, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Some(m & !bit),
                Err(x) => m = x,
            }
        }
    }

    /// Gives `me`'s place back; true if it held one and the set is left
    /// without a poller.
    fn leave(&self, me: WorkerId) -> bool {
        let bit = 1u64 << me;
        let before = self.pollers.fetch_and(!bit, Ordering::SeqCst);
        before & bit != 0 && before & !bit == 0
    }

    fn has_poller(&self) -> bool {
        self.pollers.load(Ordering::SeqCst) != 0
    }
}

impl LoopShared {
    /// `groups` readiness sets over `workers` workers: contiguous blocks of
    /// worker indices (the spread order puts neighbours on nearby CPUs).
    pub(crate) fn new(workers: usize, groups: usize, pollers: usize) -> LoopShared {
        let groups = groups.clamp(1, workers.max(1));
        let group_of: Box<[usize]> = (0..workers).map(|w| w * groups / workers).collect();
        LoopShared {
            groups: (0..groups)
                .map(|g| Group {
                    pollers: crossbeam_utils::CachePadded::new(AtomicU64::new(0)),
                    harvesting: AtomicBool::new(false),
                    members: group_of
                        .iter()
                        .enumerate()
                        .filter(|&(_, &x)| x == g)
                        .fold(0u64, |m, (w, _)| m | 1u64 << w),
                    size: group_of.iter().filter(|&&x| x == g).count() as u32,
                })
                .collect(),
            group_of,
            cap: if pollers == 0 {
                u32::MAX
            } else {
                pollers as u32
            },
            sleepers: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            target: AtomicUsize::new(workers),
            prioritized: AtomicBool::new(false),
        }
    }
}

impl Scheduler {
    /// Opens a `wait` of worker `ctx` at `now`: releases its previous batch
    /// (redeliveries owe wake-ups). `deadline` is absolute (same clock).
    pub fn begin_wait(
        &self,
        ctx: &mut WorkerCtx,
        now: Nanos,
        deadline: Option<Nanos>,
        readiness: Readiness,
    ) -> WaitCall {
        self.release(ctx, now);
        WaitCall {
            deadline,
            readiness,
            harvested: false,
            ready: 0,
            follower: false,
            harvesting: false,
            surplus: false,
            stolen: 0,
            poll_max: usize::MAX,
        }
    }

    /// The next step of `call` after `done`, at `now`. Fills `out` (cleared
    /// first on a delivery) with at most `max` events.
    pub fn next_step(
        &self,
        ctx: &mut WorkerCtx,
        call: &mut WaitCall,
        done: Done,
        now: Nanos,
        out: &mut Vec<Event>,
        max: usize,
    ) -> Step {
        let me = ctx.id;
        let l = &self.lp;
        let g = &l.groups[l.group_of[me]];
        Counters::bump(&self.workers[me].counters.steps, 1);
        match done {
            Done::Begin => {}
            Done::Harvested => {
                // The events filled before the harvest go out now.
                ctx.unharvested = call.ready;
                if call.harvesting {
                    call.harvesting = false;
                    g.harvesting.store(false, Ordering::Release);
                }
                if call.ready > 0 {
                    let n = std::mem::take(&mut call.ready);
                    self.record_return(ctx, now, n);
                    return Step::Deliver(n);
                }
            }
            Done::Polled => {
                ctx.unharvested = 0;
                self.woke(me);
                let kept = self.close_hand(me);
                let last = g.leave(me);
                self.unpark(ctx);
                call.harvested = true;
                if last && (kept > 0 || self.has_work(me)) && self.worth_handing_over(me) {
                    // Leaving the set without a poller to work: a parked
                    // follower takes over polling.
                    if let Some(f) = self.follower(me) {
                        ctx.wakes.push(f);
                    }
                }
                // The kept events go out first, then what the queue holds,
                // as if they had been pushed onto the empty queue; what
                // the batch has no room for goes onto the queue. (A source
                // deregistered while kept is stale: it is skipped.)
                if kept > 0 {
                    out.clear();
                    call.stolen = 0;
                    let n = if kept == 1 {
                        // One of several pollers (or a lone worker's one
                        // event): the common case, kept lean.
                        if self.deliver(ctx, self.kept_id(me, 0), false, out) {
                            let room = if self.has_work(me) {
                                self.batch_cap(me, max).saturating_sub(1)
                            } else {
                                0
                            };
                            1 + self.fill(ctx, out, room)
                        } else {
                            0
                        }
                    } else {
                        self.deliver_kept(ctx, kept, max, out)
                    };
                    if n > 0 {
                        ctx.unharvested += n;
                        self.record_return(ctx, now, n);
                        return Step::Deliver(n);
                    }
                }
            }
            Done::Woke => {
                if call.follower {
                    call.follower = false;
                    self.woke(me);
                    l.sleepers.fetch_and(!(1u64 << me), Ordering::SeqCst);
                    self.unpark(ctx);
                }
            }
            Done::Rejoined => {
                if call.surplus {
                    call.surplus = false;
                    self.rejoin(ctx);
                }
            }
        }
        let steal = self.cfg.steal && self.cfg.workers > 1;
        loop {
            if self.is_shut_down() {
                self.record_return(ctx, now, 0);
                return Step::Return;
            }
            if me >= l.target.load(Ordering::Relaxed) {
                if let Ok(report) = self.park_worker(ctx, now) {
                    ctx.wakes.extend_from_slice(&report.wakes);
                    // If it was the only one awake, somebody must poll now.
                    if let Some(f) = self.follower(me) {
                        ctx.wakes.push(f);
                    }
                    call.surplus = true;
                    return Step::Surplus;
                }
            }
            // With high-priority sources, a worker about to work through
            // its queue while nobody blocks in the set harvests *before*
            // it fills: high-priority readiness then reaches it (the
            // harvester takes it, `policy.rs`) ahead of the regular events
            // it would otherwise deliver first. The harvest after the fill
            // below would leave it behind them.
            if call.readiness == Readiness::Polled
                && !call.harvested
                && l.prioritized.load(Ordering::Relaxed)
                && self.has_work(me)
                && g.pollers.load(Ordering::Acquire) == 0
                && !g.harvesting.swap(true, Ordering::AcqRel)
            {
                call.harvesting = true;
                call.harvested = true;
                call.ready = 0;
                return Step::Harvest;
            }
            out.clear();
            call.stolen = 0;
            let mut n = self.fill(ctx, out, max);
            // Whether this pass looked for work to steal (a complete look
            // lets `prepare_park` check that nothing was pushed since).
            let mut looked = false;
            if n == 0
                && steal
                && self.fifo_holds(me)
                && self.searching.load(Ordering::Relaxed) != me as u64 + 1
            {
                // The kernel's list is the queue here: no look at the
                // others' queues on the way to sleep. A worker woken as the
                // thief still steals: its waker saw an entry behind a busy
                // worker outside this regime (one whose events are short,
                // or not yet timed).
            } else if n == 0 && steal {
                looked = true;
                let got = self.steal(ctx);
                if got > 0 {
                    n = self.fill(ctx, out, max);
                    call.stolen = got.min(n);
                }
            }
            if n > 0 {
                // About to work while nobody blocks in the set: harvest on
                // the way (one harvester at a time), so readiness that
                // arrived meanwhile is scheduled while this batch runs.
                // Skipped when this call just harvested as the poller, and
                // when the kernel's list is the better queue (`kernel_fifo`).
                // (Checked after the pollers: at low load a poller is
                // nearly always there and the rest is not read at all.)
                if call.readiness == Readiness::Polled
                    && !call.harvested
                    && g.pollers.load(Ordering::Acquire) == 0
                    && !self.fifo_holds(me)
                    && !self.lone_may_wait(ctx)
                    && !g.harvesting.swap(true, Ordering::AcqRel)
                {
                    call.harvesting = true;
                    call.ready = n;
                    return Step::Harvest;
                }
                ctx.unharvested += n;
                self.record_return(ctx, now, n);
                return Step::Deliver(n);
            }
            if call.deadline.is_some_and(|d| now >= d) {
                self.record_return(ctx, now, 0);
                return Step::Return;
            }
            if ctx.has_wakes() {
                return Step::Wake;
            }
            if !self.prepare_park_after(ctx, looked) {
                continue;
            }
            let mut sleep = call.deadline.map(|d| d - now);
            // The optional retry timer, only while another worker is busy:
            // parked workers' queues stay empty (a push wakes its target).
            let retry = self.cfg.steal_retry_ns;
            if looked && retry > 0 && self.others_busy(me) {
                sleep = Some(sleep.map_or(retry, |s| s.min(retry)));
            }
            if call.readiness == Readiness::Pushed {
                call.follower = true; // counted and cleared like a follower
                l.sleepers.fetch_or(1u64 << me, Ordering::SeqCst);
                return Step::Park(sleep);
            }
            if let Some(others) = g.join(me, l.cap) {
                let parked = l.target.load(Ordering::Relaxed) < self.cfg.workers;
                // A lone worker takes the whole batch: no other poller
                // could be woken for what it leaves in the set. So does
                // every poller once a source is high priority: the driver
                // activates high-priority readiness first, which it can
                // do only for what it takes (left in the kernel's list,
                // it would wait behind the regular readiness before it).
                // And so does a poller of a set of more than
                // `Config::batch_polls_above` workers whose events are short:
                // one event per poll would take the set's lock once per
                // event.
                call.poll_max = if l.cap == 1
                    || self.lone()
                    || (others == 0 && parked)
                    || (g.size as usize > self.cfg.batch_polls_above && self.short_events(me))
                    || l.prioritized.load(Ordering::Relaxed)
                {
                    usize::MAX
                } else {
                    1
                };
                // A push may have claimed this worker (cleared its idle bit)
                // after `prepare_park` and named it for a wake-up while it
                // was not polling yet: that wake-up went to its parker, not
                // to the set. So look at the bit now; the waker fences
                // before reading the pollers (`wake_via`), so either it sees
                // this worker polling or this worker sees the claim. (loom
                // found the lost wake-up without this check.)
                crate::sync::fence(Ordering::SeqCst);
                if self.idle.load(Ordering::SeqCst) & (1u64 << me) != 0 {
                    self.open_hand(me, call.poll_max);
                    return Step::Poll(sleep);
                }
                // Followers that parked meanwhile saw a poller: if it was
                // the only one, one of them takes over, since this worker
                // leaves to work.
                if g.leave(me) {
                    if let Some(f) = self.follower(me) {
                        ctx.wakes.push(f);
                    }
                }
                continue;
            }
            l.sleepers.fetch_or(1u64 << me, Ordering::SeqCst);
            // The pollers may have left after our attempt: re-check.
            if g.has_poller() && !self.is_shut_down() {
                call.follower = true;
                return Step::Park(sleep);
            }
            l.sleepers.fetch_and(!(1u64 << me), Ordering::SeqCst);
            self.unpark(ctx);
        }
    }

    /// Ends `call` after a failed step (a system call error): gives back
    /// whatever role the step held (harvester, poller, follower, surplus)
    /// so the other workers go on; the driver then reports the error.
    pub fn abort_wait(&self, ctx: &mut WorkerCtx, call: &mut WaitCall, now: Nanos) {
        let me = ctx.id;
        let l = &self.lp;
        let g = &l.groups[l.group_of[me]];
        // Kept by a harvest the driver then failed to report: queued on
        // this worker like any other activation.
        for i in 0..self.close_hand(me) {
            self.requeue_kept(me, self.kept_id(me, i));
        }
        if std::mem::take(&mut call.harvesting) {
            g.harvesting.store(false, Ordering::Release);
        }
        let held = g.pollers.load(Ordering::SeqCst) & (1u64 << me) != 0;
        if held {
            let last = g.leave(me);
            self.unpark(ctx);
            if last {
                if let Some(f) = self.follower(me) {
                    ctx.wakes.push(f);
                }
            }
        }
        if std::mem::take(&mut call.follower) {
            l.sleepers.fetch_and(!(1u64 << me), Ordering::SeqCst);
            self.unpark(ctx);
        }
        if std::mem::take(&mut call.surplus) {
            self.rejoin(ctx);
        }
        // Events filled before a failed harvest were never seen by the
        // application: they are redelivered after the next release.
        let n = std::mem::take(&mut call.ready);
        let mut i = 0;
        while n > 0 && i < ctx.batch.len() {
            let id = ctx.batch[i];
            self.still_ready(ctx, id);
            i += 1;
        }
        self.record_return(ctx, now, n);
    }

    /// How to wake worker `w` now: through the readiness set if it blocks
    /// there (the set's doorbell when it is the only poller the set may
    /// have, a targeted wake-up when there may be several), else through
    /// its own parker.
    pub fn wake_via(&self, w: WorkerId) -> WakeVia {
        // Pairs with the fence after a worker joins the pollers: the caller
        // cleared `w`'s idle bit (claimed it) before asking.
        crate::sync::fence(Ordering::SeqCst);
        let l = &self.lp;
        let g = &l.groups[l.group_of[w]];
        if g.pollers.load(Ordering::SeqCst) & (1u64 << w) == 0 {
            WakeVia::Parker
        } else if l.cap == 1 || g.size == 1 {
            WakeVia::Doorbell
        } else {
            WakeVia::Targeted
        }
    }

    /// Whether some readiness set may have several workers blocked in it
    /// at once, so that [`Scheduler::wake_via`] can answer
    /// [`WakeVia::Targeted`]: not with one poller per set
    /// (`Config::pollers` = 1), nor when every group has one worker (one
    /// worker in all, or as many poll groups as workers). Without it the
    /// driver needs no wake-up signal (skq-rt: where its polls must let
    /// the signal in with a mask, on other architectures than x86-64, each
    /// masked `epoll_pwait2` swaps the thread's mask twice under the
    /// kernel's signal lock, 0.12–0.14 µs a call on the VM of 2026-12-05).
    pub fn targeted_wakes(&self) -> bool {
        let l = &self.lp;
        l.cap != 1 && l.groups.iter().any(|g| g.size > 1)
    }

    /// A parked follower of `me`'s group, other than `me`, to take over
    /// polling its set, if any.
    pub fn follower(&self, me: WorkerId) -> Option<WorkerId> {
        let l = &self.lp;
        let members = l.groups[l.group_of[me]].members;
        let m = l.sleepers.load(Ordering::SeqCst) & members & !(1u64 << me);
        (m != 0).then(|| m.trailing_zeros() as usize)
    }

    /// The readiness set (poll group) worker `w` harvests
    /// ([`crate::Config::poll_groups`]; 0 with one set).
    pub fn poll_group(&self, w: WorkerId) -> usize {
        self.lp.group_of[w]
    }

    /// Readiness sets (poll groups).
    pub fn poll_groups(&self) -> usize {
        self.lp.groups.len()
    }

    /// Whether poll group `g` has a live worker (neither exited nor
    /// parked). A group without one has nobody to harvest its set: the
    /// driver must have another group harvest it meanwhile.
    pub fn group_live(&self, g: usize) -> bool {
        self.alive.load(Ordering::SeqCst) & self.lp.groups[g].members != 0
    }

    /// Whether some worker is blocked in `w`'s group's set now.
    pub fn polled(&self, w: WorkerId) -> bool {
        let l = &self.lp;
        l.groups[l.group_of[w]].pollers.load(Ordering::Relaxed) != 0
    }

    /// Whether a checkpoint of worker `w` has nothing to do: another
    /// worker blocks in `w`'s set (it takes what arrives there) and nothing
    /// is queued on `w`. The first test of every driver's checkpoint
    /// (skq-rt's `checkpoint()`, the simulator's), before
    /// [`Scheduler::try_harvest`] and [`Scheduler::checkpoint_as`].
    #[inline]
    pub fn nothing_to_checkpoint(&self, w: WorkerId) -> bool {
        self.polled(w) && self.queued(w) == 0
    }

    /// Takes the non-blocking harvest flag of `w`'s group's set (for
    /// checkpoints); false if it has a poller or someone else harvests it.
    /// Pair with [`Scheduler::end_harvest`].
    pub fn try_harvest(&self, w: WorkerId) -> bool {
        let l = &self.lp;
        !self.polled(w)
            && !l.groups[l.group_of[w]]
                .harvesting
                .swap(true, Ordering::AcqRel)
    }

    /// Gives the harvest flag of `w`'s group back.
    pub fn end_harvest(&self, w: WorkerId) {
        let l = &self.lp;
        l.groups[l.group_of[w]]
            .harvesting
            .store(false, Ordering::Release);
    }

    /// Makes every current and future wait return ([`Step::Return`]); the
    /// driver then wakes every sleeper.
    pub fn shut_down(&self) {
        self.lp.shutdown.store(true, Ordering::SeqCst);
    }

    /// Whether [`Scheduler::shut_down`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.lp.shutdown.load(Ordering::Acquire)
    }

    /// Sets the elastic target (workers `0..n` run, `n` clamped to
    /// 1..=workers) and returns the workers whose side of it changed: the
    /// driver wakes them (rising: parked ones rejoin; falling: idle ones
    /// notice).
    pub fn set_target(&self, n: usize) -> std::ops::Range<WorkerId> {
        let n = n.clamp(1, self.cfg.workers);
        let old = self.lp.target.swap(n, Ordering::SeqCst);
        old.min(n)..old.max(n)
    }

    /// Workers that should be active now.
    pub fn target(&self) -> usize {
        self.lp.target.load(Ordering::Relaxed)
    }

    /// Whether a [`Step::Surplus`] worker may run again.
    pub fn wanted(&self, w: WorkerId) -> bool {
        w < self.lp.target.load(Ordering::SeqCst) || self.is_shut_down()
    }

    /// Steps taken by every worker's loop so far ([`Scheduler::next_step`]
    /// calls): a driver that bypasses the loop leaves it at zero.
    pub fn loop_steps(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| w.counters.steps.load(Ordering::Relaxed))
            .sum()
    }

    /// Returns from sleeping (`Poll`, `Park`) of every worker so far.
    pub fn sleeps_ended(&self) -> u64 {
        self.workers
            .iter()
            .map(|w| w.counters.sleeps_ended.load(Ordering::Relaxed))
            .sum()
    }

    /// Whether readiness nobody polls for is best left in the kernel's
    /// list until a worker comes back to poll: one readiness set, every
    /// idle worker polling it, no elastic worker parked, no high-priority
    /// source (and, checked by the loop, events of at least
    /// [`KERNEL_FIFO_MIN_NS`] on average). Then the set's ready list is one
    /// FIFO over every flow, and
    /// the first worker to finish its queue takes the oldest readiness, as
    /// in a stock shared-epoll server. A harvest on the way would instead
    /// commit that readiness to the queues of busy workers, where it waits
    /// behind work of unknown length while another worker may finish first:
    /// at 0.85 load on bimodal-1 (8 emulated workers, 2 CPUs) hybrid's p99
    /// was 11.8–14.0 ms with the harvest and 8.8–10.4 ms without it, against
    /// 9.4–11.5 ms for epoll-shared (`docs/results/harvest-2026-11-28.txt`).
    ///
    /// The harvest stays where the readiness would otherwise be out of
    /// reach: with several sets (idle workers of other groups see only
    /// queue entries), with a cap on pollers (parked followers see nothing
    /// in the kernel), with elastic workers parked (the resource manager
    /// sees a backlog only in the core's queues), and once a source is
    /// high priority (its readiness must not wait behind regular work
    /// already queued: the harvest activates it first).
    pub fn kernel_fifo(&self) -> bool {
        let l = &self.lp;
        l.groups.len() == 1
            && l.cap == u32::MAX
            && l.target.load(Ordering::Relaxed) >= self.cfg.workers
            && !l.prioritized.load(Ordering::Relaxed)
    }

    /// Whether the kernel's list is worker `w`'s queue: [`Scheduler::kernel_fifo`]
    /// holds and `w`'s events take at least [`KERNEL_FIFO_MIN_NS`] on
    /// average. Then `w` neither harvests on the way nor looks for work to
    /// steal before it sleeps (unless it was woken as the thief), and no
    /// thief is woken for what is pushed behind it. In that regime every
    /// idle worker blocks in the one set and takes the oldest readiness,
    /// and a redelivery goes to the worker that released it when it is
    /// free (`policy.rs`), so the queues behind busy workers stay nearly
    /// empty; a thief woken for the rare entry there cost more than it
    /// saved (`docs/results/steal-fifo-2026-11-28.txt`).
    pub(crate) fn fifo_holds(&self, w: WorkerId) -> bool {
        self.workers[w].t_avg() >= KERNEL_FIFO_MIN_NS && self.kernel_fifo()
    }

    /// Whether `w`'s events are short: it has timed some, and they take
    /// less than [`KERNEL_FIFO_MIN_NS`] on average.
    fn short_events(&self, w: WorkerId) -> bool {
        let t = self.workers[w].t_avg();
        t > 0.0 && t < KERNEL_FIFO_MIN_NS
    }

    /// Whether any source was ever registered high priority, modified to
    /// it or set to it ([`Scheduler::kernel_fifo`]; a driver then activates
    /// high-priority readiness before the rest of a harvest).
    pub fn prioritized(&self) -> bool {
        self.lp.prioritized.load(Ordering::Relaxed)
    }

    /// Records that a source was given `flags` (register, modify, class).
    pub(crate) fn note_flags(&self, flags: crate::types::Flags) {
        if flags.contains(crate::types::Flags::HIGH_PRIORITY)
            && !self.lp.prioritized.load(Ordering::Relaxed)
        {
            self.lp.prioritized.store(true, Ordering::Relaxed);
        }
    }

    /// Whether the pool has a single worker: nobody to hand readiness to
    /// and nothing for a policy to choose between.
    pub(crate) fn lone(&self) -> bool {
        self.cfg.workers == 1
    }

    /// Whether a lone worker may skip the harvest on the way before its
    /// next batch: it is the only worker (nobody could take what the
    /// harvest finds), no source is high priority, and it delivered fewer
    /// than [`LONE_HARVEST_EVERY`] events since it last looked at the set.
    fn lone_may_wait(&self, ctx: &WorkerCtx) -> bool {
        self.lone()
            && ctx.unharvested < LONE_HARVEST_EVERY
            && !self.lp.prioritized.load(Ordering::Relaxed)
    }

    /// Shuts worker `me`'s hand at the end of its blocking poll; returns
    /// how many sources its harvest kept there ([`Scheduler::kept_id`]).
    #[inline]
    fn close_hand(&self, me: WorkerId) -> usize {
        let hand = &self.workers[me].hand;
        if hand.room.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        hand.room.store(0, Ordering::Relaxed);
        hand.len.load(Ordering::Relaxed)
    }

    /// The `i`-th source `me`'s last poll kept (below what
    /// [`Scheduler::close_hand`] returned).
    fn kept_id(&self, me: WorkerId, i: usize) -> SourceId {
        SourceId::from_u64(self.workers[me].hand.ids[i].load(Ordering::Relaxed))
    }

    /// Delivers the `kept` (> 1) sources of a lone worker's hand, in
    /// harvest order, up to the batch cap, then what its queue holds in the
    /// room left; what the cap leaves out of the hand goes onto the queue.
    /// Returns how many went out (0 if every kept source was stale: the
    /// caller then fills as usual).
    #[inline(never)]
    fn deliver_kept(
        &self,
        ctx: &mut WorkerCtx,
        kept: usize,
        max: usize,
        out: &mut Vec<Event>,
    ) -> usize {
        let me = ctx.id;
        let cap = self.batch_cap(me, max);
        let mut n = 0;
        for i in 0..kept {
            let id = self.kept_id(me, i);
            if n < cap {
                if self.deliver(ctx, id, false, out) {
                    n += 1;
                }
            } else {
                self.requeue_kept(me, id);
            }
        }
        if n == 0 {
            return 0;
        }
        let room = if self.has_work(me) { cap - n } else { 0 };
        n + self.fill(ctx, out, room)
    }

    /// A kept source that is not delivered from the hand goes onto `me`'s
    /// queue like any other activation (or back to IDLE with every worker
    /// gone).
    fn requeue_kept(&self, me: WorkerId, id: SourceId) {
        if !self.push(self.qidx(me), id, false, false) {
            self.park_orphan(id, self.slot_of(id));
        }
    }

    /// Opens `me`'s hand for the blocking poll it is about to make, taking
    /// at most `poll_max` events: one event for one of several pollers, up
    /// to [`HAND_ROOM`] for a lone worker. Not under `Policy::Shared` (its
    /// one queue is everybody's), nor for a lone worker once a source is
    /// high priority (its regular events would go out before the queued
    /// high-priority ones).
    fn open_hand(&self, me: WorkerId, poll_max: usize) {
        if self.cfg.policy == Policy::Shared {
            return;
        }
        let room = if poll_max == 1 {
            1
        } else if self.lone() && !self.lp.prioritized.load(Ordering::Relaxed) {
            HAND_ROOM
        } else {
            return;
        };
        let hand = &self.workers[me].hand;
        hand.len.store(0, Ordering::Relaxed);
        hand.room.store(room, Ordering::Relaxed);
    }

    /// Whether a poller leaving to work should wake a follower to poll:
    /// only when its events take long enough (`Config::promote_min_ns`)
    /// that a follower's wake-up pays for itself. Otherwise nobody polls
    /// while it works; every worker's next `wait` harvests on the way, so
    /// readiness waits at most about one event's processing.
    fn worth_handing_over(&self, me: WorkerId) -> bool {
        let min = self.cfg.promote_min_ns;
        min == 0 || self.workers[me].t_avg() >= min as f64
    }

    fn woke(&self, me: WorkerId) {
        Counters::bump(&self.workers[me].counters.sleeps_ended, 1);
    }
}
