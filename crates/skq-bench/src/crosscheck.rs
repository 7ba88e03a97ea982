//! The independent cross-check of a curve: after the sweep, `wrk` (Debian's
//! package, a closed-loop HTTP client that shares no code with `skq load`)
//! drives a fresh server of every curve that asks for it (`wrk = true`),
//! with the curve's connections, generator threads, CPU placement and
//! point duration.
//!
//! A closed-loop client keeps every connection busy, so wrk measures the
//! server at saturation: its requests/s should agree with the highest rate
//! `skq load` achieved on the curve, and its latencies with the point whose
//! achieved rate is nearest wrk's (the matched point). Both are shown side
//! by side in `summary.txt`, `summary.json` and the HTML report, with the
//! server's CPU time per reply under wrk.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::config::{Curve, Sweep};
use crate::peers::find_program;
use crate::process::{command_in, ctx_switches_between, prepare_child, split_cpus, ProcessRunner};
use crate::server::ServerProcess;
use crate::summary::CtxSwitchesPerRequest;
use crate::sweep::PointRecord;

/// What wrk printed, in numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WrkFigures {
    /// `Requests/sec`.
    pub rps: f64,
    /// Requests completed.
    pub requests: u64,
    /// Latency percentiles from `--latency` (µs): 50, 75, 90, 99.
    pub p50_us: f64,
    /// 75th percentile (µs).
    pub p75_us: f64,
    /// 90th percentile (µs).
    pub p90_us: f64,
    /// 99th percentile (µs).
    pub p99_us: f64,
    /// `Non-2xx or 3xx responses` (0 when wrk printed none).
    pub non_2xx: u64,
    /// Sum of wrk's socket errors (connect, read, write, timeout).
    pub socket_errors: u64,
}

/// The point of the curve a cross-check is compared with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatchedPoint {
    /// Load fraction.
    pub load: f64,
    /// Offered rate (requests/s).
    pub target_rps: f64,
    /// Rate `skq load` achieved (requests/s).
    pub achieved_rps: f64,
    /// Its p50 (µs).
    pub p50_us: f64,
    /// Its p99 (µs).
    pub p99_us: f64,
}

/// One curve's cross-check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// Curve index.
    pub curve: usize,
    /// Curve label.
    pub config: String,
    /// The client's command line.
    pub command: String,
    /// wrk's figures, or why there are none.
    pub wrk: std::result::Result<WrkFigures, String>,
    /// Server CPU time (user + system) per reply under wrk (µs).
    pub server_cpu_per_reply_us: Option<f64>,
    /// Server context switches (voluntary, involuntary) per reply under wrk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ctx_per_reply: Option<CtxSwitchesPerRequest>,
    /// The curve's point whose achieved rate is nearest wrk's.
    pub matched: Option<MatchedPoint>,
    /// The highest rate `skq load` achieved on the curve (requests/s).
    pub peak_achieved_rps: Option<f64>,
}

impl CrossCheck {
    /// One line for the text summaries.
    pub fn line(&self) -> String {
        let w = match &self.wrk {
            Ok(w) => w,
            Err(e) => return format!("{}: wrk failed: {e}", self.config),
        };
        let mut s = format!(
            "{}: wrk {:.0} req/s, p50 {:.0} µs, p99 {:.0} µs",
            self.config, w.rps, w.p50_us, w.p99_us
        );
        if let Some(c) = self.server_cpu_per_reply_us {
            s.push_str(&format!(", server CPU {c:.1} µs/reply"));
        }
        if let Some(c) = self.server_ctx_per_reply {
            s.push_str(&format!(
                ", {} context switches/reply (vol+invol)",
                c.cell()
            ));
        }
        if w.non_2xx + w.socket_errors > 0 {
            s.push_str(&format!(
                ", {} non-2xx, {} socket errors",
                w.non_2xx, w.socket_errors
            ));
        }
        if let Some(peak) = self.peak_achieved_rps {
            s.push_str(&format!(
                " | skq load peak {peak:.0} req/s ({:.2}× wrk)",
                peak / w.rps.max(f64::MIN_POSITIVE)
            ));
        }
        if let Some(m) = &self.matched {
            s.push_str(&format!(
                "; nearest point (load {:.2}, {:.0} req/s achieved): p50 {:.0} µs, p99 {:.0} µs",
                m.load, m.achieved_rps, m.p50_us, m.p99_us
            ));
        }
        s
    }
}

