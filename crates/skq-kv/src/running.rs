//! The handle of a running cache server, whichever architecture and driver
//! serves it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_utils::CachePadded;

use crate::ctx::Ctx;

/// How the workers run.
pub(crate) enum Workers {
    /// Threads of this crate (thread-per-core), stopped by `wake` after
    /// `ctx.shutdown` is set.
    Threads {
        threads: Vec<JoinHandle<()>>,
        wake: Box<dyn Fn() + Send + Sync>,
    },
    /// A server of the server layer (the shared architecture on any driver).
    #[cfg(feature = "runtime")]
    Net(skq_net::ServerHandle),
}

/// A running server.
pub struct Running {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) workers: Workers,
    /// Connections accepted by each worker (thread-per-core; tests use it to
    /// see which worker got a socket).
    pub accepted: Arc<Vec<CachePadded<AtomicU64>>>,
    /// The idle tick's threads (`--idle-tick-us`), when on.
    pub(crate) tick: Option<crate::tick::IdleTick>,
}

impl Running {
    /// Connections each worker accepted so far (thread-per-core only; the
    /// shared architecture reports zeros).
    pub fn accepted_per_worker(&self) -> Vec<u64> {
        self.accepted
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .collect()
    }

    /// The state shared by the workers (counters, by memcached name).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// How many idle-tick threads run (0 without `--idle-tick-us`).
    pub fn idle_tick_threads(&self) -> usize {
        self.tick.as_ref().map_or(0, |t| t.threads())
    }

    /// Stops every worker and waits for them: listeners close, open connections close.
    pub fn stop(self) {
        if let Some(t) = self.tick {
            t.stop();
        }
        self.ctx.shutdown.store(true, Ordering::SeqCst);
        match self.workers {
            Workers::Threads { threads, wake } => {
                wake();
                for t in threads {
                    let _ = t.join();
                }
            }
            #[cfg(feature = "runtime")]
            Workers::Net(h) => {
                h.shutdown();
            }
        }
    }
}

/// `skq serve kv` runs under skq-net's serve lifecycle like every server:
/// its notices are the server layer's (shared store) or the thread-per-core
/// workers' own (the library prints nothing), and its statistics are read
/// with `stats` over the protocol, not returned.
#[cfg(feature = "runtime")]
impl skq_net::Serving for Running {
    type Stats = ();
    fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    fn notices(&self) -> skq_net::Notices {
        match &self.workers {
            Workers::Net(h) => h.notices(),
            Workers::Threads { .. } => self.ctx.notices.clone(),
        }
    }
    fn shutdown(self) {
        self.stop()
    }
}
