//! The RPC protocol as an `skq_net::Protocol`: what the server does with the
//! bytes of one connection, whatever driver carries them.
//!
//! * Requests are served strictly in order, one reply each; a client may
//!   pipeline as many as it likes.
//! * Each request gets its `service_ns` delivered on the serving worker
//!   ([`ServiceMode`]) and a reply carrying the same id and the service time
//!   actually delivered.
//! * The first invalid frame (bad length, kind, reserved flags, or a reply
//!   sent to the server) closes that connection only.
//! * A request of class 1 asks the driver to serve the connection's future
//!   events first (the skq driver re-flags it `HIGH_PRIORITY`).

use skq_net::{Close, Cx, Protocol, Served};
use skq_proto::wire;

use crate::service::ServiceMode;

/// The synthetic RPC protocol.
#[derive(Clone, Copy, Debug)]
pub struct RpcProtocol {
    /// How service is delivered.
    pub service: ServiceMode,
    /// Call `skq_rt::checkpoint` every this many ns of a request's service
    /// (0: never). Off skq worker threads the call does nothing.
    pub checkpoint_ns: u64,
}

/// Per-connection state.
#[derive(Debug, Default)]
pub struct RpcSession {
    high_seen: bool,
}

impl RpcSession {
    /// Whether a class-1 (high-priority) request has arrived.
    pub fn high_priority_seen(&self) -> bool {
        self.high_seen
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
            Ok(Some(req)) => {
                if req.class == 1 && !s.high_seen {
                    s.high_seen = true;
                    cx.raise_priority();
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

    fn prepare_worker(&self, _worker: usize) {
        self.service.prepare_thread();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skq_net::conn::{Conn, Outcome};
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

    const PROTO: RpcProtocol = RpcProtocol {
        service: ServiceMode::Spin,
        checkpoint_ns: 0,
    };

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
    fn a_high_priority_request_raises_the_connection_once() {
        let counters = WorkerCounters::default();
        let mut session = RpcSession::default();
        let mut bytes = requests(0..1);
        Header::request(1, 0, 1).encode(&mut bytes);
        let mut out = Vec::new();
        let mut cx = Cx::new(0, &counters);
        let Served::Request { consumed } = PROTO.serve(&mut session, &bytes, &mut out, &mut cx)
        else {
            panic!("a whole request is buffered")
        };
        assert!(!cx.priority_raised() && !session.high_priority_seen());
        let _ = PROTO.serve(&mut session, &bytes[consumed..], &mut out, &mut cx);
        assert!(cx.priority_raised() && session.high_priority_seen());
    }

    #[test]
    fn idle_connection_allocates_nothing() {
        let mut s = mock(0);
        let mut c = Conn::new(RpcSession::default());
        assert_eq!(drive(&mut c, &mut s), Outcome::Idle);
        assert_eq!(c.buffer_capacity(), 0);
    }
}
