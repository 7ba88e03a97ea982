//! CPU placement, the calling thread's CPU, clocks, sleeps, timer slack and CPU time.

use std::io;

use super::syscall;

/// CPUs a CPU set can name (`CPU_SETSIZE`); CPU numbers are below it.
pub const MAX_CPUS: u32 = libc::CPU_SETSIZE as u32;

/// CPUs this process may run on (`sched_getaffinity`), ascending.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    syscall!(sched_getaffinity(
        0,
        std::mem::size_of::<libc::cpu_set_t>(),
        &mut set
    ))?;
    let n = libc::CPU_SETSIZE as usize;
    // SAFETY: CPU_ISSET reads within the set for indices below CPU_SETSIZE.
    Ok((0..n)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect())
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: u32) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} out of range"),
        ));
    }
    // SAFETY: index checked above.
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    syscall!(sched_setaffinity(
        0,
        std::mem::size_of::<libc::cpu_set_t>(),
        &set
    ))?;
    Ok(())
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: no arguments; returns -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as u32)
}

/// Sets the calling thread's timer slack (ns); 1 is the minimum, used for
/// emulated service so absolute-deadline sleeps overshoot as little as the
/// kernel allows (BRIEF §8).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    syscall!(prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0))?;
    Ok(())
}

/// Monotonic clock in nanoseconds.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Clock `id` in nanoseconds; `id` must be a clock every supported kernel has.
#[inline]
fn clock_ns(id: libc::clockid_t) -> u64 {
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: the callers pass CLOCK_MONOTONIC (always there) or
    // CLOCK_MONOTONIC_COARSE (since Linux 2.6.32); ts is a live out-parameter.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds: the time of the last timer
/// tick (a few ms behind at most), read from the vDSO without touching the
/// clock hardware, several times cheaper than [`monotonic_ns`]. For clocks
/// that count seconds or milliseconds, read per request.
pub fn monotonic_coarse_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

/// The resolution of [`monotonic_coarse_ns`] in nanoseconds: the timer
/// tick, by which it lags the precise clock at most while the calling CPU
/// runs (`clock_getres`; 4 ms at `HZ=250`).
pub fn monotonic_coarse_resolution_ns() -> u64 {
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: CLOCK_MONOTONIC_COARSE exists since Linux 2.6.32; ts is a
    // live out-parameter.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the calling thread has run so far, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`): unlike wall time, it does not grow while the
/// thread waits for a CPU.
pub fn thread_cputime_ns() -> u64 {
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: CLOCK_THREAD_CPUTIME_ID always exists on Linux; ts is a live
    // out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until the monotonic clock reaches `deadline_ns` (absolute, so
/// early wake-ups and overshoots never accumulate).
pub fn sleep_until(deadline_ns: u64) {
    clock_sleep_until(libc::CLOCK_MONOTONIC, deadline_ns);
}

/// Sleeps until `CLOCK_REALTIME` reaches `deadline_ns` (absolute; a step of
/// the clock moves the wake-up with it).
pub fn sleep_until_realtime(deadline_ns: u64) {
    clock_sleep_until(libc::CLOCK_REALTIME, deadline_ns);
}

fn clock_sleep_until(clock: libc::clockid_t, deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid clock id and timespec; remain may be null with TIMER_ABSTIME.
        let r =
            unsafe { libc::clock_nanosleep(clock, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if r != libc::EINTR {
            break;
        }
    }
}

/// Nanoseconds of `CLOCK_REALTIME` (to compare with kernel receive timestamps).
pub fn realtime_ns() -> u64 {
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: CLOCK_REALTIME always exists; ts is a live out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC − CLOCK_REALTIME` in ns, read as tightly as the
/// machine allows: of three bracketing reads (monotonic, realtime,
/// monotonic) the one with the shortest bracket wins, so a preemption
/// between two reads does not skew the offset. It changes only when the
/// realtime clock is stepped (both clocks are slewed alike by NTP).
pub fn monotonic_minus_realtime_ns() -> i64 {
    let mut best = (u64::MAX, 0i64);
    for _ in 0..3 {
        let m1 = monotonic_ns();
        let r = realtime_ns();
        let m2 = monotonic_ns();
        let width = m2 - m1;
        if width < best.0 {
            best = (width, (m1 + width / 2) as i64 - r as i64);
        }
    }
    best.1
}

/// Sleeps until `CLOCK_REALTIME` reaches `deadline_ns − spin_ns`, then spins
/// on that clock until `deadline_ns` (the realtime twin of
/// [`sleep_then_spin_until`]).
///
/// No sleep at all when the spin has begun already: `clock_nanosleep` for
/// an instant in the past still arms a timer and may deschedule the thread
/// until it fires, and on these VMs a descheduled vCPU can halt and be
/// woken late. (Sleeping on every send this way, the simple client's sender
/// was more than 50 µs late on 2% of its sends at 3,200 req/s.)
pub fn sleep_then_spin_until_realtime(deadline_ns: u64, spin_ns: u64) {
    let wake = deadline_ns.saturating_sub(spin_ns);
    if realtime_ns() < wake {
        sleep_until_realtime(wake);
    }
    while realtime_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// Sleeps until `deadline_ns − spin_ns`, then spins on the clock until
/// `deadline_ns`: the sleep's overshoot (tens of µs) is absorbed by the spin.
/// Like the realtime twin, it does not sleep once the spin has begun.
pub fn sleep_then_spin_until(deadline_ns: u64, spin_ns: u64) {
    let wake = deadline_ns.saturating_sub(spin_ns);
    if monotonic_ns() < wake {
        sleep_until(wake);
    }
    while monotonic_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

/// Moves the calling thread to `SCHED_FIFO` at `priority` (1..=99) so other
/// processes on a busy machine cannot delay its wake-ups. Needs CAP_SYS_NICE
/// (or root); fails with `EPERM` otherwise.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    syscall!(sched_setscheduler(0, libc::SCHED_FIFO, &param))?;
    Ok(())
}

/// Pins the calling thread to the `n`-th CPU (wrapping) of those the process
/// may run on; returns that CPU.
pub fn pin_to_nth_allowed_cpu(n: usize) -> io::Result<u32> {
    let allowed = allowed_cpus()?;
    let cpu = *allowed
        .get(n % allowed.len().max(1))
        .ok_or_else(|| io::Error::other("no CPU is allowed"))?;
    pin_current_thread(cpu)?;
    Ok(cpu)
}

/// Number of CPUs this process may run on (at least 1).
pub fn allowed_cpu_count() -> usize {
    allowed_cpus().map_or(1, |c| c.len().max(1))
}

fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live out-parameter; RUSAGE_SELF and RUSAGE_THREAD
    // always exist on Linux, so the call cannot fail.
    unsafe { libc::getrusage(who, &mut ru) };
    ru
}

fn timeval_ns(t: libc::timeval) -> u64 {
    t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000
}

/// User and kernel CPU time of the whole process so far (ns).
pub fn process_cpu_ns() -> (u64, u64) {
    let ru = rusage(libc::RUSAGE_SELF);
    (timeval_ns(ru.ru_utime), timeval_ns(ru.ru_stime))
}

/// User and kernel CPU time of the calling thread so far (ns).
pub fn thread_cpu_ns() -> (u64, u64) {
    let ru = rusage(libc::RUSAGE_THREAD);
    (timeval_ns(ru.ru_utime), timeval_ns(ru.ru_stime))
}

/// How the machine has kept the calling thread from running so far: the
/// time it spent runnable but waiting for a CPU (ns, the second field of
/// `/proc/thread-self/schedstat`; `None` where the kernel has no schedstat)
/// and its involuntary context switches (preemptions).
pub fn thread_waited() -> (Option<u64>, u64) {
    let waited = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| crate::process::parse_schedstat(&s))
        .map(|(_, wait)| wait);
    (waited, rusage(libc::RUSAGE_THREAD).ru_nivcsw as u64)
}
