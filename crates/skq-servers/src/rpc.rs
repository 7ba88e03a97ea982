//! The RPC protocol as an `skq_net::Protocol`: what the server does with the
//! bytes of one connection, whatever driver carries them.
//!
//! * Requests are served strictly in order, one reply each; a client may
//!   pipeline as many as it likes.
//! * Each request gets its `service_ns` delivered on the serving worker
//!   ([`ServiceMode`]) and a reply carrying the same id and the service time
//!   actually delivered.
//! * A request asking for more than [`RpcProtocol::max_service_ns`] of
//!   service (`--max-service-us`, default [`DEFAULT_MAX_SERVICE_US`]) is
//!   not served: it gets a refusal reply (`skq_proto::wire::FLAG_REFUSED`,
//!   in order, same id, nothing delivered) and the connection stays open.
//!   So a client cannot hold a worker for seconds with one frame.
//! * The first invalid frame (bad length, kind, reserved flags, or a reply
//!   sent to the server) closes that connection only.
//! * Priority comes from a classifier callback (`skq_net::classify`), by
//!   default [`FlagByte`] on the header's class byte (offset 5: 0 regular,
//!   1 high, 2 batch); the skq driver places the connection's next events by
//!   the class of its latest request. `--classify none` turns it off.

use std::fmt;
use std::str::FromStr;

use skq_net::classify::{Class, Classifier, FlagByte};
use skq_net::{Close, Cx, Protocol, Served};
use skq_proto::wire;

/// Offset of the class byte in the RPC header.
pub const CLASS_OFFSET: usize = 5;
/// Default `--max-service-us` of the RPC server: the longest service one
/// request may ask for (100 ms). It must not refuse what the benchmarks
/// ask: their longest class is 20 ms (the GIS workload at scale 100), and an
/// exponential service of mean 1 ms (the sweep's) passes 100 ms with
/// probability e^-100, where 10 ms would refuse one request in 22,000. An
/// attacker can hold a worker at most this long per frame.
pub const DEFAULT_MAX_SERVICE_US: u64 = 100_000;

/// How the RPC server classifies requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Classify {
    /// By the header's class byte.
    Header,
    /// Not at all: every request is regular.
    None,
}

impl FromStr for Classify {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "header" => Ok(Classify::Header),
            "none" => Ok(Classify::None),
            _ => Err(format!(
                "--classify `{s}` is unknown: expected header or none"
            )),
        }
    }
}

impl fmt::Display for Classify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Classify::Header => "header",
            Classify::None => "none",
        })
    }
}

use crate::service::{Deliver, ServiceMode};

/// The synthetic RPC protocol.
#[derive(Clone, Copy, Debug)]
pub struct RpcProtocol {
    /// How service is delivered.
    pub service: ServiceMode,
    /// Call `skq_rt::checkpoint` every this many ns of a request's service
    /// (0: never). Off skq worker threads the call does nothing.
    pub checkpoint_ns: u64,
    /// The classifier callback (None: no classification).
    pub classifier: Option<FlagByte>,
    /// Requests asking for more service than this (ns) are refused.
    pub max_service_ns: u64,
}

impl RpcProtocol {
    /// A protocol delivering `service`, classifying as `classify` says.
    pub const fn new(service: ServiceMode, classify: Classify) -> RpcProtocol {
        RpcProtocol {
            service,
            checkpoint_ns: 0,
            classifier: match classify {
                Classify::Header => Some(FlagByte {
                    offset: CLASS_OFFSET,
                    map: [Class::Regular, Class::High, Class::Batch],
                }),
                Classify::None => None,
            },
            max_service_ns: DEFAULT_MAX_SERVICE_US * 1_000,
        }
    }
}

/// Per-connection state.
#[derive(Debug, Default)]
pub struct RpcSession {
    high_served: u64,
}

impl RpcSession {
    /// Requests served on this connection that were classified high.
    pub fn high_served(&self) -> u64 {
        self.high_served
    }
}

impl Protocol for RpcProtocol {
    type Session = RpcSession;

    fn open(&self, _worker: usize) -> RpcSession {
        RpcSession::default()
    }

    fn serve(
        &self,
        s: &mut RpcSession,
        input: &[u8],
        out: &mut Vec<u8>,
        cx: &mut Cx<'_>,
    ) -> Served {
        match wire::decode_request(input) {
            Err(_) => Served::Close {
                consumed: 0,
                why: Close::Protocol,
            },
            Ok(None) => Served::NeedInput { consumed: 0 },
            Ok(Some(req)) if u64::from(req.service_ns) > self.max_service_ns => {
                req.refusal().encode(out);
                Served::Request {
                    consumed: req.frame_len(),
                }
            }
            Ok(Some(req)) => {
                if cx.class() == Class::High {
                    s.high_served += 1;
                }
                let delivered = if self.checkpoint_ns == 0 {
                    self.service.serve(req.service_ns)
                } else {
                    self.service
                        .serve_checkpointed(req.service_ns, self.checkpoint_ns, || {
                            skq_rt::checkpoint();
                        })
                };
                req.reply(delivered).encode(out);
                cx.record_service(u64::from(delivered));
                Served::Request {
                    consumed: req.frame_len(),
                }
            }
        }
    }

