//! The command lines of the servers under test: `skq serve rpc` and the
//! peers of BRIEF §10 (memcached and nginx from Debian's packages).
//!
//! Each function returns a [`std::process::Command`] that is ready to spawn;
//! placement, output redirection and readiness belong to
//! [`crate::process`]. skq's own servers (rpc, http, rocksdb) are handed
//! the curve's [`skq_net::ServerSpec`] whole, as `--spec JSON`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::{Curve, ServerKind};

/// The command that serves `curve` on `127.0.0.1:port`. `skq` is the skq
/// binary; `workdir` is an empty private folder for peers that need files
/// (nginx's configuration, document root, pid file and temp paths), and
/// where skq's own servers write their statistics ([`STATS_FILE`]).
pub fn server_command(curve: &Curve, skq: &Path, port: u16, workdir: &Path) -> Result<Command> {
    let stats = |mut c: Command| {
        c.arg("--stats-json").arg(workdir.join(STATS_FILE));
        c
    };
    match curve.server.kind {
        ServerKind::Skq | ServerKind::Tokio | ServerKind::Epoll => {
            Ok(stats(skq_command(curve, skq, port)?))
        }
        ServerKind::Memcached => memcached_command(curve.workers, port),
        ServerKind::Nginx => nginx_command(curve.workers, port, workdir, curve.http.tcp_nopush),
        ServerKind::Kv => kv_command(curve, skq, port),
        ServerKind::Http => http_command(curve, skq, port, workdir),
        ServerKind::Rocksdb => Ok(stats(rocksdb_command(curve, skq, port)?)),
    }
}

/// `--spec JSON`: the curve's server spec (rpc, http and rocksdb curves).
fn spec_args(curve: &Curve) -> Result<[String; 2]> {
    let spec = curve
        .server
        .spec
        .as_ref()
        .with_context(|| format!("curve `{}`: no server spec", curve.name))?;
    Ok(["--spec".into(), spec.to_json()])
}

/// `skq serve http --root WORKDIR/www --spec JSON ...` for modes
/// `http-MODE`, serving the same document root ([`write_docroot`]) as the
/// nginx peer, with the curve's IO variance.
pub fn http_command(curve: &Curve, skq: &Path, port: u16, workdir: &Path) -> Result<Command> {
    let www = write_docroot(workdir)?;
    http_command_at(curve, skq, port, &www)
}

/// [`http_command`] serving `www`, which must exist (writes nothing).
fn http_command_at(curve: &Curve, skq: &Path, port: u16, www: &Path) -> Result<Command> {
    let mut c = Command::new(skq);
    c.args(["serve", "http", "--addr", &format!("127.0.0.1:{port}")]);
    c.arg("--root").arg(www);
    c.args(spec_args(curve)?);
    if let Some(io) = &curve.http.io {
        c.args(io.args());
    }
    Ok(c)
}

/// Where skq's own servers write their statistics (`--stats-json`), in the
/// folder given to [`server_command`]; read by the harness after each point
/// (`crate::serverstats`).
pub const STATS_FILE: &str = "server-stats.json";

/// `skq serve rocksdb --addr 127.0.0.1:PORT --spec JSON --db DIR` for
/// modes `rocksdb-MODE` (the extra emulated service is asked per request
/// by the generator: `skq load --db-dilate`).
pub fn rocksdb_command(curve: &Curve, skq: &Path, port: u16) -> Result<Command> {
    let mut c = Command::new(skq);
    c.args(["serve", "rocksdb", "--addr", &format!("127.0.0.1:{port}")]);
    c.args(spec_args(curve)?);
    c.args(["--db", &curve.rocksdb.db_dir]);
    Ok(c)
}

/// `skq serve kv --addr 127.0.0.1:PORT --spec JSON` for modes `kv-tpc`
/// and `kv-MODE` (the spec holds the parsed mode, workers and pinning).
pub fn kv_command(curve: &Curve, skq: &Path, port: u16) -> Result<Command> {
    let spec = curve
        .server
        .kv
        .as_ref()
        .with_context(|| format!("curve `{}`: no kv spec", curve.name))?;
    let mut c = Command::new(skq);
    c.args(["serve", "kv", "--addr", &format!("127.0.0.1:{port}")]);
    c.args(["--spec", &spec.to_json()]);
    Ok(c)
}

