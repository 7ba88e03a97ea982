//! The model of the real server, driven by the real scheduling core.
//!
//! Every policy decision is made by [`skq_core::Scheduler`]; this module only
//! plays the part of the Linux runtime and the application around it, in
//! virtual time:
//!
//! * the machine ([`CoreOpts::machine`], `machine.rs`) says which CPU each
//!   worker runs on and which CPU processes each connection's packets; both,
//!   and the topology, go to the core (`Config::worker_cpus`,
//!   `Config::cpu_topology`), which maps hints to workers itself;
//! * each client connection is one registered source (token = connection
//!   number); its incoming CPU comes from the machine (by default the CPU of
//!   worker `i % workers`) and, with [`CoreOpts::migrate_prob`], jumps to
//!   another CPU the machine's hints may come from; its *home* (for the
//!   cache-miss penalty) is the worker the core's hint mapping picks for it;
//! * an arrival appends the request to its connection's FIFO and calls
//!   `activate(id, READABLE, Some(cpu), now, rng)`; a returned wake target is
//!   woken after [`Overheads::wake_ns`];
//! * a worker whose `wait()` returned a batch processes its events in order.
//!   Reaching an event, it pays [`Overheads::event_ns`] (plus `steal_ns` if the
//!   event was stolen and `miss_ns` if the connection's home is another
//!   worker), then serves every request pending on the connection at that
//!   moment, up to [`CoreOpts::max_reads`], back to back; if more remained it
//!   calls `still_ready`. After the last event it opens a `wait` at its
//!   virtual time (`Scheduler::begin_wait`);
//! * **the worker loop is the core's** (`Scheduler::next_step`, the same
//!   state machine skq-rt executes): the model only executes its steps.
//!   `Harvest` activates what the kernel holds; `Deliver` starts a batch
//!   (the call says which events were stolen, charged `steal_ns`); `Poll`
//!   blocks in the readiness set until an arrival or a doorbell (after
//!   `wake_ns`), then harvests; `Park` sleeps until a wake-up (after
//!   `wake_ns`) or its timeout; `Surplus` sleeps until the elastic target
//!   wants the worker again; before every step the workers the core names
//!   are woken. A run fails if the core counted another number of steps than
//!   the model executed;
//! * [`Harvest::Immediate`] is readiness pushed at once (`Readiness::Pushed`:
//!   no poller, idle workers park); [`Harvest::Runtime`] is skq-rt's
//!   (`Readiness::Polled`: leader/follower and harvest on the way);
//! * cost: every `Harvest`, `Poll`, `Park`, `Surplus` and wake-up of another
//!   worker is a system call, every `Poll`, `Park` and `Surplus` a voluntary
//!   context switch; [`CoreOutcome::cpu_ns`] adds them, at
//!   `Overheads::syscall_ns` and `switch_ns`, to the processing time, for
//!   CPU and context switches per request beside latency;
//! * with [`CoreOpts::elastic`], the core's `ResourceManager` runs in virtual
//!   time: every `backlog_check_ns` it sees the queued total, every
//!   `period_ns` the summed busy time, and sets the core's target
//!   (`Scheduler::set_target`); workers above it leave through
//!   `Step::Surplus` at their next step, and come back when it rises.
//!   [`CoreOpts::rate_profile`] warps the arrivals (a load step).
//! * with [`CoreOpts::checkpoint_ns`], a worker processing an event calls
//!   the cooperative checkpoint every that many ns of it, as skq-rt's
//!   `checkpoint()` does (a harvest of its set when nobody polls it, then
//!   `Scheduler::checkpoint`); the harvest is a system call, counted in CPU
//!   but not added to the event's length.
//!
//! Invariant checked at the end: every request completes. Requests left when
//! the simulation stalls (no worker will ever run again, or none made progress
//! for a long virtual time after the last arrival) are reported as stranded —
//! a lost wake-up in the core shows up here.

use std::collections::VecDeque;

use anyhow::{anyhow, bail};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use skq_core::{
    Activation, Config, Done, Event, FastRng, Flags, Readiness, Ready, Scheduler, SourceId, Step,
    WaitCall, WorkerCtx,
};

