//! File regions that end replies ([`crate::Cx::send_file`]): sent with
//! `sendfile(2)` where the stream is a socket, else read into the output
//! buffer in bounded pieces.
//!
//! Invariants: the region is sent only once the buffered output before it
//! is written, so the bytes reach the peer in reply order; on a socket no
//! byte of the file enters user memory, and a call sends only what the
//! socket takes (`EAGAIN` blocks the connection on its writable edge); on
//! other streams at most [`FILE_PIECE`] bytes of it are buffered at a time,
//! and only once the output is empty. A file shorter than its region ends
//! the send with `UnexpectedEof` (the connection closes).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;

use super::{release, Conn};
use crate::bufpool;
use std::io::{Read, Write};

/// Most bytes of a file region one `sendfile(2)` call is asked to send.
pub const SENDFILE_MAX: usize = 1 << 20;
/// Bytes of a file region read into the output at a time where the stream
/// cannot take `sendfile(2)` (in-memory streams).
pub const FILE_PIECE: usize = 32 * 1024;

/// A stream a connection is served over: bytes in and out, and, for a
/// socket, the descriptor file regions are sent to with `sendfile(2)`.
pub trait Transport: Read + Write {
    /// The socket `sendfile(2)` may write to; `None` (the default): file
    /// regions are read into the output buffer and written.
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

impl Transport for std::net::TcpStream {
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
}

impl Transport for std::os::unix::net::UnixStream {
    fn sendfile_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
}

impl<S> Conn<S> {
    /// Sends part of the file region to `sock` with one `sendfile(2)` call
    /// once the buffered output is written; returns the bytes sent (0 when
    /// there is nothing to send now). `WouldBlock` when the socket is full;
    /// `UnexpectedEof` when the file ended before the region.
    pub fn send_file_once(&mut self, sock: BorrowedFd<'_>) -> io::Result<usize> {
        if self.out_start < self.output.len() {
            return Ok(0);
        }
        let Some(f) = self.file.as_mut() else {
            return Ok(0);
        };
        let count = usize::try_from(f.len)
            .unwrap_or(usize::MAX)
            .min(SENDFILE_MAX);
        let n = skq_sys::fs::sendfile(sock, &f.file, &mut f.offset, count)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.progress = true;
        f.len -= n as u64;
        if f.len == 0 {
            self.file = None;
        }
        Ok(n)
    }

    /// Where the stream cannot take `sendfile(2)`: once the buffered output
    /// is written, reads the file region's next [`FILE_PIECE`] bytes into
    /// the output buffer. `UnexpectedEof` when the file ended before the
    /// region.
    pub fn stage_file(&mut self) -> io::Result<()> {
        if self.out_start < self.output.len() {
            return Ok(());
        }
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let n = usize::try_from(f.len).unwrap_or(usize::MAX).min(FILE_PIECE);
        if self.output.capacity() < n {
            if let Some(spare) = bufpool::take() {
                release(std::mem::replace(&mut self.output, spare));
            }
        }
        self.output.clear();
        self.out_start = 0;
        self.output.resize(n, 0);
        let got = loop {
            match f.file.read_at(&mut self.output, f.offset) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r,
            }
        };
        let got = match got {
            Ok(0) if n > 0 => Err(io::ErrorKind::UnexpectedEof.into()),
            r => r,
        };
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                self.output.clear();
                return Err(e);
            }
        };
        self.output.truncate(got);
        f.offset += got as u64;
        f.len -= got as u64;
        if f.len == 0 {
            self.file = None;
        }
        Ok(())
    }
}