/// `skq serve rpc --addr 127.0.0.1:PORT --spec JSON` for the skq
/// policies, the plain epoll servers and tokio.
pub fn skq_command(curve: &Curve, skq: &Path, port: u16) -> Result<Command> {
    let mut c = Command::new(skq);
    c.args(["serve", "rpc", "--addr", &format!("127.0.0.1:{port}")]);
    c.args(spec_args(curve)?);
    if let Some(u) = curve.server.checkpoint_us {
        c.args(["--checkpoint-us", &u.to_string()]);
    }
    Ok(c)
}

/// Finds an executable in `PATH`, then in the sbin folders (where Debian
/// puts nginx, and which a non-root `PATH` often lacks).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `memcached -p PORT -t N -U 0 -l 127.0.0.1` (plus `-u nobody` as root,
/// which memcached otherwise refuses). The bench passes the curve's
/// `workers` as N: memcached runs as many worker threads as the skq server
/// it is compared with.
pub fn memcached_command(threads: usize, port: u16) -> Result<Command> {
    let bin = find_program("memcached").context(
        "memcached not found: install it with scripts/setup.sh (Debian package memcached)",
    )?;
    let mut c = Command::new(bin);
    c.args(memcached_args(threads, &port.to_string()));
    Ok(c)
}

/// The arguments of [`memcached_command`], with `port` as given.
fn memcached_args(threads: usize, port: &str) -> Vec<String> {
    let mut a: Vec<String> = ["-p", port, "-t", &threads.to_string(), "-U", "0"]
        .map(String::from)
        .to_vec();
    a.extend(["-l", "127.0.0.1"].map(String::from));
    if skq_sys::process::is_root() {
        a.extend(["-u", "nobody"].map(String::from));
    }
    a
}

/// The page nginx and `skq serve http` serve at `/`: a static HTML page of
/// about 640 bytes, the size SKQ §6.7 served.
pub fn index_page() -> String {
    let mut p = String::from("<!DOCTYPE html>\n<html><head><title>skq</title></head><body>\n");
    while p.len() < 620 {
        p.push_str("<p>static page for skq bench</p>\n");
    }
    p.push_str("</body></html>\n");
    p
}

/// Writes the document root both web servers serve (`WORKDIR/www` with
/// `index.html` = [`index_page`]) and returns its path.
pub fn write_docroot(workdir: &Path) -> Result<PathBuf> {
    let www = workdir.join("www");
    std::fs::create_dir_all(&www).with_context(|| format!("creating {}", www.display()))?;
    std::fs::write(www.join("index.html"), index_page())
        .with_context(|| format!("writing {}/index.html", www.display()))?;
    Ok(www)
}

/// Writes an nginx configuration into `workdir` (serving [`index_page`]
/// at `/` on `127.0.0.1:port` with `workers` worker processes, logging
/// errors to stderr, in the foreground) and returns the command to start it.
pub fn nginx_command(
    workers: usize,
    port: u16,
    workdir: &Path,
    tcp_nopush: bool,
) -> Result<Command> {
    let bin = find_program("nginx").context(
        "nginx not found: install it with scripts/setup.sh (Debian package nginx-light)",
    )?;
    write_docroot(workdir)?;
    let conf = workdir.join("nginx.conf");
    std::fs::write(&conf, nginx_conf(workers, port, workdir, tcp_nopush))?;
    let mut c = Command::new(bin);
    c.arg("-p")
        .arg(workdir)
        .arg("-c")
        .arg(&conf)
        .args(["-e", "stderr"]);
    Ok(c)
}