use crate::params::Overheads;
pub use crate::params::{CoreOpts, Harvest};
use crate::queue::EventQueue;
use crate::stats::{Recorder, Summary};
use crate::workload::{Generator, Request, Scenario};

/// Salt for the core's seed and the migration stream.
const CORE_SALT: u64 = 0xA409_3822_299F_31D0;

/// What a core-driven run produced besides latencies.
#[derive(Clone, Debug)]
pub struct CoreOutcome {
    /// Latency summary.
    pub summary: Summary,
    /// Simulated events: arrivals, departures, worker steps and wake-ups.
    pub events: u64,
    /// Requests never served (should be zero).
    pub stranded: u64,
    /// Events delivered with no request pending (the edge-triggered cost of
    /// readiness that arrived while the connection was being served).
    pub empty_events: u64,
    /// Deliveries charged the steal cost.
    pub stolen: u64,
    /// Deliveries charged the cache-miss penalty.
    pub off_home: u64,
    /// The core's imbalance figure at the end of the run.
    pub imbalance: f64,
    /// Elastic runs: (virtual ns, active workers) at every change.
    pub active: Vec<(u64, usize)>,
    /// Elastic runs: active workers integrated over the run (worker·ns).
    pub active_worker_ns: f64,
    /// Best-effort requests served by each worker.
    pub batch_served: Vec<u64>,
    /// CPU the workers spent, ns: processing (overheads and service) plus
    /// `syscalls × Overheads::syscall_ns` plus `switches × switch_ns`.
    pub cpu_ns: f64,
    /// System calls the worker loop made (harvests, polls, parks, wake-ups
    /// of other workers; not the application's reads and writes, which
    /// `event_ns` covers).
    pub syscalls: u64,
    /// Times a worker blocked (voluntary context switches).
    pub switches: u64,
    /// Steps of the core's worker loop executed.
    pub loop_steps: u64,
    /// Returns from sleeping, as the core counted them.
    pub wakeups: u64,
    /// Time workers spent holding or waiting for a readiness set's lock
    /// (`Overheads::set_hold_ns`), ns; part of `cpu_ns`.
    pub set_lock_ns: u64,
    /// Cooperative checkpoints made ([`CoreOpts::checkpoint_ns`]).
    pub checkpoints: u64,
    /// Of those, the ones that harvested the worker's readiness set.
    pub checkpoint_harvests: u64,
    /// Events the checkpoints handed to other workers.
    pub checkpoint_moved: u64,
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    idx: u64,
    arrival: u64,
    service: u64,
}

struct Conn {
    id: SourceId,
    /// The worker the core's hint mapping picks for this connection's CPU
    /// (its locality home: where its data is warm).
    home: usize,
    /// The CPU its packets are processed on (its `SO_INCOMING_CPU`).
    cpu: u32,
    /// The readiness set it lives in: its home worker's poll group.
    group: usize,
    pending: VecDeque<Pending>,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// The worker reaches its next event (or its next `wait()`).
    Step(u32),
    /// Wake-up or steal retry of an idle worker, valid for one idle period.
    Wake(u32, u32),
    /// The resource manager looks (elastic runs).
    Manage,
    /// A worker's harvest of its set, delayed by the set's lock, is done.
    Harvested(u32, u32),
    /// A worker inside an event reaches a cooperative checkpoint.
    Checkpoint(u32),
}

/// Where an idle worker sleeps (the step it is executing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sleep {
    /// Running a batch or between steps.
    Awake,
    /// `Step::Poll`: blocked in the readiness set.
    Poll,
    /// `Step::Park`: on its own doorbell.
    Park,
    /// `Step::Surplus`: out of the pool until wanted.
    Surplus,
    /// Inside a harvest held up by its set's lock (awake, not wakeable).
    Busy,
}

struct Worker {
    ctx: WorkerCtx,
    batch: Vec<Event>,
    pos: usize,
    /// The `wait` in progress while the worker sleeps.
    call: Option<WaitCall>,
    sleep: Sleep,
    wake_pending: bool,
    epoch: u32,
    /// The first this-many events of `batch` were stolen.
    stolen_in_batch: usize,
    /// What the held-up harvest reports when done.
    after_harvest: Done,
    /// When the event it is processing ends (for its checkpoints).
    busy_until: u64,
}

