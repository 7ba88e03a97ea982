//! The knobs of the core-driven model, shared by `model.rs` (which runs a
//! point) and `core_model.rs` (which simulates it): what the core does not
//! see ([`Overheads`]), the application around it ([`CoreOpts`]), when
//! readiness reaches it ([`Harvest`]) and the machine ([`Machine`]). Nothing
//! here imports either of them, so the modules read bottom-up:
//! `machine`/`params` → `core_model` → `model`.

use std::fmt;

pub use crate::machine::Machine;

/// Costs the core-driven model charges on top of service times (ns). The
/// reference models are zero-overhead by definition and ignore them.
///
/// The defaults are order-of-magnitude guesses for a Linux user-space runtime
/// on a VM, to be calibrated from `skq bench` measurements:
/// `event_ns` ≈ one `epoll_wait` + `read` + `write` share per event,
/// `steal_ns` ≈ a contended lock handoff plus cold queue lines,
/// `wake_ns` ≈ an eventfd/futex wake-up until the thread runs,
/// `miss_ns` = SKQ's default hybrid penalty (1000 cycles ≈ 0.5 µs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overheads {
    /// Paid by a worker for every event it processes (including empty ones).
    pub event_ns: u64,
    /// Extra cost of processing an event taken from another worker's queue.
    pub steal_ns: u64,
    /// Delay between deciding to wake an idle worker and it running.
    pub wake_ns: u64,
    /// Cache-miss penalty when a connection is served off its home worker
    /// (the worker on the CPU that receives its packets).
    pub miss_ns: u64,
    /// CPU of one system call of the worker loop (a harvest, a poll, a
    /// park, a wake-up of another worker). Counted in CPU per request,
    /// not charged as delay (`wake_ns` is the delay of a wake-up).
    pub syscall_ns: u64,
    /// CPU of one voluntary context switch (a worker blocking and later
    /// resuming), counted like `syscall_ns`.
    pub switch_ns: u64,
    /// A harvest holds its readiness set's lock this long (ns), plus
    /// `set_item_ns` per ready source; another harvester of the same set
    /// waits (spinning) meanwhile. 0 (the default) models no lock at all.
    pub set_hold_ns: u64,
    /// Per ready source harvested, added to `set_hold_ns`.
    pub set_item_ns: u64,
}

impl Overheads {
    /// No overhead at all (for cross-checks against the reference models).
    pub const ZERO: Overheads = Overheads {
        event_ns: 0,
        steal_ns: 0,
        wake_ns: 0,
        miss_ns: 0,
        syscall_ns: 0,
        switch_ns: 0,
        set_hold_ns: 0,
        set_item_ns: 0,
    };
}

/// Defaults calibrated from the runtime's own benchmarks on the 2-core
/// development VM (2026-11-22):
/// * `event_ns` 250: `skq pipes` with 1 worker and 5 µs spun service ran
///   190,636 events/s, i.e. 5.246 µs per event, 246 ns of it the runtime
///   (harvest, scheduling, queue, release);
/// * `steal_ns` 400: criterion `cycle/best2+steal/contended-2-threads`
///   (508 ns) minus `cycle/best2/contended-2-threads` (106 ns);
/// * `miss_ns` 500: SKQ's cache-miss penalty (1000 cycles ≈ 0.5 µs);
/// * `wake_ns` 5000: `cargo run --release -p skq-rt --example wakeup`
///   measured an idle poller woken by readiness in 5.3 µs p50 (21.6 µs p99);
///   a parked follower reached through the poller takes 25.8 µs p50 (two
///   hops, each charged `wake_ns` by the `runtime` harvest model);
/// * `syscall_ns` 700 and `switch_ns` 4000: order-of-magnitude figures for
///   this VM, not yet fitted; `scripts/bench/cost-per-reply.py` gives the
///   runtime's CPU and switches per reply to fit them against.
impl Default for Overheads {
    fn default() -> Self {
        Overheads {
            event_ns: 250,
            steal_ns: 400,
            wake_ns: 5_000,
            miss_ns: 500,
            syscall_ns: 700,
            switch_ns: 4_000,
            set_hold_ns: 0,
            set_item_ns: 0,
        }
    }
}

impl fmt::Display for Overheads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "event {} ns, steal {} ns, wake-up {} ns, cache miss {} ns, system call {} ns, context switch {} ns",
            self.event_ns, self.steal_ns, self.wake_ns, self.miss_ns, self.syscall_ns, self.switch_ns
        )?;
        if self.set_hold_ns > 0 {
            write!(
                f,
                ", readiness-set lock {} ns + {} ns per source",
                self.set_hold_ns, self.set_item_ns
            )?;
        }
        Ok(())
    }
}

/// Knobs of the application model (not of the scheduler).
#[derive(Clone, Debug, PartialEq)]
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
    /// When readiness reaches the core (see [`Harvest`]).
    pub harvest: Harvest,
    /// Where the workers run, where flows' packets are processed, and the
    /// topology between them (default: worker `w` on CPU `w`, connection `i`
    /// on worker `i % n`'s CPU).
    pub machine: Machine,
    /// Elastic worker count: the core's resource manager parks and wakes
    /// workers (`None`: all workers always active).
    pub elastic: Option<skq_core::ElasticConfig>,
    /// Offered rate changing over the run: arrivals are warped through it
    /// (`None`: constant rate).
    pub rate_profile: Option<std::sync::Arc<skq_proto::profile::RateProfile>>,
    /// The handler calls the runtime's cooperative checkpoint
    /// (`skq_rt::checkpoint`, `skq serve rpc --checkpoint-us`) every this
    /// many ns while it processes an event (0, the default: never). Each
    /// one does what skq-rt's does: unless a poller waits in the worker's
    /// set and nothing is queued on it, it harvests the set without
    /// blocking when nobody else polls or harvests it (a system call), then
    /// hands the worker's queued events to other workers
    /// (`Scheduler::checkpoint`).
    pub checkpoint_ns: u64,
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
            harvest: Harvest::Immediate,
            machine: Machine::default(),
            elastic: None,
            rate_profile: None,
            checkpoint_ns: 0,
        }
    }
}
