//! CPU time and context switches of running processes, from
//! `/proc/PID/stat`, `/proc/PID/task/*/schedstat` and
//! `/proc/PID/task/*/status`: the server's CPU and switches over a point are
//! the difference of two readings ([`cpu_between`] for the CPU).

use anyhow::{anyhow, Context, Result};
use skq_report::result::{CpuTime, CtxSwitches};

/// User and system CPU time of a live process, from `/proc/PID/stat`.
pub fn proc_cpu_time(pid: u32) -> Result<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    parse_stat_cpu(&stat, skq_sys::process::clock_ticks_per_sec())
}

/// CPU time of a process including its reaped children (`/proc/PID/stat`
/// fields 14–17: utime, stime, cutime, cstime), comparable with the
/// resource usage `wait4` returns for it (see [`crate::disturbance`]).
pub fn proc_cpu_time_with_reaped(pid: u32) -> Result<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    parse_stat_cpu_with_reaped(&stat, skq_sys::process::clock_ticks_per_sec())
}

/// utime + cutime and stime + cstime (fields 14–17) of a `/proc/PID/stat`
/// line, in seconds.
pub fn parse_stat_cpu_with_reaped(stat: &str, ticks_per_s: f64) -> Result<CpuTime> {
    let field = |n: usize| -> Option<u64> {
        // Fields are counted after the command name's closing parenthesis:
        // field n is the (n - 3)th there.
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(n - 3)?
            .parse()
            .ok()
    };
    let (u, s, cu, cs) = (|| Some((field(14)?, field(15)?, field(16)?, field(17)?)))()
        .ok_or_else(|| anyhow!("malformed /proc stat line"))?;
    Ok(CpuTime {
        user_s: (u + cu) as f64 / ticks_per_s,
        sys_s: (s + cs) as f64 / ticks_per_s,
    })
}

/// CPU time of a live process plus its live direct children (nginx's
/// workers are child processes of its master; threads are already counted
/// in their process). A child that exited between two readings takes its
/// time with it, so deltas are a lower bound for multi-process servers.
pub fn tree_cpu_time(pid: u32) -> Result<CpuTime> {
    Ok(tree_reading(pid, false)?.ticks)
}

/// One reading of a process tree's CPU time: the user/system split from
/// `/proc/PID/stat` (whole clock ticks) and the scheduler's exact run time
/// of its live threads (ns, [`skq_sys::process::thread_exec_ns`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuReading {
    /// From `/proc/PID/stat` ([`tree_cpu_time`]).
    pub ticks: CpuTime,
    /// Exact run time of the live threads, ns; `None` where unreadable.
    pub exec_ns: Option<u64>,
}

/// Reads a process tree's CPU time (the process and its live direct
/// children, as [`tree_cpu_time`]).
pub fn tree_cpu_reading(pid: u32) -> Result<CpuReading> {
    tree_reading(pid, true)
}

/// The process and its live direct children, listed once; the exact time
/// only when asked for, and `None` when any counted part lacks it.
fn tree_reading(pid: u32, exact: bool) -> Result<CpuReading> {
    let exec_of = |p: u32| {
        exact
            .then(|| skq_sys::process::thread_exec_ns(p).ok())
            .flatten()
    };
    let mut r = CpuReading {
        ticks: proc_cpu_time(pid)?,
        exec_ns: exec_of(pid),
    };
    for child in child_pids(pid)? {
        // A child may exit between listing and reading: skip it.
        if let Ok(t) = proc_cpu_time(child) {
            r.ticks.user_s += t.user_s;
            r.ticks.sys_s += t.sys_s;
            r.exec_ns = r.exec_ns.zip(exec_of(child)).map(|(a, b)| a + b);
        }
    }
    Ok(r)
}

/// The CPU time between two readings. `/proc/PID/stat` counts whole ticks
/// (10 ms): over a 1.5 s point of a server using 0.1 CPU that is ±7%, too
/// coarse to compare two servers' cost per reply. So the total is the
/// exact run time, split between user and system in the ticks' proportion
/// (all user when no tick fell in the window). When the exact total falls
/// short of the ticks' by more than their rounding (`tick_s` twice), a
/// thread exited in between and took its time with it: the ticks are used.
pub fn cpu_between(a: CpuReading, b: CpuReading, tick_s: f64) -> CpuTime {
    let user = b.ticks.user_s - a.ticks.user_s;
    let sys = b.ticks.sys_s - a.ticks.sys_s;
    let ticked = user + sys;
    let exact = match (a.exec_ns, b.exec_ns) {
        (Some(x), Some(y)) if y >= x => (y - x) as f64 * 1e-9,
        _ => {
            return CpuTime {
                user_s: user,
                sys_s: sys,
            }
        }
    };
    if exact + 2.0 * tick_s < ticked {
        return CpuTime {
            user_s: user,
            sys_s: sys,
        };
    }
    let user_share = if ticked > 0.0 { user / ticked } else { 1.0 };
    CpuTime {
        user_s: exact * user_share,
        sys_s: exact * (1.0 - user_share),
    }
}

