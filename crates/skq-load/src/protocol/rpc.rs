//! skq RPC: a 20-byte header per request carrying the sequence number as
//! `id`, the requested service time and the class; replies echo `id`. The wire
//! format itself lives in `skq_proto::wire`.

use skq_proto::wire::{self, Header};

use super::{Answers, Codec, Parsed, Request};

/// The skq RPC codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rpc;

impl Codec for Rpc {
    fn encode(&self, req: &Request, out: &mut Vec<u8>) {
        Header::request(req.seq, req.service_ns, req.class).encode(out);
    }

    fn parse(&self, buf: &[u8], _head: Option<&Request>) -> Parsed {
        match wire::decode_reply(buf) {
            Ok(None) => Parsed::Incomplete,
            // A refusal (the server's `--max-service-us`) answers the
            // oldest request, in order, and is a failed request.
            Ok(Some(h)) if h.refused => Parsed::Reply {
                len: h.frame_len(),
                answers: Answers::Head(false),
                service_ns: None,
                miss: false,
            },
            Ok(Some(h)) => Parsed::Reply {
                len: h.frame_len(),
                answers: Answers::Id(h.id),
                service_ns: Some(h.service_ns),
                miss: false,
            },
            Err(e) => Parsed::Fatal(format!("bad rpc reply: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_requests_and_parses_replies() {
        let mut req = Request::new(7);
        req.service_ns = 1234;
        req.class = 1;
        let mut out = Vec::new();
        Rpc.encode(&req, &mut out);
        let h = wire::decode_request(&out).unwrap().unwrap();
        assert_eq!((h.id, h.service_ns, h.class), (7, 1234, 1));
        let mut reply = Vec::new();
        h.reply(1200).encode(&mut reply);
        assert_eq!(Rpc.parse(&reply[..10], None), Parsed::Incomplete);
        assert_eq!(
            Rpc.parse(&reply, None),
            Parsed::Reply {
                len: 20,
                answers: Answers::Id(7),
                service_ns: Some(1200),
                miss: false
            }
        );
        assert!(
            matches!(Rpc.parse(&out, None), Parsed::Fatal(_)),
            "a request is not a reply"
        );
        let mut refused = Vec::new();
        h.refusal().encode(&mut refused);
        assert_eq!(
            Rpc.parse(&refused, None),
            Parsed::Reply {
                len: 20,
                answers: Answers::Head(false),
                service_ns: None,
                miss: false
            },
            "a refusal is a bad reply"
        );
    }
}