struct Sim {
    sched: Scheduler,
    ov: Overheads,
    opts: CoreOpts,
    readiness: Readiness,
    conns: Vec<Conn>,
    workers: Vec<Worker>,
    q: EventQueue<Ev>,
    rec: Recorder,
    rng: FastRng,
    wakes: Vec<usize>,
    /// Runtime harvest: per readiness set (poll group), connections with
    /// readiness still in the kernel.
    kernel_ready: Vec<Vec<u32>>,
    in_kernel: Vec<bool>,
    /// Runtime harvest: per set, the worker blocked in it.
    /// Per set: the workers blocked in it, in the order they blocked (the
    /// kernel wakes the last one first, one per readiness).
    polling: Vec<Vec<usize>>,
    /// Per set: until when its lock is held by a harvest (`set_hold_ns`).
    set_busy: Vec<u64>,
    last_progress: u64,
    rm: Option<skq_core::ResourceManager>,
    next_period: u64,
    active: Vec<(u64, usize)>,
    empty_events: u64,
    stolen: u64,
    off_home: u64,
    batch_from: usize,
    batch_served: Vec<u64>,
    cost: Cost,
}

/// What the workers spent besides latency: counted as the runtime would
/// pay it (see [`CoreOutcome::cpu_ns`]).
#[derive(Clone, Copy, Debug, Default)]
struct Cost {
    /// Time processing events (overheads and service), ns.
    work_ns: u64,
    /// System calls made by workers for the loop: a non-blocking harvest,
    /// a blocking poll, a park, a wake-up of another worker.
    syscalls: u64,
    /// Times a worker blocked (poll, park, surplus): voluntary switches.
    switches: u64,
    /// Steps executed (`Scheduler::next_step` answers).
    steps: u64,
    /// Time in the kernel holding or waiting for a set's lock, ns.
    set_ns: u64,
    /// Cooperative checkpoints, those that harvested, events they moved.
    checkpoints: u64,
    checkpoint_harvests: u64,
    checkpoint_moved: u64,
}

