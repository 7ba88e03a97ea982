//! CPU time of running processes, from `/proc/PID/stat`: the server's
//! CPU over a point is the difference of two readings.

use anyhow::{anyhow, Context, Result};
use skq_report::result::CpuTime;

/// User and system CPU time of a live process, from `/proc/PID/stat`.
pub fn proc_cpu_time(pid: u32) -> Result<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    parse_stat_cpu(&stat, skq_sys::process::clock_ticks_per_sec())
}

/// CPU time of a live process plus its live direct children (nginx's
/// workers are child processes of its master; threads are already counted
/// in their process). A child that exited between two readings takes its
/// time with it, so deltas are a lower bound for multi-process servers.
pub fn tree_cpu_time(pid: u32) -> Result<CpuTime> {
    let mut total = proc_cpu_time(pid)?;
    for child in child_pids(pid)? {
        // A child may exit between listing and reading: skip it.
        if let Ok(t) = proc_cpu_time(child) {
            total.user_s += t.user_s;
            total.sys_s += t.sys_s;
        }
    }
    Ok(total)
}

/// Live processes whose parent is `pid`.
pub fn child_pids(pid: u32) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc")
        .context("listing /proc")?
        .flatten()
    {
        let name = entry.file_name();
        let Some(p) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        if parse_stat_ppid(&stat) == Some(pid) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The parent pid (field 4) of a `/proc/PID/stat` line.
pub fn parse_stat_ppid(stat: &str) -> Option<u32> {
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// utime and stime (fields 14 and 15) of a `/proc/PID/stat` line, in seconds.
pub fn parse_stat_cpu(stat: &str, ticks_per_s: f64) -> Result<CpuTime> {
    let (user, sys) = skq_sys::process::parse_stat_cpu_ticks(stat)
        .ok_or_else(|| anyhow!("malformed /proc stat line"))?;
    Ok(CpuTime {
        user_s: user as f64 / ticks_per_s,
        sys_s: sys as f64 / ticks_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_spaces_in_the_name() {
        let line = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 0 0";
        let t = parse_stat_cpu(line, 100.0).unwrap();
        assert_eq!(
            t,
            CpuTime {
                user_s: 2.5,
                sys_s: 0.5
            }
        );
        assert!(parse_stat_cpu("garbage", 100.0).is_err());
        assert_eq!(parse_stat_ppid(line), Some(1));
    }

    #[test]
    fn own_cpu_time_is_readable() {
        let t = proc_cpu_time(std::process::id()).unwrap();
        assert!(t.user_s >= 0.0 && t.sys_s >= 0.0);
    }
}
