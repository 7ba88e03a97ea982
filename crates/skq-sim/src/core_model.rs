//! The model of the real server, driven by the real scheduling core.
//!
//! Every policy decision is made by [`skq_core::Scheduler`]; this module only
//! plays the part of the Linux runtime and the application around it, in
//! virtual time:
//!
//! * each client connection is one registered source (token = connection
//!   number); its incoming CPU starts as the CPU of worker `i % workers` and,
//!   with [`CoreOpts::migrate_prob`], jumps to a random worker's CPU;
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
//!   until woken or, when the configuration steals, until `steal_retry_ns`
//!   later, whichever is first; on waking it calls `unpark`, then `wait()`.
//! * the steal cost is charged to the events a wait obtained by stealing. To
//!   know them, the model performs `wait()` as the core documents its
//!   composition (`release`, `fill`, and if that found nothing and stealing is
//!   on, `steal` then `fill` again, then `record_return`); a test checks this
//!   gives the very same run as `Scheduler::wait`.
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

use crate::model::Overheads;
use crate::queue::EventQueue;
use crate::stats::{Recorder, Summary};
use crate::workload::{Generator, Request, Scenario};

/// Salt for the core's seed and the migration stream.
const CORE_SALT: u64 = 0xA409_3822_299F_31D0;

/// Knobs of the application model (not of the scheduler).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CoreOpts {
    /// Events a worker asks for per `wait()` (default 1, the default `--batch`
    /// of `skq serve rpc`: every event not yet started stays stealable).
    pub max_events: usize,
    /// Requests a worker serves per event before calling `still_ready`
    /// (default 32).
    pub max_reads: usize,
    /// Probability that an arrival moves its connection's incoming CPU to a
    /// random worker's CPU (default 0: flows stay put).
    pub migrate_prob: f64,
    /// Call `Scheduler::wait` itself instead of its documented composition
    /// (`release`, `fill`, `steal`, `fill`, `record_return`), which the
    /// model uses to know which events were stolen. With `plain_wait` no
    /// steal cost is charged; it exists to check that both give the same run.
    pub plain_wait: bool,
    /// When readiness reaches the core (see [`Harvest`]).
    pub harvest: Harvest,
    /// CPUs of the simulated machine: worker `w` runs on CPU `w % cpus`, as
    /// skq-rt places more workers than CPUs (None: one CPU per worker).
    pub cpus: Option<u32>,
    /// Every connection's packets arrive on this CPU (None: connection `i`
    /// on worker `i % n`'s CPU). On loopback `SO_INCOMING_CPU` is the
    /// sender's CPU, so a one-thread load generator puts every flow on one
    /// CPU; this reproduces that for CPU and queue affinity.
    pub client_cpu: Option<u32>,
}

/// When an arrival's readiness reaches the core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Harvest {
    /// At once, as if the kernel called `activate` (the model of the brief,
    /// and of SKQ in the kernel).
    #[default]
    Immediate,
    /// As the skq-rt runtime does it on Linux: readiness waits in the kernel
    /// until harvested, by the *poller* (an idle worker blocked in
    /// `epoll_wait`, woken after `wake_ns`) or, when nobody polls, by any
    /// worker entering `wait()`. Parked workers other than the poller are
    /// followers; a poller that leaves with work promotes one.
    Runtime,
}

impl std::str::FromStr for Harvest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "immediate" => Ok(Harvest::Immediate),
            "runtime" => Ok(Harvest::Runtime),
            _ => Err(format!(
                "unknown harvest model `{s}`; expected immediate or runtime"
            )),
        }
    }
}

impl Default for CoreOpts {
    fn default() -> Self {
        CoreOpts {
            max_events: 1,
            max_reads: 32,
            migrate_prob: 0.0,
            plain_wait: false,
            harvest: Harvest::Immediate,
            cpus: None,
            client_cpu: None,
        }
    }
}

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
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    idx: u64,
    arrival: u64,
    service: u64,
}

