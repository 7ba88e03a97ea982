//! The key-value operations of the RocksDB front end (`skq serve rocksdb`),
//! carried as the payload of skq RPC frames ([`crate::wire`]).
//!
//! The RPC header is unchanged: `kind` 1 (request) or 2 (reply), the request
//! id echoed in the reply, `class` as in every RPC request. In a request,
//! `service_ns` is *extra* service the server emulates after the database
//! operation (0 = the operation's real work only); in a reply it is the
//! service the server delivered, database operation included, in ns.
//!
//! Request payload (little-endian):
//!
//! ```text
//! offset size field
//!      0    1 op        1 = GET, 2 = PUT, 3 = SEEK
//!      1    1 reserved  must be 0
//!      2    2 key_len   1 ..= MAX_KEY
//!      4    4 arg       GET: 0; PUT: value length (0 ..= MAX_VALUE);
//!                       SEEK: entries to return (1 ..= MAX_SCAN)
//!      8    k key
//!    8+k    v value     PUT only
//! ```
//!
//! The payload must be exactly `8 + key_len (+ value length)` bytes long.
//!
//! Reply payload:
//!
//! ```text
//! offset size field
//!      0    1 status    0 = ok, 1 = not found (GET), 2 = bad request (the
//!                       server closes the connection after this reply),
//!                       3 = ok but the scan stopped at the reply size limit
//!      1    3 reserved  0
//!      4    4 count     GET: value length; PUT, error: 0; SEEK: entries returned
//!      8      data      GET: the value; SEEK: `count` entries, each
//!                       u16 key_len, u32 value_len, key, value, in key order
//! ```
//!
//! SEEK positions at the first key ≥ the request's key and returns up to
//! `arg` entries in ascending key order, fewer at the end of the database or
//! when the reply payload would pass [`MAX_REPLY_DATA`] (status 3). A scan
//! reads one consistent snapshot of the database.

use thiserror::Error;

/// Length of the fixed part of a request or reply payload.
pub const OP_HEADER_LEN: usize = 8;
/// Longest key (bytes).
pub const MAX_KEY: usize = 1024;
/// Longest value a PUT may carry (bytes).
pub const MAX_VALUE: usize = 64 * 1024;
/// Most entries one SEEK may ask for (db_bench's default `mix_max_scan_len`).
pub const MAX_SCAN: u32 = 10_000;
/// Most scan data (entry headers, keys, values) in one reply, so every
/// reply fits one RPC frame.
pub const MAX_REPLY_DATA: usize = crate::wire::MAX_PAYLOAD - OP_HEADER_LEN;
/// Length of the keys `skq serve rocksdb` preloads and ZippyDB uses.
pub const KEY_LEN: usize = 48;

/// A database operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbOp {
    /// Point lookup.
    Get = 1,
    /// Insert or overwrite.
    Put = 2,
    /// Seek to a key and scan forward.
    Seek = 3,
}

/// Reply status byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done (a GET that found its key, a PUT, a whole SEEK).
    Ok = 0,
    /// A GET whose key is absent.
    NotFound = 1,
    /// The request was malformed; the connection is closed after the reply.
    BadRequest = 2,
    /// A SEEK that stopped at [`MAX_REPLY_DATA`] before its count.
    Partial = 3,
}

impl Status {
    /// The status a byte names.
    pub fn from_byte(b: u8) -> Option<Status> {
        match b {
            0 => Some(Status::Ok),
            1 => Some(Status::NotFound),
            2 => Some(Status::BadRequest),
            3 => Some(Status::Partial),
            _ => None,
        }
    }
}

/// A decoded request payload, borrowing the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbRequest<'a> {
    /// GET key.
    Get {
        /// Key.
        key: &'a [u8],
    },
    /// PUT key value.
    Put {
        /// Key.
        key: &'a [u8],
        /// Value.
        value: &'a [u8],
    },
    /// SEEK key, then up to `count` entries.
    Seek {
        /// Start key (inclusive).
        key: &'a [u8],
        /// Entries wanted.
        count: u32,
    },
}

