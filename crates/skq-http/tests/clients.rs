//! Real clients through the server: curl, Python's `http.client`, and
//! headless Chromium loading a page with its stylesheet, script and image.
//!
//! The programs are installed by `scripts/setup.sh` (setup.d/30-http.sh and
//! 10-bench.sh). When one is missing its test fails, saying so: a silent
//! skip would let a broken server through CI.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{page, start, Root};

fn need(program: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/bin"] {
        let p = Path::new(dir).join(program);
        if p.is_file() {
            return p.display().to_string();
        }
    }
    // Fall back to PATH (pyenv shims and the like).
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    found.unwrap_or_else(|| panic!("{program} not found: run `bash scripts/setup.sh`"))
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .expect("starting a client");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn curl_gets_heads_revalidates_and_reuses_the_connection() {
    let curl = need("curl");
    let root = Root::new("curl");
    let (server, _) = start(&root.www, "hybrid");
    let base = format!("http://{}", server.local_addr());
    let out = run(Command::new(&curl).args(["-sS", "--http1.1", &format!("{base}/")]));
    assert_eq!(out.stdout, page());
    let head = run(Command::new(&curl).args(["-sSI", &format!("{base}/a.css")]));
    let head = String::from_utf8_lossy(&head.stdout).to_lowercase();
    assert!(head.starts_with("http/1.1 200 ok"), "{head}");
    assert!(head.contains("content-type: text/css"), "{head}");
    let etag = head
        .lines()
        .find_map(|l| l.strip_prefix("etag: "))
        .unwrap()
        .trim()
        .to_string();
    let code = run(Command::new(&curl).args([
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &format!("If-None-Match: {etag}"),
        &format!("{base}/a.css"),
    ]));
    assert_eq!(code.stdout, b"304");
    // Two URLs in one invocation share one keep-alive connection.
    let both = run(Command::new(&curl).args([
        "-sS",
        "-v",
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &format!("{base}/index.html"),
        &format!("{base}/sub/"),
    ]));
    let verbose = String::from_utf8_lossy(&both.stderr);
    assert!(
        verbose.contains("Re-using existing connection") || verbose.contains("Reusing existing"),
        "{verbose}"
    );
    let missing = run(Command::new(&curl).args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("{base}/nope"),
    ]));
    assert_eq!(missing.stdout, b"404");
    let stats = server.shutdown();
    assert_eq!(stats.requests, 6);
    assert_eq!(stats.accepted, 5, "curl reused its connection for the pair");
}

#[test]
fn python_http_client_keeps_one_connection_for_many_requests() {
    let python = need("python3");
    let root = Root::new("python");
    let (server, _) = start(&root.www, "epoll-1to1");
    let script = r#"
import http.client, sys
host, port = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection(host, port, timeout=20)
c.request("GET", "/")
r = c.getresponse(); body = r.read()
assert r.status == 200 and r.getheader("Content-Length") == str(len(body)), r.status
etag, lm = r.getheader("ETag"), r.getheader("Last-Modified")
assert r.getheader("Content-Type").startswith("text/html")
c.request("HEAD", "/a.css")
r = c.getresponse(); assert r.status == 200 and r.read() == b"" and r.getheader("Content-Type").startswith("text/css")
c.request("GET", "/", headers={"If-None-Match": etag})
r = c.getresponse(); r.read(); assert r.status == 304, r.status
c.request("GET", "/", headers={"If-Modified-Since": lm})
r = c.getresponse(); r.read(); assert r.status == 304, r.status
c.request("DELETE", "/")
r = c.getresponse(); r.read(); assert r.status == 405 and r.getheader("Allow") == "GET, HEAD"
c.request("GET", "/missing")
r = c.getresponse(); r.read(); assert r.status == 404
for i in range(20):
    c.request("GET", "/a.css"); r = c.getresponse(); assert r.read() == b"body { color: #123; }\n"
print(len(body))
"#;
    let addr = server.local_addr();
    let out = run(Command::new(&python).args([
        "-c",
        script,
        &addr.ip().to_string(),
        &addr.port().to_string(),
    ]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        page().len().to_string()
    );
    let stats = server.shutdown();
    assert_eq!(stats.accepted, 1, "one keep-alive connection");
    assert_eq!(stats.requests, 26);
}

#[test]
fn headless_chromium_loads_a_page_with_its_assets() {
    let chromium = need("chromium");
    let root = Root::new("chromium");
    root.write(
        "site/page.html",
        br#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>skq</title>
<link rel="stylesheet" href="style.css"></head>
<body><p id="out">script did not run</p><img id="logo" src="img/logo.png" alt="logo">
<script src="app.js"></script></body></html>
"#,
    );
    root.write("site/style.css", b"p { font-weight: bold; }\n");
    root.write(
        "site/app.js",
        b"document.getElementById('out').textContent = 'script ran: ' + document.styleSheets.length + ' stylesheet';\n",
    );
    // A 1x1 PNG, written from its bytes.
    let png: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8,
        0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00,
        0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    root.write("site/img/logo.png", png);
    let (server, proto) = start(&root.www, "hybrid");
    let profile = root.base.join("chromium-profile");
    let dom_file = root.base.join("dom.html");
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
        .arg(format!("http://{}/site/page.html", server.local_addr()))
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
    let log = proto.access_log();
    for line in [
        "GET /site/page.html 200",
        "GET /site/style.css 200",
        "GET /site/app.js 200",
        "GET /site/img/logo.png 200",
    ] {
        assert!(log.iter().any(|l| l == line), "{line} missing from {log:?}");
    }
    server.shutdown();
}
