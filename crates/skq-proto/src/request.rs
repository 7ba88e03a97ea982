//! One request as a workload draws it, before any protocol encodes it.
//!
//! The load generator fills a [`Request`] per send (service time from
//! [`crate::workload`], key and size from a key-value mix or from
//! [`crate::zippydb`]) and remembers it while it is outstanding; the simulator
//! draws the same requests to cost them. Plain data: each protocol reads only
//! the fields it carries.

/// Key-value operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read (RPC and HTTP requests use this too).
    Get,
    /// Write (memcached set, RocksDB PUT).
    Set,
    /// Seek and scan `value_len` entries (RocksDB front end only).
    Seek,
}

/// One drawn request, before encoding. Also what is remembered about it while
/// it is outstanding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Per-connection sequence number (the RPC `id`).
    pub seq: u64,
    /// Requested service time (RPC).
    pub service_ns: u32,
    /// Priority class (RPC header; 1 = high).
    pub class: u8,
    /// Key index (memcached).
    pub key: u32,
    /// Value size in bytes (memcached set, RocksDB PUT), or entries to scan
    /// (RocksDB SEEK).
    pub value_len: u32,
    /// Operation (memcached).
    pub op: Op,
}

impl Request {
    /// A request with only a sequence number set.
    pub fn new(seq: u64) -> Request {
        Request {
            seq,
            service_ns: 0,
            class: 0,
            key: 0,
            value_len: 0,
            op: Op::Get,
        }
    }
}
