//! The simulated machine: where the server's workers run, which CPU each
//! connection's packets are processed on (its `SO_INCOMING_CPU` hint), and
//! the topology that relates the two.
//!
//! The core-driven model passes [`Machine::worker_cpus`] and
//! [`Machine::topology`] to the real core (`Config::worker_cpus`,
//! `Config::cpu_topology`), so a hint is mapped to a worker by the very code
//! the runtime runs (skq-core's `cpumap.rs`). The defaults reproduce the
//! model of the brief: one CPU per worker, every flow processed on its own
//! worker's CPU. `skq bench` on the 2-CPU VM is instead: the server confined
//! to one CPU (`server_cpus = [0]`, all workers there), the load generator on
//! the other, so on loopback every flow reports the generator's CPU
//! (`HintSource::Client(1)`); with RPS in a namespace the kernel spreads
//! flows over CPUs by flow hash (`HintSource::Rss`).

use std::fmt;
use std::str::FromStr;

use anyhow::{anyhow, bail};
use skq_core::{CpuPlace, MAX_CPUS};

/// Where connections' CPU hints come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HintSource {
    /// Connection `i` is processed on the CPU of worker `i % workers` (a NIC
    /// steering each flow to a worker's CPU: the brief's model).
    #[default]
    Workers,
    /// Every connection is processed on this CPU (loopback, one-thread load
    /// generator on it).
    Client(u32),
    /// Each connection is processed on a CPU of this set chosen by a hash of
    /// the connection, as RPS/RSS do.
    Rss(Vec<u32>),
}

/// A regular topology: how many consecutive CPUs share a core, a last-level
/// cache and a node (0: all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// CPUs per physical core (SMT threads), at least 1.
    pub smt: u32,
    /// CPUs per last-level cache (0: one cache for all).
    pub llc: u32,
    /// CPUs per NUMA node (0: one node).
    pub node: u32,
}

impl Default for Shape {
    /// The 2-CPU development VM: separate cores, one LLC, one node.
    fn default() -> Self {
        Shape {
            smt: 1,
            llc: 0,
            node: 0,
        }
    }
}

impl FromStr for Shape {
    type Err = anyhow::Error;
    /// `flat` (the default) or `smt=2,llc=8,node=16` (any subset).
    fn from_str(s: &str) -> anyhow::Result<Shape> {
        let mut shape = Shape::default();
        if s == "flat" {
            return Ok(shape);
        }
        for part in s.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| anyhow!("`{part}`: expected key=value"))?;
            let v: u32 = v
                .parse()
                .map_err(|_| anyhow!("`{part}`: `{v}` is not a number"))?;
            match k {
                "smt" if v >= 1 => shape.smt = v,
                "smt" => bail!("`{part}`: smt must be at least 1"),
                "llc" => shape.llc = v,
                "node" => shape.node = v,
                _ => bail!("`{part}`: expected smt, llc or node"),
            }
        }
        Ok(shape)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let per = |n: u32| {
            if n == 0 {
                "all CPUs".to_string()
            } else {
                format!("{n} CPUs")
            }
        };
        write!(
            f,
            "{} per core, {} per LLC, {} per node",
            self.smt,
            per(self.llc),
            per(self.node)
        )
    }
}

/// The simulated machine (see the module documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    /// CPUs the server's workers may run on: worker `w` on
    /// `server_cpus[w % len]`, as skq-rt places workers over the CPUs it may
    /// use. Empty: worker `w` on CPU `w`.
    pub server_cpus: Vec<u32>,
    /// Where connections' packets are processed.
    pub hints: HintSource,
    /// The topology of CPUs `0..=max` of everything above.
    pub shape: Shape,
}

