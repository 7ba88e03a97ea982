//! hyper 1.x HTTP/1.1 server on skq-async: static files and a small JSON
//! API, every connection a task scheduled by skq. The same service runs on
//! tokio with `--runtime tokio` (for `scripts/bench/hyper-vs-tokio.py`).
//!
//! ```text
//! cargo run -p skq-async --example hyper_server -- \
//!     --addr 127.0.0.1:8080 --workers 2 --mode hybrid --root ./docs
//! cargo run -p skq-async --example hyper_server -- --runtime tokio --port 8080 --root ./docs
//! curl http://127.0.0.1:8080/api/hello?name=skq
//! curl http://127.0.0.1:8080/api/stats
//! curl http://127.0.0.1:8080/files/ASYNC.md
//! ```
//!
//! Routes: `GET /api/hello?name=X` (JSON greeting), `GET /api/stats`
//! (per-worker skq counters as JSON), `GET /files/<path>` (a file under
//! `--root`, read on the blocking pool; `..` is refused), `POST /api/echo`
//! (the body back). Anything else is 404.
//!
//! Flags: `--runtime skq|tokio` (default skq), `--workers N` (default 2),
//! `--mode MODE` (any `skq serve --mode` value; skq only, default hybrid),
//! `--addr HOST:PORT` or `--port P` (on 127.0.0.1), `--root DIR`, `--pin`
//! (skq only: worker w on skq's CPU for w), `--header-timeout-s S` (hyper's
//! header-read timeout on the runtime's timer, default 30; 0: no timer, so
//! no timer is armed per request).

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

#[path = "support/tokio_glue.rs"]
mod tokio_glue;

#[derive(PartialEq)]
enum RuntimeKind {
    Skq,
    Tokio,
}

struct Opts {
    runtime: RuntimeKind,
    addr: String,
    workers: usize,
    mode: Option<String>,
    root: PathBuf,
    pin: bool,
    /// hyper's header-read timeout in seconds; 0: no timer at all.
    header_timeout_s: u64,
}

/// The runtime the service runs on (what the routes ask of it).
#[derive(Clone)]
enum Rt {
    Skq(Handle),
    Tokio(tokio::runtime::Handle),
}

impl Rt {
    /// Reads `file` on the runtime's blocking pool.
    async fn read_file(&self, file: PathBuf) -> Option<Vec<u8>> {
        match self {
            Rt::Skq(_) => skq_async::spawn_blocking(move || std::fs::read(file))
                .await
                .ok()?
                .ok(),
            Rt::Tokio(h) => h
                .spawn_blocking(move || std::fs::read(file))
                .await
                .ok()?
                .ok(),
        }
    }

