//! The generator's measured capacity on this machine, kept between runs.
//!
//! `skq load --capacity` finds, per protocol and connection count, the
//! highest rate at which one generator thread keeps its send lateness p99
//! within a bound, and records it here ([`CapacityFile::record`]); `skq
//! bench` reads it before a sweep and warns about every curve whose top
//! offered rate per generator thread is above it ([`CapacityFile::check`]).
//!
//! The file is JSON at [`default_path`]. It describes one machine
//! ([`Machine`]: host name, CPUs this process may use, kernel release):
//! recording on another machine starts the file afresh, and a lookup from
//! another machine finds nothing, so figures never travel between machines.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The machine a file describes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// `/proc/sys/kernel/hostname`.
    pub hostname: String,
    /// CPUs this process may use.
    pub cpus: usize,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: String,
}

impl Machine {
    /// This machine, as far as /proc tells.
    pub fn current(cpus: usize) -> Machine {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        Machine {
            hostname: read("/proc/sys/kernel/hostname"),
            cpus,
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }
}

/// One measured capacity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityEntry {
    /// Protocol (`rpc`, `memcached`, `http`).
    pub protocol: String,
    /// Connections of the generator thread.
    pub connections: usize,
    /// Lateness bound of `at_bound_rps` (µs).
    pub bound_us: f64,
    /// Highest rate (req/s) one thread sustained within `bound_us`.
    pub at_bound_rps: f64,
    /// The machine's floor plus the same margin (µs).
    pub relative_bound_us: f64,
    /// Highest rate (req/s) within `relative_bound_us`.
    pub at_relative_bound_rps: f64,
    /// The rate (req/s) from which `bound_us` was met, when the search's
    /// slower steps failed it (absent: its first step met it, or none did,
    /// or the file predates the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_from_rps: Option<f64>,
    /// The thread's saturated rate (req/s).
    pub ceiling_rps: f64,
    /// Generator thread CPU per request at the ceiling (µs).
    pub cpu_us_per_request: f64,
    /// When it was measured (seconds since the Unix epoch).
    pub measured_unix_s: u64,
}

impl CapacityEntry {
    /// The rate a sweep may offer per generator thread: the capacity at
    /// the fixed bound, which is the lateness self-check's threshold (on a
    /// machine whose floor alone exceeds it, 0: every point is at risk).
    pub fn usable_rps(&self) -> f64 {
        self.at_bound_rps
    }
}

/// A curve whose slowest points ask one generator thread for less than the
/// rate from which it met its bound: per-thread rate asked, and the entry.
pub type BelowMet = (f64, CapacityEntry);

/// The capacity file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityFile {
    /// The machine measured.
    pub machine: Machine,
    /// One entry per (protocol, connections), the latest.
    pub entries: Vec<CapacityEntry>,
}

/// What a sweep's curve is, measured against the file.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Within the measured capacity (entry used).
    Within(CapacityEntry),
    /// Above it: per-thread rate offered, and the entry.
    Above(f64, CapacityEntry),
    /// Nothing measured for this protocol on this machine.
    Unknown,
}

/// `$SKQ_CAPACITY_FILE`, else `$XDG_CACHE_HOME/skq/capacity.json`, else
/// `$HOME/.cache/skq/capacity.json`; None without any of them.
pub fn default_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("SKQ_CAPACITY_FILE") {
        return Some(PathBuf::from(p));
    }
    let base = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("skq").join("capacity.json"))
}

