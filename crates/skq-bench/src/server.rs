//! The server under test as a child process: start (optionally inside the
//! emulated-RSS namespace), readiness, CPU time, stop.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use skq_report::result::CtxSwitches;
use skq_sys::netns::RpsNamespace;
use skq_sys::process::{send_signal, Signal};

use crate::config::{Curve, ServerKind};
use crate::interrupt;
use crate::peers;
use crate::process::{command_in, free_port, in_namespace, log_tail, prepare_child, STOP_GRACE};
use crate::procstat::tree_ctx_switches;

/// A running server under test.
pub struct ServerProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    log: PathBuf,
    workdir: Option<PathBuf>,
    stopped: bool,
    emergency: Option<interrupt::Cleanup>,
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
        Self::start_in(curve, skq, cpus, log, scratch, ready_timeout, None)
    }

    /// [`Self::start`] inside network namespace `ns` when given.
    pub fn start_in(
        curve: &Curve,
        skq: &Path,
        cpus: Option<&[usize]>,
        log: &Path,
        scratch: &Path,
        ready_timeout: Duration,
        ns: Option<&RpsNamespace>,
    ) -> Result<Self> {
        let port = in_namespace(ns, free_port)?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let workdir = match curve.server.kind {
            ServerKind::Nginx => Some(peers::workdir(scratch, "nginx")?),
            ServerKind::Http => Some(peers::workdir(scratch, "http")?),
            _ => None,
        };
        let cmd = peers::server_command(curve, skq, port, workdir.as_deref().unwrap_or(scratch))?;
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut cmd = match ns {
            Some(ns) => command_in(ns, &cmd),
            None => cmd,
        };
        if let Some(parent) = log.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let log_file = OpenOptions::new().create(true).append(true).open(log)?;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file.try_clone()?);
        prepare_child(&mut cmd, cpus);
        let mut child = cmd.spawn().with_context(|| format!("starting {program}"))?;
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout is piped");
        std::thread::spawn(move || forward_stdout(stdout, log_file, tx));
        let emergency = Some(interrupt::kill_on_emergency(child.id()));
        let mut s = ServerProcess {
            child,
            addr,
            log: log.to_path_buf(),
            workdir,
            stopped: false,
            emergency,
        };
        if let Err(e) = in_namespace(ns, || s.wait_ready(rx, ready_timeout)) {
            s.stop();
            return Err(e);
        }
        Ok(s)
    }

    fn wait_ready(&mut self, rx: mpsc::Receiver<String>, timeout: Duration) -> Result<()> {
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
            if interrupt::interrupted() {
                bail!("interrupted while the server started");
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

    /// CPU time so far ([`crate::procstat::cpu_between`] takes the
    /// difference of two readings).
    pub fn cpu_reading(&self) -> Result<crate::procstat::CpuReading> {
        crate::procstat::tree_cpu_reading(self.pid())
    }

    /// Context switches of its live threads (and live child processes') so
    /// far ([`tree_ctx_switches`]).
    pub fn ctx_switches(&self) -> Result<CtxSwitches> {
        tree_ctx_switches(self.pid())
    }

    /// `Err` with the log tail when the server has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            self.stopped = true;
            self.emergency = None;
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
            // The pid is our unreaped child, so it cannot have been reused.
            let _ = send_signal(self.child.id(), Signal::Term);
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
        // Reaped: its pid may be reused, so the emergency kill goes first.
        self.emergency = None;
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
