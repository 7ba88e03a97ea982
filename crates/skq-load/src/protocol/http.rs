//! HTTP/1.1 `GET` with keep-alive (pipelining allowed: HTTP/1.1 servers answer
//! a connection's requests in order). A reply is the status line, headers and
//! a body framed by `Content-Length` or chunked transfer coding; a non-2xx
//! status is a reply that does not match. `Connection: close` or a response
//! without framing ends the connection (it cannot be kept alive).

use super::{find_crlf, Answers, Codec, Parsed, Request};

/// Largest header block accepted.
const MAX_HEAD: usize = 64 * 1024;

/// The HTTP codec; `request` is the pre-rendered request bytes.
#[derive(Clone, Debug)]
pub struct Http {
    request: Vec<u8>,
}

impl Http {
    /// A codec that GETs `path` from `host`.
    pub fn new(host: &str, path: &str) -> Http {
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: skq-load\r\n\r\n")
                .into_bytes();
        Http { request }
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Length of a chunked body starting at `buf[0]`, `Ok(None)` if incomplete.
fn chunked_len(buf: &[u8]) -> Result<Option<usize>, String> {
    let mut pos = 0;
    loop {
        let Some(eol) = find_crlf(&buf[pos..]) else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&buf[pos..pos + eol]).map_err(|_| "chunk size not text")?;
        let hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size `{hex}`"))?;
        pos += eol + 2;
        if size == 0 {
            // Trailers end with an empty line.
            loop {
                let Some(eol) = find_crlf(&buf[pos..]) else {
                    return Ok(None);
                };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some(pos));
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return Ok(None);
        }
        pos += size + 2;
    }
}

impl Codec for Http {
    fn encode(&self, _req: &Request, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.request);
    }

    fn parse(&self, buf: &[u8], _head: Option<&Request>) -> Parsed {
        let Some(head_len) = find_head_end(buf) else {
            return if buf.len() > MAX_HEAD {
                Parsed::Fatal("HTTP header over 64 KiB".into())
            } else {
                Parsed::Incomplete
            };
        };
        let Ok(head) = std::str::from_utf8(&buf[..head_len]) else {
            return Parsed::Fatal("HTTP header is not text".into());
        };
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut sp = status_line.split(' ');
        let (ver, code) = (
            sp.next().unwrap_or(""),
            sp.next().and_then(|c| c.parse::<u16>().ok()),
        );
        let Some(code) = code.filter(|_| ver.starts_with("HTTP/1.")) else {
            return Parsed::Fatal(format!("bad HTTP status line `{status_line}`"));
        };
        let (mut length, mut chunked, mut close) = (None, false, false);
        for l in lines {
            let Some((name, value)) = l.split_once(':') else {
                continue;
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<usize>().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            } else if name.eq_ignore_ascii_case("connection") {
                close = value.eq_ignore_ascii_case("close");
            }
        }
        let body = if chunked {
            match chunked_len(&buf[head_len..]) {
                Ok(Some(n)) => n,
                Ok(None) => return Parsed::Incomplete,
                Err(e) => return Parsed::Fatal(e),
            }
        } else if let Some(n) = length {
            if buf.len() < head_len + n {
                return Parsed::Incomplete;
            }
            n
        } else if (100..200).contains(&code) || code == 204 || code == 304 {
            0
        } else {
            return Parsed::Fatal(
                "HTTP response without Content-Length cannot be kept alive".into(),
            );
        };
        if close {
            return Parsed::Fatal("server sent Connection: close".into());
        }
        Parsed::Reply {
            len: head_len + body,
            answers: Answers::Head((200..300).contains(&code)),
            service_ns: None,
            miss: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_keep_alive_get() {
        let h = Http::new("127.0.0.1:80", "/index.html");
        let mut out = Vec::new();
        h.encode(&Request::new(0), &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:80\r\n"));
        assert!(s.ends_with("\r\n\r\n"));
    }

    #[test]
    fn frames_replies() {
        let h = Http::new("x", "/");
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1";
        assert_eq!(
            h.parse(ok, None),
            Parsed::Reply {
                len: ok.len() - 8,
                answers: Answers::Head(true),
                service_ns: None,
                miss: false
            }
        );
        assert_eq!(h.parse(&ok[..30], None), Parsed::Incomplete);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        assert!(
            matches!(h.parse(chunked, None), Parsed::Reply { len, .. } if len == chunked.len())
        );
        assert_eq!(
            h.parse(&chunked[..chunked.len() - 2], None),
            Parsed::Incomplete
        );
        let missing = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(
            h.parse(missing, None),
            Parsed::Reply {
                answers: Answers::Head(false),
                ..
            }
        ));
        assert!(matches!(
            h.parse(b"SPDY/9 200\r\n\r\n", None),
            Parsed::Fatal(_)
        ));
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(matches!(h.parse(close, None), Parsed::Fatal(_)));
    }
}
