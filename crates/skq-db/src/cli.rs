//! `skq serve rocksdb` and `skq db preload|sample`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use skq_net::{Lifecycle, ServeError, Server, Started};
use skq_proto::db::{self, DbRequest, KEY_LEN};
use skq_proto::request::{Op, Request};
use skq_proto::zippydb::ZippyDb;
use skq_servers::cli::RpcArgs;
use skq_sys::cpu;

use crate::protocol::DbProtocol;

/// Flags of `skq serve rocksdb`: the RPC server's (address, workers, mode,
/// service, stats) plus the database's.
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// The database directory (built by `skq db preload`).
    #[arg(long, default_value = crate::DEFAULT_DB)]
    pub db: PathBuf,
    /// Extra service after each operation, as a multiple of the operation's
    /// own CPU time, delivered by --service (emulate: sleep; spin: CPU).
    /// Stretches real RocksDB work so many workers on few cores queue as on a
    /// larger machine; 0 = real work only.
    #[arg(long, default_value_t = 0.0)]
    pub dilate: f64,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub server: RpcArgs,
}

/// `skq db`: build or measure the database.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum DbCmd {
    /// Build the database: KEYS records of 48-byte keys and ZippyDB-sized values
    /// (replaces what is there).
    Preload(PreloadArgs),
    /// Time ZippyDB operations on the database in this process, one at a time,
    /// and write each one's service time (µs, one per line) for
    /// `skq sim --service-samples`.
    Sample(SampleArgs),
}

/// Flags of `skq db preload`.
#[derive(clap::Args, Debug, Clone)]
pub struct PreloadArgs {
    /// The database directory (memory-backed by default).
    #[arg(long, default_value = crate::DEFAULT_DB)]
    pub db: PathBuf,
    /// Records to write (the paper used 50M; 10M takes about 13 s and 0.5 GB here).
    #[arg(long, default_value_t = 10_000_000)]
    pub keys: u64,
    /// Seed of the value sizes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Flags of `skq db sample`.
#[derive(clap::Args, Debug, Clone)]
pub struct SampleArgs {
    /// The database directory.
    #[arg(long, default_value = crate::DEFAULT_DB)]
    pub db: PathBuf,
    /// Records in it (as preloaded).
    #[arg(long, default_value_t = 10_000_000)]
    pub keys: u64,
    /// Operations to time.
    #[arg(long, default_value_t = 100_000)]
    pub requests: u64,
    /// Add DILATE × each operation's CPU time (what `skq serve rocksdb --dilate` serves).
    #[arg(long, default_value_t = 0.0)]
    pub dilate: f64,
    /// Seed of the operations.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the samples here.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `skq db ...`.
pub fn run_db(cmd: DbCmd) -> anyhow::Result<()> {
    match cmd {
        DbCmd::Preload(a) => {
            let bar = if a.quiet {
                indicatif::ProgressBar::hidden()
            } else {
                indicatif::ProgressBar::new(a.keys)
            };
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "preload {bar:40} {pos}/{len} keys ({per_sec}, {eta} left)",
                )
                .expect("valid template"),
            );
            let r = crate::preload(&a.db, a.keys, a.seed, |done| bar.set_position(done))?;
            bar.finish_and_clear();
            println!(
                "preloaded {} keys ({:.1} MB of keys and values) into {} in {:.1} s",
                r.keys,
                r.bytes as f64 / 1e6,
                a.db.display(),
                r.secs
            );
            Ok(())
        }
        DbCmd::Sample(a) => sample(&a),
    }
}