struct Conn {
    id: SourceId,
    /// Worker whose CPU sees this connection's packets (its locality home).
    home: usize,
    /// The CPU its packets arrive on, when fixed by [`CoreOpts::client_cpu`].
    cpu: Option<u32>,
    pending: VecDeque<Pending>,
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// The worker reaches its next event (or its next `wait()`).
    Step(u32),
    /// Wake-up or steal retry of an idle worker, valid for one idle period.
    Wake(u32, u32),
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
}

struct Sim {
    sched: Scheduler,
    ov: Overheads,
    opts: CoreOpts,
    steal: bool,
    retry_ns: u64,
    cpus: Vec<u32>,
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
    empty_events: u64,
    stolen: u64,
    off_home: u64,
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
    if let Some(n) = opts.cpus {
        if n == 0 {
            bail!("--cpus must be at least 1");
        }
        cfg.worker_cpus = (0..sc.workers as u32).map(|w| w % n).collect();
    }
    if let Some(c) = opts.client_cpu {
        let n = opts.cpus.unwrap_or(sc.workers as u32);
        if c >= n {
            bail!("--client-cpu {c} is out of range: the machine has CPUs 0..{n}");
        }
    }
    let cpus: Vec<u32> = (0..sc.workers)
        .map(|w| cfg.worker_cpus.get(w).copied().unwrap_or(w as u32))
        .collect();
    let (steal, retry_ns) = (cfg.steal, cfg.steal_retry_ns.max(1));
    let sched = Scheduler::new(cfg).map_err(|e| anyhow!("{e}"))?;
    let mut conns = Vec::with_capacity(sc.connections);
    for i in 0..sc.connections {
        let flags = if i < sc.high_conns {
            Flags::HIGH_PRIORITY
        } else {
            Flags::NONE
        };
        let id = sched
            .register(i as u64, flags, None)
            .map_err(|e| anyhow!("registering connection {i}: {e}"))?;
        conns.push(Conn {
            id,
            home: i % sc.workers,
            cpu: opts.client_cpu,
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
        })
        .collect();
    let gen = Generator::new(sc);
    let total = gen.total() as u64;
    let rng = sched.activator_rng(1);
    let mut sim = Sim {
        sched,
        ov: *ov,
        opts: *opts,
        steal,
        retry_ns,
        cpus,
        conns,
        workers,
        q: EventQueue::with_capacity(4 * sc.workers + 4),
        rec: Recorder::with_high(total as usize, sc.warmup, sc.high_conns),
        rng,
        wakes: Vec::with_capacity(sc.workers),
        kernel_ready: Vec::with_capacity(sc.connections),
        in_kernel: vec![false; sc.connections],
        poller: None,
        last_progress: 0,
        empty_events: 0,
        stolen: 0,
        off_home: 0,
    };
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
    let retries = if steal {
        2.0 * sc.workers as f64 * expected_ns / retry_ns as f64
    } else {
        0.0
    };
    let event_cap = 64 * total + 1_000_000 + retries as u64;
    let mut events = 0u64;
    let mut gen = gen.peekable();
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
                Ev::Wake(w, epoch) => {
                    let wk = &mut sim.workers[w as usize];
                    if wk.idle && wk.epoch == epoch {
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
    Ok(CoreOutcome {
        summary: sim.rec.finish(),
        events,
        stranded,
        empty_events: sim.empty_events,
        stolen: sim.stolen,
        off_home: sim.off_home,
        imbalance,
    })
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
            conn.home = mrng.gen_range(0..n);
            conn.cpu = None;
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
        let cpu = conn.cpu.unwrap_or(self.cpus[conn.home]);
        match self
            .sched
            .activate(conn.id, Ready::READABLE, Some(cpu), t, &mut self.rng)
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

    /// Schedules worker `w`'s wake-up if it sleeps and none is on the way.
    fn wake(&mut self, w: usize, t: u64) {
        let Some(wk) = self.workers.get_mut(w) else {
            return;
        };
        if wk.idle && !wk.wake_pending {
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
