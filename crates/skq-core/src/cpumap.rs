//! CPU hints mapped through the topology tree.
//!
//! A source's CPU hint (`SO_INCOMING_CPU`: the CPU that processed its last
//! packets) names a CPU, not a worker. [`CpuMap`] turns it into a worker by
//! narrowing distance in the topology tree:
//!
//! 1. a worker on that very CPU ([`HintLevel::Cpu`]);
//! 2. else one on an SMT sibling of it ([`HintLevel::Sibling`]);
//! 3. else one under the same last-level cache ([`HintLevel::Llc`]);
//! 4. else one on the same NUMA node ([`HintLevel::Node`]);
//! 5. else any live worker ([`HintLevel::Spread`]).
//!
//! Within a level the source's sticky home wins if it is a live candidate;
//! otherwise the per-source `salt` picks among the level's candidates (the
//! next live one if that one has exited). A level whose candidates have all
//! exited falls through to the next. So flows whose hints name a CPU where
//! no worker runs (the server confined to some CPUs, a NIC interrupting
//! others) spread over the nearest workers by salt instead of piling onto
//! one.
//!
//! Everything is precomputed by [`CpuMap::new`]: per CPU, four levels of
//! (candidate bit mask, candidate list). [`CpuMap::route`] is a table index,
//! a few mask tests and one salt modulo: no allocation, no lock.

use std::collections::HashMap;
use std::fmt;

use crate::config::Config;
use crate::types::WorkerId;

/// How far from the hinted CPU the chosen worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HintLevel {
    /// On the hinted CPU itself.
    Cpu,
    /// On an SMT sibling (same physical core).
    Sibling,
    /// Under the same last-level cache.
    Llc,
    /// On the same NUMA node.
    Node,
    /// Anywhere: spread over all live workers by the per-source salt.
    Spread,
}

impl HintLevel {
    const NARROW: [HintLevel; 4] = [
        HintLevel::Cpu,
        HintLevel::Sibling,
        HintLevel::Llc,
        HintLevel::Node,
    ];

    /// Short name used by `skq topology`.
    pub fn name(self) -> &'static str {
        match self {
            HintLevel::Cpu => "own CPU",
            HintLevel::Sibling => "SMT sibling",
            HintLevel::Llc => "same LLC",
            HintLevel::Node => "same node",
            HintLevel::Spread => "spread",
        }
    }
}

impl fmt::Display for HintLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One level's candidates: a bit mask of workers and the same workers as a
/// list (ascending) in [`CpuMap::list`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Level {
    mask: u64,
    start: u32,
    len: u32,
}

/// Per-CPU candidate workers, precomputed from a [`Config`]'s
/// `worker_cpus` and `cpu_topology`. See the module documentation.
#[derive(Clone, Debug)]
pub struct CpuMap {
    /// Indexed by CPU number: the narrowing levels of a hint on that CPU.
    cpus: Box<[[Level; 4]]>,
    /// Candidate lists, shared by every level with the same mask.
    list: Box<[u8]>,
    /// Every worker.
    all: Level,
}

impl CpuMap {
    /// Precomputes the map for `cfg`'s workers and topology. The
    /// configuration must be valid ([`Config::validate`]).
    pub fn new(cfg: &Config) -> CpuMap {
        let n = cfg.workers.min(crate::config::MAX_WORKERS);
        let place: HashMap<u32, (u32, u32, u32)> = cfg
            .cpu_topology
            .iter()
            .map(|p| (p.cpu, (p.core, p.llc, p.node)))
            .collect();
        let worker_cpu: Vec<u32> = (0..n).map(|w| cfg.cpu_of(w)).collect();
        let max_cpu = worker_cpu
            .iter()
            .copied()
            .chain(cfg.cpu_topology.iter().map(|p| p.cpu))
            .max()
            .unwrap_or(0);
        let mut lists: HashMap<u64, Level> = HashMap::new();
        let mut list = Vec::new();
        let mut level_of = |mask: u64| -> Level {
            if mask == 0 {
                return Level::default();
            }
            *lists.entry(mask).or_insert_with(|| {
                let start = list.len() as u32;
                list.extend((0..64u8).filter(|&w| mask & (1u64 << w) != 0));
                Level {
                    mask,
                    start,
                    len: mask.count_ones(),
                }
            })
        };
        let all = level_of(if n == 64 { u64::MAX } else { (1u64 << n) - 1 });
        let cpus = (0..=max_cpu)
            .map(|c| {
                let here = place.get(&c);
                let mut masks = [0u64; 4];
                for (w, &wc) in worker_cpu.iter().enumerate() {
                    let bit = 1u64 << w;
                    if wc == c {
                        masks[0] |= bit;
                    }
                    if let (Some(a), Some(b)) = (here, place.get(&wc)) {
                        if a.0 == b.0 && a.1 == b.1 && a.2 == b.2 {
                            masks[1] |= bit;
                        }
                        if a.1 == b.1 && a.2 == b.2 {
                            masks[2] |= bit;
                        }
                        if a.2 == b.2 {
                            masks[3] |= bit;
                        }
                    }
                }
                masks.map(&mut level_of)
            })
            .collect();
        CpuMap {
            cpus,
            list: list.into_boxed_slice(),
            all,
        }
    }

