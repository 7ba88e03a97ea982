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
//!    reads the server's CPU time from `/proc/PID/stat`;
//! 4. waits for the generator, reads the server's CPU time again (so
//!    `server_cpu` covers the measured window plus the generator's drain),
//!    checks the server is still alive, and stops it with SIGTERM (SIGKILL
//!    after [`STOP_GRACE`]);
//! 5. reads the generator's JSON; the generator's own CPU time comes from
//!    its result, or from `wait4`'s resource usage when it reported none.
//!
//! With [`Affinity::Split`] the server is confined to the first half of the
//! CPUs and the generator to the rest (`sched_setaffinity` in the child
//! before `exec`).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use skq_report::result::{CpuTime, PointResult};

use crate::config::{Affinity, Curve, ServerKind, Settings};
use crate::peers;
use crate::sweep::{PlannedPoint, PointFiles, Runner};

/// How long a server may take to become ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
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
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r == 0 {
        // SAFETY: CPU_ISSET reads one bit of an initialised set.
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect();
        if !cpus.is_empty() {
            return cpus;
        }
    }
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// Makes `cmd` run on `cpus` only.
fn set_affinity(cmd: &mut Command, cpus: &[usize]) {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET writes one bit of `set`, which we own; c is below
        // the machine's CPU count, far below CPU_SETSIZE.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: the closure runs in the child between fork and exec; it only
    // calls sched_setaffinity (async-signal-safe) on a set copied into it.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// User and system CPU time of a live process, from `/proc/PID/stat`.
pub fn proc_cpu_time(pid: u32) -> Result<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    parse_stat_cpu(&stat, clock_ticks())
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
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("malformed /proc stat line"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so field n is fields[n - 3].
    let get = |n: usize| -> Result<f64> {
        let v: u64 = fields
            .get(n - 3)
            .ok_or_else(|| anyhow!("short /proc stat line"))?
            .parse()?;
        Ok(v as f64 / ticks_per_s)
    };
    Ok(CpuTime {
        user_s: get(14)?,
        sys_s: get(15)?,
    })
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
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

/// A running server under test.
pub struct ServerProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    log: PathBuf,
    workdir: Option<PathBuf>,
    stopped: bool,
}

impl ServerProcess {
    /// Starts the server of `curve` on a free port and waits until it is
    /// ready. `scratch` holds the peers' private folders.
    pub fn start(
        curve: &Curve,
        skq: &Path,
        cpus: Option<&[usize]>,
        log: &Path,
        scratch: &Path,
        ready_timeout: Duration,
    ) -> Result<Self> {
        let port = free_port()?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let workdir = match curve.server {
            ServerKind::Nginx => Some(peers::workdir(scratch, "nginx")?),
            _ => None,
        };
        let mut cmd =
            peers::server_command(curve, skq, port, workdir.as_deref().unwrap_or(scratch))?;
        if let Some(parent) = log.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let log_file = OpenOptions::new().create(true).append(true).open(log)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file.try_clone()?);
        if let Some(c) = cpus {
            set_affinity(&mut cmd, c);
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().with_context(|| format!("starting {program}"))?;
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        std::thread::spawn(move || forward_stdout(stdout, log_file, tx));
        let mut s = ServerProcess {
            child,
            addr,
            log: log.to_path_buf(),
            workdir,
            stopped: false,
        };
        if let Err(e) = s.wait_ready(&rx, ready_timeout) {
            s.stop();
            return Err(e);
        }
        Ok(s)
    }

    fn wait_ready(&mut self, rx: &mpsc::Receiver<String>, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if rx.try_recv().is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                self.stopped = true;
                bail!(
                    "server exited ({status}) before becoming ready: {}",
                    log_tail(&self.log, 5)
                );
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "server not ready on {} after {:?} (no `listening on` line, connect refused): {}",
                    self.addr,
                    timeout,
                    log_tail(&self.log, 5)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time so far.
    pub fn cpu_time(&self) -> Result<CpuTime> {
        tree_cpu_time(self.pid())
    }

    /// `Err` with the log tail when the server has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            self.stopped = true;
            bail!(
                "server exited during the run ({status}): {}",
                log_tail(&self.log, 5)
            );
        }
        Ok(())
    }

    /// SIGTERM, then SIGKILL after [`STOP_GRACE`]; reaps the process and
    /// removes its private folder. Idempotent.
    pub fn stop(&mut self) {
        if !self.stopped {
            // SAFETY: kill has no memory preconditions; the pid is our
            // unreaped child, so it cannot have been reused.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    self.stopped = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if !self.stopped {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.stopped = true;
            }
        }
        if let Some(d) = self.workdir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Copies the server's stdout into its log; signals the first
/// `listening on` line.
fn forward_stdout(stdout: std::process::ChildStdout, mut log: File, ready: mpsc::Sender<String>) {
    let mut sent = false;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(log, "{line}");
        if !sent && line.contains("listening on") {
            sent = ready.send(line).is_ok();
        }
    }
}