/// The configuration [`nginx_command`] writes: `workers` worker processes,
/// in the foreground, errors to stderr, and for the static page what
/// nginx's documentation advises for serving static files ("Serving Static
/// Content" in the NGINX admin guide, `ngx_http_core_module`): `sendfile`,
/// `tcp_nopush` and `tcp_nodelay` on, an open-file cache (descriptors and
/// sizes of open files kept, so a request does not `open` and `fstat` the
/// file), no access log; keep-alive connections serve up to a million
/// requests each (the load generator's connections stay open for a point).
/// `tcp_nopush` may be turned off (the curve's `nginx_tcp_nopush`): with it
/// on, small replies on keep-alive connections under open-loop load wait
/// tens of ms now and then (`scripts/bench/nginx-tail.sh`).
pub fn nginx_conf(workers: usize, port: u16, workdir: &Path, tcp_nopush: bool) -> String {
    nginx_conf_text(
        workers,
        &port.to_string(),
        &workdir.display().to_string(),
        tcp_nopush,
    )
}

/// [`nginx_conf`] with the port and folder as given (placeholders in the
/// reports).
fn nginx_conf_text(workers: usize, port: &str, d: &str, tcp_nopush: bool) -> String {
    let nopush = if tcp_nopush { "on" } else { "off" };
    format!(
        "daemon off;\n\
         master_process on;\n\
         worker_processes {workers};\n\
         pid {d}/nginx.pid;\n\
         error_log stderr warn;\n\
         events {{ worker_connections 4096; }}\n\
         http {{\n\
         \x20   access_log off;\n\
         \x20   sendfile on;\n\
         \x20   tcp_nopush {nopush};\n\
         \x20   tcp_nodelay on;\n\
         \x20   open_file_cache max=1000 inactive=20s;\n\
         \x20   open_file_cache_valid 30s;\n\
         \x20   open_file_cache_min_uses 1;\n\
         \x20   open_file_cache_errors on;\n\
         \x20   keepalive_requests 1000000;\n\
         \x20   client_body_temp_path {d}/tmp-body;\n\
         \x20   proxy_temp_path {d}/tmp-proxy;\n\
         \x20   fastcgi_temp_path {d}/tmp-fastcgi;\n\
         \x20   uwsgi_temp_path {d}/tmp-uwsgi;\n\
         \x20   scgi_temp_path {d}/tmp-scgi;\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       location / {{ root {d}/www; }}\n\
         \x20   }}\n\
         }}\n"
    )
}

/// How a configuration's server is started, as the reports print it: the
/// command line with `PORT` and `WORKDIR` standing for what each point
/// picks, the files it is given (nginx's configuration), and what the mode
/// means.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerSetup {
    /// The configurations started this way (curve names).
    pub configs: Vec<String>,
    /// The command line.
    pub command: String,
    /// What serves the requests, in words.
    pub about: String,
    /// Files written for it: (name under WORKDIR, text).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<(String, String)>,
}

/// The [`ServerSetup`] of every curve, curves started the same way merged
/// (in first-appearance order).
pub fn server_setups(curves: &[Curve]) -> Vec<ServerSetup> {
    let mut out: Vec<ServerSetup> = Vec::new();
    for c in curves {
        let s = server_setup(c);
        match out
            .iter_mut()
            .find(|o| (&o.command, &o.about, &o.files) == (&s.command, &s.about, &s.files))
        {
            Some(o) if !o.configs.contains(&c.name) => o.configs.push(c.name.clone()),
            Some(_) => {}
            None => out.push(s),
        }
    }
    out
}

/// How `curve`'s server is started (see [`ServerSetup`]); writes nothing.
pub fn server_setup(curve: &Curve) -> ServerSetup {
    let workdir = Path::new("WORKDIR");
    let workers = curve.workers;
    let (command, files) = match curve.server.kind {
        ServerKind::Memcached => (
            format!("memcached {}", memcached_args(workers, "PORT").join(" ")),
            Vec::new(),
        ),
        ServerKind::Nginx => (
            "nginx -p WORKDIR -c WORKDIR/nginx.conf -e stderr".to_string(),
            vec![(
                "nginx.conf".to_string(),
                nginx_conf_text(workers, "PORT", "WORKDIR", curve.http.tcp_nopush),
            )],
        ),
        ServerKind::Http => (
            command_line(http_command_at(
                curve,
                Path::new("skq"),
                0,
                &workdir.join("www"),
            )),
            Vec::new(),
        ),
        _ => (
            command_line(server_command(curve, Path::new("skq"), 0, workdir)),
            Vec::new(),
        ),
    };
    ServerSetup {
        configs: vec![curve.name.clone()],
        command,
        about: about(curve),
        files,
    }
}

