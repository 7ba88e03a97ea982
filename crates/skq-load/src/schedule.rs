//! Per-connection send schedules (open loop).
//!
//! Every connection owns a [`ConnSchedule`] that yields absolute send times
//! independent of replies. With `c` connections sharing a total rate `λ`:
//!
//! * **poisson**: each connection draws exponential gaps of mean `c/λ`; the
//!   superposition of independent Poisson processes is Poisson with rate `λ`.
//! * **fixed**: each connection sends every `c/λ`, connection `i` phase-shifted
//!   by `i/λ`, so the aggregate is evenly spaced at `1/λ`.
//! * **trace**: a file of send offsets (one per line, microseconds from the
//!   start, `#` comments allowed) is time-scaled so its mean rate equals the
//!   requested rate (its shape is kept), dealt round-robin over the
//!   connections, and repeated with its own period if the run is longer.
//!
//! The schedule is pure: it takes the previous time and returns the next, so
//! it is tested without any clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

/// Which arrival process.
#[derive(Clone, Debug, PartialEq)]
pub enum ScheduleKind {
    /// Exponential gaps (the default).
    Poisson,
    /// Evenly spaced sends.
    Fixed,
    /// Replay of a file of send offsets.
    Trace(PathBuf),
}

impl std::str::FromStr for ScheduleKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "poisson" => Ok(ScheduleKind::Poisson),
            "fixed" => Ok(ScheduleKind::Fixed),
            _ => match s.strip_prefix("trace=") {
                Some(p) if !p.is_empty() => Ok(ScheduleKind::Trace(PathBuf::from(p))),
                _ => Err(format!(
                    "unknown schedule `{s}`; expected poisson, fixed or trace=PATH"
                )),
            },
        }
    }
}

/// A loaded trace: sorted offsets in ns from the start, scaled to a target
/// rate, and the period after which it repeats.
#[derive(Clone, Debug)]
pub struct Trace {
    /// Send offsets in nanoseconds, ascending.
    pub offsets: Vec<u64>,
    /// Repetition period in nanoseconds.
    pub period: u64,
}

impl Trace {
    /// Parses trace text (microsecond offsets) and scales it to `rate` req/s.
    pub fn parse(text: &str, rate: f64) -> Result<Trace, String> {
        let mut us = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let v: f64 = line
                .parse()
                .map_err(|_| format!("line {}: `{line}` is not a number of microseconds", i + 1))?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!(
                    "line {}: offset {v} must be finite and non-negative",
                    i + 1
                ));
            }
            us.push(v);
        }
        if us.len() < 2 {
            return Err("a trace needs at least two send offsets".into());
        }
        us.sort_by(f64::total_cmp);
        let span = us[us.len() - 1] - us[0];
        if span <= 0.0 {
            return Err("all trace offsets are equal".into());
        }
        // Period: span plus one mean gap, so the last send and the first of the
        // next round are one mean gap apart.
        let n = us.len() as f64;
        let period_us = span * n / (n - 1.0);
        let native_rate = n / (period_us * 1e-6);
        let factor = native_rate / rate; // stretch (>1) or squeeze (<1) time
        let offsets = us
            .iter()
            .map(|v| ((v - us[0]) * factor * 1e3).round() as u64)
            .collect();
        Ok(Trace {
            offsets,
            period: (period_us * factor * 1e3).round().max(1.0) as u64,
        })
    }

    /// Reads and parses a trace file.
    pub fn load(path: &Path, rate: f64) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--schedule trace={}: {e}", path.display()))?;
        Trace::parse(&text, rate).map_err(|e| format!("--schedule trace={}: {e}", path.display()))
    }
}