/// Waits for a child and returns its exit code and resource usage; kills it
/// at `deadline`. Reaps the child through `wait4` (so `Child::wait` must not
/// be called on it afterwards).
fn wait_with_rusage(child: &Child, deadline: Instant) -> Result<(Option<i32>, CpuTime, bool)> {
    let pid = child.id() as libc::pid_t;
    let mut killed = false;
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain data, all-zero is valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let flags = if killed { 0 } else { libc::WNOHANG };
        // SAFETY: pid is our unreaped child; status and ru are valid for writes.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
        if r == pid {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let cpu = CpuTime {
                user_s: tv(ru.ru_utime),
                sys_s: tv(ru.ru_stime),
            };
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            return Ok((code, cpu, killed));
        }
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e).context("waiting for the load generator");
            }
        }
        if !killed && Instant::now() >= deadline {
            // SAFETY: as above, the pid is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        if !killed {
            std::thread::sleep(Duration::from_millis(10));
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
}

impl ProcessRunner {
    /// A runner using the running executable as the skq binary.
    pub fn from_current_exe(cpus: Vec<usize>, scratch: PathBuf) -> Result<Self> {
        let skq = std::env::current_exe().context("locating the skq binary (current_exe)")?;
        Ok(ProcessRunner {
            skq,
            cpus,
            scratch,
            ready_timeout: READY_TIMEOUT,
        })
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
        c.args(["--protocol", &curve.protocol]);
        c.args(["--rate", &format!("{:.3}", p.target_rps)]);
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
            &curve.threads.to_string(),
        ]);
        c.args(["--drain", &s.drain_secs.to_string()]);
        match curve.protocol.as_str() {
            "rpc" => {
                c.args(["--workload", &curve.workload]);
                c.args(["--mean-us", &curve.mean_us.to_string()]);
                c.args(["--scale", &curve.scale.to_string()]);
            }
            "memcached" if curve.workload != "default" => {
                c.args(["--kv-workload", &curve.workload]);
            }
            _ => {}
        }
        c.arg("--json")
            .arg(&files.json)
            .arg("--hdr-log")
            .arg(&files.hdr_log);
        let label = match curve.server {
            ServerKind::Skq | ServerKind::Tokio => curve.service.as_str(),
            ServerKind::Memcached | ServerKind::Nginx | ServerKind::Kv => "spin",
        };
        c.args(["--service-mode-label", label, "--quiet"]);
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
        let (server_cpus, load_cpus) = split_cpus(curve.affinity, &self.cpus);
        let mut server = ServerProcess::start(
            curve,
            &self.skq,
            server_cpus.as_deref(),
            &files.server_log,
            &self.scratch,
            self.ready_timeout,
        )?;
        let mut cmd = self.load_command(curve, s, p, server.addr, files);
        let log = File::create(&files.load_log)?;
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if let Some(c) = &load_cpus {
            set_affinity(&mut cmd, c);
        }
        let gen = cmd
            .spawn()
            .with_context(|| format!("starting {} load", self.skq.display()))?;
        let started = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(s.warmup_secs));
        let cpu0 = server.cpu_time().ok();
        let deadline =
            started + Duration::from_secs_f64(s.warmup_secs + s.point_secs) + GENERATOR_SLACK;
        let (code, gen_cpu, killed) = wait_with_rusage(&gen, deadline)?;
        let cpu1 = server.cpu_time().ok();
        let alive = server.check_alive();
        server.stop();
        alive?;
        if killed {
            bail!(
                "load generator did not finish within {:?} of its run; killed",
                GENERATOR_SLACK
            );
        }
        if code != Some(0) {
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
            r.server_cpu = Some(CpuTime {
                user_s: b.user_s - a.user_s,
                sys_s: b.sys_s - a.sys_s,
            });
        }
        if r.client_cpu == CpuTime::default() {
            r.client_cpu = gen_cpu;
        }
        Ok(r)
    }
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