/// Simulates `sc` served by `cfg` (its `workers` is replaced by the
/// scenario's; its seed is derived from the scenario's).
pub fn run(
    cfg: &Config,
    ov: &Overheads,
    opts: &CoreOpts,
    sc: &Scenario,
) -> anyhow::Result<CoreOutcome> {
    let mut cfg = cfg.clone();
    cfg.workers = sc.workers;
    cfg.seed = sc.seed ^ CORE_SALT;
    cfg.capacity = cfg.capacity.max(sc.connections);
    if opts.max_events == 0 || opts.max_reads == 0 {
        bail!("--max-events and --max-reads must be at least 1");
    }
    let machine = &opts.machine;
    machine.validate()?;
    cfg.worker_cpus = machine.worker_cpus(sc.workers);
    cfg.cpu_topology = machine.topology(sc.workers);
    let readiness = match opts.harvest {
        Harvest::Immediate => Readiness::Pushed,
        Harvest::Runtime => Readiness::Polled,
    };
    let retry_ns = if cfg.steal { cfg.steal_retry_ns } else { 0 };
    let sched = Scheduler::new(cfg).map_err(|e| anyhow!("{e}"))?;
    let mut conns = Vec::with_capacity(sc.connections);
    for i in 0..sc.connections {
        let flags = if i < sc.high_conns && !sc.probe_regular {
            Flags::HIGH_PRIORITY
        } else if i >= sc.batch_from() {
            Flags::BATCH
        } else {
            Flags::NONE
        };
        let id = sched
            .register(i as u64, flags, None)
            .map_err(|e| anyhow!("registering connection {i}: {e}"))?;
        let cpu = machine.hint_of(i, sc.workers, sc.seed);
        conns.push(Conn {
            id,
            home: home_of(&sched, id, cpu, None),
            cpu,
            group: 0,
            pending: VecDeque::new(),
        });
    }
    let workers = (0..sc.workers)
        .map(|w| Worker {
            ctx: sched.worker(w),
            batch: Vec::with_capacity(opts.max_events),
            pos: 0,
            call: None,
            sleep: Sleep::Awake,
            wake_pending: false,
            epoch: 0,
            stolen_in_batch: 0,
            after_harvest: Done::Begin,
            busy_until: 0,
        })
        .collect();
    let rm = match &opts.elastic {
        Some(e) => Some(skq_core::ResourceManager::new(e.clone()).map_err(|e| anyhow!("{e}"))?),
        None => None,
    };
    let gen = Generator::new(sc);
    let total = gen.total() as u64;
    let rng = sched.activator_rng(1);
    let groups = sched.poll_groups();
    let mut sim = Sim {
        sched,
        ov: *ov,
        opts: opts.clone(),
        readiness,
        conns,
        workers,
        q: EventQueue::with_capacity(4 * sc.workers + 4),
        rec: Recorder::with_high(total as usize, sc.warmup, sc.high_conns).with_batch_from(
            if sc.batch_conns > 0 {
                sc.batch_from()
            } else {
                usize::MAX
            },
        ),
        batch_from: sc.batch_from(),
        batch_served: vec![0; sc.workers],
        rng,
        wakes: Vec::with_capacity(sc.workers),
        kernel_ready: vec![Vec::new(); groups],
        in_kernel: vec![false; sc.connections],
        polling: vec![Vec::new(); groups],
        set_busy: vec![0; groups],
        last_progress: 0,
        next_period: rm.as_ref().map_or(0, |r| r.config().period_ns),
        active: rm.as_ref().map_or(Vec::new(), |r| vec![(0, r.active())]),
        rm,
        empty_events: 0,
        stolen: 0,
        off_home: 0,
        cost: Cost::default(),
    };
    if let Some(rm) = &mut sim.rm {
        rm.tick(0, 0, 0);
        let _ = sim.sched.set_target(rm.active());
        let check = rm.config().backlog_check_ns.max(1);
        sim.q.push(check, Ev::Manage);
    }
    for c in sim.conns.iter_mut() {
        c.group = sim.sched.poll_group(c.home);
    }
    let mut mrng = SmallRng::seed_from_u64(sc.seed ^ CORE_SALT ^ 2);
    for w in 0..sc.workers {
        sim.step(w, 0);
    }

    // A run is stalled when, after the last arrival, nobody has served a
    // request for this long: far beyond any batch the workload can produce.
    let stall_ns = (1e9f64).max(2000.0 * sc.service.mean_ns()) as u64;
    // Runaway guard: generous per request, plus every idle worker retrying
    // a steal every interval for the whole (expected) run.
    let expected_ns = total as f64 / sc.rate_rps * 1e9;
    let retries = if retry_ns > 0 {
        2.0 * sc.workers as f64 * expected_ns / retry_ns as f64
    } else {
        0.0
    };
    let event_cap = 64 * total + 1_000_000 + retries as u64;
    let mut events = 0u64;
    // A rate profile warps the arrival times (monotonic, so order is kept).
    let profile = opts.rate_profile.clone();
    let mut gen = gen
        .map(move |mut r| {
            if let Some(p) = &profile {
                r.arrival = p.warp(r.arrival);
            }
            r
        })
        .peekable();
    loop {
        let next_arrival = gen.peek().map(|r| r.arrival);
        let next_event = sim.q.peek_time();
        let take_arrival = match (next_arrival, next_event) {
            (Some(a), Some(e)) => a <= e,
            (Some(_), None) => true,
            (None, Some(e)) => {
                if sim.rec.completed() == total || e > sim.last_progress.saturating_add(stall_ns) {
                    break;
                }
                false
            }
            (None, None) => break,
        };
        events += 1;
        if events > event_cap {
            bail!(
                "the core delivered over {event_cap} events for {total} requests without finishing"
            );
        }
        if take_arrival {
            let r = gen.next().expect("peeked");
            sim.arrive(r, &mut mrng)?;
        } else {
            let (t, ev) = sim.q.pop().expect("peeked");
            match ev {
                Ev::Step(w) => sim.step(w as usize, t),
                Ev::Manage => {
                    let more = gen.peek().is_some() || sim.rec.completed() < total;
                    sim.manage(t, more)
                }
                Ev::Wake(w, epoch) => sim.woken(w as usize, epoch, t),
                Ev::Harvested(w, epoch) => sim.harvested(w as usize, epoch, t),
                Ev::Checkpoint(w) => sim.checkpoint(w as usize, t),
            }
        }
    }
    // Departures are events too; they are computed within a step.
    events += sim.rec.completed();
    let stranded = total - sim.rec.completed();
    let imbalance = sim.sched.imbalance();
    let end = sim.last_progress;
    let mut active_worker_ns = 0.0;
    for (i, &(t, a)) in sim.active.iter().enumerate() {
        let until = sim.active.get(i + 1).map_or(end, |x| x.0).min(end);
        active_worker_ns += until.saturating_sub(t) as f64 * a as f64;
    }
    let c = sim.cost;
    if sim.sched.loop_steps() != c.steps {
        bail!(
            "the core counted {} loop steps, the model executed {}",
            sim.sched.loop_steps(),
            c.steps
        );
    }
    let cpu_ns = c.work_ns as f64
        + c.set_ns as f64
        + c.syscalls as f64 * sim.ov.syscall_ns as f64
        + c.switches as f64 * sim.ov.switch_ns as f64;
    Ok(CoreOutcome {
        batch_served: sim.batch_served,
        active: sim.active,
        active_worker_ns,
        summary: sim.rec.finish(),
        events,
        stranded,
        empty_events: sim.empty_events,
        stolen: sim.stolen,
        off_home: sim.off_home,
        imbalance,
        cpu_ns,
        syscalls: c.syscalls,
        switches: c.switches,
        loop_steps: c.steps,
        wakeups: sim.sched.sleeps_ended(),
        set_lock_ns: c.set_ns,
        checkpoints: c.checkpoints,
        checkpoint_harvests: c.checkpoint_harvests,
        checkpoint_moved: c.checkpoint_moved,
    })
}

