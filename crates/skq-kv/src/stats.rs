//! Server counters and the `stats` reply.
//!
//! Each worker owns one [`Counters`] block (cache-padded: the owning worker increments it
//! on every request while a `stats` reader on another worker sums all blocks; padding keeps
//! two workers' blocks off one cache line). Increments are relaxed: `stats` is a snapshot
//! of monotone counters, not a consistent cut.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

use crate::store::PartStats;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Per-worker request counters (names as in memcached's `stats`).
        #[derive(Default, Debug)]
        pub struct Counters { $($(#[$doc])* pub $name: AtomicU64,)* }

        impl Counters {
            /// Adds every counter of `self` into `acc`, in declaration order.
            fn add_into(&self, acc: &mut Vec<(&'static str, u64)>) {
                let vals = [$((stringify!($name), self.$name.load(Relaxed)),)*];
                if acc.is_empty() {
                    acc.extend(vals);
                } else {
                    for (a, (_, v)) in acc.iter_mut().zip(vals) {
                        a.1 += v;
                    }
                }
            }
        }
    };
}

counters! {
    /// Retrieval requests (one per key).
    cmd_get,
    /// Storage requests.
    cmd_set,
    /// flush_all requests.
    cmd_flush,
    /// touch and gat requests.
    cmd_touch,
    /// Keys found.
    get_hits,
    /// Keys not found.
    get_misses,
    /// Deletes of missing keys.
    delete_misses,
    /// Deletes that removed an item.
    delete_hits,
    /// incr on a missing key.
    incr_misses,
    /// Successful incr.
    incr_hits,
    /// decr on a missing key.
    decr_misses,
    /// Successful decr.
    decr_hits,
    /// cas on a missing key.
    cas_misses,
    /// Successful cas.
    cas_hits,
    /// cas with a stale unique.
    cas_badval,
    /// Keys touched.
    touch_hits,
    /// touch on a missing key.
    touch_misses,
    /// Values over the item size limit.
    store_too_large,
    /// Bytes read from clients.
    bytes_read,
    /// Bytes written to clients.
    bytes_written,
    /// Connections accepted.
    total_connections,
    /// Connections refused: `--max-conns` reached, or out of file descriptors.
    rejected_connections,
    /// Connections closed for waiting longer than `--idle-timeout` (memcached's name).
    idle_kicks,
    /// Of those, connections taken off the backlog and closed because the process had
    /// no file descriptor left (the listener never stalls on `EMFILE`).
    skq_rejected_fd_limit,
    /// Connections closed for a protocol violation (line too long, garbage, an HTTP request).
    skq_protocol_closes,
    /// Requests forwarded to another worker (thread-per-core only).
    skq_forwarded,
    /// Times a connection stopped reading because a ring to another worker was full.
    skq_ring_full,
    /// Commands (or runs of a multi-key get) for another worker's partition run by the
    /// worker that read them, on that partition, while its owner slept (thread-per-core
    /// without `--tpc-strict`).
    skq_borrowed,
}

/// One counter block per worker.
pub type WorkerCounters = Vec<CachePadded<Counters>>;

/// Fixed facts `stats` reports.
#[derive(Clone, Debug)]
pub struct StatsInfo {
    /// Unix second the server started.
    pub started_unix: i64,
    /// Server-relative seconds now (≥ 1).
    pub now: u32,
    /// Worker threads.
    pub threads: usize,
    /// `-m` in bytes.
    pub limit_maxbytes: u64,
    /// `--max-conns`.
    pub max_connections: usize,
    /// Open connections.
    pub curr_connections: u64,
    /// "shared" or "tpc".
    pub arch: &'static str,
    /// Scheduling mode (shared architecture) or "tpc".
    pub mode: String,
    /// Estimated index + header bytes per item.
    pub overhead_per_item: f64,
    /// Bytes an idle connection holds in user space (its table slot and
    /// session; buffers are lent per request).
    pub idle_conn_bytes: usize,
}

/// The server version string.
pub const VERSION: &str = concat!("1.6.18-skq-", env!("CARGO_PKG_VERSION"));

/// Writes the general `stats` reply.
pub fn write_stats(
    out: &mut Vec<u8>,
    info: &StatsInfo,
    workers: &[CachePadded<Counters>],
    parts: &[PartStats],
) {
    let mut sum = PartStats::default();
    for p in parts {
        sum.curr_items += p.curr_items;
        sum.total_items += p.total_items;
        sum.bytes += p.bytes;
        sum.evictions += p.evictions;
        sum.allocated += p.allocated;
    }
    let mut counters = Vec::new();
    for w in workers {
        w.add_into(&mut counters);
    }
    let mut stat = |name: &str, v: &dyn std::fmt::Display| {
        let _ = write!(out, "STAT {name} {v}\r\n");
    };
    stat("pid", &std::process::id());
    stat("uptime", &(info.now - 1));
    stat("time", &(info.started_unix + i64::from(info.now) - 1));
    stat("version", &VERSION);
    stat("libevent", &"none");
    stat("pointer_size", &(8 * std::mem::size_of::<usize>()));
    let (user, sys) = rusage();
    stat("rusage_user", &user);
    stat("rusage_system", &sys);
    stat("max_connections", &info.max_connections);
    stat("curr_connections", &info.curr_connections);
    for (name, v) in &counters {
        stat(name, v);
    }
    stat("threads", &info.threads);
    stat("curr_items", &sum.curr_items);
    stat("total_items", &sum.total_items);
    stat("bytes", &sum.bytes);
    stat("evictions", &sum.evictions);
    stat("limit_maxbytes", &info.limit_maxbytes);
    stat("accepting_conns", &1);
    stat("skq_arch", &info.arch);
    stat("skq_mode", &info.mode);
    stat("skq_segment_bytes_allocated", &sum.allocated);
    stat("skq_idle_conn_bytes", &info.idle_conn_bytes);
    stat(
        "skq_overhead_per_item",
        &format!("{:.1}", info.overhead_per_item),
    );
    out.extend_from_slice(b"END\r\n");
}

/// `rusage_user`, `rusage_system` as `seconds.micros`.
fn rusage() -> (String, String) {
    let (user, sys) = skq_sys::cpu::process_cpu_ns();
    let f = |ns: u64| format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000);
    (f(user), f(sys))
}
