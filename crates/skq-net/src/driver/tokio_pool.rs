//! The `tokio-spawn-blocking` request path: the protocol's work runs in
//! `tokio::task::spawn_blocking`, tokio's documented way to run blocking
//! calls (a RocksDB read, a file read, a service that sleeps), so the
//! runtime's worker threads only move bytes.
//!
//! One task per connection, as for `tokio`. When bytes arrive, the task
//! hands the connection (its buffers and session, moved, not shared) to a
//! blocking-pool thread, which serves the buffered requests in order
//! ([`serve_buffered`]: at most [`REQUESTS_PER_EVENT`], one when the
//! protocol flushes each, stopping at the output ceiling or a reply's
//! piece above the low watermark); the task awaits it, takes the connection
//! back, writes the replies and reads again. One hop at a time per
//! connection, so a connection's replies stay in request order; a hop runs
//! only when new bytes arrived or a hop stopped early, so an idle wake-up
//! costs no hand-off.
//!
//! The pool is capped at `workers` threads (`max_blocking_threads`, set by
//! [`super::tokio::start`]): the protocol runs on at most as many threads as
//! the server has workers, as on every other driver, and emulated service
//! (a sleep) cannot borrow parallelism the server does not have. A protocol
//! panic on a pool thread is resumed in the task (tokio then ends the task,
//! as for a panic inline); a hop cancelled because the runtime is shutting
//! down ends the connection without its close notice (nothing is left to
//! notice it).

use std::sync::Arc;

use tokio::net::TcpStream;

use super::tokio::{read_more, worker_index, write_out};
use crate::config::Timeouts;
use crate::conn::{Conn, REQUESTS_PER_EVENT};
use crate::protocol::{Close, Cx, Protocol, Resume, Served};
use crate::server::Common;

/// How a hop on the pool ended.
#[must_use]
enum Hop {
    /// Every complete request buffered was served.
    NeedInput,
    /// Stopped early (budget, flush, output ceiling, a piece to write):
    /// write the output, then hop again.
    Write,
    /// The protocol closes the connection (after writing what is pending).
    Close(Close),
}

/// Serves the connection until it closes; returns why, with the connection
/// (None when a hop was cancelled by the runtime's shutdown).
pub(super) async fn serve_connection<P: Protocol>(
    mut stream: TcpStream,
    mut conn: Conn<P::Session>,
    common: &Arc<Common<P>>,
    t: Timeouts,
) -> (Close, Option<Conn<P::Session>>) {
    let limit = common.proto.read_limit();
    // Bytes arrived (or a hop stopped early) since the last hop.
    let mut fresh = false;
    loop {
        if fresh {
            let (back, hop) = match off_thread(conn, common).await {
                Some(done) => done,
                None => return (Close::Aborted, None),
            };
            conn = back;
            match hop {
                Hop::NeedInput => fresh = false,
                Hop::Write => {}
                Hop::Close(why) => {
                    let _ = write_out(&mut stream, &mut conn, t.send).await;
                    return (why, Some(conn));
                }
            }
        }
        if let Err(why) = write_out(&mut stream, &mut conn, t.send).await {
            return (why, Some(conn));
        }
        if fresh {
            continue;
        }
        match read_more(&mut stream, &mut conn, common, &t, limit).await {
            Ok(n) => fresh = n > 0,
            Err(why) => return (why, Some(conn)),
        }
    }
}

/// One hop: moves the connection to a blocking-pool thread, serves its
/// buffered requests there and brings it back.
async fn off_thread<P: Protocol>(
    conn: Conn<P::Session>,
    common: &Arc<Common<P>>,
) -> Option<(Conn<P::Session>, Hop)> {
    let shared = Arc::clone(common);
    let job = tokio::task::spawn_blocking(move || {
        let mut conn = conn;
        let hop = serve_buffered(&mut conn, &shared);
        (conn, hop)
    });
    match job.await {
        Ok(done) => Some(done),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

/// Serves the connection's buffered requests in order, on this (pool)
/// thread, recording into the counters of its worker index.
fn serve_buffered<P: Protocol>(conn: &mut Conn<P::Session>, common: &Common<P>) -> Hop {
    let proto = &*common.proto;
    let flush_each = proto.flush_each();
    let limits = conn.limits();
    let w = worker_index();
    let mut served = 0usize;
    loop {
        let mut cx = Cx::new(w, &common.counters.workers[w]);
        if conn.is_resuming() {
            // A reply produced in pieces: the next piece once the output
            // is below the low watermark.
            if conn.pending_charge() >= limits.low_water || conn.sending_file() {
                return Hop::Write;
            }
            if let Some(Resume::Close(why)) = conn.resume_one(proto, &mut cx) {
                return Hop::Close(why);
            }
        } else {
            match conn.serve_one(proto, &mut cx) {
                Served::Request { .. } => {
                    if flush_each
                        || conn.sending_file()
                        || conn.pending_charge() >= limits.max_output
                    {
                        return Hop::Write;
                    }
                }
                Served::NeedInput { .. } => return Hop::NeedInput,
                Served::Close { why, .. } => return Hop::Close(why),
            }
        }
        served += 1;
        if served >= REQUESTS_PER_EVENT {
            return Hop::Write;
        }
    }
}
