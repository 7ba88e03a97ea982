//! `skq conns`: what a server pays, in memory, for each idle connection.
//!
//! Opens `--conns` connections to a running server, has each one served
//! once (so the server has gone through its full per-connection path, as a
//! keep-alive client's connection has), then leaves them idle while a busy
//! client on one more connection checks that replies stay correct. The
//! server's resident set (`VmRSS` of `/proc/PID/status`) is read before
//! and after; the growth divided by the connections is the user-space cost
//! per idle connection. The kernel's cost (socket structures of both ends,
//! which share this machine's kernel) is read from `/proc/meminfo`'s `Slab`
//! and reported per connection beside it; it is noisier, since any kernel
//! activity moves it.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use skq_proto::wire::{self, Header, HEADER_LEN};

/// The request each connection sends once, and the busy client's check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Touch {
    /// memcached text protocol (`version`; the busy client sets and gets).
    Memcached,
    /// skq RPC (a request of zero service; replies echo its id).
    Rpc,
    /// Connect only: nothing is sent.
    None,
}

/// `skq conns` options.
#[derive(Clone, Debug, clap::Args)]
pub struct IdleArgs {
    /// The server's address.
    #[arg(long)]
    pub addr: SocketAddr,
    /// The server's process id (its memory is read from /proc/PID/status).
    #[arg(long)]
    pub pid: u32,
    /// Idle connections to hold (mind the open-file limit: 20,000 per
    /// process on the project's machines, and the server needs its own).
    #[arg(long, default_value_t = 15_000)]
    pub conns: usize,
    /// Protocol of the one request each connection sends.
    #[arg(long, value_enum, default_value_t = Touch::Memcached)]
    pub touch: Touch,
    /// Requests the busy client makes (and checks) while the idle ones are held.
    #[arg(long, default_value_t = 2_000)]
    pub busy_requests: u64,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What [`measure`] found.
#[derive(Clone, Debug, Serialize)]
pub struct IdleReport {
    /// Idle connections held.
    pub conns: usize,
    /// Server RSS before the connections were opened, bytes.
    pub rss_before: u64,
    /// Server RSS with them open and served once, bytes.
    pub rss_held: u64,
    /// Server RSS after they closed again, bytes.
    pub rss_after_close: u64,
    /// `(rss_held - rss_before) / conns`.
    pub rss_per_conn: f64,
    /// Kernel slab growth per connection (both socket ends), bytes.
    pub kernel_slab_per_conn: f64,
    /// Busy-client requests answered correctly while the idle connections were held.
    pub busy_ok: u64,
    /// Server CPU time (user + system) per busy-client request, ns: the cost
    /// of one activation arriving alone at an otherwise idle server (each
    /// request waits for the previous reply). Resolution: the kernel's
    /// clock tick over the whole busy phase.
    pub cpu_per_activation_ns: f64,
}

/// Resident set size of a live process, bytes.
pub fn rss_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("--pid {pid}: reading /proc/{pid}/status"))?;
    kib_field(&status, "VmRSS:").with_context(|| format!("no VmRSS in /proc/{pid}/status"))
}

/// User + system CPU time of a live process, ns (from `/proc/PID/stat`).
pub fn cpu_ns(pid: u32) -> Result<u64> {
    skq_sys::process::cpu_time_ns(pid).with_context(|| format!("reading /proc/{pid}/stat"))
}

fn slab_bytes() -> Result<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    kib_field(&m, "Slab:").context("no Slab in /proc/meminfo")
}

fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

/// Waits until the server's RSS stops moving (allocations of the last
/// accepts settle), at most `limit`.
fn settled_rss(pid: u32, limit: Duration) -> Result<u64> {
    let deadline = Instant::now() + limit;
    let mut last = rss_bytes(pid)?;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = rss_bytes(pid)?;
        if now == last || Instant::now() >= deadline {
            return Ok(now);
        }
        last = now;
    }
}

/// One connection served once with `touch`.
fn open_touched(addr: SocketAddr, touch: Touch, i: u64) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    match touch {
        Touch::None => {}
        Touch::Memcached => {
            s.write_all(b"version\r\n")?;
            let mut line = Vec::new();
            let mut byte = [0u8; 1];
            while !line.ends_with(b"\r\n") {
                if s.read(&mut byte)? == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                line.push(byte[0]);
            }
            if !line.starts_with(b"VERSION ") {
                return Err(io::Error::other(format!(
                    "connection {i}: expected VERSION, got {:?}",
                    String::from_utf8_lossy(&line)
                )));
            }
        }
        Touch::Rpc => rpc_call(&mut s, i)?,
    }
    Ok(s)
}

fn rpc_call(s: &mut TcpStream, id: u64) -> io::Result<()> {
    let mut req = Vec::new();
    Header::request(id, 0, 0).encode(&mut req);
    s.write_all(&req)?;
    let mut reply = [0u8; HEADER_LEN];
    s.read_exact(&mut reply)?;
    match wire::decode_reply(&reply) {
        Ok(Some(h)) if h.id == id => Ok(()),
        other => Err(io::Error::other(format!(
            "rpc request {id}: bad reply {other:?}"
        ))),
    }
}