    fn stats(&self) -> serde_json::Value {
        match self {
            Rt::Skq(h) => serde_json::json!({
                "runtime": "skq",
                "mode": h.skq().config().mode_name(),
                "workers": h.skq().stats(),
            }),
            Rt::Tokio(h) => serde_json::json!({
                "runtime": "tokio",
                "workers": h.metrics().num_workers(),
            }),
        }
    }
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        runtime: RuntimeKind::Skq,
        addr: "127.0.0.1:8080".into(),
        workers: 2,
        mode: None,
        root: PathBuf::from("."),
        pin: false,
        header_timeout_s: 30,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--runtime" => {
                o.runtime = match val()?.as_str() {
                    "skq" => RuntimeKind::Skq,
                    "tokio" => RuntimeKind::Tokio,
                    v => return Err(format!("--runtime {v} is unknown: expected skq or tokio")),
                }
            }
            "--addr" => o.addr = val()?,
            "--port" => {
                let v = val()?;
                let p: u16 = v
                    .parse()
                    .map_err(|_| format!("--port {v} is not a port number"))?;
                o.addr = format!("127.0.0.1:{p}");
            }
            "--workers" => {
                let v = val()?;
                o.workers = v
                    .parse()
                    .map_err(|_| format!("--workers {v} is not a number"))?;
            }
            "--mode" => o.mode = Some(val()?),
            "--root" => o.root = PathBuf::from(val()?),
            "--pin" => o.pin = true,
            "--header-timeout-s" => {
                let v = val()?;
                o.header_timeout_s = v
                    .parse()
                    .map_err(|_| format!("--header-timeout-s {v} is not a number of seconds"))?;
            }
            _ => {
                return Err(format!(
                    "unknown argument {a}: expected --runtime, --addr, --port, --workers, --mode, --root, --pin, --header-timeout-s"
                ))
            }
        }
    }
    if o.runtime == RuntimeKind::Tokio && (o.mode.is_some() || o.pin) {
        return Err("--mode and --pin are for --runtime skq only".into());
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
    rt: Rt,
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
        (Method::GET, "/api/stats") => json(StatusCode::OK, rt.stats()),
        (Method::POST, "/api/echo") => match req.into_body().collect().await {
            Ok(b) => Response::new(Full::new(b.to_bytes())),
            Err(_) => text(StatusCode::BAD_REQUEST, "bad body\n"),
        },
        (Method::GET, p) if p.starts_with("/files/") => {
            match safe_path(&root, &p["/files/".len()..]) {
                None => text(StatusCode::FORBIDDEN, "forbidden\n"),
                Some(file) => match rt.read_file(file).await {
                    Some(data) => Response::new(Full::new(Bytes::from(data))),
                    None => text(StatusCode::NOT_FOUND, "not found\n"),
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
    let r = match o.runtime {
        RuntimeKind::Skq => serve_skq(o),
        RuntimeKind::Tokio => serve_tokio(o),
    };
    if let Err(e) = r {
        eprintln!("hyper_server: {e}");
        std::process::exit(1);
    }
}

/// hyper's HTTP/1 connection settings, the same on both runtimes: a header-read
/// timeout of `header_timeout_s` on `timer`, or (0) no timer and no timeout.
fn http1(
    timer: impl hyper::rt::Timer + Send + Sync + 'static,
    header_timeout_s: u64,
) -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    if header_timeout_s > 0 {
        b.timer(timer)
            .header_read_timeout(Duration::from_secs(header_timeout_s));
    }
    b
}

fn serve_skq(o: Opts) -> std::io::Result<()> {
    let mode = o.mode.unwrap_or_else(|| "hybrid".into());
    let rt = match Builder::new()
        .workers(o.workers)
        .mode(&mode)
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
    let header_timeout_s = o.header_timeout_s;
    rt.block_on(async move {
        let l = TcpListener::bind(&o.addr).await?;
        println!(
            "listening on http://{} (skq, {} workers, mode {mode})",
            l.local_addr()?,
            o.workers,
        );
        loop {
            let (s, _) = match l.accept().await {
                Ok(c) => c,
                // Out of fds or a reset before accept: keep serving.
                Err(_) => continue,
            };
            let _ = s.set_nodelay(true);
            let (root, rt) = (root.clone(), Rt::Skq(handle.clone()));
            skq_async::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req| route(req, root.clone(), rt.clone()));
                let _ = http1(HyperTimer(Handle::current()), header_timeout_s)
                    .serve_connection(s, svc)
                    .await;
            })
            .detach();
        }
    })
}

fn serve_tokio(o: Opts) -> std::io::Result<()> {
    if o.workers == 0 {
        eprintln!("hyper_server: --workers 0: at least one worker is needed");
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.workers)
        .enable_all()
        .build()?;
    let root = Arc::new(o.root);
    let handle = rt.handle().clone();
    let header_timeout_s = o.header_timeout_s;
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(&o.addr).await?;
        println!(
            "listening on http://{} (tokio, {} workers)",
            l.local_addr()?,
            o.workers
        );
        loop {
            let (s, _) = match l.accept().await {
                Ok(c) => c,
                Err(_) => continue,
            };
            let _ = s.set_nodelay(true);
            let (root, rt) = (root.clone(), Rt::Tokio(handle.clone()));
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(move |req| route(req, root.clone(), rt.clone()));
                let _ = http1(tokio_glue::TokioTimer, header_timeout_s)
                    .serve_connection(tokio_glue::TokioIo(s), svc)
                    .await;
            });
        }
    })
}
