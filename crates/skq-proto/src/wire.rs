//! The skq RPC protocol.
//!
//! Every message is one frame. All integers are little-endian.
//!
//! ```text
//! offset size field
//!      0    4 frame_len   total length of the frame, this field included (20 ..= 20 + MAX_PAYLOAD)
//!      4    1 kind        1 = request, 2 = reply
//!      5    1 class       0 = regular, 1 = high priority (a hint; the server may honour it)
//!      6    2 flags       requests: must be 0; replies: 0, or FLAG_REFUSED (bit 0)
//!      8    8 id          request id; clients use a per-connection sequence number
//!     16    4 service_ns  request: service time the client asks for (ns)
//!                         reply: service time the server actually delivered (ns)
//!     20    n payload     n = frame_len - 20 bytes, opaque; replies carry none
//! ```
//!
//! Requests may be pipelined: a client can send many frames without waiting, and
//! the server answers each connection's requests in order, one reply per request,
//! echoing `id`. A frame that violates this layout (bad kind, non-zero flags, a
//! length below the header size or above the limit) is a protocol error: the
//! server closes that connection only.
//!
//! **Refusals.** A well-formed request the server will not serve (the RPC
//! server's `--max-service-us`: a `service_ns` above its limit) is answered,
//! in order like any reply, with a reply frame whose flags are
//! [`FLAG_REFUSED`] and whose `service_ns` is 0 (nothing was delivered);
//! the connection stays open. Any other flag bit is still a protocol error.
//! A client that counts replies must count a refusal as a failed request
//! (skq-load counts it as a bad reply).

use thiserror::Error;

/// Size of the fixed header in bytes.
pub const HEADER_LEN: usize = 20;
/// Largest payload a frame may carry (1 MiB).
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Largest whole frame.
pub const MAX_FRAME: usize = HEADER_LEN + MAX_PAYLOAD;
/// Reply flag: the request was refused, not served (see the module docs).
pub const FLAG_REFUSED: u16 = 1;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Client to server.
    Request = 1,
    /// Server to client.
    Reply = 2,
}

/// A decoded frame header; the payload stays in the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Request or reply.
    pub kind: Kind,
    /// Priority hint: 0 regular, 1 high.
    pub class: u8,
    /// Request id, echoed in the reply.
    pub id: u64,
    /// Requested (request) or delivered (reply) service time in nanoseconds.
    pub service_ns: u32,
    /// Payload length in bytes.
    pub payload_len: u32,
    /// A reply with [`FLAG_REFUSED`]: the request was refused, not served.
    pub refused: bool,
}

impl Header {
    /// A request header with an empty payload.
    pub fn request(id: u64, service_ns: u32, class: u8) -> Self {
        Header {
            kind: Kind::Request,
            class,
            id,
            service_ns,
            payload_len: 0,
            refused: false,
        }
    }

    /// The reply to `self`, reporting `delivered_ns` of service.
    pub fn reply(&self, delivered_ns: u32) -> Self {
        Header {
            kind: Kind::Reply,
            class: self.class,
            id: self.id,
            service_ns: delivered_ns,
            payload_len: 0,
            refused: false,
        }
    }

    /// The refusal of `self` ([`FLAG_REFUSED`], nothing delivered).
    pub fn refusal(&self) -> Self {
        Header {
            refused: true,
            ..self.reply(0)
        }
    }

    /// Length of the whole frame this header describes.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.payload_len as usize
    }

    /// Appends the header (not the payload) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut b = [0u8; HEADER_LEN];
        self.write_to(&mut b);
        out.extend_from_slice(&b);
    }

    /// Writes the header into a fixed array.
    pub fn write_to(&self, b: &mut [u8; HEADER_LEN]) {
        b[0..4].copy_from_slice(&(self.frame_len() as u32).to_le_bytes());
        b[4] = self.kind as u8;
        b[5] = self.class;
        let flags = if self.refused { FLAG_REFUSED } else { 0 };
        b[6..8].copy_from_slice(&flags.to_le_bytes());
        b[8..16].copy_from_slice(&self.id.to_le_bytes());
        b[16..20].copy_from_slice(&self.service_ns.to_le_bytes());
    }
}

/// Why a byte stream is not valid skq RPC.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ProtoError {
    /// `frame_len` below the header size or above [`MAX_FRAME`].
    #[error("frame length {0} outside {HEADER_LEN}..={MAX_FRAME}")]
    BadLength(u32),
    /// `kind` is neither request nor reply.
    #[error("unknown frame kind {0}")]
    BadKind(u8),
    /// Reserved flags are not zero.
    #[error("reserved flags set: {0:#06x}")]
    BadFlags(u16),
    /// A frame of the wrong direction (a reply sent to a server, say).
    #[error("unexpected frame kind {0:?}")]
    UnexpectedKind(Kind),
}

