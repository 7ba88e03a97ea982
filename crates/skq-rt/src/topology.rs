//! The CPU topology tree (SKQ's kqdom): NUMA node → last-level cache → core →
//! CPUs (hyperthreads), read from /sys.
//!
//! The runtime uses it twice:
//!
//! * to place workers ([`worker_cpus`]): the CPUs this process may use, one
//!   per physical core first, spread over last-level caches and nodes,
//!   hyperthread siblings last, wrapping around;
//! * to map CPU hints ([`Topology::places`] fills
//!   [`skq_core::Config::cpu_topology`]): a hint names a CPU, which may host
//!   no worker (the server confined to some CPUs, a NIC interrupting
//!   others); the core then picks a worker on an SMT sibling, under the same
//!   last-level cache, on the same node, or spreads by a per-source salt.
//!
//! [`report`] is `skq topology`: the tree, the CPUs the process may use, and
//! where hints from every online CPU go for a given worker count.

use std::collections::BTreeMap;
use std::fmt;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use skq_core::{Config, ConfigError, CpuMap, CpuPlace, Policy, MAX_CPUS};

/// A physical core and its hardware threads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Core {
    /// (package, core_id) folded into one number: package << 16 | core_id.
    pub id: u32,
    /// Logical CPUs (hyperthreads) of the core, ascending.
    pub cpus: Vec<u32>,
}

/// Cores sharing a last-level cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Llc {
    /// The lowest CPU sharing the cache (a stable name).
    pub id: u32,
    /// Cores under this cache.
    pub cores: Vec<Core>,
}

/// A NUMA node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Node number.
    pub id: u32,
    /// Last-level caches in the node.
    pub llcs: Vec<Llc>,
}

/// The whole tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// NUMA nodes, ascending.
    pub nodes: Vec<Node>,
}

