//! # skq-http: a static-file HTTP/1.1 server on the skq server layer
//!
//! `skq serve http --root DIR` serves the files below `DIR` with GET and
//! HEAD over HTTP/1.1 keep-alive and pipelining: `Content-Length`, `Date`,
//! `Content-Type` by extension, `Last-Modified`/`If-Modified-Since`,
//! `ETag`/`If-None-Match`, `Connection: close`, and the errors a client
//! expects (400, 403, 404, 405, 413, 414, 431, 501, 505), HTTP/0.9 as nginx
//! answers it. Request heads are parsed by `httparse`; everything else is in
//! [`protocol`]. Files are streamed in 32 KiB pieces as the socket drains,
//! so a slow reader costs under 100 KiB whatever the file's size; header,
//! keep-alive idle and send timeouts default to nginx's (60 s, 75 s, 60 s).
//!
//! The server is one sans-socket [`skq_net::Protocol`]
//! ([`protocol::HttpProtocol`]), so every skq-net driver serves it through
//! the same request path: every skq scheduling mode, `epoll-1to1`,
//! `epoll-shared` and tokio; and `async-MODE`/`async-tokio` serve it by
//! async code on skq-async or tokio (skq-net's async drivers,
//! [`skq_net::async_driver`]).
//!
//! **Containment.** A request path is percent-decoded once and normalised
//! (`..` removes the segment before it), and refused if a `..` would climb
//! above the root ([`target`]); what remains is opened with
//! `openat2(RESOLVE_BENEATH)` relative to the root ([`docroot`]), so
//! symlinks cannot lead out of it either.
//!
//! **Priority** ([`priority`]): `--priority CLASS:COND[&COND]` rules by
//! path prefix or header classify each request through skq-net's classifier
//! (high, regular or batch); `--batch-workers` turns on diffusion.
//!
//! **IO variance** ([`iovar`]): a chosen fraction of file reads misses the
//! page cache, for real (`posix_fadvise(POSIX_FADV_DONTNEED)`) or emulated
//! (a storage latency waited on the clock). Every output names it.
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod cli;
pub mod date;
pub mod docroot;
pub mod fuzzing;
pub mod iovar;
pub mod mime;
pub mod priority;
pub mod protocol;
pub mod server;
pub mod target;

pub use protocol::{AccessLog, HttpProtocol};
pub use server::{start, HttpConfig};
