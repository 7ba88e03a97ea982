//! Disturbance: the CPU that processes outside the run used on the machine
//! while a point was measured.
//!
//! Over each point's measured window (from the end of the warm-up to the
//! generator's exit, the window of the server's CPU time) the runner reads
//! the machine's CPU counters (`/proc/stat`, the aggregate `cpu` line)
//! before and after, and takes away what the run itself used:
//! (when the sweep may use only some of the machine's CPUs, as under
//! `taskset -c 0-3 skq bench ...`, the per-CPU lines of those CPUs instead,
//! so sweeps confined to disjoint CPU sets do not count each other):
//!
//! ```text
//! disturbance = (Δ machine busy − Δ server CPU − Δ generator CPU) / window
//! machine busy = user + nice + system + steal      (guest is inside user)
//! ```
//!
//! in **CPUs** (1.0 = one CPU busy the whole window), clamped at 0.
//!
//! * **What counts.** `user`, `nice` and `system` of every process and
//!   kernel thread, and `steal` (time the hypervisor gave this VM's CPUs to
//!   someone else: disturbance by definition). `irq` and `softirq` are left
//!   out: the run's own loopback traffic is processed there (packet
//!   receive, emulated RSS, `ksoftirqd`), attributed to no process, so it
//!   cannot be told from anyone else's; it is recorded beside the figure
//!   ([`Disturbance::irq_cpu`]) but not judged. `idle` and `iowait` are idle.
//! * **What is the run.** The server with its live direct children (nginx's
//!   workers; [`crate::procstat::tree_cpu_time`], the same reading as its
//!   CPU per reply) and the load generator `skq load`, a child process of
//!   the harness: its CPU at the window's start (`/proc/PID/stat`, its own
//!   and its reaped children's) and at its exit (`wait4`'s resource usage).
//!   The harness itself (a thread that polls the generator every 10 ms, the
//!   emulated-RSS and time-series samplers) is *not* taken away: it is tiny
//!   and it lets a test burn CPU on a thread beside the sweep.
//! * **Error.** `/proc/stat` and `/proc/PID/stat` count in ticks of
//!   `1/CLK_TCK` s (10 ms); each difference is off by up to a tick per
//!   counter and CPU, so the figure carries an error of a few ticks per
//!   window: about ±0.02 CPU over a 2 s window on 2 CPUs, more on shorter
//!   windows and more CPUs. A negative figure (tick rounding; a server
//!   thread or child that exited inside the window and took its time along)
//!   is clamped to 0, the raw parts are kept.
//! * **Judged.** A point is *disturbed* when the figure is above the sweep's
//!   `disturbed_above` (`--disturbed-above`, default
//!   [`DEFAULT_DISTURBED_ABOVE`] CPU); the summary counts the disturbed
//!   points among those that decide each curve's answer.

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

/// Default threshold (CPUs) above which a point is disturbed: five ticks of
/// one CPU per second, above the tick error of a 2 s window.
pub const DEFAULT_DISTURBED_ABOVE: f64 = 0.05;

/// The machine's cumulative CPU counters (`/proc/stat`, the aggregate `cpu`
/// line), in ticks of `1/CLK_TCK` s summed over every CPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MachineCpu {
    /// Normal processes in user mode (guest time included).
    pub user: u64,
    /// Niced processes in user mode.
    pub nice: u64,
    /// Kernel mode, outside interrupts.
    pub system: u64,
    /// Idle.
    pub idle: u64,
    /// Idle with I/O outstanding.
    pub iowait: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts (and `ksoftirqd`).
    pub softirq: u64,
    /// Taken by the hypervisor for other guests.
    pub steal: u64,
}

