//! Running real processes: the server under test and the load generator.
//!
//! Per point, [`ProcessRunner`]:
//! 1. picks a free loopback port and starts the server (its own stdout and
//!    stderr go to the point's server log);
//! 2. waits until it is ready: an skq server prints `listening on ADDR`;
//!    every server is also polled with TCP connects (the peers print
//!    nothing). A server that exits, or is not ready within
//!    [`READY_TIMEOUT`], fails the point with the tail of its log;
//! 3. starts `skq load` with the point's rate, waits out the warm-up and
//!    reads the server's CPU time (`/proc/PID/stat` for the user/system
//!    split, `/proc/PID/task/*/schedstat` for the exact total:
//!    [`crate::procstat::cpu_between`])
//!    and the context switches of its threads (`/proc/PID/task/*/status`,
//!    plus those of its child processes: nginx's workers);
//! 4. waits for the generator, reads the server's CPU time and context
//!    switches again (so `server_cpu` and the point's `server_ctx_switches`
//!    cover the measured window plus the generator's drain), checks the
//!    server is still alive, and stops it with SIGTERM (SIGKILL after
//!    [`STOP_GRACE`]). Threads (or child processes) that exit between the
//!    two readings take their switches with them: the count is then a lower
//!    bound;
//! 5. reads the generator's JSON; the generator's own CPU time comes from
//!    its result, or from `wait4`'s resource usage when it reported none.
//!
//! Beside the server's readings of steps 3 and 4 it reads the machine's CPU
//! counters (`/proc/stat`) and, at the window's start, the generator's CPU
//! time: the point's disturbance, the CPU used by processes outside the
//! run over the same window, is the machine's busy time less the server's
//! and the generator's ([`crate::disturbance`]).
//!
//! With [`Affinity::Split`] the server is confined to the first half of the
//! CPUs and the generator to the rest (`sched_setaffinity` in the child
//! before `exec`).
//!
//! With emulated RSS ([`crate::rss`]) both run in the sweep's network
//! namespace: the server under `ip netns exec NS` (which execs in place, so
//! its PID, CPU time and signals are its own), the generator with
//! `skq load --netns NS`; the port search and the readiness connects run on
//! a thread that entered the namespace; the mask is set back to the whole
//! set at each point's start and, with a migration period, rewritten while
//! the generator runs.
//!
//! After a first SIGINT/SIGTERM ([`crate::interrupt`]) a point in flight
//! ends at once: the generator is killed and the server stopped as usual.

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use skq_report::result::{CpuTime, CtxSwitches, PointResult};
use skq_sys::netns::RpsNamespace;
use skq_sys::process::{reap, send_signal, Signal};

use crate::config::{Affinity, Curve, Settings};
use crate::disturbance::{Disturbance, MachineCpu};
use crate::interrupt;
use crate::procstat::proc_cpu_time_with_reaped;
pub use crate::procstat::{
    child_pids, ctx_switches_between, parse_stat_cpu, parse_stat_ppid, proc_cpu_time,
    tree_cpu_time, tree_ctx_switches,
};
use crate::rss::RssEnv;
pub use crate::server::ServerProcess;
use crate::sweep::{PlannedPoint, PointFiles, Runner};

/// How long a server may take to become ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// `skq load`'s exit status when its run completed but a self-check failed
/// (`skq_load::cli::EXIT_CHECK_FAILED`).
const LOAD_CHECK_FAILED: i32 = 3;
/// `skq load`'s exit status when it ended a run at the end of its warm-up
/// (`--abort-if-warmup-stalled`; `skq_load::engine::EXIT_WARMUP_STALLED`).
const LOAD_WARMUP_STALLED: i32 = 4;

/// How long a server may take to exit after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(3);
/// Time the generator may take beyond warm-up + duration (connect, drain).
pub const GENERATOR_SLACK: Duration = Duration::from_secs(30);

/// A free TCP port on 127.0.0.1 (bound then released, so another process
/// could take it in between; a server failing to bind says so in its log).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding 127.0.0.1:0 to find a free port")?;
    Ok(l.local_addr()?.port())
}

/// CPU sets for (server, generator) under `affinity`, from the CPUs this
/// process may use (`allowed`, ascending).
pub fn split_cpus(
    affinity: Affinity,
    allowed: &[usize],
) -> (Option<Vec<usize>>, Option<Vec<usize>>) {
    if affinity == Affinity::None || allowed.len() < 2 {
        return (None, None);
    }
    let (a, b) = allowed.split_at(allowed.len() / 2);
    (Some(a.to_vec()), Some(b.to_vec()))
}