impl CapacityFile {
    /// Reads `path`; `Ok(None)` if it does not exist.
    pub fn read(path: &Path) -> Result<Option<CapacityFile>, String> {
        match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| format!("{}: not a capacity file ({e})", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Adds `e` for `machine`, replacing the entry of the same protocol and
    /// connections; a file of another machine is started afresh.
    pub fn record(old: Option<CapacityFile>, machine: &Machine, e: CapacityEntry) -> CapacityFile {
        let mut f = match old {
            Some(f) if f.machine == *machine => f,
            _ => CapacityFile {
                machine: machine.clone(),
                entries: Vec::new(),
            },
        };
        f.entries
            .retain(|x| !(x.protocol == e.protocol && x.connections == e.connections));
        f.entries.push(e);
        f.entries
            .sort_by(|a, b| (&a.protocol, a.connections).cmp(&(&b.protocol, b.connections)));
        f
    }

    /// Writes the file (creating its directory).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let json = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The entry for `protocol` at `connections` on `machine`: the exact
    /// count if measured, else the nearest measured count (by ratio).
    pub fn lookup(
        &self,
        machine: &Machine,
        protocol: &str,
        connections: usize,
    ) -> Option<&CapacityEntry> {
        if self.machine != *machine {
            return None;
        }
        let dist = |c: usize| (c.max(1) as f64 / connections.max(1) as f64).ln().abs();
        self.entries
            .iter()
            .filter(|e| e.protocol == protocol)
            .min_by(|a, b| dist(a.connections).total_cmp(&dist(b.connections)))
    }

    /// Judges a curve offering up to `top_rps` of `protocol` over
    /// `connections` from `threads` generator threads.
    pub fn check(
        file: Option<&CapacityFile>,
        machine: &Machine,
        protocol: &str,
        connections: usize,
        threads: usize,
        top_rps: f64,
    ) -> Verdict {
        let Some(e) = file.and_then(|f| f.lookup(machine, protocol, connections)) else {
            return Verdict::Unknown;
        };
        let threads = threads.max(1);
        // Each thread drives its share of the connections.
        let per_thread = top_rps / threads as f64;
        if per_thread > e.usable_rps() {
            Verdict::Above(per_thread, e.clone())
        } else {
            Verdict::Within(e.clone())
        }
    }

    /// Judges a curve's slowest point, offering `bottom_rps` of `protocol`
    /// over `connections` from `threads` generator threads: `Some` when
    /// that is below the rate from which the recorded search met its bound
    /// (the slower steps failed it, so such points may fail the lateness
    /// or read-lag self-check).
    pub fn check_slowest(
        file: Option<&CapacityFile>,
        machine: &Machine,
        protocol: &str,
        connections: usize,
        threads: usize,
        bottom_rps: f64,
    ) -> Option<BelowMet> {
        let e = file.and_then(|f| f.lookup(machine, protocol, connections))?;
        let per_thread = bottom_rps / threads.max(1) as f64;
        let from = e.met_from_rps?;
        (per_thread < from).then(|| (per_thread, e.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(host: &str) -> Machine {
        Machine {
            hostname: host.into(),
            cpus: 2,
            kernel: "6.1".into(),
        }
    }

    fn entry(protocol: &str, connections: usize, rps: f64) -> CapacityEntry {
        CapacityEntry {
            protocol: protocol.into(),
            connections,
            bound_us: 20.0,
            at_bound_rps: rps,
            relative_bound_us: 35.0,
            at_relative_bound_rps: rps * 1.5,
            met_from_rps: None,
            ceiling_rps: rps * 3.0,
            cpu_us_per_request: 4.0,
            measured_unix_s: 1,
        }
    }

    #[test]
    fn record_replaces_the_same_point_and_restarts_on_another_machine() {
        let f = CapacityFile::record(None, &m("a"), entry("rpc", 64, 1000.0));
        let f = CapacityFile::record(Some(f), &m("a"), entry("http", 64, 500.0));
        let f = CapacityFile::record(Some(f), &m("a"), entry("rpc", 64, 2000.0));
        assert_eq!(f.entries.len(), 2);
        let rpc = f.lookup(&m("a"), "rpc", 64).unwrap();
        assert_eq!(rpc.at_bound_rps, 2000.0);
        let other = CapacityFile::record(Some(f), &m("b"), entry("rpc", 8, 10.0));
        assert_eq!(other.entries.len(), 1);
        assert_eq!(other.machine, m("b"));
    }

    #[test]
    fn lookup_takes_the_nearest_count_and_only_this_machine() {
        let mut f = CapacityFile::record(None, &m("a"), entry("rpc", 8, 100.0));
        f = CapacityFile::record(Some(f), &m("a"), entry("rpc", 96, 300.0));
        assert_eq!(f.lookup(&m("a"), "rpc", 64).unwrap().connections, 96);
        assert_eq!(f.lookup(&m("a"), "rpc", 16).unwrap().connections, 8);
        assert!(f.lookup(&m("a"), "http", 64).is_none());
        assert!(f.lookup(&m("b"), "rpc", 64).is_none());
    }

    #[test]
    fn check_divides_the_rate_among_threads() {
        let f = CapacityFile::record(None, &m("a"), entry("rpc", 64, 1000.0));
        // usable = the fixed bound's 1000 per thread
        match CapacityFile::check(Some(&f), &m("a"), "rpc", 64, 1, 1600.0) {
            Verdict::Above(per, e) => assert!(per == 1600.0 && e.usable_rps() == 1000.0),
            v => panic!("{v:?}"),
        }
        assert!(matches!(
            CapacityFile::check(Some(&f), &m("a"), "rpc", 64, 2, 1600.0),
            Verdict::Within(_)
        ));
        assert_eq!(
            CapacityFile::check(None, &m("a"), "rpc", 64, 1, 1.0),
            Verdict::Unknown
        );
    }

    #[test]
    fn slowest_points_below_the_rate_met_from_are_named() {
        let met_from = |from: Option<f64>| {
            let mut e = entry("memcached", 384, 38_000.0);
            e.met_from_rps = from;
            CapacityFile::record(None, &m("a"), e)
        };
        let f = met_from(Some(2_250.0));
        let (per, e) =
            CapacityFile::check_slowest(Some(&f), &m("a"), "memcached", 384, 2, 3_000.0).unwrap();
        assert_eq!((per, e.met_from_rps), (1_500.0, Some(2_250.0)));
        assert!(
            CapacityFile::check_slowest(Some(&f), &m("a"), "memcached", 384, 1, 3_000.0).is_none()
        );
        // The first step met the bound: nothing is known below it.
        let f = met_from(None);
        assert!(
            CapacityFile::check_slowest(Some(&f), &m("a"), "memcached", 384, 1, 10.0).is_none()
        );
        assert!(CapacityFile::check_slowest(None, &m("a"), "memcached", 384, 1, 10.0).is_none());
    }

    #[test]
    fn a_file_written_before_met_from_reads_without_it() {
        let v = serde_json::to_value(CapacityFile::record(
            None,
            &m("a"),
            entry("rpc", 64, 1000.0),
        ))
        .unwrap();
        assert!(v["entries"][0].get("met_from_rps").is_none());
        let f: CapacityFile = serde_json::from_value(v).unwrap();
        assert_eq!(f.entries[0].met_from_rps, None);
        assert_eq!(f.entries[0].at_bound_rps, 1000.0);
    }

    #[test]
    fn files_round_trip_and_a_missing_file_is_none() {
        let dir = std::env::temp_dir().join(format!("skq-cap-{}", std::process::id()));
        let path = dir.join("sub").join("capacity.json");
        assert_eq!(CapacityFile::read(&path).unwrap(), None);
        let f = CapacityFile::record(None, &m("a"), entry("memcached", 96, 7.0));
        f.write(&path).unwrap();
        assert_eq!(CapacityFile::read(&path).unwrap(), Some(f));
        std::fs::write(&path, b"{not json").unwrap();
        assert!(CapacityFile::read(&path)
            .unwrap_err()
            .contains("not a capacity file"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