impl Machine {
    /// Checks the CPU numbers; the error names the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        if let Some(c) = self.server_cpus.iter().find(|&&c| c >= MAX_CPUS) {
            bail!("--server-cpus: CPU {c} is out of range (CPUs must be below {MAX_CPUS})");
        }
        match &self.hints {
            HintSource::Workers => {}
            HintSource::Client(c) if *c >= MAX_CPUS => {
                bail!("--client-cpu {c} is out of range (CPUs must be below {MAX_CPUS})")
            }
            HintSource::Client(_) => {}
            HintSource::Rss(set) if set.is_empty() => bail!("--rss needs at least one CPU"),
            HintSource::Rss(set) => {
                if let Some(c) = set.iter().find(|&&c| c >= MAX_CPUS) {
                    bail!("--rss: CPU {c} is out of range (CPUs must be below {MAX_CPUS})");
                }
            }
        }
        if self.shape.smt == 0 {
            bail!("--topology: smt must be at least 1");
        }
        Ok(())
    }

    /// The CPU of each of `workers` workers.
    pub fn worker_cpus(&self, workers: usize) -> Vec<u32> {
        (0..workers)
            .map(|w| match self.server_cpus.len() {
                0 => w as u32,
                n => self.server_cpus[w % n],
            })
            .collect()
    }

    /// Every CPU the machine needs described (workers' and hints'), with its
    /// core, last-level cache and node under [`Machine::shape`].
    pub fn topology(&self, workers: usize) -> Vec<CpuPlace> {
        let hint_max = match &self.hints {
            HintSource::Workers => 0,
            HintSource::Client(c) => *c,
            HintSource::Rss(set) => set.iter().copied().max().unwrap_or(0),
        };
        let max = self
            .worker_cpus(workers)
            .into_iter()
            .max()
            .unwrap_or(0)
            .max(hint_max);
        let group = |cpu: u32, per: u32| cpu.checked_div(per).unwrap_or(0);
        (0..=max)
            .map(|cpu| CpuPlace {
                cpu,
                core: cpu / self.shape.smt.max(1),
                llc: group(cpu, self.shape.llc),
                node: group(cpu, self.shape.node),
            })
            .collect()
    }

    /// The CPU connection `conn` starts on (`salt` varies the RSS hash).
    pub fn hint_of(&self, conn: usize, workers: usize, salt: u64) -> u32 {
        match &self.hints {
            HintSource::Workers => self.worker_cpus(workers)[conn % workers.max(1)],
            HintSource::Client(c) => *c,
            HintSource::Rss(set) => set[(mix(conn as u64 ^ salt) % set.len() as u64) as usize],
        }
    }

    /// The CPU a migrating connection moves to, from a uniform draw `r` in
    /// `[0, 1)`: a random worker's CPU, a random RSS CPU, or (one client
    /// CPU) nowhere else.
    pub fn migrate(&self, workers: usize, r: f64) -> u32 {
        let pick = |n: usize| ((r * n as f64) as usize).min(n.saturating_sub(1));
        match &self.hints {
            HintSource::Workers => self.worker_cpus(workers)[pick(workers.max(1))],
            HintSource::Client(c) => *c,
            HintSource::Rss(set) => set[pick(set.len())],
        }
    }
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.server_cpus.as_slice() {
            [] => f.write_str("worker w on CPU w")?,
            cpus => write!(f, "workers spread over CPUs {}", cpu_list(cpus))?,
        }
        match &self.hints {
            HintSource::Workers => f.write_str("; flow i processed on worker i's CPU")?,
            HintSource::Client(c) => write!(f, "; every flow processed on CPU {c}")?,
            HintSource::Rss(set) => write!(f, "; flows hashed over CPUs {} (RSS)", cpu_list(set))?,
        }
        write!(f, "; topology: {}", self.shape)
    }
}

/// A 64-bit mixer (splitmix64's finaliser): the RSS "flow hash".
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Parses a kernel-style CPU list such as `0-3,8`.
pub fn parse_cpu_list(s: &str) -> anyhow::Result<Vec<u32>> {
    skq_core::parse_cpu_list(s).map_err(|e| anyhow!(e))
}

fn cpu_list(cpus: &[u32]) -> String {
    skq_core::format_cpu_list(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_harness_placement() {
        let m = Machine {
            server_cpus: vec![0],
            hints: HintSource::Client(1),
            shape: Shape::default(),
        };
        m.validate().unwrap();
        assert_eq!(m.worker_cpus(3), vec![0, 0, 0]);
        assert_eq!(m.hint_of(5, 3, 0), 1);
        let t = m.topology(3);
        assert_eq!(t.len(), 2);
        assert_eq!((t[1].core, t[1].llc, t[1].node), (1, 0, 0));
        assert!(m.to_string().contains("every flow processed on CPU 1"));
    }

    #[test]
    fn rss_spreads_connections_over_its_cpus() {
        let m = Machine {
            hints: HintSource::Rss(vec![2, 3]),
            shape: "smt=2,llc=4".parse().unwrap(),
            ..Machine::default()
        };
        let on2 = (0..1000).filter(|&c| m.hint_of(c, 4, 7) == 2).count();
        assert!((400..600).contains(&on2), "{on2}");
        assert_eq!(m.worker_cpus(2), vec![0, 1]);
        assert_eq!(m.topology(2)[3].core, 1);
        assert_eq!(m.migrate(4, 0.99), 3);
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("2-1").is_err());
        assert!("smt=0".parse::<Shape>().is_err());
        assert!("cache=2".parse::<Shape>().is_err());
        assert!(Machine {
            hints: HintSource::Rss(vec![]),
            ..Machine::default()
        }
        .validate()
        .is_err());
    }
}