/// Why a request payload is refused.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DbError {
    /// Shorter than the fixed part.
    #[error("payload of {0} bytes is shorter than the {OP_HEADER_LEN}-byte operation header")]
    Short(usize),
    /// Unknown operation code.
    #[error("unknown operation {0}")]
    UnknownOp(u8),
    /// Reserved byte not zero.
    #[error("reserved byte set: {0}")]
    Reserved(u8),
    /// Key empty or longer than [`MAX_KEY`].
    #[error("key length {0} outside 1..={MAX_KEY}")]
    KeyLen(usize),
    /// Value longer than [`MAX_VALUE`].
    #[error("value length {0} above {MAX_VALUE}")]
    ValueLen(u32),
    /// Scan count 0 or above [`MAX_SCAN`].
    #[error("scan count {0} outside 1..={MAX_SCAN}")]
    ScanLen(u32),
    /// A GET with a non-zero argument.
    #[error("GET argument must be 0, got {0}")]
    GetArg(u32),
    /// The payload's length disagrees with its fields.
    #[error("payload is {got} bytes, its fields say {want}")]
    Length {
        /// Bytes present.
        got: usize,
        /// Bytes the fields describe.
        want: usize,
    },
}

/// Decodes a request payload (the bytes after the RPC header).
pub fn decode_request(p: &[u8]) -> Result<DbRequest<'_>, DbError> {
    if p.len() < OP_HEADER_LEN {
        return Err(DbError::Short(p.len()));
    }
    let op = p[0];
    if p[1] != 0 {
        return Err(DbError::Reserved(p[1]));
    }
    let key_len = u16::from_le_bytes([p[2], p[3]]) as usize;
    let arg = u32::from_le_bytes([p[4], p[5], p[6], p[7]]);
    if op == 0 || op > 3 {
        return Err(DbError::UnknownOp(op));
    }
    if key_len == 0 || key_len > MAX_KEY {
        return Err(DbError::KeyLen(key_len));
    }
    let extra = match op {
        1 if arg != 0 => return Err(DbError::GetArg(arg)),
        2 if arg as usize > MAX_VALUE => return Err(DbError::ValueLen(arg)),
        2 => arg as usize,
        3 if arg == 0 || arg > MAX_SCAN => return Err(DbError::ScanLen(arg)),
        _ => 0,
    };
    let want = OP_HEADER_LEN + key_len + extra;
    if p.len() != want {
        return Err(DbError::Length { got: p.len(), want });
    }
    let key = &p[OP_HEADER_LEN..OP_HEADER_LEN + key_len];
    Ok(match op {
        1 => DbRequest::Get { key },
        2 => DbRequest::Put {
            key,
            value: &p[OP_HEADER_LEN + key_len..],
        },
        _ => DbRequest::Seek { key, count: arg },
    })
}

/// Appends a request payload for `op` on `key` to `out`; `arg` is the value
/// length for PUT (whose `value` follows), the scan count for SEEK, 0 for GET.
pub fn encode_request(op: DbOp, key: &[u8], arg: u32, value: &[u8], out: &mut Vec<u8>) {
    out.push(op as u8);
    out.push(0);
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&arg.to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Appends the fixed part of a reply payload.
pub fn encode_reply_head(status: Status, count: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&[status as u8, 0, 0, 0]);
    out.extend_from_slice(&count.to_le_bytes());
}

/// Appends one scan entry to a SEEK reply's data.
pub fn encode_entry(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// Bytes one scan entry takes in a reply.
pub fn entry_len(key: &[u8], value: &[u8]) -> usize {
    6 + key.len() + value.len()
}

/// A decoded reply payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DbReply {
    /// Status.
    pub status: Status,
    /// GET: the value; SEEK: the entries; otherwise empty.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// GET's value (empty otherwise).
    pub value: Vec<u8>,
}

/// Why a reply payload cannot be read.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("malformed rocksdb reply payload")]
pub struct BadReply;

