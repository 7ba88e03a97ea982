//! Application-defined priority (QStack's full-datapath priority, SKQ §4)
//! and priority diffusion.
//!
//! A source carries one of three [`Class`]es in its flags: `High`
//! (`Flags::HIGH_PRIORITY`), `Regular` (no bit) or `Batch`
//! (`Flags::BATCH`: long, latency-tolerant work). The class is the
//! application's statement about the *next* request on the source; a driver
//! that classifies requests changes it with [`Scheduler::set_class`] as each
//! request is seen, so a connection's level follows its requests: it rises
//! when a high-priority request is pending and falls back when the next one
//! is regular. Changing the class touches only the slot's flags (no system
//! call), and only the worker processing the source changes it, so a queued
//! entry never disagrees with its flags.
//!
//! Where the class is honoured in the core:
//! * activation: high sources go on the high queue of the chosen worker;
//! * [`Scheduler::fill`]: the high queue first, within `rtshare`;
//! * stealing: the victim's high queue is scanned first;
//! * diffusion (below) decides which workers may run batch sources.
//!
//! ## Diffusion
//!
//! With [`Config::batch_workers`] non-empty the workers split in two sets:
//! the *batch workers* named there and the *reserved* ones (the rest).
//! The rule:
//! 1. a batch source is always queued on a live batch worker (the one with
//!    the shortest queue), whatever the policy chose;
//! 2. high and regular sources are queued on a live reserved worker (the
//!    policy's choice if it is reserved, else the shortest reserved queue);
//! 3. a reserved worker never steals a batch source; a batch worker may
//!    steal anything.
//!
//! So long best-effort work never occupies a worker that latency-critical
//! requests are routed to (rules 1 and 3), while the batch workers' idle
//! time is not wasted: when their own queues are empty they take regular
//! and high work from reserved workers' queues by stealing (rule 3), which
//! only ever shortens the wait of that work. If every worker of the needed
//! set has exited, the policy's choice stands (work is never stranded).
//! A `PINNED` source stays with its registrar: pinning is an explicit
//! request of the application and wins over diffusion.

use crate::config::Config;
use crate::sched::Scheduler;
use crate::slot::Slot;
use crate::sync::Ordering;
use crate::types::{CoreError, Flags, SourceId, WorkerId};

/// The priority class of a request (and of the source it arrived on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Long, latency-tolerant work; runs only on batch workers when
    /// diffusion is on, else like regular work.
    Batch,
    /// Ordinary work.
    #[default]
    Regular,
    /// Latency-critical work: served first at every queueing stage.
    High,
}

impl Class {
    /// Every class, lowest first.
    pub const ALL: [Class; 3] = [Class::Batch, Class::Regular, Class::High];

    /// Lower-case name used on command lines and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Class::Batch => "batch",
            Class::Regular => "regular",
            Class::High => "high",
        }
    }

    /// Parses [`Class::name`].
    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The class recorded in `flags`.
    pub fn of_flags(flags: Flags) -> Class {
        if flags.contains(Flags::HIGH_PRIORITY) {
            Class::High
        } else if flags.contains(Flags::BATCH) {
            Class::Batch
        } else {
            Class::Regular
        }
    }

    /// `flags` with its class bits replaced by this class.
    pub fn apply(self, flags: Flags) -> Flags {
        let rest = flags.0 & !(Flags::HIGH_PRIORITY.0 | Flags::BATCH.0);
        Flags(
            rest | match self {
                Class::High => Flags::HIGH_PRIORITY.0,
                Class::Batch => Flags::BATCH.0,
                Class::Regular => 0,
            },
        )
    }
}

impl Config {
    /// Whether priority diffusion is on (some workers take batch work).
    pub fn diffusion(&self) -> bool {
        self.batch_workers != 0
    }

    /// Whether worker `w` is one of the batch workers.
    pub fn is_batch_worker(&self, w: WorkerId) -> bool {
        w < 64 && self.batch_workers & (1u64 << w) != 0
    }
}

