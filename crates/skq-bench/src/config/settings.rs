//! Sweep-wide settings ([`Settings`], the `[sweep]` table validated) and the
//! validated [`Sweep`]: settings plus curves.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{Curve, SweepEntry, SweepFile};
use crate::rss::{RssSpec, MIN_MIGRATE_MS};

/// Validated sweep-wide settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Load fractions, ascending.
    pub loads: Vec<f64>,
    /// Measured seconds per point.
    pub point_secs: f64,
    /// Warm-up seconds per point.
    pub warmup_secs: f64,
    /// SLO = slo_factor × S̄.
    pub slo_factor: f64,
    /// Saturation: p99 > stop_p99_factor × SLO.
    pub stop_p99_factor: f64,
    /// Saturation: achieved < stop_rate_ratio × the rate the schedule sent.
    pub stop_rate_ratio: f64,
    /// Load fraction whose CDF the report plots.
    pub cdf_load: f64,
    /// Seconds the generator waits for outstanding replies after its last
    /// send (`skq load --drain`); it stops earlier once all are in.
    pub drain_secs: f64,
    /// Mode or name of the curve each group's ratios are taken against.
    #[serde(default = "default_baseline")]
    pub baseline: String,
    /// A point whose generator failed its lateness check, or whose server
    /// the host delayed ([`crate::overshoot`]), is measured again up to
    /// this many times (the attempt with the fewest such faults, then the
    /// least late, is kept).
    #[serde(default)]
    pub retries: u32,
    /// A point whose p99 crossed the SLO below a load that met it again, or
    /// though at least half of its one-second intervals met it, is measured
    /// this many times in all and the median p99's attempt kept (1 = never
    /// measured again; see `sweep::confirm_crossings`).
    #[serde(default = "default_crossing_attempts")]
    pub crossing_attempts: u32,
    /// Emulated RSS asked for (what was in force is in the run's
    /// [`crate::rss::RssStatus`]).
    #[serde(default)]
    pub rss: RssSpec,
    /// Flow migration period under emulated RSS, ms (`None`: flows stay).
    #[serde(default)]
    pub rss_migrate_ms: Option<u64>,
    /// A point whose disturbance (CPUs used by processes outside the run,
    /// [`crate::disturbance`]) is above this is marked disturbed.
    #[serde(default = "default_disturbed_above")]
    pub disturbed_above: f64,
    /// The run's seed: each load of the sweep gets its own arrival schedule
    /// and request mix drawn from it ([`crate::sweep::point_seed`]), the
    /// same at that load for every configuration, and every measurement
    /// again of a point a fresh one. `skq bench` draws it at random
    /// unless `--seed` or `seed` gives it, and prints it.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// The host gate before each measurement of a point
    /// ([`crate::hostgate`]; `None`: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_gate: Option<crate::hostgate::GateSpec>,
}

fn default_seed() -> u64 {
    1
}

fn default_disturbed_above() -> f64 {
    crate::disturbance::DEFAULT_DISTURBED_ABOVE
}

fn default_baseline() -> String {
    "vanilla".into()
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            loads: vec![0.2, 0.4, 0.6, 0.75, 0.9],
            point_secs: 1.5,
            warmup_secs: 0.5,
            slo_factor: 10.0,
            stop_p99_factor: 4.0,
            stop_rate_ratio: 0.9,
            cdf_load: 0.5,
            drain_secs: 1.0,
            baseline: default_baseline(),
            retries: 1,
            crossing_attempts: default_crossing_attempts(),
            rss: RssSpec::Off,
            rss_migrate_ms: None,
            disturbed_above: default_disturbed_above(),
            seed: default_seed(),
            host_gate: None,
        }
    }
}

