//! The real process plumbing: readiness, CPU time, SIGTERM, the generator's
//! result, and failures, with a stand-in `skq` script (the real server and
//! generator live in other crates) and with the real memcached and nginx.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{fixture_result, temp_dir, write_executable};
use skq_bench::config::{self, ConfigEntry, Curve, Settings, Sweep};
use skq_bench::process::{allowed_cpus, in_namespace, ProcessRunner, ServerProcess};
use skq_bench::rss::{RssEnv, RssSpec};
use skq_bench::sweep::{self, Outcome, PointFiles, Quiet};

/// Writes an executable stand-in for `skq`: `serve` behaves per `server`
/// (a shell snippet; `$4` is the address), `load` copies `result` to the
/// path after `--json` and records its arguments.
fn fake_skq(dir: &Path, server: &str, result: &Path) -> PathBuf {
    let path = dir.join("skq");
    let script = format!(
        "#!/bin/bash\n\
         case \"$1\" in\n\
         serve) echo \"$@\" > '{args}.serve'; {server} ;;\n\
         load) echo \"$@\" > '{args}.load'\n\
         \x20     while [ $# -gt 0 ]; do [ \"$1\" = --json ] && json=\"$2\"; shift; done\n\
         \x20     cp '{result}' \"$json\" ;;\n\
         esac\n",
        args = dir.join("args").display(),
        result = result.display()
    );
    write_executable(&path, &script);
    path
}

fn one_curve(mode: &str, loads: &[f64]) -> Sweep {
    let mut f = config::default_file();
    f.matrix = None;
    f.config = vec![ConfigEntry {
        mode: Some(mode.into()),
        ..Default::default()
    }];
    f.sweep.loads = Some(loads.to_vec());
    f.sweep.point_secs = Some(0.2);
    f.sweep.warmup_secs = Some(0.1);
    Sweep::from_file(&f, 2).unwrap()
}

fn runner(skq: PathBuf, scratch: &Path) -> ProcessRunner {
    let mut r = ProcessRunner::new(skq, allowed_cpus(), scratch.to_path_buf());
    r.ready_timeout = Duration::from_secs(2);
    r
}

/// The sweep's emulated-RSS namespace over every CPU, flows moving every
/// `migrate_ms`; `None` (and why, printed) where the machine refuses.
fn rss_env(test: &str, migrate_ms: Option<u64>) -> Option<RssEnv> {
    let settings = Settings {
        rss: RssSpec::All,
        rss_migrate_ms: migrate_ms,
        ..Settings::default()
    };
    match RssEnv::start(&settings, &allowed_cpus()) {
        Ok((Some(env), status)) => {
            assert!(status.on && status.namespace.as_deref() == Some(env.namespace().name()));
            Some(env)
        }
        Ok((None, status)) => {
            eprintln!("{test}: skipped: emulated RSS {}", status.describe());
            None
        }
        Err(e) => {
            eprintln!("{test}: skipped: {e:#}");
            None
        }
    }
}

fn namespace_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

fn write_result(dir: &Path, s: &Sweep) -> PathBuf {
    let p = &sweep::plan(s)[0][0];
    let r = fixture_result(&s.curves[0], &s.settings, p);
    let path = dir.join("result.json");
    std::fs::write(&path, serde_json::to_string(&r).unwrap()).unwrap();
    path
}

