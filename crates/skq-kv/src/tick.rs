//! The idle tick (`--idle-tick-us`): one thread per CPU the server may run
//! on, doing nothing but sleep for the period in a loop, so that none of
//! those CPUs stays idle for longer than that.
//!
//! Why a cache would want it: on the 2-CPU VMs of our measurements (no
//! cpuidle driver: an idle vCPU halts), a CPU that has been idle a while
//! took 100–300 µs to run the thread a packet woke, and at one server thread
//! and 10,000 req/s that put the cache's p99 at 40–160 µs against
//! memcached's 22–26 µs, whose LRU maintainer thread happens to wake its
//! CPU about every 0.8 ms. A 2-ms tick gave the cache memcached's p99 at no
//! CPU the measurement could see; 0.8 ms cost about 0.3–0.5 µs a request at
//! that rate (docs/KV-PROFILE.md, "The one-thread tail is the idle CPU's").
//! Off by default: on a machine whose idle CPUs wake fast it is only cost,
//! and it makes an idle server wake its CPUs (500 times a second each at
//! 2 ms).
//!
//! Invariants: the threads never touch the cache; [`IdleTick::stop`] ends
//! every thread within one period and joins it.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The running tick threads.
pub(crate) struct IdleTick {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl IdleTick {
    /// Starts one thread on each CPU this process may run on, each sleeping
    /// `period` in a loop.
    pub(crate) fn start(period: Duration) -> io::Result<IdleTick> {
        let mut tick = IdleTick {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
        };
        for cpu in skq_sys::cpu::allowed_cpus()? {
            let stop = tick.stop.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("kv-tick-{cpu}"))
                .spawn(move || {
                    // Best effort: unpinned, it still wakes some allowed CPU.
                    let _ = skq_sys::cpu::pin_current_thread(cpu);
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(period);
                    }
                });
            match spawned {
                Ok(t) => tick.threads.push(t),
                Err(e) => {
                    // The ones already running end with the error.
                    tick.stop();
                    return Err(e);
                }
            }
        }
        Ok(tick)
    }

    /// How many tick threads run.
    pub(crate) fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Ends and joins every tick thread.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thread_per_allowed_cpu_and_stop_joins_them() {
        let cpus = skq_sys::cpu::allowed_cpus().unwrap().len();
        let t = IdleTick::start(Duration::from_micros(500)).unwrap();
        assert_eq!(t.threads(), cpus);
        let names: Vec<String> = t
            .threads
            .iter()
            .map(|h| h.thread().name().unwrap_or("").to_string())
            .collect();
        assert!(names.iter().all(|n| n.starts_with("kv-tick-")), "{names:?}");
        t.stop(); // returns only once every thread has ended (joined)
    }
}