impl Settings {
    /// Defaults overridden by a `[sweep]` table, validated.
    pub fn from_entry(e: &SweepEntry) -> Result<Settings> {
        if let Some(w) = e.host_gate_wait_s {
            if !(w.is_finite() && (0.0..=3600.0).contains(&w)) {
                bail!("`host_gate_wait_s`: {w} must be 0 to 3600 seconds");
            }
            if e.host_gate.is_none() {
                bail!("`host_gate_wait_s` needs `host_gate` (the most late sleeps per CPU)");
            }
        }
        if let Some(l) = e.host_gate_warmup_ms_per_s {
            if !(l.is_finite() && (0.0..=1000.0).contains(&l)) {
                bail!("`host_gate_warmup_ms_per_s`: {l} must be 0 (off) to 1000 ms per second");
            }
            if e.host_gate.is_none() {
                bail!("`host_gate_warmup_ms_per_s` needs `host_gate`");
            }
        }
        if e.host_gate
            .is_some_and(|l| l > crate::hostgate::DEFAULT_SLEEPS)
        {
            bail!(
                "`host_gate`: at most {} late sleeps of {} per CPU",
                crate::hostgate::DEFAULT_SLEEPS,
                crate::hostgate::DEFAULT_SLEEPS
            );
        }
        let d = Settings::default();
        let mut loads = e.loads.clone().unwrap_or(d.loads);
        if loads.is_empty()
            || loads
                .iter()
                .any(|l| !(l.is_finite() && *l > 0.0 && *l <= 4.0))
        {
            bail!("`loads`: {loads:?} must be non-empty fractions of capacity in (0, 4]");
        }
        loads.sort_by(f64::total_cmp);
        loads.dedup();
        let s = Settings {
            loads,
            point_secs: e.point_secs.unwrap_or(d.point_secs),
            warmup_secs: e.warmup_secs.unwrap_or(d.warmup_secs),
            slo_factor: e.slo_factor.unwrap_or(d.slo_factor),
            stop_p99_factor: e.stop_p99_factor.unwrap_or(d.stop_p99_factor),
            stop_rate_ratio: e.stop_rate_ratio.unwrap_or(d.stop_rate_ratio),
            cdf_load: e.cdf_load.unwrap_or(d.cdf_load),
            drain_secs: e.drain_secs.unwrap_or(d.drain_secs),
            baseline: e.baseline.clone().unwrap_or(d.baseline),
            retries: e.retries.unwrap_or(d.retries),
            crossing_attempts: e.crossing_attempts.unwrap_or(d.crossing_attempts),
            rss: e.rss.clone().unwrap_or(d.rss),
            rss_migrate_ms: e.rss_migrate_ms.filter(|&ms| ms > 0),
            disturbed_above: e.disturbed_above.unwrap_or(d.disturbed_above),
            seed: e.seed.unwrap_or(d.seed),
            host_gate: e.host_gate.map(|late| crate::hostgate::GateSpec {
                max_wait: e.host_gate_wait_s.map_or(
                    crate::hostgate::DEFAULT_MAX_WAIT,
                    std::time::Duration::from_secs_f64,
                ),
                warmup_stall_ms_per_s: match e.host_gate_warmup_ms_per_s {
                    Some(0.0) => None,
                    Some(l) => Some(l),
                    None => Some(crate::hostgate::DEFAULT_WARMUP_STALL_MS_PER_S),
                },
                ..crate::hostgate::GateSpec::new(late)
            }),
        };
        if let Some(ms) = s.rss_migrate_ms {
            if s.rss == RssSpec::Off {
                bail!("`rss_migrate_ms`: flows can only migrate under emulated RSS; set `rss` too");
            }
            if ms < MIN_MIGRATE_MS {
                bail!("`rss_migrate_ms`: {ms} is too short; at least {MIN_MIGRATE_MS}");
            }
        }
        if !(s.disturbed_above.is_finite() && s.disturbed_above >= 0.0) {
            bail!(
                "`disturbed_above`: {} must be zero or a positive number of CPUs",
                s.disturbed_above
            );
        }
        if s.retries > 5 {
            bail!("`retries`: {} is too many; at most 5", s.retries);
        }
        if !(1..=5).contains(&s.crossing_attempts) {
            bail!(
                "`crossing_attempts`: {} must be 1 (never measure again) to 5",
                s.crossing_attempts
            );
        }
        let positive = |v: f64, key: &str| -> Result<()> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                bail!("`{key}`: {v} must be a positive number")
            }
        };
        positive(s.point_secs, "point_secs")?;
        positive(s.slo_factor, "slo_factor")?;
        positive(s.stop_p99_factor, "stop_p99_factor")?;
        positive(s.cdf_load, "cdf_load")?;
        for (v, key) in [(s.warmup_secs, "warmup_secs"), (s.drain_secs, "drain_secs")] {
            if !(v.is_finite() && v >= 0.0) {
                bail!("`{key}`: {v} must be zero or positive");
            }
        }
        if !(0.0..=1.0).contains(&s.stop_rate_ratio) {
            bail!(
                "`stop_rate_ratio`: {} must be within 0..=1",
                s.stop_rate_ratio
            );
        }
        Ok(s)
    }
}

/// A validated sweep: settings plus curves, in run order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    /// Sweep-wide settings.
    pub settings: Settings,
    /// One curve per configuration.
    pub curves: Vec<Curve>,
}

impl Sweep {
    /// Validates a parsed file. Curve names must be unique within a group.
    pub fn from_file(f: &SweepFile, cpus: usize) -> Result<Sweep> {
        let settings = Settings::from_entry(&f.sweep)?;
        let curves = f
            .entries()
            .iter()
            .map(|e| Curve::from_entry(e, cpus))
            .collect::<Result<Vec<_>>>()?;
        if curves.is_empty() {
            bail!("no configurations: give `[matrix]` or `[[config]]` entries (or --modes)");
        }
        for (i, c) in curves.iter().enumerate() {
            if curves[..i]
                .iter()
                .any(|o| o.name == c.name && o.group() == c.group())
            {
                bail!(
                    "configuration `{}` appears twice for {}; give one a distinct `name`",
                    c.name,
                    c.group()
                );
            }
        }
        Ok(Sweep { settings, curves })
    }

    /// Reads and validates a TOML file.
    pub fn load(path: &std::path::Path, cpus: usize) -> Result<(Sweep, Option<PathBuf>)> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--config {}", path.display()))?;
        let f = SweepFile::parse(&text).with_context(|| format!("--config {}", path.display()))?;
        let out = f.sweep.out.clone();
        Ok((
            Sweep::from_file(&f, cpus).with_context(|| format!("--config {}", path.display()))?,
            out,
        ))
    }
}

fn default_crossing_attempts() -> u32 {
    3
}
