//! The front end as an `skq_net::Protocol`: one request path for every
//! driver (skq modes, `epoll-1to1`, `epoll-shared`, tokio).
//!
//! * Requests are RPC frames whose payload is a GET, PUT or SEEK
//!   (`skq_proto::db`); each is executed on the serving worker, directly on
//!   RocksDB, and answered in order with the same id.
//! * After the operation the worker delivers extra service, emulated or
//!   spun ([`ServiceMode`]): the request's `service_ns` plus `dilate` × the
//!   operation's own CPU time (the thread's CPU clock, not wall time: time
//!   spent waiting for a busy CPU is not stretched, so dilation does not
//!   feed back on contention). The reply's `service_ns` is the whole time
//!   served (wall clock), and that time is what the worker's busy counter
//!   (the imbalance figure) records.
//! * A frame that is not a valid request (bad RPC header) closes the
//!   connection at once; a valid frame whose payload is malformed (unknown
//!   operation, oversized key or value, lengths that disagree with the
//!   frame) gets a `BadRequest` reply and then the connection is closed.
//!   Other connections are untouched, and nothing is written to the database.
//! * A request whose `service_ns` is above `--max-service-us` (default
//!   [`DEFAULT_MAX_SERVICE_US`], 1 s) is refused, unexecuted: a reply with the wire format's
//!   `FLAG_REFUSED` and no payload, in order; the connection stays open.
//! * Output is bounded per connection: a reply is at most one frame
//!   (SEEK stops at `MAX_REPLY_DATA`, status 3), and skq-net serves none of
//!   a connection's requests while its pending output is at the ceiling
//!   (`ServerConfig::max_output`, 256 KiB), so a client pipelining SEEKs
//!   without reading makes the server hold at most the ceiling plus one
//!   reply (about 1.3 MiB) for it.
//! * SEEK reads through one RocksDB iterator, which pins one snapshot: a scan
//!   never mixes states of the database, and keys come in ascending order.

use std::sync::Arc;

use rocksdb::{ReadOptions, WriteOptions, DB};
use skq_net::{Close, Cx, Protocol, Served};
use skq_proto::db::{self, DbRequest, Status};
use skq_proto::wire::{self, Header, Kind, HEADER_LEN};
use skq_servers::service::{Deliver, ServiceMode};
use skq_sys::cpu;

/// Default `--max-service-us` of the front end (1 s): the ZippyDB bench asks
/// for its scans' modelled cost stretched 49 times, up to about 150 ms for
/// a 10,000-entry scan, which the RPC server's 100 ms default would refuse.
pub const DEFAULT_MAX_SERVICE_US: u64 = 1_000_000;

/// The RocksDB front end.
pub struct DbProtocol {
    db: Arc<DB>,
    service: ServiceMode,
    dilate: f64,
    write: WriteOptions,
    max_service_ns: u64,
}

impl DbProtocol {
    /// Serves `db`, delivering extra service with `service`, `dilate` times
    /// each operation's own time on top of what requests ask for (0 = none).
    pub fn new(db: Arc<DB>, service: ServiceMode, dilate: f64) -> DbProtocol {
        let mut write = WriteOptions::default();
        // The database lives in memory (tmpfs) and is rebuilt by
        // `skq db preload`; a write-ahead log would only add a copy.
        write.disable_wal(true);
        DbProtocol {
            db,
            service,
            dilate,
            write,
            max_service_ns: DEFAULT_MAX_SERVICE_US * 1_000,
        }
    }

    /// Refuses requests asking for more than `ns` of extra service.
    pub fn with_max_service_ns(mut self, ns: u64) -> DbProtocol {
        self.max_service_ns = ns;
        self
    }

