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
//!   calls `still_ready`. After the last event it calls `wait()` again at its
//!   virtual time, and wakes the workers the core names (`drain_wakes_into`);
//! * with [`Harvest::Runtime`], readiness instead waits "in the kernel" until
//!   a worker harvests it, as skq-rt's leader/follower loop does;
//! * a worker whose `wait()` returned nothing announces it with
//!   `prepare_park` (waiting again at once if that reports work) and sleeps
//!   until woken (a thief is woken on demand by the core) or, when a
//!   `steal_retry_ns` safety net is configured, until that much later,
//!   whichever is first; on waking it calls `unpark`, then `wait()`.
//! * the steal cost is charged to the events a wait obtained by stealing. To
//!   know them, the model performs `wait()` as the core documents its
//!   composition (`release`, `fill`, and if that found nothing and stealing is
//!   on, `steal` then `fill` again, then `record_return`); a test checks this
//!   gives the very same run as `Scheduler::wait`.
//!
//! * with [`CoreOpts::elastic`], the core's `ResourceManager` runs in virtual
//!   time: every `backlog_check_ns` it sees the queued total, every
//!   `period_ns` the summed busy time. A worker above the decided count
//!   parks (`park_worker`) when it next finds itself idle or between
//!   batches; a parked worker below it rejoins (`rejoin`) and starts
//!   working at once. Parked workers get no wake-ups and no steal retries.
//!   [`CoreOpts::rate_profile`] warps the arrivals (a load step).
//!
//! Invariant checked at the end: every request completes. Requests left when
//! the simulation stalls (no worker will ever run again, or none made progress
//! for a long virtual time after the last arrival) are reported as stranded —
//! a lost wake-up in the core shows up here.

use std::collections::VecDeque;

use anyhow::{anyhow, bail};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use skq_core::{Activation, Config, Event, FastRng, Flags, Ready, Scheduler, SourceId, WorkerCtx};

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
}

struct Worker {
    ctx: WorkerCtx,
    batch: Vec<Event>,
    pos: usize,
    idle: bool,
    wake_pending: bool,
    epoch: u32,
    /// The first this-many events of `batch` were stolen.
    stolen_in_batch: usize,
    /// Parked by the resource manager.
    parked: bool,
}