/// The worker the core's CPU-hint mapping picks for source `id` with a hint
/// on `cpu` (its salt is its slot index, as in the core), keeping `sticky` if
/// that is a candidate; worker 0 if none lives (never in a simulation).
fn home_of(sched: &Scheduler, id: SourceId, cpu: u32, sticky: Option<usize>) -> usize {
    let all = u64::MAX >> (64 - sched.config().workers);
    sched
        .cpu_map()
        .route(cpu, sticky, id.index(), all)
        .map_or(0, |(w, _)| w)
}

impl Sim {
    fn arrive(&mut self, r: Request, mrng: &mut SmallRng) -> anyhow::Result<()> {
        let t = r.arrival;
        let n = self.workers.len();
        self.last_progress = self.last_progress.max(t);
        let conn = &mut self.conns[r.conn as usize];
        if self.opts.migrate_prob > 0.0 && mrng.gen::<f64>() < self.opts.migrate_prob {
            conn.cpu = self.opts.machine.migrate(n, mrng.gen::<f64>());
            conn.home = home_of(&self.sched, conn.id, conn.cpu, Some(conn.home));
            conn.group = self.sched.poll_group(conn.home);
        }
        conn.pending.push_back(Pending {
            idx: r.idx,
            arrival: t,
            service: r.service,
        });
        if self.readiness == Readiness::Polled {
            let c = r.conn as usize;
            let g = self.conns[c].group;
            if !self.in_kernel[c] {
                self.in_kernel[c] = true;
                self.kernel_ready[g].push(r.conn);
            }
            // The kernel wakes one blocked poller per readiness: the
            // latest to block among those not woken already.
            let next = self.polling[g]
                .iter()
                .rev()
                .copied()
                .find(|&p| !self.workers[p].wake_pending);
            if let Some(p) = next {
                self.schedule_wake(p, t);
            }
            return Ok(());
        }
        self.activate(r.conn as usize, t, None)
    }

    /// Hands connection `c`'s readiness to the core at `t`; `harvester` is
    /// the worker doing it (its wake-ups of others are system calls; an
    /// arrival's, with pushed readiness, are the kernel's).
    fn activate(&mut self, c: usize, t: u64, harvester: Option<usize>) -> anyhow::Result<()> {
        let conn = &self.conns[c];
        let (id, cpu) = (conn.id, Some(conn.cpu));
        let activation = match harvester {
            // A worker's harvest inside its wait call (as skq-rt's).
            Some(w) => self
                .sched
                .activate_harvested(id, Ready::READABLE, cpu, t, &mut self.rng, w),
            None => self
                .sched
                .activate_by(id, Ready::READABLE, cpu, t, &mut self.rng, None),
        };
        match activation {
            Activation::Queued { wake, .. } => {
                if let Some(x) = wake.filter(|&x| Some(x) != harvester) {
                    if harvester.is_some() {
                        self.cost.syscalls += 1;
                    }
                    self.schedule_wake(x, t);
                }
            }
            Activation::Coalesced | Activation::Deferred => {}
            Activation::Stale => bail!("the core called connection {c} stale"),
        }
        Ok(())
    }

