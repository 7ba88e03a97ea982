//! Elastic workers (park/rejoin driven by the resource manager) and the
//! cooperative checkpoint, under a virtual clock.

use std::collections::{HashMap, VecDeque};

use super::sched;
use crate::*;

/// Service time of one event in the virtual-time model (ns).
const S: u64 = 10_000;
/// Statistics period: 100 service times.
const PERIOD: u64 = 100 * S;

/// A fluid-free, step-by-step model: each step lasts one service time;
/// every active worker takes at most one event per step and is busy for the
/// whole step. Arrivals carry a per-source sequence number so loss and
/// reordering show.
struct Model {
    s: Scheduler,
    ctxs: Vec<WorkerCtx>,
    rm: ResourceManager,
    rng: FastRng,
    sources: Vec<SourceId>,
    /// Per source: sequence numbers arrived and not yet processed.
    pending: HashMap<SourceId, VecDeque<u64>>,
    /// Per source: the last sequence number processed.
    done: HashMap<SourceId, u64>,
    processed: u64,
    arrived: u64,
    seq: u64,
    credit: f64,
    ev: Vec<Event>,
    /// (step, active) after every decision.
    history: Vec<(u64, usize)>,
}

impl Model {
    fn new(workers: usize, min: usize) -> Model {
        let s = sched(Policy::Hybrid, workers, |c| c.steal = true);
        let ctxs = (0..workers).map(|w| s.worker(w)).collect();
        let mut ecfg = ElasticConfig::new(min, workers);
        ecfg.period_ns = PERIOD;
        let rm = ResourceManager::new(ecfg).unwrap();
        let sources = (0..64)
            .map(|i| {
                s.register(i, Flags::NONE, Some(i as usize % workers))
                    .unwrap()
            })
            .collect();
        Model {
            s,
            ctxs,
            rm,
            rng: FastRng::new(7),
            sources,
            pending: HashMap::new(),
            done: HashMap::new(),
            processed: 0,
            arrived: 0,
            seq: 0,
            credit: 0.0,
            ev: Vec::new(),
            history: Vec::new(),
        }
    }

    fn apply(&mut self, now: Nanos) {
        let want = self.rm.active();
        for w in 0..self.ctxs.len() {
            if w < want && self.s.is_parked(w) {
                assert!(self.s.rejoin(&mut self.ctxs[w]));
            } else if w >= want && !self.s.is_parked(w) {
                let r = self.s.park_worker(&mut self.ctxs[w], now).unwrap();
                assert!(r.stranded.is_empty());
            }
        }
        assert_eq!(self.s.live_workers(), want);
    }

    /// One step at `load` events per step (capacity: one per worker).
    fn step(&mut self, t: u64, load: f64) {
        let now = t * S;
        self.credit += load;
        while self.credit >= 1.0 {
            self.credit -= 1.0;
            let id = self.sources[self.rng.below(self.sources.len())];
            self.seq += 1;
            self.arrived += 1;
            self.pending.entry(id).or_default().push_back(self.seq);
            let cpu = Some(self.rng.below(self.ctxs.len()) as u32);
            let _ = self
                .s
                .activate(id, Ready::READABLE, cpu, now, &mut self.rng);
        }
        for w in 0..self.ctxs.len() {
            if self.s.is_parked(w) {
                continue;
            }
            let n = self.s.wait(&mut self.ctxs[w], now, &mut self.ev, 1);
            for e in self.ev.iter().take(n) {
                // Process everything that arrived for this source, in order.
                let q = self.pending.entry(e.source).or_default();
                let last = self.done.entry(e.source).or_insert(0);
                while let Some(x) = q.pop_front() {
                    assert!(x > *last, "source {:?} reordered", e.source);
                    *last = x;
                    self.processed += 1;
                }
            }
        }
        let stats = self.s.stats();
        let busy: u64 = stats.iter().map(|w| w.busy_ns).sum();
        let queued: usize = stats.iter().map(|w| w.queued).sum();
        if self.rm.tick(now, busy, queued).is_some() {
            self.history.push((t, self.rm.active()));
            self.apply(now);
        }
    }

    /// Runs until every queue is empty (all live workers take what is left).
    fn drain(&mut self, mut t: u64) {
        for _ in 0..10_000 {
            self.step(t, 0.0);
            t += 1;
            if (0..self.ctxs.len()).all(|w| self.s.queued(w) == 0) {
                // One more round releases the last batches.
                self.step(t, 0.0);
                break;
            }
        }
    }

    fn active_at(&self, step: u64) -> usize {
        self.history
            .iter()
            .take_while(|(t, _)| *t <= step)
            .last()
            .map_or(self.ctxs.len(), |&(_, a)| a)
    }
}

