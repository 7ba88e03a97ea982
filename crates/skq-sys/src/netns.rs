//! Network namespaces with Receive Packet Steering on their loopback:
//! emulated RSS (BRIEF §8).
//!
//! On the host's loopback a flow's packets are processed on the sender's
//! CPU, so every flow of a one-thread load generator reports the same
//! `SO_INCOMING_CPU` and CPU affinity cannot be judged. Inside a network
//! namespace of its own whose loopback has RPS enabled
//! (`/sys/class/net/lo/queues/rx-0/rps_cpus`), the kernel processes each
//! flow's packets on a CPU of the mask chosen by the flow hash, as a
//! multi-queue NIC's RSS would; rewriting the mask mid-run moves flows.
//!
//! [`RpsNamespace`] creates such a namespace (`ip netns add skq-PID-N`),
//! brings its loopback up, sets and rewrites the RPS mask, moves the calling
//! thread into it, gives the command prefix that runs a child process in it,
//! and deletes it on drop. Sockets belong to the namespace of the thread that
//! created them and may then be used from any thread.
//!
//! Everything here needs `CAP_SYS_ADMIN` (root) and iproute2's `ip`; errors
//! say which was missing ("network namespaces not permitted: ...").
//!
//! The mask lives in sysfs, and sysfs shows the network devices of the
//! namespace it was *mounted* in, not the writer's: the mask is written by a
//! long-lived `sh` started with `ip netns exec` (which mounts a private
//! sysfs), so rewriting it mid-run costs no process start.

use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::syscall;

/// The RPS mask of the loopback's one receive queue, as seen inside the
/// namespace.
pub const RPS_CPUS: &str = "/sys/class/net/lo/queues/rx-0/rps_cpus";
/// Where `ip netns` keeps the namespaces it names.
pub const NETNS_DIR: &str = "/run/netns";
/// Prefix of the names [`RpsNamespace::create`] gives (`skq-PID-N`).
pub const NAME_PREFIX: &str = "skq-";

/// A network namespace of this process with RPS on its loopback; deleted on
/// drop.
pub struct RpsNamespace {
    name: String,
    cpus: Mutex<Vec<u32>>,
    shell: Mutex<Option<Shell>>,
    deleted: bool,
}

/// `ip netns exec NAME sh`, reading mask commands on stdin.
struct Shell {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Shell {
    fn start(name: &str) -> io::Result<Shell> {
        let mut child = Command::new(ip_program())
            .args(["netns", "exec", name, "sh"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Its own process group: a terminal's Ctrl-C goes to the
            // program that owns the namespace, which decides when to stop.
            .process_group(0)
            .spawn()
            .map_err(|e| not_available(&format!("starting `ip netns exec {name} sh`"), e))?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        Ok(Shell {
            child,
            stdin,
            stdout,
        })
    }

    /// Writes `mask` to [`RPS_CPUS`] and returns what the kernel kept.
    fn write_mask(&mut self, mask: &str) -> io::Result<String> {
        // Failures print a sentinel rather than nothing, so the read below
        // always gets its line.
        let cmd = format!(
            "if echo {mask} > {RPS_CPUS}; then cat {RPS_CPUS} || echo skq-rps-error; else echo skq-rps-error; fi\n"
        );
        self.stdin.write_all(cmd.as_bytes())?;
        self.stdin.flush()?;
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the namespace's shell exited",
            ));
        }
        Ok(line.trim().to_string())
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RpsNamespace {
    /// Creates `skq-PID-N`, brings its loopback up and spreads its flows over
    /// `cpus` with RPS (empty: RPS off, every flow processed on its
    /// sender's CPU).
    pub fn create(cpus: &[u32]) -> io::Result<RpsNamespace> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "{NAME_PREFIX}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run_ip(&["netns", "add", &name])?;
        // From here on, Drop deletes the namespace whatever fails next.
        let ns = RpsNamespace {
            name,
            cpus: Mutex::new(Vec::new()),
            shell: Mutex::new(None),
            deleted: false,
        };
        run_ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        ns.set_rps_cpus(cpus)?;
        Ok(ns)
    }