/// Parses a kernel CPU list such as `0-3,8,10-11` (see [`skq_core::parse_cpu_list`]).
pub fn parse_cpu_list(s: &str) -> io::Result<Vec<u32>> {
    skq_core::parse_cpu_list(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn read_u32(p: &Path) -> Option<u32> {
    fs::read_to_string(p).ok()?.trim().parse().ok()
}

impl Topology {
    /// Reads the machine's topology from /sys.
    pub fn detect() -> io::Result<Topology> {
        Topology::from_sysfs(Path::new("/sys/devices/system"))
    }

    /// Reads a sysfs tree rooted at `root` (`.../devices/system`), so tests
    /// can feed a fake one.
    pub fn from_sysfs(root: &Path) -> io::Result<Topology> {
        let cpu_dir = root.join("cpu");
        let online = match fs::read_to_string(cpu_dir.join("online")) {
            Ok(s) => parse_cpu_list(&s)?,
            Err(_) => {
                let mut v: Vec<u32> = fs::read_dir(&cpu_dir)?
                    .filter_map(|e| {
                        e.ok()?
                            .file_name()
                            .to_str()?
                            .strip_prefix("cpu")?
                            .parse()
                            .ok()
                    })
                    .collect();
                v.sort_unstable();
                v
            }
        };
        // CPU -> node from node*/cpulist; everything on node 0 when absent.
        let mut node_of = BTreeMap::new();
        if let Ok(rd) = fs::read_dir(root.join("node")) {
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(n) = name
                    .to_str()
                    .and_then(|s| s.strip_prefix("node"))
                    .and_then(|s| s.parse::<u32>().ok())
                else {
                    continue;
                };
                if let Ok(list) = fs::read_to_string(e.path().join("cpulist")) {
                    for c in parse_cpu_list(&list)? {
                        node_of.insert(c, n);
                    }
                }
            }
        }
        // node -> llc -> core -> cpus
        let mut tree: BTreeMap<u32, BTreeMap<u32, BTreeMap<u32, Vec<u32>>>> = BTreeMap::new();
        for &c in &online {
            let base = cpu_dir.join(format!("cpu{c}"));
            let topo = base.join("topology");
            let core = read_u32(&topo.join("core_id")).unwrap_or(c);
            let pkg = read_u32(&topo.join("physical_package_id")).unwrap_or(0);
            let llc = Self::llc_of(&base).unwrap_or(c);
            let node = node_of.get(&c).copied().unwrap_or(0);
            tree.entry(node)
                .or_default()
                .entry(llc)
                .or_default()
                .entry(pkg << 16 | core)
                .or_default()
                .push(c);
        }
        let nodes = tree
            .into_iter()
            .map(|(id, llcs)| Node {
                id,
                llcs: llcs
                    .into_iter()
                    .map(|(id, cores)| Llc {
                        id,
                        cores: cores
                            .into_iter()
                            .map(|(id, cpus)| Core { id, cpus })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        Ok(Topology { nodes })
    }

    /// The lowest CPU sharing the highest-level cache of `cpu_base`.
    fn llc_of(cpu_base: &Path) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        for e in fs::read_dir(cpu_base.join("cache")).ok()?.flatten() {
            let p = e.path();
            if !e.file_name().to_str()?.starts_with("index") {
                continue;
            }
            let level = read_u32(&p.join("level"))?;
            let shared =
                parse_cpu_list(&fs::read_to_string(p.join("shared_cpu_list")).ok()?).ok()?;
            let first = *shared.first()?;
            if best.is_none_or(|(l, _)| level > l) {
                best = Some((level, first));
            }
        }
        best.map(|(_, first)| first)
    }

    /// Every CPU in the tree, ascending.
    pub fn cpus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .nodes
            .iter()
            .flat_map(|n| {
                n.llcs
                    .iter()
                    .flat_map(|l| l.cores.iter().flat_map(|c| c.cpus.iter().copied()))
            })
            .collect();
        v.sort_unstable();
        v
    }

    /// CPUs in placement order, restricted to `allowed`: the first hardware
    /// thread of every core, taking cores round-robin across last-level
    /// caches (and so across nodes), then the second threads, and so on.
    pub fn spread_order(&self, allowed: &[u32]) -> Vec<u32> {
        let llcs: Vec<&Llc> = self.nodes.iter().flat_map(|n| n.llcs.iter()).collect();
        let max_threads = llcs
            .iter()
            .flat_map(|l| l.cores.iter().map(|c| c.cpus.len()))
            .max()
            .unwrap_or(0);
        let max_cores = llcs.iter().map(|l| l.cores.len()).max().unwrap_or(0);
        let mut out = Vec::new();
        for t in 0..max_threads {
            for k in 0..max_cores {
                for l in &llcs {
                    if let Some(&c) = l.cores.get(k).and_then(|core| core.cpus.get(t)) {
                        if allowed.contains(&c) {
                            out.push(c);
                        }
                    }
                }
            }
        }
        // CPUs the tree does not know (odd sysfs) still count.
        for &c in allowed {
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }
}

/// CPUs for `workers` workers: the `w`-th CPU of `topo`'s spread order over
/// `allowed` (`allowed` itself without a topology), wrapping around; CPU 0
/// when nothing is allowed.
pub fn worker_cpus(topo: Option<&Topology>, allowed: &[u32], workers: usize) -> Vec<u32> {
    let order = topo.map_or_else(|| allowed.to_vec(), |t| t.spread_order(allowed));
    let order = if order.is_empty() { vec![0] } else { order };
    (0..workers).map(|w| order[w % order.len()]).collect()
}

pub use skq_core::format_cpu_list;

impl Topology {
    /// Every CPU's place (core, last-level cache, node) for
    /// [`skq_core::Config::cpu_topology`]; CPUs beyond
    /// [`skq_core::MAX_CPUS`] are left out (their hints spread).
    pub fn places(&self) -> Vec<CpuPlace> {
        let mut v = Vec::new();
        for n in &self.nodes {
            for l in &n.llcs {
                for c in &l.cores {
                    for &cpu in c.cpus.iter().filter(|&&cpu| cpu < MAX_CPUS) {
                        v.push(CpuPlace {
                            cpu,
                            core: c.id,
                            llc: l.id,
                            node: n.id,
                        });
                    }
                }
            }
        }
        v.sort_unstable_by_key(|p| p.cpu);
        v
    }
}

/// `skq topology`'s text for `workers` workers (default: one per allowed
/// CPU) placed as [`crate::Skq::new`] places them: the tree, the CPUs the
/// process may use, each worker's CPU, and where a CPU hint from every CPU
/// of the tree goes (own CPU, SMT sibling, same LLC, same node or spread,
/// and to which workers).
pub fn hint_report(
    topo: &Topology,
    allowed: &[u32],
    workers: Option<usize>,
) -> Result<String, ConfigError> {
    let n = workers.unwrap_or(allowed.len().max(1));
    let mut cfg = Config::new(Policy::Cpu, n);
    cfg.validate()?;
    cfg.worker_cpus = worker_cpus(Some(topo), allowed, n);
    cfg.cpu_topology = topo.places();
    cfg.validate()?;
    let map = CpuMap::new(&cfg);
    let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut s = String::new();
    let _ = write!(s, "{topo}");
    let _ = writeln!(s, "CPUs this process may use: {}", format_cpu_list(allowed));
    let how = if workers.is_some() {
        "--workers"
    } else {
        "default: one per allowed CPU"
    };
    let _ = writeln!(s, "workers: {n} ({how}), placed in spread order:");
    for cpu in cfg
        .worker_cpus
        .iter()
        .copied()
        .collect::<std::collections::BTreeSet<_>>()
    {
        let ws: Vec<String> = (0..n)
            .filter(|&w| cfg.worker_cpus[w] == cpu)
            .map(|w| w.to_string())
            .collect();
        let _ = writeln!(s, "  cpu {cpu}: workers {}", ws.join(","));
    }
    let _ = writeln!(
        s,
        "CPU hints (SO_INCOMING_CPU) from each online CPU go to (salt-spread among the list):"
    );
    for cpu in topo.cpus() {
        let (level, ws) = map.candidates(cpu, all);
        let ws: Vec<String> = ws.iter().map(|w| w.to_string()).collect();
        let _ = writeln!(s, "  cpu {cpu} -> {level}: workers {}", ws.join(","));
    }
    let _ = writeln!(
        s,
        "  any other CPU -> spread: every live worker; exited workers fall through to the next level"
    );
    Ok(s)
}

/// `skq topology`: [`hint_report`] for this machine and this process's CPU
/// affinity.
pub fn report(workers: Option<usize>) -> io::Result<String> {
    let topo = Topology::detect()?;
    let allowed = crate::sys::cpu::allowed_cpus()?;
    hint_report(&topo, &allowed, workers)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for n in &self.nodes {
            writeln!(f, "node {}", n.id)?;
            for l in &n.llcs {
                writeln!(f, "  llc {}", l.id)?;
                for c in &l.cores {
                    let cpus: Vec<String> = c.cpus.iter().map(|x| x.to_string()).collect();
                    writeln!(f, "    core {:#x}: cpus {}", c.id, cpus.join(","))?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    }

    #[test]
    fn parses_cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn builds_the_tree_from_a_fake_sysfs() {
        // 2 nodes, one LLC each, 2 cores per LLC, 2 threads per core:
        // node0: cores {0,4},{1,5}; node1: cores {2,6},{3,7}
        let dir = std::env::temp_dir().join(format!("skq-topo-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        write(&dir.join("cpu/online"), "0-7");
        write(&dir.join("node/node0/cpulist"), "0-1,4-5");
        write(&dir.join("node/node1/cpulist"), "2-3,6-7");
        for c in 0..8u32 {
            let base = dir.join(format!("cpu/cpu{c}"));
            write(&base.join("topology/core_id"), &(c % 4).to_string());
            write(
                &base.join("topology/physical_package_id"),
                &((c % 4) / 2).to_string(),
            );
            let llc = if c % 4 < 2 { "0-1,4-5" } else { "2-3,6-7" };
            write(&base.join("cache/index3/level"), "3");
            write(&base.join("cache/index3/shared_cpu_list"), llc);
            write(&base.join("cache/index0/level"), "1");
            write(
                &base.join("cache/index0/shared_cpu_list"),
                &format!("{c},{}", (c + 4) % 8),
            );
        }
        let t = Topology::from_sysfs(&dir).unwrap();
        assert_eq!(t.nodes.len(), 2);
        assert_eq!(t.nodes[1].llcs[0].id, 2);
        assert_eq!(t.nodes[0].llcs[0].cores[1].cpus, vec![1, 5]);
        assert_eq!(t.cpus(), (0..8).collect::<Vec<_>>());
        // Physical cores first, alternating caches, siblings last.
        assert_eq!(t.spread_order(&t.cpus()), vec![0, 2, 1, 3, 4, 6, 5, 7]);
        assert_eq!(t.spread_order(&[1, 5, 9]), vec![1, 5, 9]);
        assert!(t.to_string().contains("core 0x1: cpus 1,5"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reads_this_machine() {
        let t = Topology::detect().unwrap();
        assert!(!t.cpus().is_empty());
        let r = report(None).unwrap();
        assert!(r.contains("CPUs this process may use"), "{r}");
    }

    /// The 2-CPU VM: separate cores, one LLC, one node.
    fn vm() -> Topology {
        Topology {
            nodes: vec![Node {
                id: 0,
                llcs: vec![Llc {
                    id: 0,
                    cores: (0..2)
                        .map(|c| Core {
                            id: c,
                            cpus: vec![c],
                        })
                        .collect(),
                }],
            }],
        }
    }

    #[test]
    fn places_and_worker_cpus() {
        let t = vm();
        assert_eq!(
            t.places()[1],
            CpuPlace {
                cpu: 1,
                core: 1,
                llc: 0,
                node: 0
            }
        );
        assert_eq!(worker_cpus(Some(&t), &[0, 1], 3), vec![0, 1, 0]);
        assert_eq!(worker_cpus(None, &[], 2), vec![0, 0]);
        assert_eq!(format_cpu_list(&[8, 0, 1, 2, 3, 10, 11]), "0-3,8,10,11");
    }

    #[test]
    fn the_report_says_where_every_cpus_hints_go() {
        // The bench harness: the server confined to CPU 0 with 8 workers,
        // hints arriving from the generator's CPU 1.
        let r = hint_report(&vm(), &[0], Some(8)).unwrap();
        assert!(r.contains("CPUs this process may use: 0\n"), "{r}");
        assert!(r.contains("cpu 0: workers 0,1,2,3,4,5,6,7"), "{r}");
        assert!(
            r.contains("cpu 0 -> own CPU: workers 0,1,2,3,4,5,6,7"),
            "{r}"
        );
        assert!(
            r.contains("cpu 1 -> same LLC: workers 0,1,2,3,4,5,6,7"),
            "{r}"
        );
        let r = hint_report(&vm(), &[0, 1], None).unwrap();
        assert!(r.contains("workers: 2 (default"), "{r}");
        assert!(r.contains("cpu 1 -> own CPU: workers 1"), "{r}");
        let e = hint_report(&vm(), &[0, 1], Some(65)).unwrap_err();
        assert!(e.to_string().contains("--workers 65"), "{e}");
    }
}