struct Sim {
    sched: Scheduler,
    ov: Overheads,
    opts: CoreOpts,
    steal: bool,
    retry_ns: u64,
    conns: Vec<Conn>,
    workers: Vec<Worker>,
    q: EventQueue<Ev>,
    rec: Recorder,
    rng: FastRng,
    wakes: Vec<usize>,
    /// Runtime harvest: connections with readiness still in the kernel.
    kernel_ready: Vec<u32>,
    in_kernel: Vec<bool>,
    /// Runtime harvest: the idle worker blocked in `epoll_wait`.
    poller: Option<usize>,
    last_progress: u64,
    rm: Option<skq_core::ResourceManager>,
    next_period: u64,
    active: Vec<(u64, usize)>,
    empty_events: u64,
    stolen: u64,
    off_home: u64,
    batch_from: usize,
    batch_served: Vec<u64>,
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
    // Stealing is on demand (the core wakes a thief); the retry timer only
    // when one is configured.
    let (steal, retry_ns) = (
        cfg.steal && cfg.steal_retry_ns > 0,
        cfg.steal_retry_ns.max(1),
    );
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
            pending: VecDeque::new(),
        });
    }
    let workers = (0..sc.workers)
        .map(|w| Worker {
            ctx: sched.worker(w),
            batch: Vec::with_capacity(opts.max_events),
            pos: 0,
            idle: false,
            wake_pending: false,
            epoch: 0,
            stolen_in_batch: 0,
            parked: false,
        })
        .collect();
    let rm = match &opts.elastic {
        Some(e) => Some(skq_core::ResourceManager::new(e.clone()).map_err(|e| anyhow!("{e}"))?),
        None => None,
    };
    let gen = Generator::new(sc);
    let total = gen.total() as u64;
    let rng = sched.activator_rng(1);
    let mut sim = Sim {
        sched,
        ov: *ov,
        opts: opts.clone(),
        steal,
        retry_ns,
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
        kernel_ready: Vec::with_capacity(sc.connections),
        in_kernel: vec![false; sc.connections],
        poller: None,
        last_progress: 0,
        next_period: rm.as_ref().map_or(0, |r| r.config().period_ns),
        active: rm.as_ref().map_or(Vec::new(), |r| vec![(0, r.active())]),
        rm,
        empty_events: 0,
        stolen: 0,
        off_home: 0,
    };
    let mut mrng = SmallRng::seed_from_u64(sc.seed ^ CORE_SALT ^ 2);
    for w in 0..sc.workers {
        sim.step(w, 0);
    }
    if let Some(rm) = &mut sim.rm {
        rm.tick(0, 0, 0);
        let check = rm.config().backlog_check_ns.max(1);
        sim.q.push(check, Ev::Manage);
    }

    // A run is stalled when, after the last arrival, nobody has served a
    // request for this long: far beyond any batch the workload can produce.
    let stall_ns = (1e9f64).max(2000.0 * sc.service.mean_ns()) as u64;
    // Runaway guard: generous per request, plus every idle worker retrying
    // a steal every interval for the whole (expected) run.
    let expected_ns = total as f64 / sc.rate_rps * 1e9;
    let retries = if steal {
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
                Ev::Wake(w, epoch) => {
                    let wk = &mut sim.workers[w as usize];
                    if wk.idle && !wk.parked && wk.epoch == epoch {
                        wk.idle = false;
                        wk.wake_pending = false;
                        sim.woken(w as usize, t);
                    }
                }
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

/// `Scheduler::wait`, composed from the core's public steps so the number of
/// stolen sources is known (they are pushed to the front of the thief's queue,
/// so they are the first events of the batch). Returns (events, stolen).
fn wait_counting_steals(
    sched: &Scheduler,
    ctx: &mut WorkerCtx,
    now: u64,
    out: &mut Vec<Event>,
    max: usize,
) -> (usize, usize) {
    sched.release(ctx, now);
    out.clear();
    let mut n = sched.fill(ctx, out, max);
    let mut stolen = 0;
    if n == 0 && sched.config().steal {
        stolen = sched.steal(ctx);
        if stolen > 0 {
            n = sched.fill(ctx, out, max);
        }
    }
    sched.record_return(ctx, now, n);
    (n, stolen.min(n))
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
        }
        conn.pending.push_back(Pending {
            idx: r.idx,
            arrival: t,
            service: r.service,
        });
        if self.opts.harvest == Harvest::Runtime {
            let c = r.conn as usize;
            if !self.in_kernel[c] {
                self.in_kernel[c] = true;
                self.kernel_ready.push(r.conn);
            }
            if let Some(p) = self.poller {
                self.wake(p, t);
            }
            return Ok(());
        }
        self.activate(r.conn as usize, t, None)
    }

    /// Hands connection `c`'s readiness to the core at `t`; `harvester` is
    /// the worker doing it (it needs no wake-up).
    fn activate(&mut self, c: usize, t: u64, harvester: Option<usize>) -> anyhow::Result<()> {
        let conn = &self.conns[c];
        match self
            .sched
            .activate(conn.id, Ready::READABLE, Some(conn.cpu), t, &mut self.rng)
        {
            Activation::Queued { wake, .. } => {
                if let Some(x) = wake.filter(|&x| Some(x) != harvester) {
                    self.wake(x, t);
                }
            }
            Activation::Coalesced | Activation::Deferred => {}
            Activation::Stale => bail!("the core called connection {c} stale"),
        }
        Ok(())
    }

    /// Runtime harvest: worker `w` activates everything the kernel holds.
    fn harvest(&mut self, w: usize, t: u64) {
        let mut ready = std::mem::take(&mut self.kernel_ready);
        for &c in &ready {
            self.in_kernel[c as usize] = false;
            // Stale cannot happen: connections are never deregistered.
            let _ = self.activate(c as usize, t, Some(w));
        }
        ready.clear();
        self.kernel_ready = ready;
    }

    /// An idle worker's wake-up (or steal retry) fired at `t`.
    fn woken(&mut self, w: usize, t: u64) {
        if self.opts.harvest == Harvest::Runtime && self.poller == Some(w) {
            self.harvest(w, t);
            self.poller = None;
            self.sched.unpark(&self.workers[w].ctx);
            if self.sched.has_work(w) {
                // Leaving to work: a parked follower becomes the poller.
                if let Some(f) = (0..self.workers.len()).find(|&f| f != w && self.workers[f].idle) {
                    self.wake(f, t);
                }
            }
        } else {
            self.sched.unpark(&self.workers[w].ctx);
        }
        self.step(w, t);
    }

    /// The resource manager's turn at `t` (elastic runs): the backlog check,
    /// and the period's decision when one is due; then parks idle workers
    /// above the count and brings parked ones below it back.
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
        for w in 0..self.workers.len() {
            if w < now_active && self.workers[w].parked {
                let wk = &mut self.workers[w];
                wk.parked = false;
                wk.idle = false;
                wk.wake_pending = false;
                wk.epoch = wk.epoch.wrapping_add(1);
                self.sched.rejoin(&mut wk.ctx);
                self.step(w, t);
            } else if w >= now_active && self.workers[w].idle && !self.workers[w].parked {
                self.park(w, t);
            }
        }
        // Keep looking while requests may still come or remain queued.
        if more {
            self.q.push(t + check, Ev::Manage);
        }
    }

    /// Parks worker `w` (idle or between batches) in the core.
    fn park(&mut self, w: usize, t: u64) {
        let wk = &mut self.workers[w];
        if self.sched.is_parked(w) {
            return;
        }
        if wk.idle {
            self.sched.unpark(&wk.ctx);
        }
        let Ok(report) = self.sched.park_worker(&mut wk.ctx, t) else {
            return; // the last live worker
        };
        wk.parked = true;
        wk.idle = true;
        wk.wake_pending = false;
        wk.epoch = wk.epoch.wrapping_add(1);
        for x in report.wakes {
            self.wake(x, t);
        }
        if self.poller == Some(w) {
            // The poller parked: another idle worker takes over.
            self.poller = None;
            if let Some(f) = (0..self.workers.len())
                .find(|&f| f != w && self.workers[f].idle && !self.workers[f].parked)
            {
                self.wake(f, t);
            }
        }
    }

    /// Schedules worker `w`'s wake-up if it sleeps and none is on the way.
    fn wake(&mut self, w: usize, t: u64) {
        let Some(wk) = self.workers.get_mut(w) else {
            return;
        };
        if wk.idle && !wk.parked && !wk.wake_pending {
            wk.wake_pending = true;
            self.q
                .push(t + self.ov.wake_ns, Ev::Wake(w as u32, wk.epoch));
        }
    }

    /// Worker `w` is free at `t`: process its next event, or wait for more,
    /// or park (announcing it with `prepare_park`, as the runtime does).
    fn step(&mut self, w: usize, t: u64) {
        loop {
            let wk = &mut self.workers[w];
            if wk.pos < wk.batch.len() {
                let ev = wk.batch[wk.pos];
                let stolen = wk.pos < wk.stolen_in_batch;
                wk.pos += 1;
                let d = self.serve(w, ev, stolen, t);
                self.q.push(t + d, Ev::Step(w as u32));
                return;
            }
            wk.pos = 0;
            if self.rm.as_ref().is_some_and(|rm| w >= rm.active()) {
                // Between batches above the decided count: release the batch
                // and park (the core reschedules anything queued here).
                self.sched.release(&mut self.workers[w].ctx, t);
                self.wakes.clear();
                self.workers[w].ctx.drain_wakes_into(&mut self.wakes);
                for i in 0..self.wakes.len() {
                    self.wake(self.wakes[i], t);
                }
                self.park(w, t);
                if self.workers[w].parked {
                    return;
                }
            }
            if self.opts.harvest == Harvest::Runtime && self.poller.is_none() {
                // Nobody blocks in epoll_wait: harvest on the way in. (The
                // runtime releases first; releasing only re-queues sources
                // whose readiness the core already has, so order is moot.)
                self.harvest(w, t);
            }
            let wk = &mut self.workers[w];
            let (got, stolen) = if self.opts.plain_wait {
                (
                    self.sched
                        .wait(&mut wk.ctx, t, &mut wk.batch, self.opts.max_events),
                    0,
                )
            } else {
                wait_counting_steals(
                    &self.sched,
                    &mut wk.ctx,
                    t,
                    &mut wk.batch,
                    self.opts.max_events,
                )
            };
            wk.stolen_in_batch = stolen;
            self.wakes.clear();
            wk.ctx.drain_wakes_into(&mut self.wakes);
            let parked = got == 0 && self.sched.prepare_park(&wk.ctx);
            if parked {
                wk.idle = true;
                wk.wake_pending = false;
                wk.epoch = wk.epoch.wrapping_add(1);
                if self.opts.harvest == Harvest::Runtime && self.poller.is_none() {
                    self.poller = Some(w);
                    if !self.kernel_ready.is_empty() {
                        // Readiness already waiting: epoll_wait returns at once.
                        wk.wake_pending = true;
                        self.q.push(t, Ev::Wake(w as u32, wk.epoch));
                    }
                }
                if self.steal {
                    self.q.push(t + self.retry_ns, Ev::Wake(w as u32, wk.epoch));
                }
            }
            for i in 0..self.wakes.len() {
                self.wake(self.wakes[i], t);
            }
            if parked {
                return;
            }
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
