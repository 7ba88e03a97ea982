//! The serve lifecycle: the process around one running server, as every
//! `skq serve …` command runs it (rpc, rocksdb, http on a [`Server`](crate::Server);
//! kv on its own shared or thread-per-core workers, through [`Serving`]).
//!
//! A command builds a [`Lifecycle`] from its `--duration` and
//! `--stats-json` flags, then [`Lifecycle::serve`] runs these steps in order:
//!
//! 1. raise the open-file limit (a failure is a warning line, not an error);
//! 2. block SIGINT and SIGTERM in the calling thread **before any other
//!    thread exists** (the command's `start` runs after this, so every
//!    worker, and any thread a library such as RocksDB starts, inherits
//!    the mask and the signals are taken here, not by a random thread);
//! 3. run the command's `start`, which builds its configuration and starts
//!    the server; [`ServeError::start`] turns a start failure into the
//!    command's one-line error;
//! 4. print exactly one line on standard output, `listening on ADDR` plus
//!    the command's detail, and flush it (scripts, the bench harness and
//!    tests wait for it);
//! 5. wait until `--duration` has passed or SIGINT/SIGTERM arrives, printing
//!    the drivers' [`Notices`] as `LEVEL: MESSAGE` lines on standard error
//!    as they come (looked at every [`NOTICE_POLL`]);
//! 6. shut the server down, print the notices of the shutdown, and hand the
//!    final statistics back to the command, which prints its summary and
//!    writes them with [`Lifecycle::write_stats`] (pretty JSON plus a
//!    newline, at `--stats-json`).
//!
//! Errors are [`ServeError`]s, each one line naming the flag and value; a
//! command that fails exits with [`EXIT_FAILURE`].

use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use skq_sys::{limits, signal};

use crate::notice::{Drained, Notices};
use crate::server::ServerHandle;
use crate::stats::ServerStats;

/// The exit status of a server command that fails (any error, as for
/// clap's usage errors).
pub const EXIT_FAILURE: i32 = 2;

/// How often the wait looks for new notices to print.
pub const NOTICE_POLL: Duration = Duration::from_secs(1);