#[test]
fn worker_count_follows_a_load_step_within_two_periods() {
    let workers = 8;
    let min = 2;
    let mut m = Model::new(workers, min);
    let low = 0.1 * workers as f64;
    let high = 0.9 * workers as f64;
    let phase = 30 * PERIOD / S; // steps per phase
    let mut t = 0;
    for (load, _) in [(low, 0), (high, 1), (low, 2)] {
        for _ in 0..phase {
            m.step(t, load);
            t += 1;
        }
    }
    let up = phase;
    let down = 2 * phase;
    // Quiet first phase: shrunk from the starting 8 to a few workers.
    let before = m.active_at(up - 1);
    assert!(
        (min..=3).contains(&before),
        "10% load keeps {before} workers"
    );
    // Growth: enough workers for 90% load within two periods of the step.
    let grown = m.active_at(up + 2 * PERIOD / S);
    assert!(grown as f64 >= high, "two periods after the step: {grown}");
    // Shrink after the step down (five periods to decide, then one more).
    let after = m.active_at(down + 7 * PERIOD / S);
    assert!(after <= 3, "seven periods after the end: {after}");
    // Never below the minimum, never above the maximum.
    assert!(m.history.iter().all(|&(_, a)| (min..=workers).contains(&a)));
    // Nothing lost: every arrival was processed once (order checked inline).
    m.drain(t);
    assert_eq!(m.processed, m.arrived);
    assert!(m.pending.values().all(|q| q.is_empty()));
}

#[test]
fn the_minimum_holds_with_no_load_at_all() {
    let mut m = Model::new(4, 1);
    for t in 0..20 * PERIOD / S {
        m.step(t, 0.0);
    }
    assert_eq!(m.rm.active(), 1);
    assert_eq!(m.s.live_workers(), 1);
    let mut m = Model::new(4, 3);
    for t in 0..20 * PERIOD / S {
        m.step(t, 0.0);
    }
    assert_eq!(m.rm.active(), 3);
}

#[test]
fn parking_moves_queued_work_and_unpins_as_exit_does() {
    let s = sched(Policy::Hybrid, 3, |_| {});
    let mut ctxs: Vec<WorkerCtx> = (0..3).map(|w| s.worker(w)).collect();
    let mut rng = s.activator_rng(1);
    let pinned = s.register(10, Flags::PINNED, Some(2)).unwrap();
    let plain = s.register(11, Flags::NONE, Some(2)).unwrap();
    let _ = s.activate(pinned, Ready::READABLE, None, 0, &mut rng);
    assert_eq!(
        super::queued_on(s.activate(plain, Ready::READABLE, None, 0, &mut rng)),
        2
    );
    let report = s.park_worker(&mut ctxs[2], 10).unwrap();
    assert_eq!(report.rescheduled, 2);
    assert_eq!(report.unpinned, vec![(pinned, 10)]);
    assert!(s.is_parked(2));
    assert!(s.stats()[2].parked && !s.stats()[2].exited);
    // Both are delivered by the live workers, once each.
    let mut ev = Vec::new();
    let mut got = Vec::new();
    for c in &mut ctxs[..2] {
        s.wait(c, 20, &mut ev, 8);
        got.extend(ev.iter().map(|e| e.token));
    }
    got.sort();
    assert_eq!(got, vec![10, 11]);
    // A parked worker cannot register (it owns nothing) ...
    assert!(s.register(12, Flags::PINNED, Some(2)).is_err());
    // ... and after rejoining it gets work again.
    assert!(s.rejoin(&mut ctxs[2]));
    assert!(!s.rejoin(&mut ctxs[2]), "rejoining twice is refused");
    let again = s.register(13, Flags::PINNED, Some(2)).unwrap();
    assert_eq!(
        super::queued_on(s.activate(again, Ready::READABLE, None, 30, &mut rng)),
        2
    );
    assert_eq!(s.wait(&mut ctxs[2], 40, &mut ev, 8), 1);
    assert_eq!(ev[0].token, 13);
}

#[test]
fn the_last_live_worker_never_parks() {
    let s = sched(Policy::Cpu, 2, |_| {});
    let mut c0 = s.worker(0);
    let mut c1 = s.worker(1);
    s.park_worker(&mut c1, 0).unwrap();
    assert!(matches!(
        s.park_worker(&mut c0, 0),
        Err(CoreError::BadWorker(0))
    ));
    assert!(
        s.park_worker(&mut c1, 0).is_err(),
        "parking twice is refused"
    );
    assert_eq!(s.live_workers(), 1);
}