/// What serves `curve`'s requests, in words.
fn about(curve: &Curve) -> String {
    let w = curve.workers;
    let driver = curve
        .server
        .spec
        .as_ref()
        .map(|s| format!("{}: {}", s.mode, s.mode.driver().about()));
    match curve.server.kind {
        ServerKind::Memcached => format!(
            "Debian's memcached with {w} worker threads (-t {w}: the workers of the skq \
             servers it is compared with), UDP off"
        ),
        ServerKind::Nginx => format!(
            "Debian's nginx with {w} worker processes (the workers of the skq servers it is \
             compared with), configured as nginx's documentation advises for static files: \
             sendfile, tcp_nopush, tcp_nodelay, open_file_cache, no access log"
        ),
        ServerKind::Kv => format!("skq serve kv ({}), {w} workers", curve.mode),
        _ => format!(
            "{}, {w} workers",
            driver.unwrap_or_else(|| curve.mode.clone())
        ),
    }
}

/// A command as one line: the program and its arguments, each quoted for a
/// POSIX shell when it holds anything but plain characters; `PORT` stands
/// for port 0.
fn command_line(c: Result<Command>) -> String {
    let Ok(c) = c else {
        return "(cannot be built: see the point's error)".into();
    };
    let word = |s: &str| {
        let plain = s
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "_-./:=+,@".contains(ch));
        let s = s.replace("127.0.0.1:0", "127.0.0.1:PORT");
        if plain {
            s
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| word(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fresh private folder for one server instance.
pub fn workdir(parent: &Path, tag: &str) -> Result<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = parent.join(format!("skq-bench-{}-{tag}-{n}", std::process::id()));
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigEntry, ServiceMode};

    fn args_of(mode: &str) -> Vec<String> {
        let e = ConfigEntry {
            mode: Some(mode.into()),
            workers: Some(2),
            capacity_rps: Some(1000.0),
            slo_us: Some(500.0),
            ..ConfigEntry::default()
        };
        let curve = Curve::from_entry(&e, 2).unwrap();
        assert_eq!(curve.server.kind, ServerKind::Kv);
        assert_eq!(curve.load.protocol, "memcached");
        let c = server_command(&curve, Path::new("/bin/skq"), 4242, Path::new("/tmp")).unwrap();
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn argv(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn rpc_modes_map_to_skq_serve_rpc_with_the_curve_spec() {
        for mode in ["epoll-1to1", "epoll-shared", "tokio", "best2+steal"] {
            let e = ConfigEntry {
                mode: Some(mode.into()),
                steal_k: Some(2),
                pollers: Some(1),
                ..ConfigEntry::default()
            };
            let curve = Curve::from_entry(&e, 2).unwrap();
            assert_eq!(curve.load.protocol, "rpc");
            let spec = curve.server.spec.clone().unwrap();
            assert_eq!(spec.mode.to_string(), mode);
            assert_eq!((spec.workers, spec.service), (8, ServiceMode::Emulate));
            // The scheduler's tunables reach skq policies only: a baseline
            // refuses them.
            let core = spec.mode.has_core();
            assert_eq!(spec.sched.steal_k, core.then_some(2), "{mode}");
            assert_eq!(spec.sched.pollers, core.then_some(1), "{mode}");
            let c = server_command(&curve, Path::new("/bin/skq"), 4242, Path::new("/tmp")).unwrap();
            assert_eq!(
                argv(&c),
                [
                    "serve",
                    "rpc",
                    "--addr",
                    "127.0.0.1:4242",
                    "--spec",
                    spec.to_json().as_str(),
                    "--stats-json",
                    "/tmp/server-stats.json",
                ]
            );
        }
    }

    #[test]
    fn rocksdb_modes_hand_the_spec_and_the_database() {
        let e = ConfigEntry {
            mode: Some("rocksdb-best2+steal".into()),
            steal_k: Some(3),
            rtshare: Some(50),
            capacity_rps: Some(1000.0),
            slo_us: Some(500.0),
            ..ConfigEntry::default()
        };
        let curve = Curve::from_entry(&e, 2).unwrap();
        let spec = curve.server.spec.clone().unwrap();
        assert_eq!(spec.mode.to_string(), "best2+steal");
        assert_eq!(spec.sched.steal_k, Some(3));
        assert_eq!(
            spec.sched.rtshare, None,
            "rocksdb takes steal_k only, as before"
        );
        let c = server_command(&curve, Path::new("/bin/skq"), 4242, Path::new("/tmp")).unwrap();
        assert_eq!(
            argv(&c),
            [
                "serve",
                "rocksdb",
                "--addr",
                "127.0.0.1:4242",
                "--spec",
                spec.to_json().as_str(),
                "--db",
                "/dev/shm/skq-rocksdb",
                "--stats-json",
                "/tmp/server-stats.json",
            ]
        );
    }

    #[test]
    fn kv_modes_map_to_skq_serve_kv_with_their_spec() {
        for (mode, inner) in [
            ("kv-tpc", "tpc"),
            ("kv-tpc-strict", "tpc-strict"),
            ("kv-hybrid", "hybrid"),
            ("kv-best2+steal", "best2+steal"),
            ("kv-epoll-1to1", "epoll-1to1"),
            ("kv-epoll-shared", "epoll-shared"),
            ("kv-tokio", "tokio"),
        ] {
            let argv = args_of(mode);
            assert_eq!(
                argv[..5],
                ["serve", "kv", "--addr", "127.0.0.1:4242", "--spec"],
                "{mode}"
            );
            assert_eq!(argv.len(), 6, "{mode}: {argv:?}");
            let spec = skq_kv::spec::KvSpec::parse_arg(&argv[5]).unwrap();
            assert_eq!(spec.mode.to_string(), inner, "{mode}");
            assert_eq!((spec.workers, spec.pin), (2, false), "{mode}");
        }
        for (bad, why) in [
            ("kv-epoll", "write it as `kv-epoll-shared`"),
            ("kv-fastest", "unknown mode `fastest`"),
            ("kv-async-hybrid", "the cache has no async handler"),
        ] {
            let e = ConfigEntry {
                mode: Some(bad.into()),
                capacity_rps: Some(1000.0),
                slo_us: Some(500.0),
                ..ConfigEntry::default()
            };
            let err = Curve::from_entry(&e, 2).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn http_modes_map_to_skq_serve_http_on_the_shared_page() {
        let e = ConfigEntry {
            mode: Some("http-hybrid+steal".into()),
            workers: Some(4),
            capacity_rps: Some(1000.0),
            slo_us: Some(500.0),
            batch: Some(16),
            io_variance: Some("emulate".into()),
            io_miss: Some(0.25),
            io_latency_us: Some(2000.0),
            ..ConfigEntry::default()
        };
        let curve = Curve::from_entry(&e, 2).unwrap();
        let dir = std::env::temp_dir().join(format!("skq-peers-http-{}", std::process::id()));
        let c = server_command(&curve, Path::new("/bin/skq"), 4242, &dir).unwrap();
        let www = dir.join("www").to_string_lossy().into_owned();
        let spec = curve.server.spec.clone().unwrap();
        assert_eq!(spec.mode.to_string(), "hybrid+steal");
        assert_eq!((spec.workers, spec.pin, spec.sched.batch), (4, false, 16));
        assert_eq!(
            argv(&c),
            [
                "serve",
                "http",
                "--addr",
                "127.0.0.1:4242",
                "--root",
                www.as_str(),
                "--spec",
                spec.to_json().as_str(),
                "--io-variance",
                "emulate",
                "--io-miss",
                "0.25",
                "--io-latency-us",
                "2000",
                "--io-dist",
                "exp"
            ]
        );
        // The page nginx serves too, of about 640 bytes (SKQ §6.7).
        let page = std::fs::read_to_string(dir.join("www/index.html")).unwrap();
        assert_eq!(page, index_page());
        assert!((620..=680).contains(&page.len()), "{}", page.len());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
