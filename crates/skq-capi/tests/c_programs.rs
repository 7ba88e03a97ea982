//! The C side of libskq, built by the C compiler against the library this
//! test run built (`libskq_capi.a`), under AddressSanitizer:
//! * `tests/c/test_api.c` calls every function of `include/skq.h`, error
//!   paths included;
//! * `examples/c/rpc_server.c` serves skq load's RPC protocol on one skq
//!   instance with several threads, through the `skq_*` API (`raw`) or the
//!   libevent-style layer (`ev`, one base dispatched by every thread), and
//!   must answer every request once.
//!
//! These tests FAIL when no C compiler is installed: `bash scripts/setup.sh`
//! installs one (scripts/setup.d/40-capi.sh).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use skq_load::{LoadConfig, ScheduleKind};
use skq_proto::workload::{ServiceSpec, Workload};

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The static library cargo built for this test run (next to the test
/// executable's `deps/` directory).
fn static_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for dir in [deps, deps.parent().unwrap()] {
        let p = dir.join("libskq_capi.a");
        if p.exists() {
            return p;
        }
    }
    panic!("libskq_capi.a not found near {}", deps.display());
}

/// Compiles `src` with AddressSanitizer into the test's temp directory.
fn build(src: &Path, name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let r = Command::new("cc")
        .args(["-std=gnu11", "-g", "-O1", "-Wall", "-Wextra", "-Werror"])
        .args(["-fsanitize=address", "-fno-omit-frame-pointer"])
        .arg("-I")
        .arg(manifest().join("include"))
        .arg(src)
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("no C compiler `cc` ({e}): run `bash scripts/setup.sh` first"));
    assert!(
        r.status.success(),
        "compiling {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&r.stderr)
    );
    out
}

#[test]
fn c_test_program_passes_under_asan() {
    let exe = build(&manifest().join("tests/c/test_api.c"), "test_api");
    let r = Command::new(&exe)
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:abort_on_error=0:halt_on_error=1",
        )
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&r.stdout);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "test_api failed:\n{out}\n{err}");
    assert!(out.contains("checks passed"), "{out}");
    assert!(!err.contains("AddressSanitizer"), "{err}");
}

fn run_example(policy: &str, api: &str) {
    let src = manifest().join("../../examples/c/rpc_server.c");
    let exe = build(&src, &format!("rpc_server_{policy}_{api}"));
    let mut child = Command::new(&exe)
        .args(["0", policy, "3", api])
        .env("ASAN_OPTIONS", "detect_leaks=1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let mut cfg = LoadConfig::new(addr, 4000.0);
    cfg.connections = 16;
    cfg.threads = 1;
    cfg.duration = Duration::from_millis(800);
    cfg.warmup = Duration::from_millis(200);
    cfg.drain = Duration::from_secs(5);
    cfg.service = ServiceSpec::new(Workload::Exponential, 20.0);
    cfg.schedule = ScheduleKind::Poisson;
    let r = skq_load::run(&cfg).unwrap();
    // SIGTERM: the server shuts its instance down, frees everything, exits 0.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(r.errors.total(), 0, "{policy}: {:?}", r.errors);
    assert!(r.sent > 0);
    assert_eq!(r.received, r.sent, "{policy}: every request answered once");
    assert!(
        r.measured_service_us.is_some_and(|s| s > 0.0),
        "{policy}: the server reported its service time"
    );
    assert!(status.success(), "{policy}: server exit {status}:\n{err}");
    assert!(err.contains("delivered"), "{policy}: {err}");
    assert!(!err.contains("AddressSanitizer"), "{policy}: {err}");
}

#[test]
fn c_example_server_answers_skq_load_cpu() {
    run_example("cpu", "raw");
}

#[test]
fn c_example_server_answers_skq_load_hybrid() {
    run_example("hybrid", "raw");
}

#[test]
fn c_example_server_on_the_event_layer_answers_skq_load() {
    run_example("hybrid", "ev");
}
