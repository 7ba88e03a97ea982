//! Counters kept while a server runs, and the snapshot (`--stats-json`).
//!
//! Per-worker counters are written only by their own worker thread (relaxed
//! atomics, each block on its own cache line so workers do not false-share);
//! connection counters are shared but change only on accept and close.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use serde::Serialize;

use crate::protocol::Close;

/// Counters owned by one worker thread.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    requests: AtomicU64,
    busy_ns: AtomicU64,
    events: AtomicU64,
    write_blocked: AtomicU64,
}

impl WorkerCounters {
    /// One request served.
    pub fn record_request(&self) {
        self.requests.fetch_add(1, Relaxed);
    }

    /// `ns` of service delivered.
    pub fn record_service(&self, ns: u64) {
        self.busy_ns.fetch_add(ns, Relaxed);
    }

    /// One readiness event (tokio: one wake-up of a connection task) handled.
    pub fn record_event(&self) {
        self.events.fetch_add(1, Relaxed);
    }

    /// An event ended with replies waiting for socket space.
    pub fn record_blocked(&self) {
        self.write_blocked.fetch_add(1, Relaxed);
    }

    fn snapshot(&self) -> WorkerSnapshot {
        WorkerSnapshot {
            requests: self.requests.load(Relaxed),
            busy_ns: self.busy_ns.load(Relaxed),
            events: self.events.load(Relaxed),
            write_blocked: self.write_blocked.load(Relaxed),
        }
    }
}

/// Connection counters shared by all workers.
#[derive(Debug, Default)]
pub struct ConnCounters {
    accepted: AtomicU64,
    rejected: AtomicU64,
    rejected_fd_limit: AtomicU64,
    closed: AtomicU64,
    protocol_errors: AtomicU64,
    aborted: AtomicU64,
    timeouts: AtomicU64,
}

impl ConnCounters {
    /// A connection was accepted and is being served.
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Relaxed);
    }

    /// A connection was accepted and closed at once (limit reached).
    pub fn rejected(&self) {
        self.rejected.fetch_add(1, Relaxed);
    }

    /// A connection was taken off the backlog and closed because the
    /// process is out of file descriptors (also counted as rejected).
    pub fn rejected_fd_limit(&self) {
        self.rejected.fetch_add(1, Relaxed);
        self.rejected_fd_limit.fetch_add(1, Relaxed);
    }

    /// A served connection ended for `why`.
    pub fn closed(&self, why: Close) {
        self.closed.fetch_add(1, Relaxed);
        match why {
            Close::Eof => {}
            Close::Protocol => {
                self.protocol_errors.fetch_add(1, Relaxed);
            }
            Close::Aborted => {
                self.aborted.fetch_add(1, Relaxed);
            }
            Close::Timeout => {
                self.timeouts.fetch_add(1, Relaxed);
            }
        }
    }
}

/// All counters of one server.
#[derive(Debug)]
pub struct Counters {
    /// One block per worker, indexed by worker id.
    pub workers: Box<[CachePadded<WorkerCounters>]>,
    /// Connection counters.
    pub conns: CachePadded<ConnCounters>,
}

impl Counters {
    /// Counters for `workers` workers.
    pub fn new(workers: usize) -> Self {
        Counters {
            workers: (0..workers)
                .map(|_| CachePadded::new(WorkerCounters::default()))
                .collect(),
            conns: CachePadded::new(ConnCounters::default()),
        }
    }

    /// A snapshot; `scheduler` is the skq runtime's own report, if any.
    pub fn snapshot(
        &self,
        info: &ServerInfo,
        scheduler: Option<SchedulerStats>,
        memory: MemoryStats,
    ) -> ServerStats {
        let per_worker: Vec<WorkerSnapshot> = self.workers.iter().map(|w| w.snapshot()).collect();
        let c = &self.conns;
        let accepted = c.accepted.load(Relaxed);
        let closed = c.closed.load(Relaxed);
        ServerStats {
            driver: info.driver.clone(),
            mode: info.mode.clone(),
            service: info.service.clone(),
            pinned: info.pinned,
            cpus: info.cpus,
            workers: per_worker.len(),
            requests: per_worker.iter().map(|w| w.requests).sum(),
            accepted,
            rejected: c.rejected.load(Relaxed),
            rejected_fd_limit: c.rejected_fd_limit.load(Relaxed),
            closed,
            open: accepted.saturating_sub(closed),
            protocol_errors: c.protocol_errors.load(Relaxed),
            aborted: c.aborted.load(Relaxed),
            timeouts: c.timeouts.load(Relaxed),
            imbalance: imbalance(per_worker.iter().map(|w| w.busy_ns)),
            per_worker,
            scheduler,
            memory,
        }
    }
}

/// `(max − min) / max` over per-worker busy times; 0 when all are idle.
pub fn imbalance(busy: impl Iterator<Item = u64>) -> f64 {
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for b in busy {
        lo = lo.min(b);
        hi = hi.max(b);
    }
    if hi == 0 {
        0.0
    } else {
        (hi - lo) as f64 / hi as f64
    }
}

/// What a server is, for its stats.
#[derive(Clone, Debug)]
pub struct ServerInfo {
    /// The driver (`skq`, `epoll-1to1`, `epoll-shared`, `tokio`).
    pub driver: String,
    /// Scheduling mode (`hybrid`, `best2+steal`, ...; the driver's name otherwise).
    pub mode: String,
    /// How service is delivered, as the application labels it (`spin`, `emulate`, `-`).
    pub service: String,
    /// Whether worker threads are pinned.
    pub pinned: bool,
    /// CPUs the process may run on.
    pub cpus: usize,
}

