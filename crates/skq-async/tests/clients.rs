//! Real clients against hyper on skq-async: curl (keep-alive) and headless
//! Chromium loading a page with its stylesheet and script.
//!
//! curl and chromium are installed by `scripts/setup.sh`. When one is
//! missing its test fails, saying so: a silent skip would let a broken
//! server through CI.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use skq_async::net::TcpListener;
use skq_async::{Builder, HyperTimer, Runtime};

fn need(program: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/bin"] {
        let p = Path::new(dir).join(program);
        if p.is_file() {
            return p.display().to_string();
        }
    }
    panic!("{program} not found: run `bash scripts/setup.sh`")
}

/// A fresh directory under the target's temp dir.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("skq-async-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        _ => "application/octet-stream",
    }
}

async fn files(
    req: Request<hyper::body::Incoming>,
    root: Arc<PathBuf>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let rel = req.uri().path().trim_start_matches('/').to_string();
    let bad = Path::new(&rel)
        .components()
        .any(|c| !matches!(c, Component::Normal(_)));
    let file = root.join(&rel);
    let data = if bad {
        None
    } else {
        let f = file.clone();
        skq_async::spawn_blocking(move || std::fs::read(f))
            .await
            .unwrap()
            .ok()
    };
    Ok(match data {
        Some(d) => Response::builder()
            .header("content-type", content_type(&file))
            .body(Full::new(Bytes::from(d)))
            .unwrap(),
        None => Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(b"not found")))
            .unwrap(),
    })
}

fn serve(rt: &Runtime, root: PathBuf) -> SocketAddr {
    let root = Arc::new(root);
    rt.block_on(async move {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        skq_async::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else {
                    continue;
                };
                let root = root.clone();
                skq_async::spawn(async move {
                    let svc = hyper::service::service_fn(move |r| files(r, root.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .timer(HyperTimer(skq_async::Handle::current()))
                        .header_read_timeout(Duration::from_secs(30))
                        .serve_connection(s, svc)
                        .await;
                })
                .detach();
            }
        })
        .detach();
        addr
    })
}

#[test]
fn curl_reuses_one_connection_for_several_requests() {
    let curl = need("curl");
    let root = scratch("curl");
    std::fs::write(root.join("a.txt"), b"alpha\n").unwrap();
    std::fs::write(root.join("b.txt"), b"beta\n").unwrap();
    let rt = Builder::new().workers(2).build().unwrap();
    let addr = serve(&rt, root.clone());
    let out = Command::new(curl)
        .args([
            "-sS",
            "--http1.1",
            "--max-time",
            "60",
            "-w",
            "[%{http_code} %{num_connects}]\n",
        ])
        .arg(format!("http://{addr}/a.txt"))
        .arg(format!("http://{addr}/b.txt"))
        .arg(format!("http://{addr}/missing.txt"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One connection opened, then reused twice (num_connects 0).
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "alpha\n[200 1]\nbeta\n[200 0]\nnot found[404 0]\n"
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn headless_chromium_loads_a_page_with_its_assets() {
    let chromium = need("chromium");
    let root = scratch("chromium");
    std::fs::write(
        root.join("page.html"),
        br#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>skq-async</title>
<link rel="stylesheet" href="style.css"></head>
<body><p id="out">script did not run</p>
<script src="app.js"></script></body></html>
"#,
    )
    .unwrap();
    std::fs::write(root.join("style.css"), b"p { font-weight: bold; }\n").unwrap();
    std::fs::write(
        root.join("app.js"),
        b"document.getElementById('out').textContent = 'script ran: ' + document.styleSheets.length + ' stylesheet';\n",
    )
    .unwrap();
    let rt = Builder::new().workers(2).build().unwrap();
    let addr = serve(&rt, root.clone());
    let profile = root.join("profile");
    let dom_file = root.join("dom.html");
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("http://{addr}/page.html"))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&dom_file).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting chromium");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "chromium failed: {status}");
    let dom = std::fs::read_to_string(&dom_file).unwrap();
    assert!(dom.contains("script ran: 1 stylesheet"), "{dom}");
    drop(rt);
    let _ = std::fs::remove_dir_all(root);
}