/// Decodes one frame header from the front of `buf`.
///
/// Returns `Ok(None)` when `buf` does not yet hold a whole frame (header and
/// payload), `Ok(Some(header))` when it does (the frame occupies
/// `header.frame_len()` bytes), or an error as soon as the header is known to be
/// invalid, even if the rest has not arrived.
pub fn decode(buf: &[u8]) -> Result<Option<Header>, ProtoError> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if (len as usize) < HEADER_LEN || len as usize > MAX_FRAME {
        return Err(ProtoError::BadLength(len));
    }
    if buf.len() >= 5 && buf[4] != 1 && buf[4] != 2 {
        return Err(ProtoError::BadKind(buf[4]));
    }
    let mut refused = false;
    if buf.len() >= 8 {
        let flags = u16::from_le_bytes([buf[6], buf[7]]);
        refused = flags == FLAG_REFUSED && buf[4] == Kind::Reply as u8;
        if flags != 0 && !refused {
            return Err(ProtoError::BadFlags(flags));
        }
    }
    if buf.len() < len as usize {
        return Ok(None);
    }
    let kind = if buf[4] == 1 {
        Kind::Request
    } else {
        Kind::Reply
    };
    Ok(Some(Header {
        kind,
        class: buf[5],
        id: u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes")),
        service_ns: u32::from_le_bytes(buf[16..20].try_into().expect("4 bytes")),
        payload_len: len - HEADER_LEN as u32,
        refused,
    }))
}

/// Decodes a frame that must be a request.
pub fn decode_request(buf: &[u8]) -> Result<Option<Header>, ProtoError> {
    match decode(buf)? {
        Some(h) if h.kind != Kind::Request => Err(ProtoError::UnexpectedKind(h.kind)),
        other => Ok(other),
    }
}

/// Decodes a frame that must be a reply.
pub fn decode_reply(buf: &[u8]) -> Result<Option<Header>, ProtoError> {
    match decode(buf)? {
        Some(h) if h.kind != Kind::Reply => Err(ProtoError::UnexpectedKind(h.kind)),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_partial_frames() {
        let mut h = Header::request(42, 1_000, 1);
        h.payload_len = 3;
        let mut buf = Vec::new();
        h.encode(&mut buf);
        buf.extend_from_slice(b"abc");
        for cut in 0..buf.len() {
            assert_eq!(decode(&buf[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(decode(&buf), Ok(Some(h)));
        let r = h.reply(990);
        let mut rb = Vec::new();
        r.encode(&mut rb);
        let d = decode_reply(&rb).unwrap().unwrap();
        assert_eq!((d.id, d.service_ns, d.payload_len), (42, 990, 0));
        assert!(matches!(
            decode_request(&rb),
            Err(ProtoError::UnexpectedKind(Kind::Reply))
        ));
    }

    #[test]
    fn refusals_are_replies_with_the_refused_flag() {
        let req = Header::request(9, 4_000_000_000, 0);
        let mut b = Vec::new();
        req.refusal().encode(&mut b);
        assert_eq!(&b[6..8], &FLAG_REFUSED.to_le_bytes());
        let r = decode_reply(&b).unwrap().unwrap();
        assert!(r.refused);
        assert_eq!((r.id, r.service_ns), (9, 0));
        let mut ok = Vec::new();
        req.reply(5).encode(&mut ok);
        assert!(!decode_reply(&ok).unwrap().unwrap().refused);
        // The flag is for replies only.
        let mut bad = Vec::new();
        req.encode(&mut bad);
        bad[6] = 1;
        assert_eq!(decode_request(&bad), Err(ProtoError::BadFlags(1)));
    }

    #[test]
    fn rejects_bad_headers_early() {
        assert_eq!(decode(&[3, 0, 0, 0]), Err(ProtoError::BadLength(3)));
        let huge = (MAX_FRAME as u32 + 1).to_le_bytes();
        assert_eq!(
            decode(&huge),
            Err(ProtoError::BadLength(MAX_FRAME as u32 + 1))
        );
        assert_eq!(decode(&[20, 0, 0, 0, 9]), Err(ProtoError::BadKind(9)));
        assert_eq!(
            decode(&[20, 0, 0, 0, 1, 0, 1, 0]),
            Err(ProtoError::BadFlags(1))
        );
    }
}