#[test]
fn checkpoint_moves_queued_events_and_keeps_the_source_in_hand() {
    let s = sched(Policy::Cpu, 3, |_| {});
    let mut ctxs: Vec<WorkerCtx> = (0..3).map(|w| s.worker(w)).collect();
    let mut rng = s.activator_rng(1);
    let ids: Vec<SourceId> = (0..4)
        .map(|i| s.register(i, Flags::NONE, Some(0)).unwrap())
        .collect();
    let pinned = s.register(9, Flags::PINNED, Some(0)).unwrap();
    // Nothing queued: nothing moves, nothing is woken.
    assert_eq!(s.checkpoint(&mut ctxs[0], 0), 0);
    assert!(!ctxs[0].has_wakes());
    for &id in &ids {
        assert_eq!(
            super::queued_on(s.activate(id, Ready::READABLE, Some(0), 0, &mut rng)),
            0
        );
    }
    let _ = s.activate(pinned, Ready::READABLE, None, 0, &mut rng);
    let mut ev = Vec::new();
    assert_eq!(s.wait(&mut ctxs[0], 1, &mut ev, 1), 1);
    let in_hand = ev[0].source;
    // Workers 1 and 2 are asleep.
    assert!(s.prepare_park(&ctxs[1]) && s.prepare_park(&ctxs[2]));
    // Ready again while in hand: stays deferred to the caller.
    assert_eq!(
        s.activate(in_hand, Ready::READABLE, Some(1), 2, &mut rng),
        Activation::Deferred
    );
    let moved = s.checkpoint(&mut ctxs[0], 3);
    assert_eq!(moved, 3, "the three queued, unpinned events move");
    assert_eq!(s.queued(0), 1, "the pinned one stays");
    assert!(
        ctxs[0].has_wakes(),
        "a sleeping worker is woken to take them"
    );
    assert_eq!(s.phase(in_hand), Phase::BusyPending);
    assert_eq!(ctxs[0].in_flight(), &[in_hand]);
    // The others deliver the moved events; none of them gets the source in hand.
    let mut got = Vec::new();
    for c in &mut ctxs[1..3] {
        s.unpark(c);
        s.wait(c, 4, &mut ev, 8);
        assert!(ev.iter().all(|e| e.source != in_hand));
        got.extend(ev.iter().map(|e| e.source));
    }
    got.sort();
    let mut want: Vec<SourceId> = ids.iter().copied().filter(|&i| i != in_hand).collect();
    want.sort();
    assert_eq!(got, want);
    // The caller releases its source: redelivered once, after the pinned one.
    let n = s.wait(&mut ctxs[0], 5, &mut ev, 8);
    let toks: Vec<u64> = ev[..n].iter().map(|e| e.token).collect();
    assert!(toks.contains(&9));
    let total: usize = (0..3).map(|w| s.queued(w)).sum::<usize>() + n;
    assert_eq!(total, 2, "pinned + redelivery of the in-hand source");
}

#[test]
fn saturation_grows_to_max_only_with_a_backlog() {
    let mut c = ElasticConfig::new(1, 8);
    c.period_ns = 1_000;
    let mut rm = ResourceManager::new(c).unwrap();
    let mut busy = 0;
    let mut t = 0;
    let mut tick = |rm: &mut ResourceManager, workers_busy: f64, queued: usize| {
        t += 1_000;
        busy += (workers_busy * 1_000.0) as u64;
        rm.tick(t, busy, queued)
    };
    assert!(
        tick(&mut rm, 0.0, 0).is_none(),
        "the first call only starts a period"
    );
    for _ in 0..5 {
        tick(&mut rm, 0.5, 0);
    }
    assert_eq!(rm.active(), 1, "half a worker busy needs one");
    // One worker fully busy, nothing queued: a burst it absorbed.
    let d = tick(&mut rm, 1.0, 0).unwrap();
    assert_eq!((d.active, d.demand), (2, 1.0), "ceil(1 / 0.75) workers");
    // Saturated with a backlog: straight to the maximum.
    let d = tick(&mut rm, 2.0, 5).unwrap();
    assert_eq!(d.active, 8);
    // Demand known again: four periods of 3 busy workers keep 8 ...
    for _ in 0..4 {
        assert_eq!(tick(&mut rm, 3.0, 0).unwrap().active, 8);
    }
    // ... the fifth shrinks to what the busiest of them needs at the
    // shrinking busy fraction: ceil(3 / 0.6).
    assert_eq!(tick(&mut rm, 2.0, 0).unwrap().active, 5);
}

#[test]
fn a_backlog_between_periods_grows_to_max_at_once() {
    let mut c = ElasticConfig::new(2, 8);
    c.period_ns = 1_000;
    let mut rm = ResourceManager::new(c).unwrap();
    rm.tick(0, 0, 0);
    for i in 1..=5 {
        rm.tick(i * 1_000, 0, 0);
    }
    assert_eq!(rm.active(), 2);
    assert_eq!(rm.backlog(7), None, "under 4 per active worker");
    assert_eq!(rm.backlog(8), Some(8));
    assert_eq!(rm.backlog(100), None, "already at the maximum");
    let mut off = ElasticConfig::new(1, 8);
    off.backlog_per_worker = 0;
    let mut rm = ResourceManager::new(off).unwrap();
    for i in 0..=6 {
        rm.tick(i * 20_000_000, 0, 0);
    }
    assert_eq!(rm.backlog(1_000), None);
}