    /// A whole frame of the largest size must fit.
    fn read_limit(&self) -> usize {
        wire::MAX_FRAME + 64 * 1024
    }

    fn classifier(&self) -> Option<&dyn Classifier> {
        self.classifier.as_ref().map(|c| c as &dyn Classifier)
    }

    fn prepare_worker(&self, _worker: usize) {
        self.service.prepare_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skq_net::conn::{Conn, Outcome, Transport};
    use skq_net::stats::WorkerCounters;
    use skq_proto::wire::Header;
    use std::collections::VecDeque;
    use std::io::{self, Read, Write};

    /// A non-blocking in-memory stream: reads come from scripted chunks
    /// (`None` = EAGAIN, empty = EOF), writes accept up to `write_room` bytes.
    #[derive(Default)]
    struct Mock {
        chunks: VecDeque<Option<Vec<u8>>>,
        written: Vec<u8>,
        write_room: usize,
    }

    impl Read for Mock {
        /// Like a socket: one read returns as much of the queued data as
        /// fits, up to the next EAGAIN (`None`) or EOF (empty) marker.
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut n = 0;
            while n < buf.len() {
                match self.chunks.front_mut() {
                    Some(Some(c)) if !c.is_empty() => {
                        let k = c.len().min(buf.len() - n);
                        buf[n..n + k].copy_from_slice(&c[..k]);
                        c.drain(..k);
                        n += k;
                        if c.is_empty() {
                            self.chunks.pop_front();
                        }
                    }
                    _ => break,
                }
            }
            if n > 0 {
                return Ok(n);
            }
            match self.chunks.pop_front() {
                Some(Some(_)) => Ok(0), // EOF marker
                _ => Err(io::ErrorKind::WouldBlock.into()),
            }
        }
    }

    impl Transport for Mock {}
    impl Write for Mock {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.write_room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.write_room);
            self.write_room -= n;
            self.written.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn requests(ids: std::ops::Range<u64>) -> Vec<u8> {
        let mut b = Vec::new();
        for id in ids {
            Header::request(id, 0, 0).encode(&mut b);
        }
        b
    }