    /// Executes `Step::Harvest` or the end of `Step::Poll` for worker `w`:
    /// activates what its group's set holds, oldest first, at most `max`
    /// (`WaitCall::poll_max` after a blocking poll; the rest stays).
    fn harvest(&mut self, w: usize, t: u64, max: usize) {
        let g = self.sched.poll_group(w);
        let k = self.kernel_ready[g].len().min(max);
        let mut ready = std::mem::take(&mut self.kernel_ready[g]);
        for &c in &ready[..k] {
            self.in_kernel[c as usize] = false;
            // Stale cannot happen: connections are never deregistered.
            let _ = self.activate(c as usize, t, Some(w));
        }
        ready.drain(..k);
        // Arrivals during the activations went to the (taken) list's
        // replacement: keep them after what stayed.
        ready.append(&mut self.kernel_ready[g]);
        self.kernel_ready[g] = ready;
    }

    /// Events a harvest ending with `done` takes (a blocking poll's limit
    /// comes with its call, `WaitCall::poll_max`).
    fn harvest_max(done: Done, call: &WaitCall) -> usize {
        if done == Done::Polled {
            call.poll_max()
        } else {
            usize::MAX
        }
    }

    /// Worker `w` harvests its set at `t`, then goes on with `done`. With
    /// `Overheads::set_hold_ns`, a harvest holds the set's lock for that
    /// long plus `set_item_ns` per ready source, after waiting for whoever
    /// holds it: the worker goes on when it is done, and both times are its
    /// CPU (the model of one shared set's lock at many cores).
    fn harvest_then(&mut self, w: usize, t: u64, call: WaitCall, done: Done) {
        let g = self.sched.poll_group(w);
        let max = Self::harvest_max(done, &call);
        if self.ov.set_hold_ns == 0 {
            self.harvest(w, t, max);
            self.run_loop(w, t, call, done);
            return;
        }
        let k = self.kernel_ready[g].len().min(max) as u64;
        let start = t.max(self.set_busy[g]);
        let end = start + self.ov.set_hold_ns + self.ov.set_item_ns * k;
        self.set_busy[g] = end;
        self.cost.set_ns += end - t;
        let wk = &mut self.workers[w];
        wk.sleep = Sleep::Busy;
        wk.call = Some(call);
        wk.after_harvest = done;
        wk.epoch = wk.epoch.wrapping_add(1);
        self.q.push(end, Ev::Harvested(w as u32, wk.epoch));
    }

    /// A held-up harvest of worker `w` completes at `t`.
    fn harvested(&mut self, w: usize, epoch: u32, t: u64) {
        let wk = &mut self.workers[w];
        if wk.sleep != Sleep::Busy || wk.epoch != epoch {
            return;
        }
        wk.sleep = Sleep::Awake;
        let done = wk.after_harvest;
        let call = wk
            .call
            .take()
            .expect("a harvesting worker is inside a wait");
        self.harvest(w, t, Self::harvest_max(done, &call));
        self.run_loop(w, t, call, done);
    }

    /// A wake-up (or timeout) of worker `w`'s sleep number `epoch` at `t`.
    fn woken(&mut self, w: usize, epoch: u32, t: u64) {
        let wk = &mut self.workers[w];
        if matches!(wk.sleep, Sleep::Awake | Sleep::Busy) || wk.epoch != epoch {
            return;
        }
        wk.wake_pending = false;
        let done = match wk.sleep {
            Sleep::Poll => {
                let g = self.sched.poll_group(w);
                self.polling[g].retain(|&p| p != w);
                let wk = &mut self.workers[w];
                wk.sleep = Sleep::Awake;
                let call = wk.call.take().expect("a polling worker is inside a wait");
                self.harvest_then(w, t, call, Done::Polled);
                return;
            }
            Sleep::Park => Done::Woke,
            Sleep::Surplus => {
                if !self.sched.wanted(w) {
                    return; // still surplus: sleep on
                }
                Done::Rejoined
            }
            Sleep::Awake | Sleep::Busy => unreachable!(),
        };
        let wk = &mut self.workers[w];
        wk.sleep = Sleep::Awake;
        let call = wk.call.take().expect("a sleeping worker is inside a wait");
        self.run_loop(w, t, call, done);
    }