/// Parses wrk's report (run with `--latency`).
pub fn parse_wrk(text: &str) -> Result<WrkFigures> {
    let mut f = WrkFigures::default();
    let mut have_rps = false;
    let mut pct = 0;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", v] => {
                f.rps = v.parse().context("wrk's Requests/sec")?;
                have_rps = true;
            }
            [p @ ("50%" | "75%" | "90%" | "99%"), v] => {
                let us = duration_us(v)?;
                match *p {
                    "50%" => f.p50_us = us,
                    "75%" => f.p75_us = us,
                    "90%" => f.p90_us = us,
                    _ => f.p99_us = us,
                }
                pct += 1;
            }
            [n, "requests", "in", ..] => {
                f.requests = n.parse().context("wrk's request count")?;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                f.non_2xx = n.parse().context("wrk's non-2xx count")?;
            }
            ["Socket", "errors:", rest @ ..] => {
                // connect 0, read 0, write 0, timeout 0
                for pair in rest.chunks(2) {
                    if let [_, n] = pair {
                        f.socket_errors += n
                            .trim_end_matches(',')
                            .parse::<u64>()
                            .context("wrk's socket errors")?;
                    }
                }
            }
            _ => {}
        }
    }
    if !have_rps {
        bail!("no `Requests/sec` line in wrk's output");
    }
    if pct < 4 {
        bail!("no latency distribution in wrk's output (was it run with --latency?)");
    }
    Ok(f)
}

/// `1.23ms`, `850.00us`, `2.00s` → µs.
fn duration_us(v: &str) -> Result<f64> {
    let (num, scale) = if let Some(n) = v.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1e6)
    } else if let Some(n) = v.strip_suffix('m') {
        (n, 60e6)
    } else {
        bail!("wrk latency `{v}` has no unit");
    };
    let x: f64 = num.parse().with_context(|| format!("wrk latency `{v}`"))?;
    Ok(x * scale)
}

/// The measured point of curve `curve` whose achieved rate is nearest
/// `rps`, and the curve's highest achieved rate.
pub fn match_point(
    records: &[PointRecord],
    curve: usize,
    rps: f64,
) -> (Option<MatchedPoint>, Option<f64>) {
    let measured: Vec<(&PointRecord, &skq_report::result::PointResult)> = records
        .iter()
        .filter(|r| r.curve == curve)
        .filter_map(|r| r.result().map(|x| (r, x)))
        .collect();
    let peak = measured
        .iter()
        .map(|(_, x)| x.achieved_rps)
        .max_by(f64::total_cmp);
    let nearest = measured
        .iter()
        .min_by(|a, b| {
            (a.1.achieved_rps - rps)
                .abs()
                .total_cmp(&(b.1.achieved_rps - rps).abs())
        })
        .map(|(r, x)| MatchedPoint {
            load: r.load,
            target_rps: r.target_rps,
            achieved_rps: x.achieved_rps,
            p50_us: x.latency.p50.value,
            p99_us: x.latency.p99.value,
        });
    (nearest, peak)
}

/// What the server spent per reply under wrk.
#[derive(Clone, Copy, Debug, Default)]
struct ServerCost {
    /// CPU time (user + system), µs.
    cpu_per_reply_us: Option<f64>,
    /// Context switches of its threads.
    switches: Option<CtxSwitchesPerRequest>,
}