/// The CPUs this process may run on (`sched_getaffinity`), or `0..n` with n
/// the available parallelism when the call fails.
pub fn allowed_cpus() -> Vec<usize> {
    match skq_sys::cpu::allowed_cpus() {
        Ok(c) if !c.is_empty() => c.into_iter().map(|c| c as usize).collect(),
        _ => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// Runs `f` on a thread that entered `ns` (sockets it creates live there),
/// or on this thread when there is no namespace.
pub fn in_namespace<T: Send>(
    ns: Option<&RpsNamespace>,
    f: impl FnOnce() -> Result<T> + Send,
) -> Result<T> {
    let Some(ns) = ns else {
        return f();
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter_current_thread()
                .with_context(|| format!("entering network namespace {}", ns.name()))?;
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// `cmd` run inside `ns` (`ip netns exec NS PROGRAM ARGS...`), with the
/// same environment changes and working folder.
pub fn command_in(ns: &RpsNamespace, cmd: &Command) -> Command {
    let mut c = ns.command(cmd.get_program());
    c.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        c.current_dir(d);
    }
    c
}

/// Prepares a child of the harness: an empty signal mask (the harness
/// blocks SIGINT/SIGTERM to take them on its own thread, see
/// [`crate::interrupt`], and a mask survives `exec`: without this a server
/// would ignore the SIGTERM that stops it), and, when given, confinement to
/// `cpus`.
pub(crate) fn prepare_child(cmd: &mut Command, cpus: Option<&[usize]>) {
    skq_sys::process::prepare_child(cmd, cpus);
}

/// The last `n` lines of a log file, for error messages.
pub fn log_tail(path: &Path, n: usize) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let lines: Vec<&str> = s.lines().collect();
    let tail = lines[lines.len().saturating_sub(n)..].join(" | ");
    if tail.is_empty() {
        "(no output)".into()
    } else {
        tail
    }
}

/// Why the harness killed the generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Killed {
    /// It ran past its deadline.
    Timeout,
    /// The harness was interrupted.
    Interrupted,
}

/// Waits for the generator and returns its exit code and resource usage;
/// kills it at `deadline` or when the harness is interrupted. Reaps it
/// through `wait4` (so `Child::wait` must not be called on it afterwards).
fn wait_generator(
    child: &Child,
    deadline: Instant,
) -> Result<(Option<i32>, CpuTime, Option<Killed>)> {
    let pid = child.id();
    let emergency = interrupt::kill_on_emergency(pid);
    let mut killed = None;
    loop {
        if let Some(exit) = reap(pid, killed.is_some()).context("waiting for the load generator")? {
            drop(emergency);
            let cpu = CpuTime {
                user_s: exit.user_s,
                sys_s: exit.sys_s,
            };
            return Ok((exit.code, cpu, killed));
        }
        if killed.is_none() {
            if interrupt::interrupted() {
                killed = Some(Killed::Interrupted);
            } else if Instant::now() >= deadline {
                killed = Some(Killed::Timeout);
            }
            if killed.is_some() {
                // The pid is our unreaped child.
                let _ = send_signal(pid, Signal::Kill);
            } else {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Runs points with real processes: `skq serve` or a peer, and `skq load`.
pub struct ProcessRunner {
    /// The skq binary (normally `std::env::current_exe()`).
    pub skq: PathBuf,
    /// CPUs this process may use (see [`allowed_cpus`]).
    pub cpus: Vec<usize>,
    /// Parent of the peers' private folders.
    pub scratch: PathBuf,
    /// How long a server may take to become ready ([`READY_TIMEOUT`]).
    pub ready_timeout: Duration,
    /// Emulated RSS: the namespace servers and generators run in.
    pub rss: Option<RssEnv>,
    /// What [`Runner::rss_label`] reports for each point.
    pub rss_label: String,
    /// The last point's server statistics ([`Runner::take_server_stats`]).
    pub server_stats: Option<crate::serverstats::ServerPointStats>,
    /// The last point's time series ([`Runner::take_series`]).
    pub series: Option<crate::series::PointSeries>,
    /// The last point's server context switches
    /// ([`Runner::take_ctx_switches`]).
    pub ctx_switches: Option<CtxSwitches>,
    /// The last point's disturbance ([`Runner::take_disturbance`]).
    pub disturbance: Option<Disturbance>,
}

impl ProcessRunner {
    /// A runner using the running executable as the skq binary, on the
    /// host's loopback.
    pub fn from_current_exe(cpus: Vec<usize>, scratch: PathBuf) -> Result<Self> {
        let skq = std::env::current_exe().context("locating the skq binary (current_exe)")?;
        Ok(Self::new(skq, cpus, scratch))
    }

    /// A runner using `skq` as the skq binary, on the host's loopback.
    pub fn new(skq: PathBuf, cpus: Vec<usize>, scratch: PathBuf) -> Self {
        ProcessRunner {
            skq,
            cpus,
            scratch,
            ready_timeout: READY_TIMEOUT,
            rss: None,
            rss_label: "off".into(),
            server_stats: None,
            series: None,
            ctx_switches: None,
            disturbance: None,
        }
    }

    /// The `skq load` command of one point.
    pub fn load_command(
        &self,
        curve: &Curve,
        s: &Settings,
        p: &PlannedPoint,
        addr: SocketAddr,
        files: &PointFiles,
    ) -> Command {
        let mut c = Command::new(&self.skq);
        c.arg("load").arg("--addr").arg(addr.to_string());
        if let Some(r) = &self.rss {
            c.args(["--netns", r.namespace().name()]);
        }
        c.args(["--protocol", &curve.load.protocol]);
        c.args(["--rate", &format!("{:.3}", p.target_rps)]);
        c.args(["--seed", &p.seed.to_string()]);
        c.args([
            "--duration",
            &s.point_secs.to_string(),
            "--warmup",
            &s.warmup_secs.to_string(),
        ]);
        c.args([
            "--connections",
            &curve.connections.to_string(),
            "--threads",
            &curve.load.threads.to_string(),
        ]);
        c.args(["--drain", &s.drain_secs.to_string()]);
        if let Some(l) = s.host_gate.as_ref().and_then(|g| g.warmup_stall_ms_per_s) {
            c.args(["--abort-if-warmup-stalled", &l.to_string()]);
        }
        match curve.load.protocol.as_str() {
            "rpc" => {
                c.args(["--workload", &curve.workload]);
                c.args(["--mean-us", &curve.load.mean_us.to_string()]);
                c.args(["--scale", &curve.load.scale.to_string()]);
            }
            "memcached" if curve.workload != "default" => {
                c.args(["--kv-workload", &curve.workload]);
            }
            "rocksdb" => {
                // ZippyDB operations, each asking for `dilate` × its modelled
                // cost of extra emulated service on top of the real work.
                c.args(["--db-keys", &curve.rocksdb.db_keys.to_string()]);
                c.args(["--db-dilate", &curve.rocksdb.dilate.to_string()]);
                c.args(["--workload", "fixed", "--mean-us", "0"]);
            }
            _ => {}
        }
        let prio = &curve.prio;
        if prio.probe_rps > 0.0 {
            let rate = format!("{:.3}", prio.probe_rps);
            let conns = prio.probe_connections.to_string();
            if prio.probe_high {
                c.args(["--high-priority-rate", &rate]);
                c.args(["--high-priority-connections", &conns]);
            } else {
                c.args(["--probe-connections", &conns, "--probe-rate", &rate]);
            }
        }
        if prio.batch_rps > 0.0 {
            c.args(["--batch-rate", &format!("{:.3}", prio.batch_rps)]);
            c.args(["--batch-connections", &prio.batch_connections.to_string()]);
            c.args(["--batch-service-us", &prio.batch_service_us.to_string()]);
        }
        if let Some(p) = &curve.elastic.rate_profile {
            c.args(["--rate-profile", p]);
        }
        if let Some(ms) = curve.elastic.interval_ms {
            c.args(["--interval-ms", &ms.to_string()]);
        }
        c.arg("--json")
            .arg(&files.json)
            .arg("--hdr-log")
            .arg(&files.hdr_log);
        c.args(["--service-mode-label", &curve.service_label(), "--quiet"]);
        c
    }
}

impl Runner for ProcessRunner {
    fn run_point(
        &mut self,
        curve: &Curve,
        s: &Settings,
        p: &PlannedPoint,
        files: &PointFiles,
    ) -> Result<PointResult> {
        for f in [
            &files.json,
            &files.hdr_log,
            &files.server_log,
            &files.load_log,
        ] {
            if let Some(d) = f.parent() {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            }
        }
        let _ = std::fs::remove_file(&files.json);
        if let Some(r) = &self.rss {
            r.reset().context("emulated RSS: setting the mask")?;
        }
        let (server_cpus, load_cpus) = split_cpus(curve.affinity, &self.cpus);
        let stats_file = self.scratch.join(crate::peers::STATS_FILE);
        let _ = std::fs::remove_file(&stats_file);
        self.server_stats = None;
        self.series = None;
        self.ctx_switches = None;
        self.disturbance = None;
        let server_started = Instant::now();
        let mut server = ServerProcess::start_in(
            curve,
            &self.skq,
            server_cpus.as_deref(),
            &files.server_log,
            &self.scratch,
            self.ready_timeout,
            self.rss.as_ref().map(RssEnv::namespace),
        )?;
        let mut cmd = self.load_command(curve, s, p, server.addr, files);
        let log = File::create(&files.load_log)?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        prepare_child(&mut cmd, load_cpus.as_deref());
        let gen = cmd
            .spawn()
            .with_context(|| format!("starting {} load", self.skq.display()))?;
        let started = Instant::now();
        let started_ns = skq_sys::cpu::monotonic_ns();
        let deadline =
            started + Duration::from_secs_f64(s.warmup_secs + s.point_secs) + GENERATOR_SLACK;
        let server_pid = server.pid();
        let sample_every = curve.elastic.interval_ms.map(Duration::from_millis);
        let cpus = self.cpus.as_slice();
        let measure = || {
            // With per-interval series, the server's CPU time is sampled
            // every interval while the generator runs (warm-up included).
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|sc| {
                let sampler = sample_every.map(|every| {
                    let stop = &stop;
                    sc.spawn(move || crate::series::sample_cpu(server_pid, every, stop))
                });
                // The host's steal time, always: which seconds it held.
                let steal = {
                    let stop = &stop;
                    sc.spawn(move || {
                        crate::series::sample_steal(cpus, crate::series::STEAL_PERIOD, stop)
                    })
                };
                let warmup_end = started + Duration::from_secs_f64(s.warmup_secs);
                while Instant::now() < warmup_end && !interrupt::interrupted() {
                    std::thread::sleep(
                        (warmup_end - Instant::now()).min(Duration::from_millis(50)),
                    );
                }
                // The machine's counters enclose the processes' readings.
                let machine0 = MachineCpu::read_for(cpus).ok().map(|m| (m, Instant::now()));
                let cpu0 = server.cpu_reading().ok();
                let gen0 = proc_cpu_time_with_reaped(gen.id()).ok();
                let cs0 = server.ctx_switches().ok();
                let waited = wait_generator(&gen, deadline);
                let cpu1 = server.cpu_reading().ok();
                let cs1 = server.ctx_switches().ok();
                let machine1 = MachineCpu::read_for(cpus).ok().map(|m| (m, Instant::now()));
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                let samples = sampler.and_then(|h| h.join().ok());
                let steal = steal.join().unwrap_or_default();
                let switches = cs0.zip(cs1).map(|(a, b)| ctx_switches_between(a, b));
                let machine = machine0.zip(machine1).zip(gen0);
                ((cpu0, waited, cpu1, samples), (switches, machine, steal))
            })
        };
        let (((cpu0, waited, cpu1, samples), (switches, machine, steal)), migrations) =
            match &self.rss {
                Some(r) => r.while_migrating(measure),
                None => (measure(), Default::default()),
            };
        let (code, gen_cpu, killed) = waited?;
        let alive = server.check_alive();
        server.stop();
        let server_secs = server_started.elapsed().as_secs_f64();
        if let Ok(text) = std::fs::read_to_string(&stats_file) {
            // Kept beside the server's log (per-worker counters: steals,
            // wake-ups, events queued behind busy workers).
            let kept = files.server_stats();
            if let Err(e) = std::fs::write(&kept, &text) {
                eprintln!("skq bench: keeping {}: {e}", kept.display());
            }
            match crate::serverstats::from_stats_json(&text, server_secs) {
                Ok(st) => self.server_stats = Some(st),
                Err(e) => eprintln!("skq bench: {}: {e:#}", stats_file.display()),
            }
        }
        match killed {
            Some(Killed::Interrupted) => bail!("interrupted; load generator killed"),
            Some(Killed::Timeout) => bail!(
                "load generator did not finish within {:?} of its run; killed",
                GENERATOR_SLACK
            ),
            None => {}
        }
        alive?;
        if code == Some(LOAD_WARMUP_STALLED) {
            return Err(crate::hostgate::StartStalled(log_tail(&files.load_log, 1)).into());
        }
        // 3: the run completed but a self-check failed; its result is read
        // and judged like any other.
        if code != Some(0) && code != Some(LOAD_CHECK_FAILED) {
            let how = code.map_or("was killed by a signal".to_string(), |c| {
                format!("exited with {c}")
            });
            bail!("load generator {how}: {}", log_tail(&files.load_log, 5));
        }
        let text = std::fs::read_to_string(&files.json)
            .with_context(|| format!("reading the generator's result {}", files.json.display()))?;
        let mut r: PointResult = serde_json::from_str(&text)
            .with_context(|| format!("parsing the generator's result {}", files.json.display()))?;
        if let (Some(a), Some(b)) = (cpu0, cpu1) {
            let tick_s = 1.0 / skq_sys::process::clock_ticks_per_sec();
            r.server_cpu = Some(crate::procstat::cpu_between(a, b, tick_s));
        }
        if let (Some((((m0, t0), (m1, t1)), g0)), Some(server_cpu)) = (machine, r.server_cpu) {
            // The generator's time from the window's start to its exit.
            let gen_s = (gen_cpu.user_s + gen_cpu.sys_s) - (g0.user_s + g0.sys_s);
            self.disturbance = Disturbance::between(
                &m0,
                &m1,
                skq_sys::process::clock_ticks_per_sec(),
                t1.duration_since(t0).as_secs_f64(),
                server_cpu.user_s + server_cpu.sys_s,
                gen_s.max(0.0),
                s.disturbed_above,
            );
        }
        self.ctx_switches = switches;
        // The measured window starts after the warm-up of the generator's
        // schedule (or, lacking its clock, of its start).
        let origin = r.schedule_start_ns.unwrap_or(started_ns) + (s.warmup_secs * 1e9) as u64;
        if steal.len() >= 2 {
            let tick_s = 1.0 / skq_sys::process::clock_ticks_per_sec();
            r.warmup_host_steal_ms = Some(crate::series::steal_before(&steal, origin, tick_s));
            let starts: Vec<f64> = r.intervals.iter().map(|i| i.start_s).collect();
            let ms =
                crate::series::steal_per_interval(&steal, origin, &starts, s.point_secs, tick_s);
            for (i, v) in r.intervals.iter_mut().zip(ms) {
                i.host_steal_ms = Some(v);
            }
        }
        if let Some(samples) = samples {
            self.series = Some(crate::series::build(
                &samples,
                origin,
                self.server_stats.as_ref(),
                curve.workers,
                s.warmup_secs,
                s.point_secs,
            ));
        }
        if r.client_cpu == CpuTime::default() {
            r.client_cpu = gen_cpu;
        }
        if migrations.rewrites > 0 {
            r.checks.notes.push(format!(
                "info: emulated RSS moved flows: {} mask rewrites during the point",
                migrations.rewrites
            ));
        }
        if let Some(e) = migrations.error {
            r.checks
                .notes
                .push(format!("info: flow migration stopped early: {e}"));
        }
        // The point's JSON file holds what the harness added (the host's
        // steal per interval, the server's CPU), as points.json does.
        if let Ok(text) = serde_json::to_string_pretty(&r) {
            let _ = std::fs::write(&files.json, text);
        }
        Ok(r)
    }

    fn rss_label(&self) -> String {
        self.rss_label.clone()
    }

    fn take_server_stats(&mut self) -> Option<crate::serverstats::ServerPointStats> {
        self.server_stats.take()
    }

    fn take_series(&mut self) -> Option<crate::series::PointSeries> {
        self.series.take()
    }

    fn take_ctx_switches(&mut self) -> Option<CtxSwitches> {
        self.ctx_switches.take()
    }

    fn take_disturbance(&mut self) -> Option<Disturbance> {
        self.disturbance.take()
    }

    fn probe_host(&mut self, sleeps: u32) -> Option<crate::hostgate::HostProbe> {
        // Every CPU the run may use: the server's and the generator's.
        crate::hostgate::probe(&self.cpus, sleeps).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_gives_disjoint_halves() {
        assert_eq!(
            split_cpus(Affinity::Split, &[0, 1]),
            (Some(vec![0]), Some(vec![1]))
        );
        assert_eq!(
            split_cpus(Affinity::Split, &[2, 5, 6]),
            (Some(vec![2]), Some(vec![5, 6]))
        );
        assert_eq!(split_cpus(Affinity::Split, &[0]), (None, None));
        assert_eq!(split_cpus(Affinity::None, &[0, 1, 2, 3]), (None, None));
        assert!(!allowed_cpus().is_empty());
    }
}