    /// The namespace's name (`skq-PID-N`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The CPUs RPS spreads flows over now.
    pub fn rps_cpus(&self) -> Vec<u32> {
        self.cpus.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Rewrites the RPS mask: packets arriving from now on are processed on
    /// a CPU of `cpus` chosen by their flow hash (empty: on the sender's
    /// CPU). Safe to call from any thread while others use the namespace.
    pub fn set_rps_cpus(&self, cpus: &[u32]) -> io::Result<()> {
        let mask = cpu_mask(cpus);
        let mut shell = self.shell.lock().unwrap_or_else(|p| p.into_inner());
        // A shell that died (killed from outside) is started again, once.
        let mut answer = None;
        for _ in 0..2 {
            if shell.is_none() {
                *shell = Some(Shell::start(&self.name)?);
            }
            match shell.as_mut().expect("started above").write_mask(&mask) {
                Ok(line) => {
                    answer = Some(line);
                    break;
                }
                Err(_) => {
                    if let Some(s) = shell.take() {
                        s.stop();
                    }
                }
            }
        }
        let Some(line) = answer else {
            return Err(io::Error::other(format!(
                "network namespace {}: its mask-writing shell keeps exiting",
                self.name
            )));
        };
        if line == "skq-rps-error" {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "RPS not available: cannot write {RPS_CPUS} in network namespace {} (kernel without CONFIG_RPS?)",
                    self.name
                ),
            ));
        }
        let kept = parse_cpu_mask(&line)?;
        let mut want = cpus.to_vec();
        want.sort_unstable();
        want.dedup();
        if kept != want {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "RPS mask: asked for CPUs {want:?}, the kernel kept {kept:?} (offline or isolated CPUs?)"
                ),
            ));
        }
        *self.cpus.lock().unwrap_or_else(|p| p.into_inner()) = want;
        Ok(())
    }

    /// Moves the calling thread into the namespace: sockets it creates
    /// afterwards (and threads it spawns) live there.
    pub fn enter_current_thread(&self) -> io::Result<()> {
        enter(&self.name)
    }

    /// `ip netns exec NAME`: prefix a child's command line with it to run
    /// the child in the namespace (`ip` execs the command in place, so the
    /// child's PID is its own).
    pub fn command_prefix(&self) -> Vec<String> {
        vec![
            ip_program().to_string_lossy().into_owned(),
            "netns".into(),
            "exec".into(),
            self.name.clone(),
        ]
    }

    /// A command running `program` in the namespace ([`Self::command_prefix`]).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let prefix = self.command_prefix();
        let mut c = Command::new(&prefix[0]);
        c.args(&prefix[1..]).arg(program);
        c
    }

    /// Deletes the namespace now, reporting failure (drop does the same
    /// silently but for one line on stderr).
    pub fn delete(mut self) -> io::Result<()> {
        self.deleted = true;
        self.stop_shell();
        delete(&self.name)
    }

    fn stop_shell(&self) {
        if let Some(s) = self.shell.lock().unwrap_or_else(|p| p.into_inner()).take() {
            s.stop();
        }
    }
}

impl Drop for RpsNamespace {
    fn drop(&mut self) {
        if self.deleted {
            return;
        }
        self.stop_shell();
        if let Err(e) = delete(&self.name) {
            eprintln!(
                "skq: could not delete network namespace {}: {e}; remove it with `ip netns del {}`",
                self.name, self.name
            );
        }
    }
}

/// Moves the calling thread into the named namespace (`/run/netns/NAME`).
pub fn enter(name: &str) -> io::Result<()> {
    let path = Path::new(NETNS_DIR).join(name);
    let f = std::fs::File::open(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "network namespace {name}: cannot open {}: {e}",
                path.display()
            ),
        )
    })?;
    syscall!(setns(f.as_raw_fd(), libc::CLONE_NEWNET)).map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            io::Error::new(
                e.kind(),
                format!("network namespaces not permitted: setns into {name}: {e}"),
            )
        } else {
            io::Error::new(
                e.kind(),
                format!("setns into network namespace {name}: {e}"),
            )
        }
    })?;
    Ok(())
}

/// `ip netns del NAME`.
pub fn delete(name: &str) -> io::Result<()> {
    run_ip(&["netns", "del", name])
}

/// Deletes namespaces named `skq-PID-N` whose process no longer exists (left
/// behind by a process that was killed before it could clean up). Returns
/// their names.
pub fn remove_stale() -> io::Result<Vec<String>> {
    let dir = match std::fs::read_dir(NETNS_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for entry in dir.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some((pid, _)) = parse_name(&name) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            delete(&name)?;
            removed.push(name);
        }
    }
    Ok(removed)
}

/// The PID and counter of a name [`RpsNamespace::create`] gives.
pub fn parse_name(name: &str) -> Option<(u32, u64)> {
    let (pid, n) = name.strip_prefix(NAME_PREFIX)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(pid) && digits(n)) {
        return None;
    }
    Some((pid.parse().ok()?, n.parse().ok()?))
}

