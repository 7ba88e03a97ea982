//! CPU placement, the calling thread's CPU, and timer slack.

use std::io;

use super::syscall;

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
    // SAFETY: a zeroed timespec is a valid out-parameter.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: CLOCK_MONOTONIC always exists; ts is a live out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps until the monotonic clock reaches `deadline_ns` (absolute, so
/// early wake-ups and overshoots never accumulate).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid clock id and timespec; remain may be null with TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            break;
        }
    }
}
