//! The drivers: each owns sockets, readiness and worker threads, and runs the
//! protocol through [`crate::conn::Conn`] (tokio: through the same buffers
//! with its own async I/O; `tokio-spawn-blocking` runs the protocol on
//! tokio's blocking pool, [`tokio_pool`]).

pub(crate) mod epoll;
pub(crate) mod skq;
pub(crate) mod tokio;
mod tokio_pool;
