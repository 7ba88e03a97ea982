//! Child processes and identity: signals, reaping with resource usage, the
//! effective user, the clock-tick rate of /proc times, and the context
//! switches of a live process's threads.

use std::io;

use super::syscall;

/// A signal this crate sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Asks the process to stop (servers shut down in order).
    Term,
    /// Stops the process at once.
    Kill,
    /// Interrupt (Ctrl-C).
    Int,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::Int => libc::SIGINT,
        }
    }
}

/// Sends `sig` to process `pid`.
pub fn send_signal(pid: u32, sig: Signal) -> io::Result<()> {
    syscall!(kill(pid as libc::pid_t, sig.raw()))?;
    Ok(())
}

/// How a reaped child ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exit {
    /// Exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// User CPU seconds it used.
    pub user_s: f64,
    /// Kernel CPU seconds it used.
    pub sys_s: f64,
}

/// Reaps child `pid` with `wait4`, returning its exit and CPU use; with
/// `block == false`, `Ok(None)` while it still runs. An interrupted wait is
/// `Ok(None)` too. The child must not be reaped elsewhere (e.g. by
/// `std::process::Child::wait`) afterwards.
pub fn reap(pid: u32, block: bool) -> io::Result<Option<Exit>> {
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if block { 0 } else { libc::WNOHANG };
    match syscall!(wait4(pid as libc::pid_t, &mut status, flags, &mut ru)) {
        Ok(r) if r == pid as libc::pid_t => {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            Ok(Some(Exit {
                code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
                user_s: tv(ru.ru_utime),
                sys_s: tv(ru.ru_stime),
            }))
        }
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(None),
        Err(e) => Err(e),
    }
}

/// Makes `cmd`'s child start with an empty signal mask (a mask survives
/// `exec`: a parent that blocks SIGINT/SIGTERM to take them on a thread of
/// its own would otherwise start servers that ignore the SIGTERM stopping
/// them) and, when `cpus` is given, confined to those CPUs.
pub fn prepare_child(cmd: &mut std::process::Command, cpus: Option<&[usize]>) {
    use std::os::unix::process::CommandExt;
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.unwrap_or_default() {
        if c < libc::CPU_SETSIZE as usize {
            // SAFETY: CPU_SET writes one bit of `set`, which we own, at an
            // index checked to be below CPU_SETSIZE.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    let pin = cpus.is_some();
    // SAFETY: the closure runs in the child between fork and exec; it only
    // makes async-signal-safe calls (sigemptyset, pthread_sigmask,
    // sched_setaffinity) on values copied into it or on its own stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            let r = libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            if pin && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Whether the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// User and system CPU time, in clock ticks ([`clock_ticks_per_sec`]),
/// from a `/proc/PID/stat` line; `None` if the line is malformed.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<(u64, u64)> {
    // The command name (field 2) is in parentheses and may hold spaces, so
    // fields are counted after its closing one: field n is fields[n - 3].
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let get = |n: usize| fields.get(n - 3)?.parse().ok();
    Some((get(14)?, get(15)?))
}

/// User + system CPU time of a live process, in nanoseconds.
pub fn cpu_time_ns(pid: u32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (user, sys) = parse_stat_cpu_ticks(&stat)
        .ok_or_else(|| io::Error::other(format!("malformed /proc/{pid}/stat")))?;
    Ok(((user + sys) as f64 * 1e9 / clock_ticks_per_sec()) as u64)
}

/// Context switches of a set of threads: `voluntary` when a thread blocked
/// (waited for I/O, a lock, a sleep), `involuntary` when the scheduler took
/// the CPU from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtxSwitchCounts {
    /// `voluntary_ctxt_switches`.
    pub voluntary: u64,
    /// `nonvoluntary_ctxt_switches`.
    pub involuntary: u64,
}

impl CtxSwitchCounts {
    /// The counts from `self` to a later reading `later`, each saturating
    /// at zero (a thread that exited in between takes its counts with it,
    /// so a difference can otherwise come out negative).
    pub fn until(self, later: CtxSwitchCounts) -> CtxSwitchCounts {
        CtxSwitchCounts {
            voluntary: later.voluntary.saturating_sub(self.voluntary),
            involuntary: later.involuntary.saturating_sub(self.involuntary),
        }
    }

    /// Adds `other`'s counts to `self`'s.
    pub fn add(&mut self, other: CtxSwitchCounts) {
        self.voluntary += other.voluntary;
        self.involuntary += other.involuntary;
    }
}

/// `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` of a
/// `/proc/PID/task/TID/status` text; `None` when either line is missing or
/// malformed.
pub fn parse_status_ctxt_switches(status: &str) -> Option<CtxSwitchCounts> {
    let field = |name: &str| -> Option<u64> {
        status.lines().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key == name).then(|| value.trim().parse().ok())?
        })
    };
    Some(CtxSwitchCounts {
        voluntary: field("voluntary_ctxt_switches")?,
        involuntary: field("nonvoluntary_ctxt_switches")?,
    })
}