#[test]
fn a_point_runs_server_and_generator_as_processes() {
    let dir = temp_dir("proc-ok");
    let s = one_curve("hybrid", &[0.3]);
    let result = write_result(&dir, &s);
    // A server that announces itself, then burns a little CPU until SIGTERM.
    let pidfile = dir.join("server.pid");
    let server = format!(
        "echo $$ > '{}'; echo \"listening on $4\"; while :; do :; done",
        pidfile.display()
    );
    let skq = fake_skq(&dir, &server, &result);
    let records = sweep::run(&s, &dir.join("out"), &mut runner(skq, &dir), &mut Quiet);
    let Outcome::Measured { result: r, .. } = &records[0].outcome else {
        panic!("{:?}", records[0].outcome)
    };
    let cpu = r.server_cpu.expect("server CPU time measured");
    assert!(cpu.user_s + cpu.sys_s >= 0.0);
    assert!(
        records[0].ctx_switches().is_some(),
        "server context switches measured over the same window"
    );
    let serve = std::fs::read_to_string(dir.join("args.serve")).unwrap();
    assert!(serve.starts_with("serve rpc --addr 127.0.0.1:"), "{serve}");
    assert!(
        serve.contains(
            r#"--spec {"mode":"hybrid","workers":8,"service":"emulate","pin":false,"sched":{"batch":1}}"#
        ),
        "{serve}"
    );
    let load = std::fs::read_to_string(dir.join("args.load")).unwrap();
    for want in [
        "load --addr 127.0.0.1:",
        "--protocol rpc",
        "--rate 4800.000",
        "--duration 0.2",
        "--warmup 0.1",
        "--drain 1",
        "--connections 64",
        "--threads 1",
        "--workload exponential",
        "--mean-us 500",
        "--scale 1",
        "--hdr-log",
        "--service-mode-label emulate",
        "--quiet",
    ] {
        assert!(load.contains(want), "missing {want} in: {load}");
    }
    // The server was stopped (SIGTERM) and reaped after the point.
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!process_exists(pid), "server {pid} still running");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_servers_own_statistics_reach_the_point_record_and_points_csv() {
    let dir = temp_dir("proc-stats");
    let s = one_curve("best2+steal", &[0.3]);
    let result = write_result(&dir, &s);
    // The stand-in server writes a statistics file where --stats-json says,
    // as `skq serve rpc` does at shutdown: workers busy 40 and 10 ms, 6
    // steals and 9 migrations; 200 events delivered, 50 idle workers
    // claimed and 10 events queued behind a busy worker.
    let server = r#"while [ $# -gt 0 ]; do [ "$1" = --stats-json ] && out="$2"; shift; done
         echo '{"imbalance":0.75,"per_worker":[{"busy_ns":40000000},{"busy_ns":10000000}],"scheduler":{"per_worker":[{"steals_made":6,"migrations":{"cpu_follow":0,"balance":3,"steal":6,"exit":0},"delivered":200,"wakeups":50,"queued_behind_busy":10}]}}' > "$out"
         echo "listening on 127.0.0.1:1"; exec sleep 30"#;
    let skq = fake_skq(&dir, server, &result);
    let out = dir.join("out");
    let records = sweep::run(&s, &out, &mut runner(skq, &dir), &mut Quiet);
    let st = records[0].server_stats().expect("server statistics read");
    assert_eq!(st.imbalance_pct, 75.0);
    assert!(st.secs > 0.0);
    assert!((st.steals_per_s.unwrap() * st.secs - 6.0).abs() < 1e-6);
    assert!((st.migrations_per_s.unwrap() * st.secs - 9.0).abs() < 1e-6);
    assert_eq!(st.wakeups_per_event, Some(0.25));
    assert_eq!(st.behind_busy_per_event, Some(0.05));
    let serve = std::fs::read_to_string(dir.join("args.serve")).unwrap();
    assert!(serve.contains("--stats-json"), "{serve}");
    let csv = skq_bench::output::points_table(&s, &records).to_csv();
    let rows = skq_bench::output::parse_points_csv(&csv).unwrap();
    assert_eq!(rows[0].num("imbalance_pct"), Some(75.0));
    assert_eq!(rows[0].num("steals_per_s"), st.steals_per_s);
    assert_eq!(rows[0].num("wakeups_per_event"), Some(0.25));
    assert_eq!(rows[0].num("behind_busy_per_event"), Some(0.05));
    // The text report prints them per load.
    let lines = skq_bench::output::server_lines(&s, &records);
    assert!(
        lines.contains("idle workers claimed by a push per event"),
        "{lines}"
    );
    assert!(
        lines.contains("0.250") && lines.contains("0.050"),
        "{lines}"
    );
}