    /// Executes one decoded operation, appending the reply payload to `out`.
    /// This is the one request path of the server, and what tests compare
    /// against RocksDB's own answers.
    pub fn execute(&self, req: DbRequest<'_>, out: &mut Vec<u8>) -> Result<(), rocksdb::Error> {
        match req {
            DbRequest::Get { key } => match self.db.get_pinned(key)? {
                Some(v) => {
                    db::encode_reply_head(Status::Ok, v.len() as u32, out);
                    out.extend_from_slice(&v);
                }
                None => db::encode_reply_head(Status::NotFound, 0, out),
            },
            DbRequest::Put { key, value } => {
                self.db.put_opt(key, value, &self.write)?;
                db::encode_reply_head(Status::Ok, 0, out);
            }
            DbRequest::Seek { key, count } => {
                let head = out.len();
                db::encode_reply_head(Status::Ok, 0, out);
                let mut it = self.db.raw_iterator_opt(ReadOptions::default());
                it.seek(key);
                let (mut n, mut bytes, mut status) = (0u32, 0usize, Status::Ok);
                while n < count && it.valid() {
                    let (k, v) = (it.key().unwrap_or(&[]), it.value().unwrap_or(&[]));
                    bytes += db::entry_len(k, v);
                    if bytes > db::MAX_REPLY_DATA {
                        status = Status::Partial;
                        break;
                    }
                    db::encode_entry(k, v, out);
                    n += 1;
                    it.next();
                }
                it.status()?;
                out[head] = status as u8;
                out[head + 4..head + 8].copy_from_slice(&n.to_le_bytes());
            }
        }
        Ok(())
    }
}

/// Per-connection state: none (requests are independent).
#[derive(Debug, Default)]
pub struct DbSession;

impl Protocol for DbProtocol {
    type Session = DbSession;

    fn open(&self, _worker: usize) -> DbSession {
        DbSession
    }

    fn serve(
        &self,
        _s: &mut DbSession,
        input: &[u8],
        out: &mut Vec<u8>,
        cx: &mut Cx<'_>,
    ) -> Served {
        let req = match wire::decode_request(input) {
            Err(_) => {
                return Served::Close {
                    consumed: 0,
                    why: Close::Protocol,
                }
            }
            Ok(None) => return Served::NeedInput { consumed: 0 },
            Ok(Some(h)) if u64::from(h.service_ns) > self.max_service_ns => {
                h.refusal().encode(out);
                return Served::Request {
                    consumed: h.frame_len(),
                };
            }
            Ok(Some(h)) => h,
        };
        let start = cpu::monotonic_ns();
        let cpu_start = cpu::thread_cputime_ns();
        let frame = &input[..req.frame_len()];
        let at = out.len();
        out.extend_from_slice(&[0u8; HEADER_LEN]);
        let close = match db::decode_request(&frame[HEADER_LEN..]) {
            Err(_) => {
                db::encode_reply_head(Status::BadRequest, 0, out);
                true
            }
            Ok(op) => match self.execute(op, out) {
                Ok(()) => false,
                Err(e) => {
                    // A storage error is the server's, not the peer's: say so
                    // on stderr and end this connection only.
                    eprintln!("skq serve rocksdb: {e}");
                    out.truncate(at + HEADER_LEN);
                    db::encode_reply_head(Status::BadRequest, 0, out);
                    true
                }
            },
        };
        let op_ns = cpu::thread_cputime_ns().saturating_sub(cpu_start);
        if !close {
            let extra = u64::from(req.service_ns) + (self.dilate * op_ns as f64) as u64;
            self.service.serve(extra.min(u64::from(u32::MAX)) as u32);
        }
        let served = (cpu::monotonic_ns() - start).min(u64::from(u32::MAX));
        let reply = Header {
            kind: Kind::Reply,
            class: req.class,
            id: req.id,
            service_ns: served as u32,
            payload_len: (out.len() - at - HEADER_LEN) as u32,
            refused: false,
        };
        let mut h = [0u8; HEADER_LEN];
        reply.write_to(&mut h);
        out[at..at + HEADER_LEN].copy_from_slice(&h);
        cx.record_service(served);
        if close {
            Served::Close {
                consumed: req.frame_len(),
                why: Close::Protocol,
            }
        } else {
            Served::Request {
                consumed: req.frame_len(),
            }
        }
    }

    fn read_limit(&self) -> usize {
        wire::MAX_FRAME + 64 * 1024
    }

    fn prepare_worker(&self, _worker: usize) {
        self.service.prepare_thread();
    }
}