/// Times ZippyDB operations through the server's own request path.
fn sample(a: &SampleArgs) -> anyhow::Result<()> {
    if !(a.dilate.is_finite() && a.dilate >= 0.0) {
        bail!("--dilate must be >= 0, got {}", a.dilate);
    }
    let proto = DbProtocol::new(
        Arc::new(crate::open(&a.db)?),
        skq_servers::ServiceMode::Spin,
        0.0,
    );
    let z = ZippyDb::new(a.keys, a.seed).map_err(|e| anyhow::anyhow!("--keys: {e}"))?;
    let mut rng = SmallRng::seed_from_u64(a.seed);
    let (mut payload, mut reply, mut key) = (Vec::new(), Vec::new(), [0u8; KEY_LEN]);
    let mut text = String::from("# skq db sample: ZippyDB operation service times (µs)\n");
    let mut sums = [(0u64, 0f64); 3];
    // Least squares of SEEK time (µs) against entries returned.
    let (mut sx, mut sy, mut sxx, mut sxy) = (0f64, 0f64, 0f64, 0f64);
    for i in 0..a.requests {
        let mut r = Request::new(i);
        z.draw(&mut rng, &mut r);
        db::key_of(u64::from(r.key), &mut key);
        payload.clear();
        let value: Vec<u8> = vec![
            b'v';
            if r.op == Op::Set {
                r.value_len as usize
            } else {
                0
            }
        ];
        let (op, arg, slot) = match r.op {
            Op::Get => (db::DbOp::Get, 0, 0),
            Op::Set => (db::DbOp::Put, r.value_len, 1),
            Op::Seek => (db::DbOp::Seek, r.value_len, 2),
        };
        db::encode_request(op, &key, arg, &value, &mut payload);
        let req: DbRequest<'_> = db::decode_request(&payload).map_err(anyhow::Error::msg)?;
        reply.clear();
        let (t0, c0) = (cpu::monotonic_ns(), cpu::thread_cputime_ns());
        proto.execute(req, &mut reply)?;
        // What the server serves: the operation's wall time plus `dilate`
        // times its CPU time.
        let (wall, cpu_ns) = (cpu::monotonic_ns() - t0, cpu::thread_cputime_ns() - c0);
        let us = (wall as f64 + a.dilate * cpu_ns as f64) / 1e3;
        sums[slot].0 += 1;
        sums[slot].1 += us;
        if slot == 2 {
            let n = f64::from(u32::from_le_bytes(reply[4..8].try_into().expect("4 bytes")));
            (sx, sy, sxx, sxy) = (sx + n, sy + us, sxx + n * n, sxy + n * us);
        }
        text.push_str(&format!("{us:.3}\n"));
    }
    std::fs::write(&a.out, text).with_context(|| format!("--out {}", a.out.display()))?;
    for (name, (n, s)) in ["GET", "PUT", "SEEK"].iter().zip(sums) {
        if n > 0 {
            println!("{name}: {n} operations, mean {:.2} µs", s / n as f64);
        }
    }
    let n = sums[2].0 as f64;
    if n > 1.0 && n * sxx - sx * sx > 0.0 {
        let slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
        println!(
            "SEEK fit: {:.2} µs + {:.3} µs per entry returned",
            (sy - slope * sx) / n,
            slope
        );
    }
    println!("wrote {} samples to {}", a.requests, a.out.display());
    Ok(())
}

/// Runs `skq serve rocksdb` until SIGINT/SIGTERM or `--duration` (the
/// steps: [`skq_net::serve`]; the database opens once the termination
/// signals are blocked, so its threads inherit the mask).
pub fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    if !(args.dilate.is_finite() && args.dilate >= 0.0) {
        bail!("--dilate must be >= 0, got {}", args.dilate);
    }
    let a = &args.server;
    let life = Lifecycle::new(a.duration, a.stats_json.clone())?;
    let done = life.serve(&mut std::io::stdout(), &mut std::io::stderr(), || {
        let db = crate::open(&args.db)?;
        let mut cfg = a.to_config()?;
        cfg.max_service_us = a
            .max_service_us
            .unwrap_or(crate::protocol::DEFAULT_MAX_SERVICE_US);
        cfg.validate()?;
        let proto = Arc::new(
            DbProtocol::new(Arc::new(db), cfg.spec.service, args.dilate)
                .with_max_service_ns(cfg.max_service_us * 1_000),
        );
        let server =
            Server::start(&cfg.server_config(), proto).map_err(|e| ServeError::start(a.addr, e))?;
        anyhow::Ok(Started::new(server, ()))
    })?;
    let stats = &done.stats;
    eprintln!(
        "skq serve rocksdb: {} requests on {} connections ({} protocol errors, {} aborted, {} timed out), imbalance {:.3}",
        stats.requests, stats.accepted, stats.protocol_errors, stats.aborted, stats.timeouts, stats.imbalance
    );
    life.write_stats(stats)?;
    Ok(())
}
