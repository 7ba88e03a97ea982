//! Ctrl-C and SIGTERM during a sweep.
//!
//! [`install`] blocks SIGINT and SIGTERM in the harness (the child processes
//! it starts get an empty signal mask from `std::process`) and takes them on
//! a thread of its own:
//!
//! * the **first** signal sets [`interrupted`]: the generator of the point
//!   in flight is killed, its server stopped as usual, the remaining points
//!   are skipped, the outputs are written for what was measured (marked
//!   interrupted), and every owned resource is released by its `Drop` (the
//!   emulated-RSS namespace included) before `skq bench` exits non-zero. On a
//!   terminal, Ctrl-C also reaches the server and the generator directly
//!   (same process group); the point in flight fails and the same path runs;
//! * a **second** signal runs the registered emergency cleanups at once
//!   (kill the live children, delete the namespace; see [`on_emergency`])
//!   and exits with status 130, for a harness stuck somewhere.
//!
//! Without `install` (tests, library use) nothing changes: signals keep
//! their default action and [`interrupted`] stays false.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use skq_sys::signal;

static STOP: AtomicBool = AtomicBool::new(false);
static NEXT: AtomicU64 = AtomicU64::new(0);
type Action = Box<dyn Fn() + Send>;
static CLEANUPS: Mutex<BTreeMap<u64, Action>> = Mutex::new(BTreeMap::new());

/// Whether a first SIGINT/SIGTERM arrived since [`install`].
pub fn interrupted() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Takes SIGINT/SIGTERM on a thread of its own (see the module docs). Call
/// it before any other thread exists: a thread spawned earlier would not
/// block the signals and would die of them. Idempotent.
pub fn install() -> std::io::Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = signal::block_termination_signals().and_then(|()| {
            std::thread::Builder::new()
                .name("skq-bench-signals".into())
                .spawn(watch)
                .map(drop)
        });
    });
    result
}

fn watch() {
    let mut seen = 0;
    loop {
        match signal::wait_for_termination(None) {
            Ok(Some(sig)) => {
                seen += 1;
                let name = if sig == skq_sys::signal::SIGINT {
                    "interrupt"
                } else {
                    "termination signal"
                };
                if seen == 1 {
                    STOP.store(true, Ordering::SeqCst);
                    eprintln!(
                        "\nskq bench: {name}: stopping after cleanup of the point in flight (again to stop at once)"
                    );
                } else {
                    eprintln!("\nskq bench: {name} again: cleaning up and stopping now");
                    emergency();
                    std::process::exit(130);
                }
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("skq bench: waiting for signals failed ({e}); Ctrl-C is not handled");
                return;
            }
        }
    }
}

/// Runs every registered cleanup (the emergency path).
fn emergency() {
    let actions = std::mem::take(&mut *CLEANUPS.lock().unwrap_or_else(|p| p.into_inner()));
    for a in actions.values() {
        a();
    }
}

/// A registered emergency cleanup; dropping it unregisters the action (the
/// owner cleaned up the normal way).
#[must_use = "the action is unregistered when this is dropped"]
pub struct Cleanup(u64);

impl Drop for Cleanup {
    fn drop(&mut self) {
        CLEANUPS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0);
    }
}

/// Registers `action` for the emergency path (a second signal): it must be
/// quick and must not panic.
pub fn on_emergency(action: impl Fn() + Send + 'static) -> Cleanup {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    CLEANUPS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, Box::new(action));
    Cleanup(id)
}

/// Registers "kill process `pid`" for the emergency path. Drop the guard
/// before reaping the process, so a reused pid is never killed.
pub fn kill_on_emergency(pid: u32) -> Cleanup {
    on_emergency(move || {
        let _ = skq_sys::process::send_signal(pid, skq_sys::process::Signal::Kill);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emergency_runs_registered_actions_only() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Arc;
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let kept = on_emergency(move || {
            h.fetch_add(1, Ordering::SeqCst);
        });
        let h = hits.clone();
        let gone = on_emergency(move || {
            h.fetch_add(10, Ordering::SeqCst);
        });
        drop(gone);
        emergency();
        assert_eq!(hits.load(Ordering::SeqCst), 1);
        drop(kept);
        assert!(!interrupted(), "no signal handling without install");
    }
}