/// The sysfs bitmap of `cpus`: hexadecimal, in comma-separated groups of 32
/// CPUs, most significant first (`[0, 1]` → `3`, `[32]` → `1,00000000`).
pub fn cpu_mask(cpus: &[u32]) -> String {
    let Some(&max) = cpus.iter().max() else {
        return "0".into();
    };
    let mut words = vec![0u32; max as usize / 32 + 1];
    for &c in cpus {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    let mut out = String::new();
    for (i, w) in words.iter().rev().enumerate() {
        if i == 0 {
            out.push_str(&format!("{w:x}"));
        } else {
            out.push_str(&format!(",{w:08x}"));
        }
    }
    out
}

/// The CPUs of a sysfs bitmap ([`cpu_mask`]'s format, any group padding),
/// ascending.
pub fn parse_cpu_mask(s: &str) -> io::Result<Vec<u32>> {
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("`{s}` is not a CPU bitmap"),
        )
    };
    let groups: Vec<&str> = s.trim().split(',').collect();
    let mut cpus = Vec::new();
    for (i, g) in groups.iter().rev().enumerate() {
        let w = u32::from_str_radix(g, 16).map_err(|_| bad())?;
        for b in 0..32 {
            if w & (1 << b) != 0 {
                cpus.push(i as u32 * 32 + b);
            }
        }
    }
    cpus.sort_unstable();
    Ok(cpus)
}

/// iproute2's `ip`: in `PATH`, else in the sbin folders a non-root `PATH`
/// often lacks.
pub fn ip_program() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join("ip"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("ip"))
}

/// Runs `ip ARGS`; a refusal becomes "network namespaces not permitted: ...".
fn run_ip(args: &[&str]) -> io::Result<()> {
    let what = format!("`ip {}`", args.join(" "));
    let out = Command::new(ip_program())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| not_available(&what, e))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr)
        .trim()
        .replace('\n', "; ");
    let refused = err.contains("not permitted") || err.contains("Permission denied");
    let (kind, head) = if refused {
        (
            io::ErrorKind::PermissionDenied,
            "network namespaces not permitted",
        )
    } else {
        (io::ErrorKind::Other, "network namespace command failed")
    };
    Err(io::Error::new(
        kind,
        format!("{head}: {what} ({}): {err}", out.status),
    ))
}

fn not_available(what: &str, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::NotFound {
        io::Error::new(
            e.kind(),
            format!("network namespaces not available: {what}: `ip` (iproute2) not found"),
        )
    } else {
        io::Error::new(e.kind(), format!("{what}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_are_sysfs_bitmaps() {
        assert_eq!(cpu_mask(&[]), "0");
        assert_eq!(cpu_mask(&[0, 1]), "3");
        assert_eq!(cpu_mask(&[1]), "2");
        assert_eq!(cpu_mask(&[0, 4, 31]), "80000011");
        assert_eq!(cpu_mask(&[32]), "1,00000000");
        assert_eq!(cpu_mask(&[0, 65]), "2,00000000,00000001");
        for cpus in [vec![], vec![0, 1], vec![3], vec![0, 31, 32, 63, 64, 100]] {
            assert_eq!(parse_cpu_mask(&cpu_mask(&cpus)).unwrap(), cpus);
        }
        // The kernel pads every group when it prints a mask.
        assert_eq!(parse_cpu_mask("00000003\n").unwrap(), [0, 1]);
        assert_eq!(parse_cpu_mask("00000001,00000000").unwrap(), [32]);
        assert!(parse_cpu_mask("xyz").is_err());
    }

    #[test]
    fn names_carry_pid_and_counter() {
        assert_eq!(parse_name("skq-1234-0"), Some((1234, 0)));
        assert_eq!(parse_name("skq-1-22"), Some((1, 22)));
        for other in [
            "skq-",
            "skq-12",
            "skq-a-1",
            "skq-1-",
            "other-1-2",
            "skq-1-2-3",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }

    #[test]
    fn entering_a_missing_namespace_says_which() {
        let e = enter("skq-no-such-namespace").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("skq-no-such-namespace"), "{e}");
    }

    #[test]
    fn the_prefix_runs_ip_netns_exec() {
        let ns = RpsNamespace {
            name: "skq-1-2".into(),
            cpus: Mutex::new(Vec::new()),
            shell: Mutex::new(None),
            deleted: true, // never created: nothing to delete
        };
        let p = ns.command_prefix();
        assert!(p[0].ends_with("ip"), "{p:?}");
        assert_eq!(&p[1..], ["netns", "exec", "skq-1-2"]);
        let c = ns.command("/bin/true");
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["netns", "exec", "skq-1-2", "/bin/true"]);
    }
}
