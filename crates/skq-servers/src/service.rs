//! Synthetic service: how a worker "does" the work a request asks for
//! ([`Deliver`], implemented for the spec's [`ServiceMode`]).
//!
//! * [`ServiceMode::Spin`] busy-waits on the CPU until `service_ns` have
//!   passed on the monotonic clock: real CPU work, only meaningful when the
//!   server has as many cores as workers.
//! * [`ServiceMode::Emulate`] sleeps until an absolute deadline
//!   (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`) with the thread's timer
//!   slack at 1 ns (BRIEF §8, "time dilation"). The worker thread is blocked
//!   for the whole service time exactly as if it were computing, but the CPU
//!   stays free, so 8–16 workers on 2 cores show the queueing of a larger
//!   machine. Sleeps overshoot (tens of µs on the development VMs), which is why
//!   every reply reports the time *delivered*, measured on the same clock.
//!
//! In both modes delivered ≥ requested: the deadline is computed before the
//! work starts and the worker does not return before it.

use skq_sys::cpu;

pub use skq_net::ServiceMode;

/// Delivering service the way a [`ServiceMode`] says.
pub trait Deliver {
    /// Per-thread setup; call once on every thread that will call [`Deliver::serve`].
    /// Emulation lowers the thread's timer slack to 1 ns.
    fn prepare_thread(self);
    /// Delivers `service_ns` of service on the calling thread and returns the
    /// nanoseconds actually delivered (saturated to `u32`).
    fn serve(self, service_ns: u32) -> u32;
    /// Like [`Deliver::serve`], calling `checkpoint` once `every_ns` have
    /// passed since the start or the end of the previous call, never at the
    /// start or after the deadline: spinning checks the clock each
    /// turn; emulation sleeps to the next checkpoint or the deadline,
    /// whichever is first. Returns the nanoseconds delivered.
    fn serve_checkpointed(self, service_ns: u32, every_ns: u64, checkpoint: impl FnMut()) -> u32;
}

impl Deliver for ServiceMode {
    fn prepare_thread(self) {
        if self == ServiceMode::Emulate {
            // Failure only costs precision (the default 50 µs slack), and the
            // delivered time is measured anyway, so it is not fatal.
            if let Err(e) = cpu::set_timer_slack(1) {
                eprintln!(
                    "warning: PR_SET_TIMERSLACK failed ({e}); emulated service will overshoot more"
                );
            }
        }
    }

    fn serve(self, service_ns: u32) -> u32 {
        let start = cpu::monotonic_ns();
        if service_ns == 0 {
            return 0;
        }
        let deadline = start + u64::from(service_ns);
        match self {
            ServiceMode::Spin => {
                while cpu::monotonic_ns() < deadline {
                    std::hint::spin_loop();
                }
            }
            ServiceMode::Emulate => cpu::sleep_until(deadline),
        }
        let delivered = cpu::monotonic_ns() - start;
        u32::try_from(delivered).unwrap_or(u32::MAX)
    }

    fn serve_checkpointed(
        self,
        service_ns: u32,
        every_ns: u64,
        mut checkpoint: impl FnMut(),
    ) -> u32 {
        let start = cpu::monotonic_ns();
        if service_ns == 0 {
            return 0;
        }
        let deadline = start + u64::from(service_ns);
        let every = every_ns.max(1);
        let mut next = start + every;
        loop {
            let now = match self {
                ServiceMode::Spin => {
                    std::hint::spin_loop();
                    cpu::monotonic_ns()
                }
                ServiceMode::Emulate => {
                    cpu::sleep_until(next.min(deadline));
                    cpu::monotonic_ns()
                }
            };
            if now >= deadline {
                break;
            }
            if now >= next {
                checkpoint();
                next = cpu::monotonic_ns() + every;
            }
        }
        let delivered = cpu::monotonic_ns() - start;
        u32::try_from(delivered).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivered_is_at_least_requested() {
        for mode in [ServiceMode::Spin, ServiceMode::Emulate] {
            mode.prepare_thread();
            assert_eq!(mode.serve(0), 0);
            assert_eq!(
                mode.serve_checkpointed(0, 10, || panic!("no service, no call")),
                0
            );
            for ns in [1, 1_000, 30_000, 200_000] {
                assert!(mode.serve(ns) >= ns, "{mode} {ns}");
            }
        }
    }

    #[test]
    fn checkpoints_fall_inside_the_service_and_are_spaced() {
        for mode in [ServiceMode::Spin, ServiceMode::Emulate] {
            mode.prepare_thread();
            let (service, every) = (20_000_000u32, 1_000_000u64);
            let mut calls = Vec::new();
            let start = cpu::monotonic_ns();
            let got = mode.serve_checkpointed(service, every, || calls.push(cpu::monotonic_ns()));
            assert!(got >= service, "{mode}");
            // Each call at least `every` after the previous (or the start)
            // and before the deadline: at most 19 of them.
            assert!(
                !calls.is_empty() && calls.len() < 20,
                "{mode}: {}",
                calls.len()
            );
            let mut prev = start;
            for &t in &calls {
                assert!(t >= prev + every && t < start + u64::from(service));
                prev = t;
            }
        }
    }

    #[test]
    fn parses_and_prints() {
        for m in [ServiceMode::Spin, ServiceMode::Emulate] {
            assert_eq!(m.to_string().parse::<ServiceMode>(), Ok(m));
        }
        assert!("sleep"
            .parse::<ServiceMode>()
            .unwrap_err()
            .contains("expected spin or emulate"));
    }
}
