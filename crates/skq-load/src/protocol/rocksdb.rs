//! The RocksDB front end's protocol (`skq serve rocksdb`): an RPC frame whose
//! payload is a GET, PUT or SEEK (`skq_proto::db`). The header's
//! `service_ns` asks for extra emulated service after the operation; the
//! reply echoes the id and carries a status and the data.
//!
//! A refusal (the wire format's `FLAG_REFUSED`, no payload: the server's
//! `--max-service-us` turned the request away unexecuted) is an ordinary reply
//! answering the oldest outstanding request, counted as a failed one (a bad
//! reply, as the RPC codec counts it); the connection goes on. A reply that
//! cannot be read (short payload, unknown status, a refusal with a payload)
//! and a `BadRequest` status (the server closes the connection after it) stay
//! fatal.

use skq_proto::db::{self, DbOp, Status, KEY_LEN};
use skq_proto::wire::{self, Header, HEADER_LEN};

use super::{Answers, Codec, Op, Parsed, Request};

/// The RocksDB front end codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rocksdb;

impl Codec for Rocksdb {
    fn encode(&self, req: &Request, out: &mut Vec<u8>) {
        let mut key = [0u8; KEY_LEN];
        db::key_of(u64::from(req.key), &mut key);
        let (op, arg, value_len) = match req.op {
            Op::Get => (DbOp::Get, 0, 0),
            Op::Set => (DbOp::Put, req.value_len, req.value_len as usize),
            Op::Seek => (DbOp::Seek, req.value_len.max(1), 0),
        };
        let mut h = Header::request(req.seq, req.service_ns, req.class);
        h.payload_len = (db::OP_HEADER_LEN + KEY_LEN + value_len) as u32;
        h.encode(out);
        // The value names its writer (request sequence number), repeated.
        let start = out.len();
        db::encode_request(op, &key, arg, &[], out);
        let tag = req.seq.to_le_bytes();
        out.extend((0..value_len).map(|i| tag[i % 8]));
        debug_assert_eq!(out.len() - start, h.payload_len as usize);
    }