impl MachineCpu {
    /// Parses the aggregate `cpu` line of `/proc/stat` text. Kernels older
    /// than the `steal` field read it as 0.
    pub fn parse(text: &str) -> Result<MachineCpu> {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some("cpu"))
            .ok_or_else(|| anyhow!("/proc/stat: no aggregate `cpu` line"))?;
        Self::parse_line(line)
    }

    /// The sum of the `cpuN` lines of `/proc/stat` text for N in `cpus`: the
    /// counters of the CPUs a confined sweep may use. An error when one of
    /// them has no line (offline, or not this machine's).
    pub fn parse_cpus(text: &str, cpus: &[usize]) -> Result<MachineCpu> {
        let mut sum = MachineCpu::default();
        for &c in cpus {
            let name = format!("cpu{c}");
            let line = text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(name.as_str()))
                .ok_or_else(|| anyhow!("/proc/stat: no `{name}` line"))?;
            let m = Self::parse_line(line)?;
            sum.user += m.user;
            sum.nice += m.nice;
            sum.system += m.system;
            sum.idle += m.idle;
            sum.iowait += m.iowait;
            sum.irq += m.irq;
            sum.softirq += m.softirq;
            sum.steal += m.steal;
        }
        Ok(sum)
    }

    fn parse_line(line: &str) -> Result<MachineCpu> {
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map(|f| f.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow!("/proc/stat: malformed `cpu` line ({e}): {line}"))?;
        if v.len() < 7 {
            return Err(anyhow!(
                "/proc/stat: `cpu` line has {} fields: {line}",
                v.len()
            ));
        }
        Ok(MachineCpu {
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v.get(7).copied().unwrap_or(0),
        })
    }

    /// The counters now, of the CPUs in `cpus` when it is a strict subset of
    /// the machine's (a confined sweep), else (also for an empty list) of
    /// the whole machine.
    pub fn read_for(cpus: &[usize]) -> Result<MachineCpu> {
        let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        let online = text
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .next()
                    .and_then(|w| w.strip_prefix("cpu"))
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .count();
        if cpus.is_empty() || cpus.len() >= online {
            MachineCpu::parse(&text)
        } else {
            MachineCpu::parse_cpus(&text, cpus)
        }
    }

    /// Ticks that count as busy: user + nice + system + steal.
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.steal
    }

    /// Interrupt ticks (irq + softirq), recorded but not judged.
    pub fn interrupts(&self) -> u64 {
        self.irq + self.softirq
    }
}

/// The disturbance of one point (see the module docs). Every figure is in
/// CPUs over the window: CPU-seconds divided by the window's seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Disturbance {
    /// CPU used by processes outside the run, clamped at 0.
    pub cpu: f64,
    /// Above the sweep's threshold.
    pub disturbed: bool,
    /// Machine busy (user + nice + system + steal).
    pub machine_busy_cpu: f64,
    /// The server's CPU (with its live direct children).
    pub server_cpu: f64,
    /// The load generator's CPU.
    pub generator_cpu: f64,
    /// irq + softirq on the machine (not judged: the run's own loopback
    /// traffic is processed there).
    pub irq_cpu: f64,
    /// The window, seconds (between the two `/proc/stat` readings).
    pub window_s: f64,
}

impl Disturbance {
    /// The disturbance between two readings `window_s` apart, given the
    /// server's and the generator's CPU-seconds over the same window, judged
    /// against `threshold` CPUs. None for an empty window or counters that
    /// went backwards.
    pub fn between(
        before: &MachineCpu,
        after: &MachineCpu,
        ticks_per_s: f64,
        window_s: f64,
        server_cpu_s: f64,
        generator_cpu_s: f64,
        threshold: f64,
    ) -> Option<Disturbance> {
        if !(window_s > 0.0 && ticks_per_s > 0.0) {
            return None;
        }
        let busy = after.busy().checked_sub(before.busy())? as f64 / ticks_per_s;
        let irq = after.interrupts().checked_sub(before.interrupts())? as f64 / ticks_per_s;
        let others = (busy - server_cpu_s - generator_cpu_s) / window_s;
        let cpu = if others.is_finite() {
            others.max(0.0)
        } else {
            0.0
        };
        Some(Disturbance {
            cpu,
            disturbed: cpu > threshold,
            machine_busy_cpu: busy / window_s,
            server_cpu: server_cpu_s / window_s,
            generator_cpu: generator_cpu_s / window_s,
            irq_cpu: irq / window_s,
            window_s,
        })
    }