/// Context switches of every live thread of process `pid` so far: the sum
/// over `/proc/PID/task/*/status`. `/proc/PID/status` alone counts only the
/// main thread. A thread that exited is no longer listed, so its switches
/// drop out of later readings (a difference of two readings is a lower
/// bound for a process whose threads come and go); a thread that exits
/// between listing and reading is skipped.
pub fn thread_ctx_switches(pid: u32) -> io::Result<CtxSwitchCounts> {
    let mut total = CtxSwitchCounts::default();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Ok(entry) = entry else { continue };
        let Ok(text) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let counts = parse_status_ctxt_switches(&text).ok_or_else(|| {
            io::Error::other(format!(
                "malformed {}/status: no context switch counts",
                entry.path().display()
            ))
        })?;
        total.add(counts);
    }
    Ok(total)
}

/// The first two fields of a `schedstat` file (`/proc/PID/task/TID/` or
/// `/proc/thread-self/`): the thread's run time and its time runnable but
/// waiting for a CPU, both in ns; `None` if malformed.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut f = text.split_whitespace().map(|f| f.parse().ok());
    Some((f.next()??, f.next()??))
}

/// The scheduler's exact run time (ns) of every live thread of a live
/// process: the sum of the first field of `/proc/PID/task/*/schedstat`.
/// `/proc/PID/stat` reports the same time (its total is the scheduler's,
/// split by tick sampling) but in whole clock ticks, 10 ms each; threads
/// that have exited are in `/proc/PID/stat` and not here.
pub fn thread_exec_ns(pid: u32) -> io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let Ok(entry) = entry else { continue };
        // A thread may exit between listing and reading: skip it.
        let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        let (run, _) = parse_schedstat(&text).ok_or_else(|| {
            io::Error::other(format!(
                "malformed {}/schedstat: {text:?}",
                entry.path().display()
            ))
        })?;
        total += run;
    }
    Ok(total)
}