    fn parse(&self, buf: &[u8], _head: Option<&Request>) -> Parsed {
        match wire::decode_reply(buf) {
            Ok(None) => Parsed::Incomplete,
            Ok(Some(h)) if h.refused => {
                if h.payload_len != 0 {
                    return Parsed::Fatal(format!(
                        "bad rocksdb reply: a refusal with a {}-byte payload",
                        h.payload_len
                    ));
                }
                Parsed::Reply {
                    len: h.frame_len(),
                    answers: Answers::Head(false),
                    service_ns: None,
                    miss: false,
                }
            }
            Ok(Some(h)) => {
                let p = &buf[HEADER_LEN..h.frame_len()];
                let status = p
                    .first()
                    .and_then(|&b| Status::from_byte(b))
                    .filter(|_| p.len() >= db::OP_HEADER_LEN);
                match status {
                    None => {
                        Parsed::Fatal("bad rocksdb reply: short payload or unknown status".into())
                    }
                    Some(Status::BadRequest) => {
                        Parsed::Fatal("the rocksdb server refused a request as malformed".into())
                    }
                    Some(s) => Parsed::Reply {
                        len: h.frame_len(),
                        answers: Answers::Id(h.id),
                        service_ns: Some(h.service_ns),
                        miss: s == Status::NotFound,
                    },
                }
            }
            Err(e) => Parsed::Fatal(format!("bad rocksdb reply: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skq_proto::db::DbRequest;

    #[test]
    fn encodes_each_operation_and_parses_replies() {
        let mut req = Request::new(9);
        req.key = 42;
        req.op = Op::Set;
        req.value_len = 20;
        let mut out = Vec::new();
        Rocksdb.encode(&req, &mut out);
        let h = wire::decode_request(&out).unwrap().unwrap();
        assert_eq!(h.frame_len(), out.len());
        let DbRequest::Put { key, value } = db::decode_request(&out[HEADER_LEN..]).unwrap() else {
            panic!("a PUT")
        };
        assert!(key.ends_with(b"042") && key.len() == 48 && value.len() == 20);
        out.clear();
        req.op = Op::Seek;
        req.value_len = 17;
        Rocksdb.encode(&req, &mut out);
        assert!(matches!(
            db::decode_request(&out[HEADER_LEN..]),
            Ok(DbRequest::Seek { count: 17, .. })
        ));

        let mut reply = Vec::new();
        let mut rh = h.reply(5_000);
        rh.payload_len = 8;
        rh.encode(&mut reply);
        db::encode_reply_head(Status::NotFound, 0, &mut reply);
        assert_eq!(Rocksdb.parse(&reply[..25], None), Parsed::Incomplete);
        assert_eq!(
            Rocksdb.parse(&reply, None),
            Parsed::Reply {
                len: 28,
                answers: Answers::Id(9),
                service_ns: Some(5_000),
                miss: true
            }
        );
        reply[HEADER_LEN] = Status::BadRequest as u8;
        assert!(matches!(Rocksdb.parse(&reply, None), Parsed::Fatal(_)));
    }

    /// A refused request (`--max-service-us`) gets a counted failed reply and the
    /// stream goes on; malformed replies stay fatal.
    #[test]
    fn a_refusal_is_a_failed_reply_not_a_fatal_one() {
        let mut req = Request::new(3);
        req.op = Op::Seek;
        req.value_len = 10_000;
        req.service_ns = u32::MAX;
        let mut out = Vec::new();
        Rocksdb.encode(&req, &mut out);
        let h = wire::decode_request(&out).unwrap().unwrap();
        // A refusal followed by an ordinary reply to the next request, in one buffer.
        let mut buf = Vec::new();
        h.refusal().encode(&mut buf);
        let refusal_len = buf.len();
        let mut next = Header::request(4, 0, 0).reply(700);
        next.payload_len = db::OP_HEADER_LEN as u32;
        next.encode(&mut buf);
        db::encode_reply_head(Status::Ok, 0, &mut buf);
        assert_eq!(
            Rocksdb.parse(&buf, Some(&req)),
            Parsed::Reply {
                len: HEADER_LEN,
                answers: Answers::Head(false),
                service_ns: None,
                miss: false
            }
        );
        assert_eq!(
            Rocksdb.parse(&buf[refusal_len..], None),
            Parsed::Reply {
                len: HEADER_LEN + db::OP_HEADER_LEN,
                answers: Answers::Id(4),
                service_ns: Some(700),
                miss: false
            }
        );
        assert_eq!(
            Rocksdb.parse(&buf[..refusal_len - 1], None),
            Parsed::Incomplete
        );

        // A refusal carries no payload: one that does is malformed.
        let mut bad = h.refusal();
        bad.payload_len = db::OP_HEADER_LEN as u32;
        let mut b = Vec::new();
        bad.encode(&mut b);
        db::encode_reply_head(Status::Ok, 0, &mut b);
        assert!(matches!(Rocksdb.parse(&b, None), Parsed::Fatal(_)));
        // A reply too short for its status, an unknown status, and a request are fatal.
        let mut short = Vec::new();
        h.reply(1).encode(&mut short);
        assert!(matches!(Rocksdb.parse(&short, None), Parsed::Fatal(_)));
        let mut unknown = Vec::new();
        let mut uh = h.reply(1);
        uh.payload_len = db::OP_HEADER_LEN as u32;
        uh.encode(&mut unknown);
        db::encode_reply_head(Status::Ok, 0, &mut unknown);
        unknown[HEADER_LEN] = 9;
        assert!(matches!(Rocksdb.parse(&unknown, None), Parsed::Fatal(_)));
        assert!(matches!(Rocksdb.parse(&out, None), Parsed::Fatal(_)));
    }
}