#[test]
fn dead_or_silent_servers_fail_their_curve_only() {
    let dir = temp_dir("proc-bad");
    let s = one_curve("vanilla", &[0.2, 0.4]);
    let result = write_result(&dir, &s);
    let dies = fake_skq(&dir, "echo 'cannot bind' >&2; exit 3", &result);
    let recs = sweep::run(&s, &dir.join("a"), &mut runner(dies, &dir), &mut Quiet);
    let Outcome::Failed { error } = &recs[0].outcome else {
        panic!("{:?}", recs[0].outcome)
    };
    assert!(
        error.contains("exited") && error.contains("cannot bind"),
        "{error}"
    );
    assert_eq!(recs[1].outcome, Outcome::Skipped);

    let silent = fake_skq(&dir, "exec sleep 30", &result);
    let recs = sweep::run(&s, &dir.join("b"), &mut runner(silent, &dir), &mut Quiet);
    let Outcome::Failed { error } = &recs[0].outcome else {
        panic!("{:?}", recs[0].outcome)
    };
    assert!(error.contains("not ready"), "{error}");

    // The generator fails: its output is in the error.
    let path = dir.join("skq");
    std::fs::write(&path, "#!/bin/bash\ncase \"$1\" in serve) echo \"listening on $4\"; exec sleep 30;; load) echo 'bad flag --rate' >&2; exit 2;; esac\n").unwrap();
    let recs = sweep::run(&s, &dir.join("c"), &mut runner(path, &dir), &mut Quiet);
    let Outcome::Failed { error } = &recs[0].outcome else {
        panic!("{:?}", recs[0].outcome)
    };
    assert!(
        error.contains("load generator exited with 2") && error.contains("bad flag --rate"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn peer_curve(mode: &str) -> Curve {
    let e = ConfigEntry {
        mode: Some(mode.into()),
        workers: Some(2),
        capacity_rps: Some(1000.0),
        slo_us: Some(1000.0),
        ..Default::default()
    };
    Curve::from_entry(&e, 2).unwrap()
}

fn exchange(addr: std::net::SocketAddr, request: &[u8], until: &str) -> String {
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(request).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(until) {
        let n = c.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "connection closed early: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn memcached_starts_answers_and_stops() {
    let dir = temp_dir("memcached");
    let curve = peer_curve("memcached");
    assert_eq!(curve.load.protocol, "memcached");
    let mut server = ServerProcess::start(
        &curve,
        Path::new("/nonexistent"),
        None,
        &dir.join("mc.log"),
        &dir,
        Duration::from_secs(10),
    )
    .expect("memcached must be installed (scripts/setup.sh) and start");
    let before = server.ctx_switches().unwrap();
    let reply = exchange(server.addr, b"set k 0 0 5\r\nhello\r\nget k\r\n", "END\r\n");
    assert!(
        reply.contains("STORED") && reply.contains("VALUE k 0 5\r\nhello"),
        "{reply}"
    );
    let cpu = server.cpu_reading().unwrap();
    assert!(cpu.ticks.user_s >= 0.0 && cpu.ticks.sys_s >= 0.0);
    // memcached's threads have run: the scheduler's exact time is there.
    assert!(cpu.exec_ns.is_some_and(|ns| ns > 0), "{cpu:?}");
    // Its threads' context switches, summed: they have blocked waiting for
    // work (voluntary switches), and the counts of threads that live on
    // never go back.
    let after = server.ctx_switches().unwrap();
    assert!(after.voluntary > 0, "{after:?}");
    assert!(
        after.voluntary >= before.voluntary && after.involuntary >= before.involuntary,
        "{before:?} -> {after:?}"
    );
    let pid = server.pid();
    server.stop();
    assert!(
        !process_exists(pid),
        "memcached {pid} still running after stop"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nginx_starts_serves_its_file_and_stops() {
    let dir = temp_dir("nginx");
    let curve = peer_curve("nginx");
    assert_eq!(curve.load.protocol, "http");
    let mut server = ServerProcess::start(
        &curve,
        Path::new("/nonexistent"),
        None,
        &dir.join("nginx.log"),
        &dir,
        Duration::from_secs(10),
    )
    .expect("nginx must be installed (scripts/setup.sh) and start");
    let reply = exchange(server.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "</html>");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains(skq_bench::peers::index_page().trim()));
    // Two worker processes under the master, and their CPU time is counted.
    let workers = skq_bench::process::child_pids(server.pid()).unwrap();
    assert_eq!(workers.len(), 2, "nginx workers: {workers:?}");
    let tree = skq_bench::process::tree_cpu_time(server.pid()).unwrap();
    let master = skq_bench::process::proc_cpu_time(server.pid()).unwrap();
    assert!(tree.user_s + tree.sys_s >= master.user_s + master.sys_s);
    // So are their context switches: the tree's count holds the master's.
    let master_cs = skq_sys::process::thread_ctx_switches(server.pid()).unwrap();
    let tree_cs = skq_bench::process::tree_ctx_switches(server.pid()).unwrap();
    assert!(tree_cs.voluntary >= master_cs.voluntary, "{tree_cs:?}");
    assert!(tree_cs.involuntary >= master_cs.involuntary, "{tree_cs:?}");
    let pid = server.pid();
    server.stop();
    assert!(
        !process_exists(pid),
        "nginx master {pid} still running after stop"
    );
    for w in workers {
        assert!(
            !process_exists(w),
            "nginx worker {w} still running after stop"
        );
    }
    let log = std::fs::read_to_string(dir.join("nginx.log")).unwrap_or_default();
    assert!(!log.contains("[emerg]"), "{log}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn peer_load_commands_speak_their_protocol() {
    let dir = temp_dir("peer-cmd");
    let s = one_curve("hybrid", &[0.5]);
    let r = runner(PathBuf::from("/bin/skq"), &dir);
    let p = &sweep::plan(&s)[0][0];
    let files = PointFiles::under(&dir, &s.curves[0], p);
    let addr: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let args = |c: &Curve| -> Vec<String> {
        r.load_command(c, &s.settings, p, addr, &files)
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    };
    let mc = args(&peer_curve("memcached"));
    let pos = mc
        .iter()
        .position(|a| a == "--kv-workload")
        .expect("--kv-workload");
    assert_eq!(mc[pos + 1], "etc");
    assert!(
        !mc.contains(&"--workload".to_string()) && !mc.contains(&"--mean-us".to_string()),
        "{mc:?}"
    );
    assert!(mc.windows(2).any(|w| w == ["--protocol", "memcached"]));
    assert!(mc.windows(2).any(|w| w == ["--service-mode-label", "spin"]));
    let http = args(&peer_curve("nginx"));
    assert!(http.windows(2).any(|w| w == ["--protocol", "http"]));
    assert!(!http.iter().any(|a| a.contains("workload")), "{http:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn point_files_are_distinct_per_point() {
    let s = one_curve("hybrid", &[0.2, 0.4]);
    let plan = sweep::plan(&s);
    let a = PointFiles::under(Path::new("/o"), &s.curves[0], &plan[0][0]);
    let b = PointFiles::under(Path::new("/o"), &s.curves[0], &plan[0][1]);
    assert_ne!(a.json, b.json);
    assert_eq!(
        a.json,
        Path::new("/o/points/hybrid_exponential_w8_c64_emulate_0.200.json")
    );
    assert_eq!(
        a.hdr_log,
        Path::new("/o/hdr/hybrid_exponential_w8_c64_emulate_0.200.hlog")
    );
}

#[test]
fn with_emulated_rss_a_point_runs_in_the_namespace_which_is_then_removed() {
    let Some(env) = rss_env("rss point", Some(40)) else {
        return;
    };
    let name = env.namespace().name().to_string();
    assert!(namespace_exists(&name));
    let dir = temp_dir("proc-rss");
    let s = one_curve("cpu", &[0.3]);
    let result = write_result(&dir, &s);
    // The server says which namespace it runs in; the generator takes long
    // enough for the mask to be rewritten a few times.
    let path = dir.join("skq");
    write_executable(
        &path,
        &format!(
            "#!/bin/bash\n\
             case \"$1\" in\n\
             serve) ip netns identify $$ > '{d}/serve.ns'; echo \"listening on $4\"; exec sleep 30 ;;\n\
             load) echo \"$@\" > '{d}/args.load'; sleep 0.4\n\
             \x20     while [ $# -gt 0 ]; do [ \"$1\" = --json ] && json=\"$2\"; shift; done\n\
             \x20     cp '{r}' \"$json\" ;;\n\
             esac\n",
            d = dir.display(),
            r = result.display()
        ),
    );
    let mut r = runner(path, &dir);
    r.rss = Some(env);
    r.rss_label = "all".into();
    let records = sweep::run(&s, &dir.join("out"), &mut r, &mut Quiet);
    let Outcome::Measured { result: x, .. } = &records[0].outcome else {
        panic!("{:?}", records[0].outcome)
    };
    assert_eq!(records[0].rss, "all");
    let served_in = std::fs::read_to_string(dir.join("serve.ns")).unwrap();
    assert_eq!(served_in.trim(), name, "the server runs in the namespace");
    let load = std::fs::read_to_string(dir.join("args.load")).unwrap();
    assert!(load.contains(&format!("--netns {name}")), "{load}");
    assert!(
        x.checks.notes.iter().any(|n| n.contains("mask rewrites")),
        "flows migrated while the generator ran: {:?}",
        x.checks.notes
    );
    // The whole set is back after the point.
    let all: Vec<u32> = allowed_cpus().iter().map(|&c| c as u32).collect();
    assert_eq!(r.rss.as_ref().unwrap().namespace().rps_cpus(), all);
    drop(r);
    assert!(!namespace_exists(&name), "{name} left behind");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_panic_does_not_leak_the_namespace() {
    let name = std::sync::Mutex::new(None);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(env) = rss_env("rss panic", None) else {
            return;
        };
        *name.lock().unwrap() = Some(env.namespace().name().to_string());
        panic!("a bug in the middle of a sweep");
    }));
    let Some(name) = name.into_inner().unwrap() else {
        return; // skipped
    };
    assert!(outcome.is_err());
    assert!(!namespace_exists(&name), "{name} left behind after a panic");
}

#[test]
fn memcached_runs_in_the_namespace_and_answers_there() {
    let Some(env) = rss_env("rss memcached", None) else {
        return;
    };
    let dir = temp_dir("memcached-ns");
    let curve = peer_curve("memcached");
    let ns = env.namespace();
    let mut server = ServerProcess::start_in(
        &curve,
        Path::new("/nonexistent"),
        None,
        &dir.join("mc.log"),
        &dir,
        Duration::from_secs(10),
        Some(ns),
    )
    .expect("memcached must be installed (scripts/setup.sh) and start");
    let addr = server.addr;
    let reply = in_namespace(Some(ns), || {
        Ok(exchange(addr, b"set k 0 0 2\r\nhi\r\nget k\r\n", "END\r\n"))
    })
    .unwrap();
    assert!(reply.contains("VALUE k 0 2\r\nhi"), "{reply}");
    // The process itself (not a wrapper) is in the namespace.
    let out = std::process::Command::new(skq_sys::netns::ip_program())
        .args(["netns", "identify", &server.pid().to_string()])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ns.name());
    assert!(
        server.cpu_reading().is_ok(),
        "its pid is its own (ip netns exec execs)"
    );
    server.stop();
    drop(env);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn servers_start_with_an_empty_signal_mask_though_the_harness_blocks_sigterm() {
    // The harness blocks SIGINT/SIGTERM (interrupt::install); a mask
    // survives exec, and a server that inherited it would ignore SIGTERM.
    std::thread::spawn(|| {
        skq_sys::signal::block_termination_signals().unwrap();
        let dir = temp_dir("sigmask");
        let s = one_curve("hybrid", &[0.3]);
        let result = write_result(&dir, &s);
        let server = "echo \"listening on $4\"; exec sleep 30";
        let skq = fake_skq(&dir, server, &result);
        let mut srv = ServerProcess::start(
            &s.curves[0],
            &skq,
            None,
            &dir.join("server.log"),
            &dir,
            Duration::from_secs(5),
        )
        .unwrap();
        // The mask of the exec'd `sleep` is what the server started with
        // (bash itself blocks signals for a moment around each fork).
        let status = format!("/proc/{}/status", srv.pid());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let line = loop {
            let text = std::fs::read_to_string(&status).unwrap();
            if text.lines().next().is_some_and(|l| l.ends_with("sleep")) {
                break text
                    .lines()
                    .find(|l| l.starts_with("SigBlk"))
                    .unwrap()
                    .to_string();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server never became `sleep`"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let blocked = u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap();
        assert_eq!(blocked, 0, "{line}");
        let pid = srv.pid();
        let t = std::time::Instant::now();
        srv.stop();
        assert!(
            t.elapsed() < skq_bench::process::STOP_GRACE,
            "SIGTERM stopped it, no SIGKILL needed"
        );
        assert!(!process_exists(pid));
        std::fs::remove_dir_all(&dir).unwrap();
    })
    .join()
    .unwrap();
}

#[test]
fn elastic_curves_pass_their_flags_and_record_cpu_and_workers_over_time() {
    let dir = temp_dir("proc-series");
    let mut f = config::default_file();
    f.matrix = None;
    f.sweep.rss = Some(RssSpec::Off);
    f.config = vec![ConfigEntry {
        mode: Some("hybrid".into()),
        min_workers: Some(2),
        elastic_period_us: Some(5000),
        rate_profile: Some("steps=0.5,1@0.2".into()),
        interval_ms: Some(50),
        ..Default::default()
    }];
    f.sweep.loads = Some(vec![0.3]);
    f.sweep.point_secs = Some(0.4);
    f.sweep.warmup_secs = Some(0.1);
    let s = Sweep::from_file(&f, 2).unwrap();
    let result = write_result(&dir, &s);
    // The stand-in server writes elastic decisions (2 → 8 → 2 workers, at
    // 100, 250 and 400 ms after its start) where --stats-json says, then
    // burns CPU until SIGTERM; the stand-in generator runs for 0.5 s.
    let args = dir.join("args");
    let script = format!(
        "#!/bin/bash\n\
         case \"$1\" in\n\
         serve) echo \"$@\" > '{args}.serve'\n\
         \x20      while [ $# -gt 0 ]; do [ \"$1\" = --stats-json ] && out=\"$2\"; shift; done\n\
         \x20      echo '{{\"per_worker\":[{{\"busy_ns\":1}}],\"scheduler\":{{\"per_worker\":[],\"started_ns\":5000000000,\"elastic\":[[100.0,1.0,2],[250.0,7.0,8],[400.0,1.0,2]]}}}}' > \"$out\"\n\
         \x20      echo \"listening on 127.0.0.1:1\"; while :; do :; done ;;\n\
         load) echo \"$@\" > '{args}.load'\n\
         \x20     while [ $# -gt 0 ]; do [ \"$1\" = --json ] && json=\"$2\"; shift; done\n\
         \x20     sleep 0.5; cp '{result}' \"$json\" ;;\n\
         esac\n",
        args = args.display(),
        result = result.display()
    );
    let skq = dir.join("skq");
    write_executable(&skq, &script);
    let records = sweep::run(&s, &dir.join("out"), &mut runner(skq, &dir), &mut Quiet);
    let serve = std::fs::read_to_string(dir.join("args.serve")).unwrap();
    assert!(
        serve.contains(r#""min_workers":2,"elastic_period_us":5000"#),
        "{serve}"
    );
    let load = std::fs::read_to_string(dir.join("args.load")).unwrap();
    assert!(
        load.contains("--rate-profile steps=0.5,1@0.2 --interval-ms 50"),
        "{load}"
    );
    let series = records[0].series().expect("a series for an interval curve");
    // CPU sampled every 50 ms over the generator's 0.5 s: several spans, in
    // time order, never negative, and the busy server used some CPU.
    let cpu = &series.server_cpu;
    assert!(cpu.len() >= 3, "{cpu:?}");
    assert!(cpu.windows(2).all(|w| w[0].0 < w[1].0), "{cpu:?}");
    assert!(cpu.iter().all(|&(_, c)| c >= 0.0), "{cpu:?}");
    assert!(cpu.iter().any(|&(_, c)| c > 0.0), "{cpu:?}");
    // Workers follow the decisions, 150 ms apart, shifted onto the window's
    // clock, plus the last count held to the end.
    assert!(!series.workers_fixed);
    let w = &series.workers;
    let counts: Vec<f64> = w.iter().map(|p| p.1).collect();
    assert_eq!(counts, [2.0, 8.0, 2.0, 2.0]);
    assert!(((w[1].0 - w[0].0) - 0.15).abs() < 1e-9, "{w:?}");
    assert!(((w[2].0 - w[1].0) - 0.15).abs() < 1e-9, "{w:?}");
    // CPU-seconds per request in the summary, over the points that measured it.
    let sums = skq_bench::summary::summarize(&s, &records);
    let r = records[0].result().unwrap();
    let cpu_s = r.server_cpu.map(|c| c.user_s + c.sys_s).unwrap();
    assert_eq!(sums[0].cpu_s_per_request, Some(cpu_s / r.received as f64));
    // The report stacks the strips for this point, and the summary shows
    // the CPU-per-request column.
    let out = dir.join("report");
    std::fs::create_dir_all(&out).unwrap();
    let info = skq_bench::output::RunInfo {
        started: "2026-01-01 00:00:00".into(),
        command: "skq bench".into(),
        cpus: 2,
        wall_s: 1.0,
        loadavg_before: None,
        loadavg_after: None,
        rss: skq_bench::rss::RssStatus::off("off"),
        interrupted: false,
        cross_checks: Vec::new(),
    };
    skq_bench::output::write_all(&out, &s, &records, &sums, &info).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for strip in [
        "Over time",
        "p99 per interval",
        "active workers",
        "server CPU use",
    ] {
        assert!(html.contains(strip), "report lacks {strip}");
    }
    let summary = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(summary.contains("server CPU µs/req"), "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fixed_curves_without_intervals_record_no_series() {
    let dir = temp_dir("proc-noseries");
    let s = one_curve("hybrid", &[0.3]);
    let result = write_result(&dir, &s);
    let skq = fake_skq(&dir, "echo \"listening on $4\"; exec sleep 30", &result);
    let records = sweep::run(&s, &dir.join("out"), &mut runner(skq, &dir), &mut Quiet);
    assert!(records[0].result().is_some());
    assert!(records[0].series().is_none());
    let load = std::fs::read_to_string(dir.join("args.load")).unwrap();
    assert!(!load.contains("--interval-ms"), "{load}");
    std::fs::remove_dir_all(&dir).unwrap();
}