    fn reply_ids(bytes: &[u8]) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut rest = bytes;
        while let Some(h) = wire::decode_reply(rest).unwrap() {
            ids.push(h.id);
            rest = &rest[h.frame_len()..];
        }
        assert!(rest.is_empty(), "trailing partial reply");
        ids
    }

    const PROTO: RpcProtocol = RpcProtocol::new(ServiceMode::Spin, Classify::Header);

    fn drive(conn: &mut Conn<RpcSession>, s: &mut Mock) -> Outcome {
        let mut scratch = [0u8; 7]; // tiny: frames always span reads
        let counters = WorkerCounters::default();
        let mut cx = Cx::new(0, &counters);
        // The kernel reports RDHUP once the FIN is queued.
        let hup = s
            .chunks
            .iter()
            .any(|c| matches!(c, Some(v) if v.is_empty()));
        conn.on_ready(&PROTO, s, &mut scratch, &mut cx, hup)
    }

    fn mock(room: usize) -> Mock {
        Mock {
            write_room: room,
            ..Mock::default()
        }
    }

    #[test]
    fn serves_in_order_across_split_reads_and_respects_budget() {
        let mut all = requests(0..40);
        let mut big = Header::request(40, 0, 0);
        big.payload_len = 5;
        big.encode(&mut all);
        all.extend_from_slice(b"hello");
        let mut s = mock(usize::MAX);
        for c in all.chunks(13) {
            s.chunks.push_back(Some(c.to_vec()));
        }
        s.chunks.push_back(None);
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::More, "budget of 32 reached");
        assert_eq!(reply_ids(&s.written), (0..32).collect::<Vec<_>>());
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert_eq!(reply_ids(&s.written), (0..41).collect::<Vec<_>>());
    }

    #[test]
    fn blocked_output_stops_serving_until_space() {
        let mut s = mock(30);
        s.chunks.push_back(Some(requests(0..5)));
        s.chunks.push_back(None);
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::Blocked);
        assert_eq!(s.written.len(), 30);
        s.write_room = usize::MAX;
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert_eq!(reply_ids(&s.written), (0..5).collect::<Vec<_>>());
    }

    #[test]
    fn eof_after_whole_requests_is_orderly_and_mid_frame_is_aborted() {
        let mut s = mock(usize::MAX);
        s.chunks.push_back(Some(requests(0..3)));
        s.chunks.push_back(Some(Vec::new()));
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::Close(Close::Eof));
        assert_eq!(reply_ids(&s.written), vec![0, 1, 2]);

        let mut s = mock(usize::MAX);
        let mut bytes = requests(0..2);
        bytes.truncate(30); // one whole frame and half of the next
        s.chunks.push_back(Some(bytes));
        s.chunks.push_back(Some(Vec::new()));
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::Close(Close::Aborted));
        assert_eq!(reply_ids(&s.written), vec![0]);
    }

    #[test]
    fn bad_header_closes_after_serving_what_came_before() {
        let mut s = mock(usize::MAX);
        let mut bytes = requests(0..2);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes()); // absurd length
        s.chunks.push_back(Some(bytes));
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::Close(Close::Protocol));
        assert_eq!(reply_ids(&s.written), vec![0, 1]);

        // A reply frame sent to the server is a protocol error too.
        let mut s = mock(usize::MAX);
        let mut bytes = Vec::new();
        Header::request(7, 0, 0).reply(0).encode(&mut bytes);
        s.chunks.push_back(Some(bytes));
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::Close(Close::Protocol));
        assert!(s.written.is_empty());
    }

    #[test]
    fn the_level_follows_each_request_split_at_every_byte() {
        // Requests of classes high, regular, batch, high; fed split at every
        // byte boundary, the connection's level after each request is the
        // class of that request, and every request is served once, in order.
        let classes = [1u8, 0, 2, 1];
        let mut all = Vec::new();
        for (id, &c) in classes.iter().enumerate() {
            Header::request(id as u64, 0, c).encode(&mut all);
        }
        let frame = all.len() / classes.len();
        let want = [Class::High, Class::Regular, Class::Batch, Class::High];
        for cut in 1..frame {
            let mut s = mock(usize::MAX);
            let mut c = Conn::new(RpcSession::default());
            let mut levels = Vec::new();
            for f in all.chunks(frame) {
                s.chunks.push_back(Some(f[..cut].to_vec()));
                assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
                if cut > CLASS_OFFSET {
                    let class = [Class::Regular, Class::High, Class::Batch][f[5] as usize];
                    assert_eq!(c.level(), class, "pending request classified at cut {cut}");
                }
                s.chunks.push_back(Some(f[cut..].to_vec()));
                assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
                levels.push(c.level());
            }
            assert_eq!(levels, want, "cut {cut}");
            assert_eq!(reply_ids(&s.written), vec![0, 1, 2, 3]);
            assert_eq!(c.session.high_served(), 2);
        }
        // Without a classifier: all regular.
        let none = RpcProtocol::new(ServiceMode::Spin, Classify::None);
        let mut s = mock(usize::MAX);
        s.chunks.push_back(Some(all.clone()));
        let mut c = Conn::new(RpcSession::default());
        let counters = WorkerCounters::default();
        let mut cx = Cx::new(0, &counters);
        assert_eq!(
            c.on_ready(&none, &mut s, &mut [0u8; 64], &mut cx, false),
            Outcome::Idle
        );
        assert_eq!(c.level(), Class::Regular);
        assert_eq!(c.session.high_served(), 0);
    }

    #[test]
    fn service_above_the_limit_is_refused_in_order_and_the_connection_kept() {
        let mut proto = RpcProtocol::new(ServiceMode::Emulate, Classify::None);
        proto.max_service_ns = 1_000;
        let mut bytes = Vec::new();
        Header::request(0, 1_000, 0).encode(&mut bytes);
        Header::request(1, u32::MAX, 0).encode(&mut bytes);
        Header::request(2, 0, 0).encode(&mut bytes);
        let mut s = mock(usize::MAX);
        s.chunks.push_back(Some(bytes));
        let mut c = Conn::new(RpcSession::default());
        let counters = WorkerCounters::default();
        let mut cx = Cx::new(0, &counters);
        assert_eq!(
            c.on_ready(&proto, &mut s, &mut [0u8; 64], &mut cx, false),
            Outcome::Idle
        );
        let mut rest = &s.written[..];
        let mut got = Vec::new();
        while let Some(h) = wire::decode_reply(rest).unwrap() {
            got.push((h.id, h.refused));
            rest = &rest[h.frame_len()..];
        }
        assert_eq!(got, vec![(0, false), (1, true), (2, false)]);
    }

    #[test]
    fn idle_connection_allocates_nothing() {
        let mut s = mock(0);
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert_eq!(c.buffer_capacity(), 0);
    }
}
