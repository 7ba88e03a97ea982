//! Per-protocol request encoding and reply parsing.
//!
//! A [`Codec`] turns a drawn [`Request`] into bytes and recognises one reply at
//! the front of a receive buffer. It does no I/O and keeps no per-connection
//! state: the engine owns the buffers and the FIFO of outstanding requests and
//! passes the oldest outstanding one (`head`) to [`Codec::parse`], because
//! memcached and HTTP replies carry no id and are matched by position.

pub mod http;
pub mod memcached;
pub mod rocksdb;
pub mod rpc;

/// The drawn request lives in `skq-proto` (the simulator draws it too).
pub use skq_proto::request::{Op, Request};

/// Protocol names accepted by `--protocol`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// skq RPC (`skq_proto::wire`).
    Rpc,
    /// memcached text protocol (get/set).
    Memcached,
    /// HTTP/1.1 GET with keep-alive.
    Http,
    /// The RocksDB front end (`skq serve rocksdb`): ZippyDB GET/PUT/SEEK.
    Rocksdb,
}

impl Protocol {
    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Rpc => "rpc",
            Protocol::Memcached => "memcached",
            Protocol::Http => "http",
            Protocol::Rocksdb => "rocksdb",
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rpc" => Ok(Protocol::Rpc),
            "memcached" | "mc" => Ok(Protocol::Memcached),
            "http" => Ok(Protocol::Http),
            "rocksdb" => Ok(Protocol::Rocksdb),
            _ => Err(format!(
                "unknown protocol `{s}`; expected rpc, memcached, http or rocksdb"
            )),
        }
    }
}

/// How a reply identifies the request it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answers {
    /// The reply names a request id (RPC).
    Id(u64),
    /// The reply answers the oldest outstanding request; `true` when its
    /// content matches that request (right key, right kind of answer).
    Head(bool),
}

/// The outcome of looking at the front of a receive buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole reply yet.
    Incomplete,
    /// One reply of `len` bytes.
    Reply {
        /// Bytes it occupies.
        len: usize,
        /// Which request it answers.
        answers: Answers,
        /// Service time the server reports having delivered (RPC).
        service_ns: Option<u32>,
        /// A memcached GET that found no value.
        miss: bool,
    },
    /// The stream cannot be parsed any further; the connection is closed.
    Fatal(String),
}

/// Encoding and parsing for one protocol.
pub trait Codec: Send {
    /// Appends the encoding of `req` to `out`.
    fn encode(&self, req: &Request, out: &mut Vec<u8>);
    /// Looks for one reply at the front of `buf`; `head` is the oldest
    /// outstanding request on the connection, if any.
    fn parse(&self, buf: &[u8], head: Option<&Request>) -> Parsed;
}

/// Position of the first `\r\n` in `buf`.
pub(crate) fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}