/// One connection's schedule.
#[derive(Debug)]
pub enum ConnSchedule {
    /// Exponential gaps with the given mean (ns).
    Poisson {
        /// Gap distribution.
        exp: Exp<f64>,
        /// This connection's random stream.
        rng: SmallRng,
    },
    /// Constant gap (ns), starting at a phase offset.
    Fixed {
        /// Gap between sends (ns).
        gap: f64,
        /// Sends so far.
        n: u64,
        /// Offset of the first send (ns).
        phase: f64,
    },
    /// Another schedule run in operational time and warped to wall time
    /// through a rate profile (`profile.rs`).
    Profiled {
        /// The schedule in operational time.
        inner: Box<ConnSchedule>,
        /// The profile.
        profile: Arc<crate::profile::RateProfile>,
        /// The previous send in operational time.
        op: Option<u64>,
    },
    /// Every `stride`-th offset of a shared trace starting at `index`.
    Trace {
        /// The trace.
        trace: Arc<Trace>,
        /// Next index into the repeated trace (may exceed its length).
        next: u64,
        /// Number of connections sharing it.
        stride: u64,
    },
}

impl ConnSchedule {
    /// Schedule of connection `i` of `conns` sharing `rate` req/s.
    pub fn new(
        kind: &ScheduleKind,
        trace: Option<&Arc<Trace>>,
        rate: f64,
        i: usize,
        conns: usize,
        seed: u64,
    ) -> ConnSchedule {
        let mean_gap = conns as f64 / rate * 1e9;
        match (kind, trace) {
            (ScheduleKind::Trace(_), Some(t)) => ConnSchedule::Trace {
                trace: t.clone(),
                next: i as u64,
                stride: conns as u64,
            },
            (ScheduleKind::Fixed, _) => ConnSchedule::Fixed {
                gap: mean_gap,
                n: 0,
                phase: i as f64 * 1e9 / rate,
            },
            _ => ConnSchedule::Poisson {
                exp: Exp::new(1.0 / mean_gap).expect("positive rate"),
                rng: SmallRng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            },
        }
    }

    /// This schedule warped through `profile` (rate × the profile's
    /// multiplier at each moment).
    pub fn profiled(self, profile: Arc<crate::profile::RateProfile>) -> ConnSchedule {
        ConnSchedule::Profiled {
            inner: Box::new(self),
            profile,
            op: None,
        }
    }