/// Decodes a reply payload; `seek` says whether it answers a SEEK (whose data
/// is entries) or not (whose data is a value).
pub fn decode_reply(p: &[u8], seek: bool) -> Result<DbReply, BadReply> {
    if p.len() < OP_HEADER_LEN {
        return Err(BadReply);
    }
    let status = Status::from_byte(p[0]).ok_or(BadReply)?;
    let count = u32::from_le_bytes([p[4], p[5], p[6], p[7]]) as usize;
    let mut data = &p[OP_HEADER_LEN..];
    let mut reply = DbReply {
        status,
        entries: Vec::new(),
        value: Vec::new(),
    };
    if !seek {
        if data.len() != count {
            return Err(BadReply);
        }
        reply.value = data.to_vec();
        return Ok(reply);
    }
    for _ in 0..count {
        if data.len() < 6 {
            return Err(BadReply);
        }
        let k = u16::from_le_bytes([data[0], data[1]]) as usize;
        let v = u32::from_le_bytes([data[2], data[3], data[4], data[5]]) as usize;
        if data.len() < 6 + k + v {
            return Err(BadReply);
        }
        reply
            .entries
            .push((data[6..6 + k].to_vec(), data[6 + k..6 + k + v].to_vec()));
        data = &data[6 + k + v..];
    }
    if !data.is_empty() {
        return Err(BadReply);
    }
    Ok(reply)
}

/// The key of record `index` in a preloaded database: the index in decimal,
/// zero-padded to [`KEY_LEN`] digits, so key order is index order.
pub fn key_of(index: u64, out: &mut [u8; KEY_LEN]) {
    let mut i = index;
    for b in out.iter_mut().rev() {
        *b = b'0' + (i % 10) as u8;
        i /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_ones_are_named() {
        let mut b = Vec::new();
        encode_request(DbOp::Put, b"k1", 3, b"abc", &mut b);
        assert_eq!(
            decode_request(&b),
            Ok(DbRequest::Put {
                key: b"k1",
                value: b"abc"
            })
        );
        b.clear();
        encode_request(DbOp::Seek, b"k", 7, b"", &mut b);
        assert_eq!(
            decode_request(&b),
            Ok(DbRequest::Seek {
                key: b"k",
                count: 7
            })
        );
        b.clear();
        encode_request(DbOp::Get, b"k", 0, b"", &mut b);
        assert_eq!(decode_request(&b), Ok(DbRequest::Get { key: b"k" }));
        assert_eq!(decode_request(&b[..5]), Err(DbError::Short(5)));
        let mut bad = b.clone();
        bad[0] = 9;
        assert_eq!(decode_request(&bad), Err(DbError::UnknownOp(9)));
        let mut trunc = Vec::new();
        encode_request(DbOp::Put, b"k", 10, b"abc", &mut trunc);
        assert_eq!(
            decode_request(&trunc),
            Err(DbError::Length { got: 12, want: 19 })
        );
        let long = vec![b'x'; MAX_KEY + 1];
        let mut l = Vec::new();
        encode_request(DbOp::Get, &long, 0, b"", &mut l);
        assert_eq!(decode_request(&l), Err(DbError::KeyLen(MAX_KEY + 1)));
        let mut s = Vec::new();
        encode_request(DbOp::Seek, b"k", MAX_SCAN + 1, b"", &mut s);
        assert_eq!(decode_request(&s), Err(DbError::ScanLen(MAX_SCAN + 1)));
    }

    #[test]
    fn replies_round_trip() {
        let mut r = Vec::new();
        encode_reply_head(Status::Ok, 2, &mut r);
        encode_entry(b"a", b"1", &mut r);
        encode_entry(b"b", b"22", &mut r);
        let d = decode_reply(&r, true).unwrap();
        assert_eq!(
            d.entries,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"22".to_vec())
            ]
        );
        assert_eq!(decode_reply(&r[..r.len() - 1], true), Err(BadReply));
        let mut k = [0u8; KEY_LEN];
        key_of(1234, &mut k);
        assert!(k.ends_with(b"0001234") && k.len() == 48);
        let mut k2 = [0u8; KEY_LEN];
        key_of(1235, &mut k2);
        assert!(k < k2);
    }
}