    /// The resource manager's turn at `t` (elastic runs): the backlog check,
    /// and the period's decision when one is due. A changed target wakes the
    /// workers on either side of the change: surplus ones rejoin, idle ones
    /// above it find `Step::Surplus` at their next step, busy ones between
    /// batches.
    fn manage(&mut self, t: u64, more: bool) {
        let Some(rm) = &mut self.rm else { return };
        let check = rm.config().backlog_check_ns.max(1);
        let period = rm.config().period_ns;
        let queued = self.sched.queued_total();
        let before = rm.active();
        rm.backlog(queued);
        if t >= self.next_period {
            self.next_period += period;
            let busy: u64 = self.sched.stats().iter().map(|s| s.busy_ns).sum();
            rm.tick(t, busy, queued);
        }
        let now_active = rm.active();
        if now_active != before {
            self.active.push((t, now_active));
        }
        for w in self.sched.set_target(now_active) {
            self.schedule_wake(w, t);
        }
        // Keep looking while requests may still come or remain queued.
        if more {
            self.q.push(t + check, Ev::Manage);
        }
    }

    /// Schedules worker `w`'s wake-up if it sleeps and none is on the way.
    fn schedule_wake(&mut self, w: usize, t: u64) {
        let Some(wk) = self.workers.get_mut(w) else {
            return;
        };
        if !matches!(wk.sleep, Sleep::Awake | Sleep::Busy) && !wk.wake_pending {
            wk.wake_pending = true;
            self.q
                .push(t + self.ov.wake_ns, Ev::Wake(w as u32, wk.epoch));
        }
    }

    /// The driver's one rule: wakes every worker `w`'s context owes a
    /// wake-up, each a system call (a doorbell or a parker cost the same
    /// here, so the model does not ask `Scheduler::wake_via` which).
    fn flush_wakes(&mut self, w: usize, t: u64) {
        self.wakes.clear();
        self.workers[w].ctx.drain_wakes_into(&mut self.wakes);
        for i in 0..self.wakes.len() {
            let x = self.wakes[i];
            if x != w {
                self.cost.syscalls += 1;
                self.schedule_wake(x, t);
            }
        }
    }

    /// Worker `w` is free at `t`: process its next event, or open a `wait`.
    fn step(&mut self, w: usize, t: u64) {
        let wk = &mut self.workers[w];
        if wk.pos < wk.batch.len() {
            let ev = wk.batch[wk.pos];
            let stolen = wk.pos < wk.stolen_in_batch;
            wk.pos += 1;
            let d = self.serve(w, ev, stolen, t);
            self.cost.work_ns += d;
            self.q.push(t + d, Ev::Step(w as u32));
            let every = self.opts.checkpoint_ns;
            if every > 0 && d > every {
                self.workers[w].busy_until = t + d;
                self.q.push(t + every, Ev::Checkpoint(w as u32));
            }
            return;
        }
        wk.pos = 0;
        let call = self.sched.begin_wait(&mut wk.ctx, t, None, self.readiness);
        self.run_loop(w, t, call, Done::Begin);
    }