impl Scheduler {
    /// Sets the class of a registered source (its flags' priority bits),
    /// leaving its other flags alone. Returns whether it changed. Meant for
    /// the worker processing the source (the class then governs the source's
    /// next activation); no system call.
    pub fn set_class(&self, id: SourceId, class: Class) -> Result<bool, CoreError> {
        let s = self
            .slots
            .get(id.index() as usize)
            .ok_or(CoreError::Stale)?;
        if s.phase(id) == crate::slot::Phase::Free {
            return Err(CoreError::Stale);
        }
        if class == Class::High {
            self.note_flags(Flags::HIGH_PRIORITY);
        }
        let mut cur = s.flags.load(Ordering::Relaxed);
        loop {
            let new = class.apply(Flags(cur)).0;
            if new == cur {
                return Ok(false);
            }
            match s
                .flags
                .compare_exchange(cur, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(true),
                Err(x) => cur = x,
            }
        }
    }

    /// The class of a registered source now (`Regular` for a stale id).
    pub fn class_of(&self, id: SourceId) -> Class {
        match self.slots.get(id.index() as usize) {
            Some(s) if s.phase(id) != crate::slot::Phase::Free => Class::of_flags(s.flags()),
            _ => Class::Regular,
        }
    }

    /// Diffusion's correction of the policy's choice `w` for source `s`
    /// (rules 1 and 2 of the module doc). Identity when diffusion is off.
    #[inline]
    pub(crate) fn diffuse(&self, s: &Slot, w: WorkerId) -> WorkerId {
        if !self.cfg.diffusion() {
            return w;
        }
        let flags = s.flags();
        if flags.contains(Flags::PINNED) {
            return w;
        }
        let want_batch = flags.contains(Flags::BATCH) && !flags.contains(Flags::HIGH_PRIORITY);
        if self.cfg.is_batch_worker(w) == want_batch {
            return w;
        }
        let set = if want_batch {
            self.cfg.batch_workers
        } else {
            !self.cfg.batch_workers
        };
        let live = set & self.alive.load(Ordering::Acquire);
        let mut best: Option<(usize, WorkerId)> = None;
        let mut m = live;
        while m != 0 {
            let c = m.trailing_zeros() as usize;
            m &= m - 1;
            if c >= self.cfg.workers {
                break;
            }
            let q = self.queued(c);
            if best.is_none_or(|(bq, _)| q < bq) {
                best = Some((q, c));
            }
        }
        best.map_or(w, |(_, c)| c)
    }

    /// Whether worker `thief` may steal source `s` under diffusion (rule 3).
    #[inline]
    pub(crate) fn may_steal(&self, thief: WorkerId, s: &Slot) -> bool {
        !self.cfg.diffusion()
            || self.cfg.is_batch_worker(thief)
            || Class::of_flags(s.flags()) != Class::Batch
    }
}

/// Refuses a diffusion set that names a missing worker, leaves no reserved
/// worker, or cannot be honoured by the policy.
pub(crate) fn validate_diffusion(cfg: &Config) -> Result<(), crate::config::ConfigError> {
    use crate::config::{ConfigError, Policy};
    if cfg.batch_workers == 0 {
        return Ok(());
    }
    let all = if cfg.workers >= 64 {
        u64::MAX
    } else {
        (1u64 << cfg.workers) - 1
    };
    if cfg.batch_workers & !all != 0 {
        return Err(ConfigError::Conflict(format!(
            "--batch-workers names worker {} but there are only {} workers (0..{})",
            (cfg.batch_workers & !all).trailing_zeros(),
            cfg.workers,
            cfg.workers
        )));
    }
    if cfg.batch_workers == all {
        return Err(ConfigError::Conflict(
            "--batch-workers names every worker: leave at least one for latency-critical work"
                .into(),
        ));
    }
    if cfg.policy == Policy::Shared {
        return Err(ConfigError::Conflict(
            "--batch-workers needs per-worker queues: not available with --mode shared".into(),
        ));
    }
    Ok(())
}
