//! hyper 1.x HTTP/1.1 on the executor: keep-alive, pipelining, a hyper
//! client on the same runtime, malformed requests, panicking handlers.

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use skq_async::net::{TcpListener, TcpStream};
use skq_async::{Builder, Handle, HyperExecutor, HyperTimer, Runtime};

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    let resp = match path.as_str() {
        "/echo" => {
            let body = req.into_body().collect().await.map(|b| b.to_bytes());
            Response::new(Full::new(body.unwrap_or_default()))
        }
        "/slow" => {
            skq_async::time::sleep(Duration::from_millis(2)).await;
            Response::new(Full::new(Bytes::from_static(b"slow")))
        }
        "/panic" => panic!("handler panicked on purpose"),
        p if p.starts_with("/n/") => {
            let body = format!("{{\"path\":\"{p}\"}}");
            Response::builder()
                .header("content-type", "application/json")
                .body(Full::new(Bytes::from(body)))
                .unwrap()
        }
        _ => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(b"not found")))
            .unwrap(),
    };
    Ok(resp)
}

/// Starts a hyper server on `rt`; returns its address.
fn serve(rt: &Runtime) -> SocketAddr {
    let h = rt.handle().clone();
    rt.block_on(async move {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        skq_async::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else {
                    continue;
                };
                let h = h.clone();
                skq_async::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(HyperTimer(h))
                        .header_read_timeout(Duration::from_secs(30))
                        .serve_connection(s, hyper::service::service_fn(handle))
                        .await;
                })
                .detach();
            }
        })
        .detach();
        addr
    })
}

/// Reads one response: (status, body).
fn read_response(r: &mut impl BufRead) -> (u16, Vec<u8>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .expect("status line")
        .parse()
        .unwrap();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        if h == "\r\n" || h.is_empty() {
            break;
        }
        let lower = h.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).unwrap();
    (status, body)
}

fn connect(addr: SocketAddr) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

#[test]
fn keep_alive_and_pipelining() {
    let rt = Builder::new().workers(2).build().unwrap();
    let addr = serve(&rt);
    let clients: Vec<_> = (0..8)
        .map(|c| {
            std::thread::spawn(move || {
                let mut s = connect(addr);
                // Pipelined: all requests written before any response read.
                let mut reqs = String::new();
                for i in 0..20 {
                    reqs += &format!("GET /n/{c}-{i} HTTP/1.1\r\nHost: t\r\n\r\n");
                }
                reqs += "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello";
                reqs += "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n";
                reqs += "GET /missing HTTP/1.1\r\nHost: t\r\n\r\n";
                s.write_all(reqs.as_bytes()).unwrap();
                let mut r = BufReader::new(s);
                for i in 0..20 {
                    let (st, body) = read_response(&mut r);
                    assert_eq!(st, 200);
                    assert_eq!(body, format!("{{\"path\":\"/n/{c}-{i}\"}}").into_bytes());
                }
                assert_eq!(read_response(&mut r), (200, b"hello".to_vec()));
                assert_eq!(read_response(&mut r), (200, b"slow".to_vec()));
                assert_eq!(read_response(&mut r).0, 404);
                // Keep-alive: the same connection serves more, one at a time.
                for i in 0..5 {
                    r.get_mut()
                        .write_all(format!("GET /n/k{i} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
                        .unwrap();
                    let (st, body) = read_response(&mut r);
                    assert_eq!(st, 200);
                    assert_eq!(body, format!("{{\"path\":\"/n/k{i}\"}}").into_bytes());
                }
                23 + 5
            })
        })
        .collect();
    let n: usize = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(n, 8 * 28);
}

#[test]
fn malformed_requests_and_panics_affect_only_their_connection() {
    let rt = Builder::new().workers(2).build().unwrap();
    let addr = serve(&rt);
    // A good connection opened first stays usable throughout.
    let mut good = BufReader::new(connect(addr));
    let mut ask = |path: &str| {
        good.get_mut()
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
            .unwrap();
        read_response(&mut good)
    };
    assert_eq!(ask("/n/a").0, 200);

    let mut bad = connect(addr);
    bad.write_all(b"THIS IS NOT HTTP\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = bad.read_to_end(&mut out); // 400 then close, or close
    let text = String::from_utf8_lossy(&out);
    assert!(out.is_empty() || text.starts_with("HTTP/1.1 400"), "{text}");

    let mut p = connect(addr);
    p.write_all(b"GET /panic HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = p.read_to_end(&mut out); // the connection's task died: closed
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));

    assert_eq!(ask("/n/b"), (200, b"{\"path\":\"/n/b\"}".to_vec()));
    let mut fresh = BufReader::new(connect(addr));
    fresh
        .get_mut()
        .write_all(b"GET /n/c HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut fresh).0, 200);
}

#[test]
fn hyper_client_and_server_on_one_runtime() {
    let rt = Builder::new()
        .workers(2)
        .mode("best2+steal")
        .build()
        .unwrap();
    let addr = serve(&rt);
    let bodies = rt.block_on(async move {
        let mut hs = Vec::new();
        for c in 0..16 {
            hs.push(skq_async::spawn(async move {
                let s = TcpStream::connect(addr).await.unwrap();
                let (mut tx, conn) = hyper::client::conn::http1::Builder::new()
                    .handshake::<_, Full<Bytes>>(s)
                    .await
                    .unwrap();
                skq_async::spawn(conn).detach();
                let mut got = Vec::new();
                for i in 0..10 {
                    let body = format!("c{c}r{i}");
                    let req = Request::post("/echo")
                        .header("host", "t")
                        .body(Full::new(Bytes::from(body.clone())))
                        .unwrap();
                    // The previous exchange may still be finishing.
                    tx.ready().await.unwrap();
                    let resp = tx.send_request(req).await.unwrap();
                    assert_eq!(resp.status(), 200);
                    let b = resp.into_body().collect().await.unwrap().to_bytes();
                    assert_eq!(b, body.as_bytes());
                    got.push(b);
                }
                got.len()
            }));
        }
        let mut n = 0;
        for h in hs {
            n += h.await.unwrap();
        }
        n
    });
    assert_eq!(bodies, 160);
    // The executor type works as hyper's `Executor` too.
    let exec = HyperExecutor(rt.handle().clone());
    let (tx, rx) = std::sync::mpsc::channel();
    hyper::rt::Executor::execute(&exec, async move {
        tx.send(Handle::current().workers()).unwrap()
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)).unwrap(), 2);
}