    /// Executes worker `w`'s loop at `t` from `done` until it delivers or
    /// sleeps: the steps come from `Scheduler::next_step`, as in skq-rt.
    fn run_loop(&mut self, w: usize, t: u64, mut call: WaitCall, mut done: Done) {
        loop {
            let wk = &mut self.workers[w];
            let step = self.sched.next_step(
                &mut wk.ctx,
                &mut call,
                done,
                t,
                &mut wk.batch,
                self.opts.max_events,
            );
            self.cost.steps += 1;
            self.flush_wakes(w, t);
            done = match step {
                Step::Harvest => {
                    self.cost.syscalls += 1;
                    self.harvest_then(w, t, call, Done::Harvested);
                    return;
                }
                Step::Deliver(_) => {
                    let wk = &mut self.workers[w];
                    wk.stolen_in_batch = call.stolen();
                    wk.pos = 0;
                    self.step(w, t);
                    return;
                }
                Step::Wake => Done::Woke,
                Step::Poll(timeout) | Step::Park(timeout) => {
                    let poll = matches!(step, Step::Poll(_));
                    self.cost.syscalls += 1;
                    self.cost.switches += 1;
                    let wk = &mut self.workers[w];
                    wk.sleep = if poll { Sleep::Poll } else { Sleep::Park };
                    wk.call = Some(call);
                    wk.wake_pending = false;
                    wk.epoch = wk.epoch.wrapping_add(1);
                    let epoch = wk.epoch;
                    if poll {
                        let g = self.sched.poll_group(w);
                        self.polling[g].push(w);
                        if !self.kernel_ready[g].is_empty() {
                            // Readiness already waiting: the poll returns at once.
                            self.workers[w].wake_pending = true;
                            self.q.push(t, Ev::Wake(w as u32, epoch));
                        }
                    }
                    if let Some(d) = timeout {
                        self.q.push(t + d, Ev::Wake(w as u32, epoch));
                    }
                    return;
                }
                Step::Surplus => {
                    self.cost.syscalls += 1;
                    self.cost.switches += 1;
                    let wk = &mut self.workers[w];
                    wk.sleep = Sleep::Surplus;
                    wk.call = Some(call);
                    wk.wake_pending = false;
                    wk.epoch = wk.epoch.wrapping_add(1);
                    if self.sched.wanted(w) {
                        // Wanted again already (the target rose meanwhile).
                        self.schedule_wake(w, t);
                    }
                    return;
                }
                // No deadline and no shutdown in a simulation.
                Step::Return => unreachable!("a simulated wait has no deadline"),
            };
        }
    }

    /// Worker `w`, inside an event, reaches a cooperative checkpoint at `t`:
    /// what skq-rt's `checkpoint()` does, then the next one if the event
    /// lasts that long. Unless a poller waits in its set and nothing is
    /// queued on it, the worker harvests its set when nobody else polls or
    /// harvests it (what it finds is routed by the policy, as any harvest
    /// by a busy worker), then hands its queued events to other workers.
    fn checkpoint(&mut self, w: usize, t: u64) {
        if t >= self.workers[w].busy_until {
            return;
        }
        self.cost.checkpoints += 1;
        if !self.sched.nothing_to_checkpoint(w) {
            if self.readiness == Readiness::Polled && self.sched.try_harvest(w) {
                self.cost.syscalls += 1;
                self.cost.checkpoint_harvests += 1;
                self.harvest(w, t, usize::MAX);
                self.sched.end_harvest(w);
            }
            let moved = self.sched.checkpoint(&mut self.workers[w].ctx, t);
            self.cost.checkpoint_moved += moved as u64;
            self.flush_wakes(w, t);
        }
        let next = t + self.opts.checkpoint_ns;
        if next < self.workers[w].busy_until {
            self.q.push(next, Ev::Checkpoint(w as u32));
        }
    }

    /// Serves one delivered event at `t`; returns how long it keeps the worker.
    fn serve(&mut self, w: usize, ev: Event, stolen: bool, t: u64) -> u64 {
        let conn = &mut self.conns[ev.token as usize];
        let mut d = self.ov.event_ns;
        if stolen {
            d += self.ov.steal_ns;
            self.stolen += 1;
        }
        if conn.home != w {
            d += self.ov.miss_ns;
            self.off_home += 1;
        }
        let avail = conn.pending.len();
        let k = avail.min(self.opts.max_reads);
        if ev.token as usize >= self.batch_from {
            self.batch_served[w] += k as u64;
        }
        for _ in 0..k {
            let p = conn.pending.pop_front().expect("counted");
            d += p.service;
            self.rec
                .record_on(ev.token as u32, p.idx, p.arrival, p.service, t + d);
        }
        if k == 0 {
            self.empty_events += 1;
        } else {
            self.last_progress = t + d;
        }
        if avail > k {
            self.sched.still_ready(&mut self.workers[w].ctx, ev.source);
        }
        d
    }
}