    /// The table cell: the figure with two decimals, `!` when disturbed.
    pub fn cell(&self) -> String {
        let mark = if self.disturbed { "!" } else { "" };
        format!("{:.2}{mark}", self.cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  1000 10 500 90000 20 5 30 7 0 0\n\
                          cpu0 500 5 250 45000 10 2 15 3 0 0\n\
                          cpu1 500 5 250 45000 10 3 15 4 0 0\n\
                          intr 12345\nctxt 999\n";
    // 2 s later on 2 CPUs (400 ticks): +120 user, +0 nice, +70 system,
    // +10 steal = 200 busy ticks (2.0 CPU-s); +4 irq +16 softirq.
    const AFTER: &str = "cpu  1120 10 570 90180 20 9 46 17 0 0\n\
                         cpu0 560 5 285 45090 10 4 23 8 0 0\n\
                         cpu1 560 5 285 45090 10 5 23 9 0 0\n";

    #[test]
    fn parses_the_aggregate_line() {
        let m = MachineCpu::parse(BEFORE).unwrap();
        assert_eq!(
            m,
            MachineCpu {
                user: 1000,
                nice: 10,
                system: 500,
                idle: 90000,
                iowait: 20,
                irq: 5,
                softirq: 30,
                steal: 7,
            }
        );
        assert_eq!((m.busy(), m.interrupts()), (1517, 35));
        // An old kernel without steal; garbage.
        assert_eq!(MachineCpu::parse("cpu 1 2 3 4 5 6 7\n").unwrap().steal, 0);
        assert!(MachineCpu::parse("cpu0 1 2 3 4 5 6 7 8\n").is_err());
        assert!(MachineCpu::parse("cpu 1 2 x 4 5 6 7 8\n").is_err());
        assert!(MachineCpu::parse("cpu 1 2 3\n").is_err());
        // This machine's own file parses.
        assert!(MachineCpu::read_for(&[]).is_ok());
        assert!(MachineCpu::read_for(&[0]).is_ok());
    }

    #[test]
    fn a_confined_sweep_counts_only_its_cpus() {
        let m = MachineCpu::parse_cpus(AFTER, &[1]).unwrap();
        assert_eq!((m.user, m.system, m.steal, m.softirq), (560, 285, 9, 23));
        // Both CPUs sum to the aggregate line.
        assert_eq!(
            MachineCpu::parse_cpus(AFTER, &[0, 1]).unwrap(),
            MachineCpu::parse(AFTER).unwrap()
        );
        // A CPU the file does not list is an error, not a zero.
        assert!(MachineCpu::parse_cpus(AFTER, &[0, 7]).is_err());
    }

    #[test]
    fn the_figure_is_machine_busy_minus_the_run_per_second() {
        let (a, b) = (
            MachineCpu::parse(BEFORE).unwrap(),
            MachineCpu::parse(AFTER).unwrap(),
        );
        // 2.0 CPU-s busy in 2 s; the server used 1.2 CPU-s, the generator
        // 0.5: 0.3 CPU-s by others = 0.15 CPU.
        let d = Disturbance::between(&a, &b, 100.0, 2.0, 1.2, 0.5, 0.05).unwrap();
        assert!((d.cpu - 0.15).abs() < 1e-9, "{d:?}");
        assert!(d.disturbed);
        assert!((d.machine_busy_cpu - 1.0).abs() < 1e-9);
        assert!((d.server_cpu - 0.6).abs() < 1e-9);
        assert!((d.generator_cpu - 0.25).abs() < 1e-9);
        // irq + softirq (20 ticks) are recorded, not counted.
        assert!((d.irq_cpu - 0.1).abs() < 1e-9);
        assert_eq!(d.cell(), "0.15!");
        // Under the threshold: not disturbed.
        let d = Disturbance::between(&a, &b, 100.0, 2.0, 1.2, 0.5, 0.2).unwrap();
        assert!(!d.disturbed);
        assert_eq!(d.cell(), "0.15");
        // The run used more than the machine counted (tick rounding, a
        // thread that exited): clamped at 0.
        let d = Disturbance::between(&a, &b, 100.0, 2.0, 1.8, 0.5, 0.05).unwrap();
        assert_eq!((d.cpu, d.disturbed), (0.0, false));
        // No window, or counters that went backwards: no figure.
        assert!(Disturbance::between(&a, &b, 100.0, 0.0, 0.0, 0.0, 0.05).is_none());
        assert!(Disturbance::between(&b, &a, 100.0, 2.0, 0.0, 0.0, 0.05).is_none());
    }
}
