//! The CPU topology tree (SKQ's kqdom): NUMA node → last-level cache → core →
//! CPUs (hyperthreads), read from /sys.
//!
//! The runtime uses it to place workers: one per physical core first, spread
//! over last-level caches and nodes, hyperthread siblings last.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::Path;

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

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> io::Result<Vec<u32>> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("bad CPU list `{s}`"));
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if b < a {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
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
    }
}