/// `n` requests on one connection, each reply checked.
fn busy_client(addr: SocketAddr, touch: Touch, n: u64) -> Result<u64> {
    let mut s = TcpStream::connect(addr).context("busy client: connect")?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    // A request and its reply at a time: without NODELAY a request written
    // in pieces would wait for the server's delayed ACK (about 40 ms).
    s.set_nodelay(true)?;
    match touch {
        Touch::None => Ok(0),
        Touch::Rpc => {
            for i in 0..n {
                rpc_call(&mut s, 1_000_000 + i).context("busy client")?;
            }
            Ok(n)
        }
        Touch::Memcached => {
            let mut r = BufReader::new(s.try_clone()?);
            let mut line = String::new();
            for i in 0..n {
                let value = format!("v{i:08}");
                // One write per request (`write!` on the stream would make
                // one system call, and one segment, per formatted piece).
                let req = format!(
                    "set skq:conns:{} 0 0 {}\r\n{value}\r\nget skq:conns:{}\r\n",
                    i % 64,
                    value.len(),
                    i % 64
                );
                s.write_all(req.as_bytes())?;
                let mut got = Vec::new();
                for _ in 0..4 {
                    line.clear();
                    r.read_line(&mut line)?;
                    got.push(line.trim_end().to_string());
                }
                let want = [
                    "STORED".to_string(),
                    format!("VALUE skq:conns:{} 0 {}", i % 64, value.len()),
                    value,
                    "END".to_string(),
                ];
                if got != want {
                    bail!("busy client: request {i}: got {got:?}, want {want:?}");
                }
            }
            Ok(n)
        }
    }
}

/// Opens, holds and closes the idle connections; see the module docs.
pub fn measure(args: &IdleArgs) -> Result<IdleReport> {
    if args.conns == 0 {
        bail!("--conns must be at least 1");
    }
    let _ = skq_sys::limits::raise_nofile_limit();
    let (soft, _) = skq_sys::limits::nofile_limit()?;
    if args.conns as u64 + 16 > soft {
        bail!(
            "--conns {}: this process may open only {soft} files; use fewer connections",
            args.conns
        );
    }
    // Warm the server's per-worker paths (first allocations of buffers,
    // thread-local state) before the baseline.
    busy_client(args.addr, args.touch, 64)?;
    let rss_before = settled_rss(args.pid, Duration::from_secs(3))?;
    let slab_before = slab_bytes()?;
    let bar = indicatif::ProgressBar::new(args.conns as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("opening {pos}/{len} connections {wide_bar}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut held = Vec::with_capacity(args.conns);
    for i in 0..args.conns {
        held.push(
            open_touched(args.addr, args.touch, i as u64)
                .with_context(|| format!("idle connection {i}"))?,
        );
        bar.inc(1);
    }
    bar.finish_and_clear();
    let cpu0 = cpu_ns(args.pid)?;
    let busy_ok = busy_client(args.addr, args.touch, args.busy_requests)?;
    let cpu1 = cpu_ns(args.pid)?;
    let rss_held = settled_rss(args.pid, Duration::from_secs(5))?;
    let slab_held = slab_bytes()?;
    drop(held);
    let rss_after_close = settled_rss(args.pid, Duration::from_secs(5))?;
    let n = args.conns as f64;
    Ok(IdleReport {
        conns: args.conns,
        rss_before,
        rss_held,
        rss_after_close,
        rss_per_conn: (rss_held as f64 - rss_before as f64) / n,
        kernel_slab_per_conn: (slab_held as f64 - slab_before as f64) / n,
        busy_ok,
        cpu_per_activation_ns: if busy_ok == 0 {
            0.0
        } else {
            (cpu1 - cpu0) as f64 / busy_ok as f64
        },
    })
}

/// Runs `skq conns`.
pub fn run(args: IdleArgs) -> Result<()> {
    let r = measure(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(());
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "{} idle connections to {} (pid {}), each served once ({:?})",
        r.conns, args.addr, args.pid, args.touch
    );
    println!(
        "server RSS: {:.1} MiB before, {:.1} MiB held, {:.1} MiB after they closed",
        mib(r.rss_before),
        mib(r.rss_held),
        mib(r.rss_after_close)
    );
    println!(
        "per idle connection: {:.0} B of server RSS; kernel slab {:.0} B (both socket ends)",
        r.rss_per_conn, r.kernel_slab_per_conn
    );
    println!(
        "busy client: {} requests answered correctly meanwhile; server CPU {:.1} µs per request",
        r.busy_ok,
        r.cpu_per_activation_ns / 1e3
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kib_fields() {
        let t = "Name:\tx\nVmRSS:\t  1234 kB\nSlab: 10 kB\n";
        assert_eq!(kib_field(t, "VmRSS:"), Some(1234 * 1024));
        assert_eq!(kib_field(t, "Slab:"), Some(10 * 1024));
        assert_eq!(kib_field(t, "VmHWM:"), None);
    }

    #[test]
    fn reads_this_process_rss_and_cpu() {
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
        assert!(rss_bytes(u32::MAX).is_err());
        let t0 = cpu_ns(std::process::id()).unwrap();
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(50) {
            std::hint::black_box(0u64);
        }
        assert!(
            cpu_ns(std::process::id()).unwrap() > t0,
            "CPU time advances while spinning"
        );
    }
}