/// Why a server command stopped. `Display` is the one line the command
/// prints (after its program name); the chain (`{:#}`) adds the system's
/// reason where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// `--duration` is not a positive, finite number of seconds below 10⁹.
    #[error("--duration: {0} is not a positive number of seconds")]
    Duration(f64),
    /// SIGINT/SIGTERM could not be blocked.
    #[error("blocking SIGINT/SIGTERM")]
    Signals(#[source] io::Error),
    /// The server refused its configuration (`InvalidInput`) or a feature
    /// its driver lacks (`Unsupported`); the message names the flag.
    #[error("{0}")]
    Refused(io::Error),
    /// The server could not listen on `--addr` (in use, not local, …).
    #[error("--addr {addr}: {error}")]
    Addr {
        /// The address asked for.
        addr: SocketAddr,
        /// Why it failed.
        error: io::Error,
    },
    /// The statistics file could not be written.
    #[error("--stats-json {}", path.display())]
    StatsJson {
        /// The path asked for.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The statistics could not be turned into JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// Standard output or error could not be written.
    #[error(transparent)]
    Output(io::Error),
}

impl ServeError {
    /// The error a server that failed to start on `addr` is reported with:
    /// a refused configuration (`InvalidInput`, `Unsupported`) as its own
    /// message, anything else as `--addr ADDR: REASON`.
    pub fn start(addr: SocketAddr, error: io::Error) -> ServeError {
        match error.kind() {
            io::ErrorKind::InvalidInput | io::ErrorKind::Unsupported => ServeError::Refused(error),
            _ => ServeError::Addr { addr, error },
        }
    }
}

/// A running server, whatever runs it: what the lifecycle needs of it.
pub trait Serving {
    /// What it hands back when shut down.
    type Stats;
    /// The address it listens on.
    fn local_addr(&self) -> SocketAddr;
    /// Its drivers' notices, printed while it runs (a server that has none
    /// returns an empty set).
    fn notices(&self) -> Notices;
    /// Stops it and waits for its workers.
    fn shutdown(self) -> Self::Stats;
}

impl Serving for ServerHandle {
    type Stats = ServerStats;
    fn local_addr(&self) -> SocketAddr {
        ServerHandle::local_addr(self)
    }
    fn notices(&self) -> Notices {
        ServerHandle::notices(self)
    }
    fn shutdown(self) -> ServerStats {
        ServerHandle::shutdown(self)
    }
}

/// A server the command started, with what it needs back at the end.
pub struct Started<T, S = ServerHandle> {
    /// The running server.
    pub server: S,
    /// Appended to `listening on ADDR` (empty, or e.g. ` (root …, mode …)`).
    pub detail: String,
    /// The command's own state (its protocol, for its summary), returned
    /// in [`Finished::app`].
    pub app: T,
}

impl<T, S> Started<T, S> {
    /// `server` announced as `listening on ADDR`, with `app` kept.
    pub fn new(server: S, app: T) -> Self {
        Started {
            server,
            detail: String::new(),
            app,
        }
    }
}

/// A server that has stopped.
pub struct Finished<T, St = ServerStats> {
    /// Its final statistics.
    pub stats: St,
    /// What the command kept ([`Started::app`]).
    pub app: T,
}

/// The lifecycle of one server command (see the module documentation).
#[derive(Clone, Debug)]
pub struct Lifecycle {
    run_for: Option<Duration>,
    stats_json: Option<PathBuf>,
}

impl Lifecycle {
    /// From `--duration SECONDS` (unset: until a signal) and `--stats-json
    /// PATH`.
    pub fn new(duration: Option<f64>, stats_json: Option<PathBuf>) -> Result<Self, ServeError> {
        let run_for = match duration {
            None => None,
            Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(ServeError::Duration(s)),
        };
        Ok(Lifecycle {
            run_for,
            stats_json,
        })
    }

    /// How long the server runs unless a signal comes first.
    pub fn run_for(&self) -> Option<Duration> {
        self.run_for
    }

    /// Steps 1–6: prepares the process, runs `start`, announces the server
    /// on `out`, waits, shuts it down and returns its statistics. Warnings
    /// and notices go to `err`. An error of `start` is returned as it is,
    /// with nothing printed on `out`.
    pub fn serve<T, S: Serving, E: From<ServeError>>(
        &self,
        out: &mut dyn Write,
        err: &mut dyn Write,
        start: impl FnOnce() -> Result<Started<T, S>, E>,
    ) -> Result<Finished<T, S::Stats>, E> {
        if let Err(e) = limits::raise_nofile_limit() {
            writeln!(err, "warning: could not raise the open-file limit: {e}")
                .map_err(ServeError::Output)?;
        }
        signal::block_termination_signals().map_err(ServeError::Signals)?;
        let Started {
            server,
            detail,
            app,
        } = start()?;
        let notices = server.notices();
        writeln!(out, "listening on {}{detail}", server.local_addr())
            .and_then(|()| out.flush())
            .map_err(ServeError::Output)?;
        self.wait(&notices, err)?;
        let stats = server.shutdown();
        print_notices(notices.drain(), err)?;
        Ok(Finished { stats, app })
    }

    /// Waits for `--duration` or SIGINT/SIGTERM, printing notices as they
    /// come.
    fn wait(&self, notices: &Notices, err: &mut dyn Write) -> Result<(), ServeError> {
        let started = Instant::now();
        loop {
            let slice = match self.run_for {
                None => NOTICE_POLL,
                Some(d) => match d.checked_sub(started.elapsed()) {
                    Some(left) if !left.is_zero() => left.min(NOTICE_POLL),
                    _ => return Ok(()),
                },
            };
            let signalled = matches!(signal::wait_for_termination(Some(slice)), Ok(Some(_)));
            print_notices(notices.drain(), err)?;
            if signalled {
                return Ok(());
            }
        }
    }

    /// Writes `stats` (the server's statistics, or a document built from
    /// them) as pretty JSON plus a newline at `--stats-json`, if it was
    /// given.
    pub fn write_stats(&self, stats: &impl Serialize) -> Result<(), ServeError> {
        let Some(path) = &self.stats_json else {
            return Ok(());
        };
        let json = serde_json::to_string_pretty(stats)?;
        std::fs::write(path, json + "\n").map_err(|source| ServeError::StatsJson {
            path: path.clone(),
            source,
        })
    }
}

/// The counts of a summary line: `N requests on N connections (N protocol
/// errors, N aborted, N timed out, N rejected), imbalance X`.
pub fn counts(stats: &ServerStats) -> String {
    format!(
        "{} requests on {} connections ({} protocol errors, {} aborted, {} timed out, {} rejected), imbalance {:.3}",
        stats.requests,
        stats.accepted,
        stats.protocol_errors,
        stats.aborted,
        stats.timeouts,
        stats.rejected,
        stats.imbalance
    )
}

/// Prints each notice as `LEVEL: MESSAGE`, then how many did not fit the log.
fn print_notices(d: Drained, err: &mut dyn Write) -> Result<(), ServeError> {
    for n in &d.notices {
        writeln!(err, "{}: {n}", n.level()).map_err(ServeError::Output)?;
    }
    if d.dropped > 0 {
        writeln!(
            err,
            "warning: {} more server notices not shown (the log was full)",
            d.dropped
        )
        .map_err(ServeError::Output)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notice::Notice;
    use crate::{Driver, Server, ServerConfig};
    use std::io::{BufRead, BufReader};
    use std::sync::Arc;

    // Echoes each line: the test protocol of `conn.rs`.
    use crate::conn::tests::Lines as Echo;

    #[test]
    fn an_address_in_use_is_one_line_naming_the_flag() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let mut cfg = ServerConfig::new(Driver::EpollShared, 1);
        cfg.addr = addr;
        let life = Lifecycle::new(None, None).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let e = life
            .serve(&mut out, &mut err, || {
                let server = Server::start(&cfg, Arc::new(Echo))
                    .map_err(|e| ServeError::start(cfg.addr, e))?;
                Ok::<_, ServeError>(Started::new(server, ()))
            })
            .err()
            .expect("the address is taken");
        assert!(
            matches!(&e, ServeError::Addr { error, .. } if error.kind() == io::ErrorKind::AddrInUse)
        );
        let line = e.to_string();
        assert_eq!(line.lines().count(), 1, "{line}");
        assert!(line.starts_with(&format!("--addr {addr}: ")), "{line}");
        assert!(
            out.is_empty(),
            "no `listening on` line for a server that did not start"
        );
        assert_eq!(EXIT_FAILURE, 2);
    }

    #[test]
    fn a_refused_configuration_is_its_own_message() {
        let cfg = ServerConfig::new(Driver::Tokio, 0);
        let e = Server::start(&cfg, Arc::new(Echo)).err().unwrap();
        let e = ServeError::start(cfg.addr, e);
        assert!(matches!(e, ServeError::Refused(_)));
        assert_eq!(e.to_string(), "--workers 0 is out of range: allowed 1..=64");
    }

    #[test]
    fn bad_durations_name_the_flag() {
        for s in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
            let e = Lifecycle::new(Some(s), None).unwrap_err();
            assert!(e.to_string().starts_with("--duration: "), "{e}");
        }
        let life = Lifecycle::new(Some(0.5), None).unwrap();
        assert_eq!(life.run_for(), Some(Duration::from_millis(500)));
    }

    #[test]
    fn a_short_run_announces_serves_and_writes_the_stats() {
        let path = std::env::temp_dir().join(format!("skq-net-serve-{}.json", std::process::id()));
        let _ = std::fs::remove_file(&path);
        // Long enough for the client to finish on a loaded machine.
        let life = Lifecycle::new(Some(2.0), Some(path.clone())).unwrap();
        let (mut err, mut client_thread) = (Vec::new(), None);
        let mut out = Vec::new();
        let done = life
            .serve(&mut out, &mut err, || {
                let server = Server::start(&ServerConfig::new(Driver::Skq, 2), Arc::new(Echo))
                    .map_err(|e| ServeError::start("127.0.0.1:0".parse().unwrap(), e))?;
                // A client served while the lifecycle waits.
                let addr = server.local_addr();
                client_thread = Some(std::thread::spawn(move || {
                    let mut c = std::net::TcpStream::connect(addr).unwrap();
                    c.write_all(b"one\ntwo\n").unwrap();
                    let mut r = BufReader::new(c);
                    let mut lines = String::new();
                    r.read_line(&mut lines).unwrap();
                    r.read_line(&mut lines).unwrap();
                    lines
                }));
                Ok::<_, ServeError>(Started {
                    server,
                    detail: " (echo)".into(),
                    app: 7,
                })
            })
            .unwrap();
        assert_eq!(client_thread.unwrap().join().unwrap(), "one\ntwo\n");
        assert_eq!(done.app, 7);
        assert_eq!(done.stats.requests, 2);
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out.lines().count(), 1, "{out:?}");
        assert!(out.starts_with("listening on 127.0.0.1:"), "{out:?}");
        assert!(out.ends_with(" (echo)\n"), "{out:?}");
        life.write_stats(&done.stats).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(text.ends_with("}\n"));
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["driver"], "skq");
        assert_eq!(json["requests"], 2);
        assert_eq!(json["workers"], 2);
    }

    #[test]
    fn a_stats_file_that_cannot_be_written_names_the_flag() {
        let path = PathBuf::from("/nonexistent-dir/stats.json");
        let life = Lifecycle::new(None, Some(path)).unwrap();
        let e = life
            .write_stats(&serde_json::json!({"requests": 1}))
            .unwrap_err();
        assert_eq!(e.to_string(), "--stats-json /nonexistent-dir/stats.json");
        assert!(
            std::error::Error::source(&e).is_some(),
            "the system's reason is chained"
        );
    }

    #[test]
    fn notices_are_printed_with_their_level_and_the_overflow_counted() {
        let log = Notices::new();
        log.push(Notice::AcceptFailed(io::Error::other(
            "too many open files",
        )));
        log.push(Notice::WaitFailed {
            worker: 1,
            call: "wait",
            error: io::Error::other("bad fd"),
        });
        let mut d = log.drain();
        d.dropped = 3;
        let mut err = Vec::new();
        print_notices(d, &mut err).unwrap();
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "warning: accept failed: too many open files\n\
             error: worker 1: wait failed: bad fd\n\
             warning: 3 more server notices not shown (the log was full)\n"
        );
    }
}