    /// The next send time (ns, relative to the run's start) after `prev`
    /// (`None` for the first send).
    pub fn next(&mut self, prev: Option<u64>) -> u64 {
        match self {
            ConnSchedule::Profiled { inner, profile, op } => {
                let u = inner.next(*op);
                *op = Some(u);
                profile.warp(u)
            }
            ConnSchedule::Poisson { exp, rng } => {
                let base = prev.unwrap_or(0) as f64;
                (base + exp.sample(rng)).round() as u64
            }
            ConnSchedule::Fixed { gap, n, phase } => {
                let t = *phase + *gap * *n as f64;
                *n += 1;
                t.round() as u64
            }
            ConnSchedule::Trace {
                trace,
                next,
                stride,
            } => {
                let len = trace.offsets.len() as u64;
                let round = *next / len;
                let t = round * trace.period + trace.offsets[(*next % len) as usize];
                *next += *stride;
                t
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{anderson_darling_exp, AD_CRITICAL_5PCT};

    /// Merges the first `per_conn` sends of every connection into one sorted
    /// aggregate sequence.
    fn aggregate(
        kind: &ScheduleKind,
        trace: Option<&Arc<Trace>>,
        rate: f64,
        conns: usize,
        per_conn: usize,
    ) -> Vec<u64> {
        let mut all = Vec::new();
        for i in 0..conns {
            let mut s = ConnSchedule::new(kind, trace, rate, i, conns, 42);
            let mut prev = None;
            for _ in 0..per_conn {
                let t = s.next(prev);
                all.push(t);
                prev = Some(t);
            }
        }
        all.sort_unstable();
        all
    }

    fn gaps(ts: &[u64]) -> Vec<f64> {
        ts.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
    }

    #[test]
    fn poisson_aggregate_has_the_rate_and_is_exponential() {
        let rate = 50_000.0;
        let ts = aggregate(&ScheduleKind::Poisson, None, rate, 16, 2000);
        // Use the part where every connection is still active.
        let ts = &ts[..ts.len() * 3 / 4];
        let g = gaps(ts);
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        assert!(
            (mean - 1e9 / rate).abs() / (1e9 / rate) < 0.03,
            "mean gap {mean}"
        );
        let sample: Vec<f64> = g.iter().step_by(7).copied().take(2000).collect();
        let a2 = anderson_darling_exp(&sample).unwrap();
        assert!(a2 < AD_CRITICAL_5PCT, "A2 {a2}");
    }

    /// Requests the 8-connection Poisson schedule of `seed` places in the
    /// window [0.3 s, 1.3 s) at 500 req/s (`skq bench`'s short points).
    fn window_count(seed: u64) -> u64 {
        let (warm, end) = (300_000_000, 1_300_000_000);
        let mut n = 0;
        for i in 0..8 {
            let mut s = ConnSchedule::new(&ScheduleKind::Poisson, None, 500.0, i, 8, seed);
            let mut t = s.next(None);
            while t < end {
                n += u64::from(t >= warm);
                t = s.next(Some(t));
            }
        }
        n
    }

    /// A window's count is a Poisson count (mean and variance λT), not the
    /// target's: the self-checks judge replies against what was sent
    /// (`checks::SCHEDULE_SIGMAS`). `cargo test -p skq-load --lib
    /// window_counts -- --nocapture` prints how many seeds fall 10% short.
    #[test]
    fn window_counts_are_poisson_and_some_seeds_fall_ten_percent_short() {
        let counts: Vec<f64> = (0..4000u64)
            .map(|k| window_count(k.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xDEAD) as f64)
            .collect();
        let n = counts.len() as f64;
        let mean = counts.iter().sum::<f64>() / n;
        let var = counts.iter().map(|c| (c - mean) * (c - mean)).sum::<f64>() / n;
        let short = counts.iter().filter(|&&c| c < 450.0).count();
        println!(
            "mean {mean:.1}, sd {:.1}, under 450: {short} of {n}",
            var.sqrt()
        );
        assert!((mean - 500.0).abs() < 2.0, "mean {mean}");
        // The variance of a Poisson count is its mean; 4,000 samples give
        // its estimate a standard error of about 2.2%.
        assert!((var / 500.0 - 1.0).abs() < 0.1, "variance {var}");
        // Under 450 is 2.2 standard deviations down: about 1.2% of seeds.
        assert!((20..=80).contains(&short), "{short} seeds under 450");
    }

    #[test]
    fn fixed_aggregate_is_even_and_rejected_by_ad() {
        let rate = 10_000.0;
        let ts = aggregate(&ScheduleKind::Fixed, None, rate, 8, 100);
        let g = gaps(&ts);
        assert!(
            g.iter().all(|&x| (x - 100_000.0).abs() <= 1.0),
            "{:?}",
            &g[..10]
        );
        assert!(anderson_darling_exp(&g).unwrap() > AD_CRITICAL_5PCT);
    }

    #[test]
    fn trace_is_scaled_dealt_and_repeated() {
        let t = Trace::parse("# offsets in us\n0\n10\n30\n", 1.0 / 20e-6).unwrap();
        // Native: 3 sends per 45 us; asked for one per 20 us = 3 per 60 us.
        assert_eq!(t.offsets, vec![0, 13_333, 40_000]);
        assert_eq!(t.period, 60_000);
        let t = Arc::new(t);
        let ts = aggregate(
            &ScheduleKind::Trace("x".into()),
            Some(&t),
            1.0 / 20e-6,
            2,
            3,
        );
        assert_eq!(ts, vec![0, 13_333, 40_000, 60_000, 73_333, 100_000]);
        assert!(Trace::parse("1\nx\n", 1.0).unwrap_err().contains("line 2"));
        assert!(Trace::parse("5\n", 1.0).is_err());
    }

    #[test]
    fn parses_schedule_names() {
        assert_eq!("poisson".parse(), Ok(ScheduleKind::Poisson));
        assert_eq!("trace=/a/b".parse(), Ok(ScheduleKind::Trace("/a/b".into())));
        assert!("trace=".parse::<ScheduleKind>().is_err());
        assert!("bursty"
            .parse::<ScheduleKind>()
            .unwrap_err()
            .contains("poisson"));
    }
}
