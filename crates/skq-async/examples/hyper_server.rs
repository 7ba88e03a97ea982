//! hyper 1.x HTTP/1.1 server on skq-async: static files and a small JSON
//! API, every connection a task scheduled by skq.
//!
//! ```text
//! cargo run -p skq-async --example hyper_server -- \
//!     --addr 127.0.0.1:8080 --workers 2 --mode hybrid --root ./docs
//! curl http://127.0.0.1:8080/api/hello?name=skq
//! curl http://127.0.0.1:8080/api/stats
//! curl http://127.0.0.1:8080/files/ASYNC.md
//! ```
//!
//! Routes: `GET /api/hello?name=X` (JSON greeting), `GET /api/stats`
//! (per-worker skq counters as JSON), `GET /files/<path>` (a file under
//! `--root`, read on the blocking pool; `..` is refused), `POST /api/echo`
//! (the body back). Anything else is 404.

use std::convert::Infallible;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use skq_async::net::TcpListener;
use skq_async::{Builder, Handle, HyperTimer};

struct Opts {
    addr: String,
    workers: usize,
    mode: String,
    root: PathBuf,
    pin: bool,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        addr: "127.0.0.1:8080".into(),
        workers: 2,
        mode: "hybrid".into(),
        root: PathBuf::from("."),
        pin: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--addr" => o.addr = val()?,
            "--workers" => {
                let v = val()?;
                o.workers = v
                    .parse()
                    .map_err(|_| format!("--workers {v} is not a number"))?;
            }
            "--mode" => o.mode = val()?,
            "--root" => o.root = PathBuf::from(val()?),
            "--pin" => o.pin = true,
            _ => {
                return Err(format!(
                    "unknown argument {a}: expected --addr, --workers, --mode, --root, --pin"
                ))
            }
        }
    }
    Ok(o)
}

fn json(status: StatusCode, v: serde_json::Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())))
        .expect("static headers are valid")
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("static headers are valid")
}

/// `rel` under `root`, or None if it tries to leave it.
fn safe_path(root: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    Some(root.join(rel))
}

async fn route(
    req: Request<Incoming>,
    root: Arc<PathBuf>,
    handle: Handle,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    let resp = match (req.method().clone(), path.as_str()) {
        (Method::GET, "/api/hello") => {
            let name = req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("name=")))
                .unwrap_or("world")
                .to_string();
            json(StatusCode::OK, serde_json::json!({ "hello": name }))
        }
        (Method::GET, "/api/stats") => {
            let stats = handle.skq().stats();
            json(
                StatusCode::OK,
                serde_json::json!({
                    "mode": handle.skq().config().mode_name(),
                    "workers": stats,
                }),
            )
        }
        (Method::POST, "/api/echo") => match req.into_body().collect().await {
            Ok(b) => Response::new(Full::new(b.to_bytes())),
            Err(_) => text(StatusCode::BAD_REQUEST, "bad body\n"),
        },
        (Method::GET, p) if p.starts_with("/files/") => {
            match safe_path(&root, &p["/files/".len()..]) {
                None => text(StatusCode::FORBIDDEN, "forbidden\n"),
                Some(file) => match skq_async::spawn_blocking(move || std::fs::read(file)).await {
                    Ok(Ok(data)) => Response::new(Full::new(Bytes::from(data))),
                    _ => text(StatusCode::NOT_FOUND, "not found\n"),
                },
            }
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    };
    Ok(resp)
}

fn main() {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("hyper_server: {e}");
            std::process::exit(2);
        }
    };
    // Many connections need many fds: as the skq servers do, raise the soft
    // limit to the hard one (best effort).
    let _ = skq_rt::sys::limits::raise_nofile_limit();
    let rt = match Builder::new()
        .workers(o.workers)
        .mode(&o.mode)
        .pin_workers(o.pin)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hyper_server: {e}");
            std::process::exit(2);
        }
    };
    let root = Arc::new(o.root);
    let handle = rt.handle().clone();
    let r: std::io::Result<()> = rt.block_on(async move {
        let l = TcpListener::bind(&o.addr).await?;
        println!(
            "listening on http://{} ({} workers, mode {})",
            l.local_addr()?,
            o.workers,
            o.mode
        );
        loop {
            let (s, _) = match l.accept().await {
                Ok(c) => c,
                // Out of fds or a reset before accept: keep serving.
                Err(_) => continue,
            };
            let _ = s.set_nodelay(true);
            let (root, h) = (root.clone(), handle.clone());
            skq_async::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req| route(req, root.clone(), h.clone()));
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(HyperTimer(Handle::current()))
                    .header_read_timeout(Duration::from_secs(30))
                    .serve_connection(s, svc)
                    .await;
            })
            .detach();
        }
    });
    if let Err(e) = r {
        eprintln!("hyper_server: {e}");
        std::process::exit(1);
    }
}