/// Runs wrk against a fresh server of `curve`; its report is written to
/// `log` beside the server's log.
fn run_wrk(
    runner: &ProcessRunner,
    curve: &Curve,
    secs: f64,
    logs: &Path,
) -> Result<(WrkFigures, ServerCost, String)> {
    let wrk = find_program("wrk")
        .context("wrk not found: install it with scripts/setup.sh (Debian package wrk)")?;
    std::fs::create_dir_all(logs)?;
    let slug = curve.slug();
    let ns = runner.rss.as_ref().map(|r| r.namespace());
    if let Some(r) = &runner.rss {
        r.reset().context("emulated RSS: setting the mask")?;
    }
    let (server_cpus, load_cpus) = split_cpus(curve.affinity, &runner.cpus);
    let mut server = ServerProcess::start_in(
        curve,
        &runner.skq,
        server_cpus.as_deref(),
        &logs.join(format!("{slug}_wrk.server.log")),
        &runner.scratch,
        runner.ready_timeout,
        ns,
    )?;
    let mut cmd = Command::new(&wrk);
    cmd.args([
        format!("-t{}", curve.load.threads),
        format!("-c{}", curve.connections.max(curve.load.threads)),
        format!("-d{}s", secs.ceil().max(1.0) as u64),
        "--latency".into(),
        format!("http://{}/", server.addr),
    ]);
    let shown = format!(
        "{} {}",
        wrk.display(),
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut cmd = match ns {
        Some(ns) => command_in(ns, &cmd),
        None => cmd,
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    prepare_child(&mut cmd, load_cpus.as_deref());
    let cpu0 = server.cpu_reading().ok();
    let cs0 = server.ctx_switches().ok();
    let out = cmd.output().context("running wrk")?;
    let cpu1 = server.cpu_reading().ok();
    let cs1 = server.ctx_switches().ok();
    let alive = server.check_alive();
    server.stop();
    alive?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::write(
        logs.join(format!("{slug}_wrk.txt")),
        format!("{shown}\n{text}{}", String::from_utf8_lossy(&out.stderr)),
    )?;
    if !out.status.success() {
        bail!(
            "wrk {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let figures = parse_wrk(&text)?;
    let cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) if figures.requests > 0 => {
            let tick_s = 1.0 / skq_sys::process::clock_ticks_per_sec();
            let c = crate::procstat::cpu_between(a, b, tick_s);
            Some((c.user_s + c.sys_s) * 1e6 / figures.requests as f64)
        }
        _ => None,
    };
    let switches = cs0
        .zip(cs1)
        .and_then(|(a, b)| ctx_switches_between(a, b).per_reply(figures.requests as f64))
        .map(|(voluntary, involuntary)| CtxSwitchesPerRequest {
            voluntary,
            involuntary,
        });
    Ok((
        figures,
        ServerCost {
            cpu_per_reply_us: cpu,
            switches,
        },
        shown,
    ))
}

/// Cross-checks every curve that asks for it (in sweep order), unless the
/// sweep was interrupted. `note` receives one line per curve as it ends.
pub fn run_all(
    sweep: &Sweep,
    records: &[PointRecord],
    runner: &ProcessRunner,
    out_dir: &Path,
    note: &mut dyn FnMut(&str),
) -> Vec<CrossCheck> {
    let secs = sweep.settings.point_secs.max(1.0);
    let mut checks = Vec::new();
    for (i, curve) in sweep.curves.iter().enumerate().filter(|(_, c)| c.http.wrk) {
        if crate::interrupt::interrupted() {
            break;
        }
        let (wrk, cost, command) = match run_wrk(runner, curve, secs, &out_dir.join("logs")) {
            Ok((f, cost, cmd)) => (Ok(f), cost, cmd),
            Err(e) => (Err(format!("{e:#}")), ServerCost::default(), "wrk".into()),
        };
        let (matched, peak) = match &wrk {
            Ok(f) => match_point(records, i, f.rps),
            Err(_) => (None, None),
        };
        let check = CrossCheck {
            curve: i,
            config: curve.name.clone(),
            command,
            wrk,
            server_cpu_per_reply_us: cost.cpu_per_reply_us,
            server_ctx_per_reply: cost.switches,
            matched,
            peak_achieved_rps: peak,
        };
        note(&check.line());
        checks.push(check);
    }
    checks
}

/// How long the cross-checks of `sweep` take at most (for the estimate).
pub fn estimate(sweep: &Sweep) -> Duration {
    let n = sweep.curves.iter().filter(|c| c.http.wrk).count() as u32;
    (Duration::from_secs_f64(sweep.settings.point_secs.max(1.0).ceil()) + Duration::from_secs(1))
        * n
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 2s test @ http://127.0.0.1:40000/
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   622.31us  207.93us   4.61ms   83.36%
    Req/Sec    25.93k     1.21k   27.57k    75.00%
  Latency Distribution
     50%  590.00us
     75%  680.00us
     90%  820.00us
     99%    1.43ms
  51612 requests in 2.00s, 39.47MB read
  Non-2xx or 3xx responses: 3
  Socket errors: connect 0, read 2, write 0, timeout 1
Requests/sec:  25802.15
Transfer/sec:     19.73MB
";

    #[test]
    fn wrk_report_is_read_into_numbers() {
        let f = parse_wrk(WRK).unwrap();
        assert_eq!(f.rps, 25802.15);
        assert_eq!(f.requests, 51612);
        assert_eq!((f.p50_us, f.p75_us, f.p90_us), (590.0, 680.0, 820.0));
        assert!((f.p99_us - 1430.0).abs() < 1e-9);
        assert_eq!((f.non_2xx, f.socket_errors), (3, 3));
    }

    #[test]
    fn wrk_report_without_figures_is_an_error() {
        let no_latency: String = WRK
            .lines()
            .filter(|l| !l.trim_start().starts_with("99%"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(parse_wrk(&no_latency)
            .unwrap_err()
            .to_string()
            .contains("--latency"));
        assert!(
            parse_wrk("unable to connect to 127.0.0.1:1 Connection refused")
                .unwrap_err()
                .to_string()
                .contains("Requests/sec")
        );
        assert!(duration_us("12").is_err());
        assert_eq!(duration_us("2.5s").unwrap(), 2.5e6);
    }
}