/// One worker's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WorkerSnapshot {
    /// Requests served.
    pub requests: u64,
    /// Service delivered (ns), as the protocol recorded it.
    pub busy_ns: u64,
    /// Readiness events handled (tokio: connection task wake-ups).
    pub events: u64,
    /// Events that stopped because replies could not be written.
    pub write_blocked: u64,
}

/// The skq scheduler's own view (from `Skq::stats()` / `Skq::imbalance()`).
#[derive(Clone, Debug, Serialize)]
pub struct SchedulerStats {
    /// Per-worker scheduler counters, as the core reports them.
    pub per_worker: Vec<serde_json::Value>,
    /// The core's imbalance figure.
    pub imbalance: f64,
    /// First events of a connection that waited for its acceptor to finish
    /// registering it (harmless).
    pub accept_races: u64,
    /// Events whose connection another worker was still handling: a source
    /// delivered to two workers at once. Must be 0.
    pub ownership_violations: u64,
    /// Workers live in the core at the snapshot (elastic worker count:
    /// neither parked nor exited).
    pub live_workers: usize,
    /// Elastic worker count: every decision of the resource manager as
    /// (ms since the server started, measured demand in busy workers,
    /// active workers decided); empty with a fixed worker count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub elastic: Vec<(f64, f64, usize)>,
    /// CLOCK_MONOTONIC time (ns) the server started at (the origin of
    /// `elastic`'s times).
    pub started_ns: u64,
}

impl SchedulerStats {
    /// The scheduler's view of `skq` now, for a server started at
    /// `started_ns`; the driver-specific counters (`accept_races`,
    /// `ownership_violations`) are 0 for the caller to fill in.
    pub fn of(skq: &skq_rt::Skq, started_ns: u64) -> SchedulerStats {
        SchedulerStats {
            per_worker: skq
                .stats()
                .iter()
                .map(|w| serde_json::to_value(w).unwrap_or(serde_json::Value::Null))
                .collect(),
            imbalance: skq.imbalance(),
            accept_races: 0,
            ownership_violations: 0,
            live_workers: skq.live_workers(),
            elastic: skq
                .elastic_history()
                .iter()
                .map(|d| {
                    let ms = d.at.saturating_sub(started_ns) as f64 / 1e6;
                    (ms, d.demand, d.active)
                })
                .collect(),
            started_ns,
        }
    }
}

/// Memory a server holds for its connections (user space; the kernel's
/// socket buffers come on top).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MemoryStats {
    /// Bytes an idle connection holds: its table slot with the session
    /// (and, under skq, its scheduler slots; under tokio, its task's
    /// future). Buffers are freed while idle, except up to
    /// `conn::KEEP_CAPACITY` bytes each of input and output kept to spare
    /// an allocation per request (larger buffers go to the serving
    /// thread's `bufpool`, at most 1 MiB per thread, not counted here).
    pub idle_conn_bytes: u64,
    /// Bytes the connection tables hold now: they grow a segment of 1,024
    /// slots at a time with the peak number of connections.
    pub table_bytes: u64,
}

/// A snapshot of a server's counters (the `--stats-json` document).
#[derive(Clone, Debug, Serialize)]
pub struct ServerStats {
    /// The driver.
    pub driver: String,
    /// Scheduling mode.
    pub mode: String,
    /// Service label.
    pub service: String,
    /// Whether worker threads were pinned.
    pub pinned: bool,
    /// CPUs the process could run on.
    pub cpus: usize,
    /// Worker threads.
    pub workers: usize,
    /// Requests served in total.
    pub requests: u64,
    /// Connections accepted and served.
    pub accepted: u64,
    /// Connections refused: `--max-conns` reached, the table full, or the
    /// process out of file descriptors.
    pub rejected: u64,
    /// Of `rejected`: taken off the backlog and closed because the process
    /// had no file descriptor left (the listener never stalls on `EMFILE`).
    pub rejected_fd_limit: u64,
    /// Served connections that have ended.
    pub closed: u64,
    /// Connections open now.
    pub open: u64,
    /// Connections closed for a protocol violation.
    pub protocol_errors: u64,
    /// Connections that vanished mid-request or failed with an I/O error.
    pub aborted: u64,
    /// Connections closed for waiting longer than a configured timeout
    /// (idle, request or send; see [`crate::config::Timeouts`]).
    pub timeouts: u64,
    /// `(max − min) / max` of per-worker busy time.
    pub imbalance: f64,
    /// Per-worker counters.
    pub per_worker: Vec<WorkerSnapshot>,
    /// What connections cost in memory.
    pub memory: MemoryStats,
    /// The skq scheduler's own statistics (skq driver only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<SchedulerStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imbalance_is_relative_spread() {
        assert_eq!(imbalance([0, 0].into_iter()), 0.0);
        assert_eq!(imbalance([50, 100].into_iter()), 0.5);
        assert_eq!(imbalance([7, 7, 7].into_iter()), 0.0);
    }

    #[test]
    fn close_reasons_are_counted() {
        let c = Counters::new(2);
        for _ in 0..3 {
            c.conns.accepted();
        }
        c.conns.closed(Close::Eof);
        c.conns.closed(Close::Aborted);
        c.workers[1].record_request();
        c.workers[1].record_service(10);
        let info = ServerInfo {
            driver: "tokio".into(),
            mode: "tokio".into(),
            service: "-".into(),
            pinned: false,
            cpus: 2,
        };
        let s = c.snapshot(&info, None, MemoryStats::default());
        assert_eq!(
            (s.accepted, s.closed, s.open, s.aborted, s.protocol_errors),
            (3, 2, 1, 1, 0)
        );
        assert_eq!(s.requests, 1);
        assert_eq!(s.imbalance, 1.0);
    }
}