    /// The worker for a hint on `cpu`: the nearest level with a live
    /// candidate (`alive`: bit w set while worker w lives), its `sticky`
    /// worker if that is one of them, else the `salt`-th candidate (the next
    /// live one after it). `None` only when no worker lives.
    #[inline]
    pub fn route(
        &self,
        cpu: u32,
        sticky: Option<WorkerId>,
        salt: u32,
        alive: u64,
    ) -> Option<(WorkerId, HintLevel)> {
        self.route_preferring(cpu, None, sticky, salt, alive)
    }

    /// [`CpuMap::route`], except that `prefer` wins over `sticky` when both
    /// are live candidates of the nearest level (the worker already awake
    /// to take the event: see `policy.rs`).
    #[inline]
    pub fn route_preferring(
        &self,
        cpu: u32,
        prefer: Option<WorkerId>,
        sticky: Option<WorkerId>,
        salt: u32,
        alive: u64,
    ) -> Option<(WorkerId, HintLevel)> {
        let bit = |w: Option<WorkerId>| match w {
            Some(w) if w < 64 => 1u64 << w,
            _ => 0,
        };
        let (prefer_bit, sticky_bit) = (bit(prefer), bit(sticky));
        if let Some(levels) = self.cpus.get(cpu as usize) {
            for (l, level) in levels.iter().zip(HintLevel::NARROW) {
                if let Some(w) = self.pick(l, prefer_bit, sticky_bit, salt, alive) {
                    return Some((w, level));
                }
            }
        }
        self.pick(&self.all, prefer_bit, sticky_bit, salt, alive)
            .map(|w| (w, HintLevel::Spread))
    }

    #[inline]
    fn pick(
        &self,
        l: &Level,
        prefer_bit: u64,
        sticky_bit: u64,
        salt: u32,
        alive: u64,
    ) -> Option<WorkerId> {
        let live = l.mask & alive;
        if live == 0 {
            return None;
        }
        if live & prefer_bit != 0 {
            return Some(prefer_bit.trailing_zeros() as usize);
        }
        if live & sticky_bit != 0 {
            return Some(sticky_bit.trailing_zeros() as usize);
        }
        let list = &self.list[l.start as usize..(l.start + l.len) as usize];
        let k = list.len();
        let first = salt as usize % k;
        (0..k)
            .map(|i| list[(first + i) % k] as usize)
            .find(|&w| alive & (1u64 << w) != 0)
    }

    /// Where hints on `cpu` go while the workers in `alive` live: the level
    /// reached and its live candidates (what `skq topology` prints).
    pub fn candidates(&self, cpu: u32, alive: u64) -> (HintLevel, Vec<WorkerId>) {
        let levels = self.cpus.get(cpu as usize).copied().unwrap_or_default();
        let (mask, level) = levels
            .iter()
            .zip(HintLevel::NARROW)
            .map(|(l, lv)| (l.mask & alive, lv))
            .find(|(m, _)| *m != 0)
            .unwrap_or((self.all.mask & alive, HintLevel::Spread));
        let ws = (0..64).filter(|&w| mask & (1u64 << w) != 0).collect();
        (level, ws)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{CpuPlace, Policy};

    /// 2 nodes × 1 LLC × 2 cores × 2 threads: CPU c on core c/2, LLC and
    /// node c/4.
    fn machine(worker_cpus: Vec<u32>) -> CpuMap {
        let mut c = Config::new(Policy::Cpu, worker_cpus.len());
        c.worker_cpus = worker_cpus;
        c.cpu_topology = (0..8)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu / 2,
                llc: cpu / 4,
                node: cpu / 4,
            })
            .collect();
        c.validate().unwrap();
        CpuMap::new(&c)
    }

    #[test]
    fn levels_narrow_from_cpu_to_spread() {
        // Workers on CPUs 0, 2 and 4.
        let m = machine(vec![0, 2, 4]);
        let all = 0b111;
        assert_eq!(m.candidates(0, all), (HintLevel::Cpu, vec![0]));
        assert_eq!(m.candidates(1, all), (HintLevel::Sibling, vec![0]));
        assert_eq!(m.candidates(3, all), (HintLevel::Sibling, vec![1]));
        assert_eq!(m.candidates(6, all), (HintLevel::Llc, vec![2]));
        // Worker 2 gone: CPU 6 has nobody in its node either.
        assert_eq!(m.candidates(6, 0b011), (HintLevel::Spread, vec![0, 1]));
        // Unknown CPU: spread.
        assert_eq!(m.candidates(100, all), (HintLevel::Spread, vec![0, 1, 2]));
        assert_eq!(m.route(100, None, 4, all), Some((1, HintLevel::Spread)));
        assert_eq!(m.route(100, Some(2), 4, all), Some((2, HintLevel::Spread)));
        assert_eq!(m.route(0, None, 0, 0), None);
    }

    #[test]
    fn an_unknown_topology_keeps_own_cpu_and_spreads_the_rest() {
        let mut c = Config::new(Policy::Cpu, 3);
        c.worker_cpus = vec![1, 1, 5];
        let m = CpuMap::new(&c);
        assert_eq!(m.candidates(1, 0b111), (HintLevel::Cpu, vec![0, 1]));
        assert_eq!(m.candidates(0, 0b111), (HintLevel::Spread, vec![0, 1, 2]));
        let mut per = [0; 3];
        for salt in 0..30 {
            per[m.route(0, None, salt, 0b111).unwrap().0] += 1;
        }
        assert_eq!(per, [10, 10, 10]);
    }
}