/// Clock ticks per second of the times in /proc/PID/stat (usually 100).
pub fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_parsing_takes_run_and_wait_and_rejects_garbage() {
        assert_eq!(parse_schedstat("123456 789 42\n"), Some((123456, 789)));
        assert_eq!(parse_schedstat("123456\n"), None);
        assert_eq!(parse_schedstat("x y z"), None);
    }

    #[test]
    fn exact_run_time_grows_with_work_and_agrees_with_the_ticks() {
        let pid = std::process::id();
        let a = thread_exec_ns(pid).unwrap();
        // Spin for 30 ms of this thread's own CPU time, not of wall time: on
        // a busy machine (CI runs test binaries side by side on 2 CPUs) a
        // thread spinning 30 ms of wall time may run only part of them.
        let t0 = crate::cpu::thread_cputime_ns();
        let mut x = 0u64;
        while crate::cpu::thread_cputime_ns() - t0 < 30_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let b = thread_exec_ns(pid).unwrap();
        // The slack covers test threads that exit meanwhile (their time
        // leaves the live threads' sum); each of this binary's tests runs
        // for well under a millisecond of CPU.
        assert!(b - a >= 25_000_000, "30 ms of spinning ran {} ns", b - a);
        // The live threads' exact time cannot exceed the process's total
        // (which also holds exited threads) by more than the ticks' rounding.
        let ticks = cpu_time_ns(pid).unwrap();
        let tick = (1e9 / clock_ticks_per_sec()) as u64;
        assert!(thread_exec_ns(pid).unwrap() <= ticks + 2 * tick);
    }

    /// The tail of a real `/proc/self/task/TID/status`.
    const STATUS: &str = "Name:\tskq\nState:\tS (sleeping)\nTgid:\t4242\n\
        Threads:\t9\nSigQ:\t0/62780\nCpus_allowed_list:\t0-1\n\
        voluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n";

    #[test]
    fn status_parsing_takes_both_counts_and_rejects_missing_ones() {
        let c = parse_status_ctxt_switches(STATUS).unwrap();
        assert_eq!(
            c,
            CtxSwitchCounts {
                voluntary: 1234,
                involuntary: 56
            }
        );
        let no_invol = STATUS.replace("nonvoluntary_ctxt_switches:\t56\n", "");
        assert_eq!(parse_status_ctxt_switches(&no_invol), None);
        let garbled = STATUS.replace("1234", "12x4");
        assert_eq!(parse_status_ctxt_switches(&garbled), None);
        assert_eq!(parse_status_ctxt_switches(""), None);
    }

    #[test]
    fn differences_saturate_when_a_thread_left() {
        let a = CtxSwitchCounts {
            voluntary: 10,
            involuntary: 5,
        };
        let b = CtxSwitchCounts {
            voluntary: 25,
            involuntary: 3,
        };
        assert_eq!(
            a.until(b),
            CtxSwitchCounts {
                voluntary: 15,
                involuntary: 0
            }
        );
    }

    #[test]
    fn own_counts_are_readable_and_never_go_back() {
        let own = || {
            let text = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            parse_status_ctxt_switches(&text).unwrap()
        };
        // A second thread, alive while the process is read, that has slept
        // (a sleep blocks: at least one voluntary switch of its own).
        let (slept_tx, slept_rx) = std::sync::mpsc::channel::<()>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1));
            slept_tx.send(()).unwrap();
            let _ = done_rx.recv();
        });
        slept_rx.recv().unwrap();
        let before = own();
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let total = thread_ctx_switches(std::process::id()).unwrap();
        let after = own();
        done_tx.send(()).unwrap();
        helper.join().unwrap();
        assert!(
            after.voluntary >= before.voluntary + 3,
            "each sleep blocked: {before:?} -> {after:?}"
        );
        assert!(after.involuntary >= before.involuntary);
        // The process total holds this (live) thread's counts, read between
        // the two, and the helper's at least one.
        assert!(
            total.voluntary > before.voluntary,
            "{total:?} vs this thread's {before:?}"
        );
        assert!(total.involuntary >= before.involuntary);
        assert_eq!(
            before.until(after).voluntary,
            after.voluntary - before.voluntary
        );
        assert!(thread_ctx_switches(u32::MAX).is_err(), "no such process");
    }

    #[test]
    #[allow(clippy::zombie_processes)] // reaped by `reap`, which clippy cannot see
    fn reaps_a_child_with_its_exit_code_and_a_killed_one_without() {
        let c = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        let exit = reap(c.id(), true).unwrap().unwrap();
        assert_eq!(exit.code, Some(3));

        let c = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert_eq!(reap(c.id(), false).unwrap(), None, "still running");
        send_signal(c.id(), Signal::Kill).unwrap();
        let exit = reap(c.id(), true).unwrap().unwrap();
        assert_eq!(exit.code, None, "ended by a signal");
    }
}