/// Context switches of every live thread of a live process plus those of
/// its live direct children (nginx's workers), like [`tree_cpu_time`]. A
/// thread or child that exited between two readings takes its switches
/// with it: deltas are lower bounds for servers whose threads come and go.
pub fn tree_ctx_switches(pid: u32) -> Result<CtxSwitches> {
    let mut total = skq_sys::process::thread_ctx_switches(pid)
        .with_context(|| format!("reading /proc/{pid}/task/*/status"))?;
    for child in child_pids(pid)? {
        // A child may exit between listing and reading: skip it.
        if let Ok(c) = skq_sys::process::thread_ctx_switches(child) {
            total.add(c);
        }
    }
    Ok(CtxSwitches {
        voluntary: total.voluntary,
        involuntary: total.involuntary,
    })
}

/// The switches from reading `a` to a later reading `b`, each saturating at
/// zero (see [`tree_ctx_switches`] on threads that exit in between).
pub fn ctx_switches_between(a: CtxSwitches, b: CtxSwitches) -> CtxSwitches {
    CtxSwitches {
        voluntary: b.voluntary.saturating_sub(a.voluntary),
        involuntary: b.involuntary.saturating_sub(a.involuntary),
    }
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

    fn reading(user_s: f64, sys_s: f64, exec_ns: Option<u64>) -> CpuReading {
        CpuReading {
            ticks: CpuTime { user_s, sys_s },
            exec_ns,
        }
    }

    #[test]
    fn the_exact_total_is_split_in_the_ticks_proportion() {
        // 3 ticks user, 1 system; 37.3 ms exact.
        let a = reading(1.00, 0.50, Some(1_000_000_000));
        let b = reading(1.03, 0.51, Some(1_037_300_000));
        let c = cpu_between(a, b, 0.01);
        assert!((c.user_s + c.sys_s - 0.0373).abs() < 1e-12, "{c:?}");
        assert!((c.user_s - 0.0373 * 0.75).abs() < 1e-9, "{c:?}");
        // No tick in the window: all of it counted as user time.
        let c = cpu_between(a, reading(1.00, 0.50, Some(1_004_000_000)), 0.01);
        assert_eq!((c.user_s, c.sys_s), (0.004, 0.0));
    }

    #[test]
    fn a_thread_that_exited_sends_the_count_back_to_the_ticks() {
        // The ticks saw 200 ms, the live threads only 50 ms: a thread that
        // ran 150 ms exited between the readings.
        let a = reading(1.0, 0.0, Some(2_000_000_000));
        let b = reading(1.15, 0.05, Some(2_050_000_000));
        let c = cpu_between(a, b, 0.01);
        assert!(
            (c.user_s - 0.15).abs() < 1e-9 && (c.sys_s - 0.05).abs() < 1e-9,
            "{c:?}"
        );
        // Without exact readings, the ticks as well.
        let c = cpu_between(reading(1.0, 0.0, None), b, 0.01);
        assert!((c.user_s - 0.15).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn a_live_reading_of_this_process_has_its_exact_time() {
        let r = tree_cpu_reading(std::process::id()).unwrap();
        assert!(r.exec_ns.is_some_and(|e| e > 0), "{r:?}");
    }

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
        // With the reaped children's time (fields 16 and 17: 0 and 0 here;
        // then 30 and 20).
        assert_eq!(parse_stat_cpu_with_reaped(line, 100.0).unwrap(), t);
        let with = line.replace("250 50 0 0", "250 50 30 20");
        let t = parse_stat_cpu_with_reaped(&with, 100.0).unwrap();
        assert!((t.user_s - 2.8).abs() < 1e-9 && (t.sys_s - 0.7).abs() < 1e-9);
        assert!(parse_stat_cpu_with_reaped("garbage", 100.0).is_err());
    }

    #[test]
    fn own_ctx_switches_are_readable_and_differences_saturate() {
        let pid = std::process::id();
        let a = tree_ctx_switches(pid).unwrap();
        // This test thread blocks in the sleep: at least one voluntary
        // switch of a thread that lives through both readings.
        std::thread::sleep(std::time::Duration::from_millis(1));
        let b = tree_ctx_switches(pid).unwrap();
        assert!(b.voluntary > 0, "{b:?}");
        let d = ctx_switches_between(a, b);
        assert!(d.voluntary <= b.voluntary && d.involuntary <= b.involuntary);
        // A later reading below an earlier one (a thread exited) gives 0.
        let gone = CtxSwitches {
            voluntary: 1,
            involuntary: 2,
        };
        assert_eq!(
            ctx_switches_between(gone, CtxSwitches::default()).total(),
            0
        );
    }

    #[test]
    fn own_cpu_time_is_readable() {
        let t = proc_cpu_time(std::process::id()).unwrap();
        assert!(t.user_s >= 0.0 && t.sys_s >= 0.0);
    }
}
