//! Rate profiles: offered load that changes over the run (`skq load
//! --rate-profile`; the simulator warps its arrivals the same way).
//!
//! A profile is a multiplier `m(t)` of `--rate`, piecewise constant over
//! segments, starting at the start of the run (warm-up included):
//!
//! * `steps=F1,F2,...@SECS`: `F1 × rate` for SECS seconds, then `F2 × rate`,
//!   ...; the last step holds to the end;
//! * `diurnal=SECS`: a smooth day of SECS seconds, repeated, with mean 1 and
//!   peak 3 (m = 1/11 + 32/11 · ((1 − cos 2πt/SECS)/2)³, in 100 steps);
//! * `bursts=ON,OFF`: `(ON+OFF)/ON × rate` for ON seconds, then nothing for
//!   OFF seconds, repeated (mean 1).
//!
//! Any arrival process (`--schedule`) is warped through the profile: the
//! process runs at `rate` in *operational time* `u`, and a send due at `u`
//! goes out at the wall time `t` where `∫₀ᵗ m = u`. A Poisson process
//! becomes a non-homogeneous Poisson process of rate `rate × m(t)`; a fixed
//! process stays evenly spaced within each segment. It is pure (no clock), so
//! it is tested directly.

use std::fmt;

/// A piecewise-constant rate multiplier.
#[derive(Clone, Debug, PartialEq)]
pub struct RateProfile {
    /// (duration ns, multiplier) in order.
    segs: Vec<(u64, f64)>,
    /// Repeat the segments forever (else the last one holds).
    repeat: bool,
    label: String,
}

impl std::str::FromStr for RateProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RateProfile::parse(s)
    }
}

impl fmt::Display for RateProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

fn secs(v: &str, what: &str) -> Result<u64, String> {
    let x: f64 = v
        .trim()
        .parse()
        .map_err(|_| format!("--rate-profile: {what} `{v}` is not a number of seconds"))?;
    if !(x.is_finite() && x > 0.0 && x < 1e6) {
        return Err(format!(
            "--rate-profile: {what} {x} must be positive seconds"
        ));
    }
    Ok((x * 1e9).round() as u64)
}

impl RateProfile {
    /// Parses `steps=...@SECS`, `diurnal=SECS` or `bursts=ON,OFF`.
    pub fn parse(s: &str) -> Result<RateProfile, String> {
        let label = s.to_string();
        let (kind, arg) = s.split_once('=').ok_or_else(|| {
            format!(
                "--rate-profile `{s}`: expected steps=F1,F2,..@SECS, diurnal=SECS or bursts=ON,OFF"
            )
        })?;
        match kind {
            "steps" => {
                let (fs, dur) = arg.split_once('@').ok_or_else(|| {
                    format!("--rate-profile `{s}`: steps need @SECS (e.g. steps=0.1,0.9,0.1@5)")
                })?;
                let d = secs(dur, "step length")?;
                let mut segs = Vec::new();
                for f in fs.split(',') {
                    let m: f64 = f.trim().parse().map_err(|_| {
                        format!("--rate-profile: step `{f}` is not a fraction of --rate")
                    })?;
                    if !(m.is_finite() && m >= 0.0) {
                        return Err(format!("--rate-profile: step {m} must be >= 0"));
                    }
                    segs.push((d, m));
                }
                if segs.iter().all(|&(_, m)| m == 0.0) {
                    return Err("--rate-profile: every step is 0".into());
                }
                Ok(RateProfile {
                    segs,
                    repeat: false,
                    label,
                })
            }
            "diurnal" => {
                let period = secs(arg, "day length")?;
                const N: u64 = 100;
                let seg = (period / N).max(1);
                let segs = (0..N)
                    .map(|i| {
                        let x = (i as f64 + 0.5) / N as f64;
                        let w = ((1.0 - (2.0 * std::f64::consts::PI * x).cos()) / 2.0).powi(3);
                        (seg, 1.0 / 11.0 + 32.0 / 11.0 * w)
                    })
                    .collect();
                Ok(RateProfile {
                    segs,
                    repeat: true,
                    label,
                })
            }
            "bursts" => {
                let (on, off) = arg
                    .split_once(',')
                    .ok_or_else(|| format!("--rate-profile `{s}`: bursts need ON,OFF seconds"))?;
                let (on, off) = (secs(on, "burst length")?, secs(off, "pause length")?);
                let high = (on + off) as f64 / on as f64;
                Ok(RateProfile {
                    segs: vec![(on, high), (off, 0.0)],
                    repeat: true,
                    label,
                })
            }
            other => Err(format!(
                "--rate-profile: unknown profile `{other}`: expected steps, diurnal or bursts"
            )),
        }
    }

    fn cycle(&self) -> (u64, f64) {
        let len = self.segs.iter().map(|s| s.0).sum();
        let work = self.segs.iter().map(|&(d, m)| d as f64 * m).sum();
        (len, work)
    }

    /// The multiplier at wall time `t` (ns from the start).
    pub fn at(&self, t: u64) -> f64 {
        let (len, _) = self.cycle();
        let mut t = if self.repeat { t % len } else { t };
        for &(d, m) in &self.segs {
            if t < d {
                return m;
            }
            t -= d;
        }
        self.segs.last().map_or(1.0, |s| s.1)
    }

    /// `∫ m` from 0 to `t` (ns × multiplier).
    fn work(&self, t: u64) -> f64 {
        let (len, cyc) = self.cycle();
        let (mut acc, mut t) = if self.repeat {
            ((t / len) as f64 * cyc, t % len)
        } else {
            (0.0, t)
        };
        for &(d, m) in &self.segs {
            let step = t.min(d);
            acc += step as f64 * m;
            t -= step;
            if t == 0 {
                return acc;
            }
        }
        acc + t as f64 * self.segs.last().map_or(1.0, |s| s.1)
    }

    /// Mean multiplier over wall time `[a, b)`.
    pub fn mean(&self, a: u64, b: u64) -> f64 {
        if b <= a {
            return self.at(a);
        }
        (self.work(b) - self.work(a)) / (b - a) as f64
    }

    /// The wall time at which operational time `u` is reached.
    pub fn warp(&self, u: u64) -> u64 {
        let (len, cyc) = self.cycle();
        let mut u = u as f64;
        let mut base = 0u64;
        if self.repeat {
            let k = (u / cyc).floor();
            u -= k * cyc;
            base = (k as u64).saturating_mul(len);
        }
        for &(d, m) in &self.segs {
            let w = d as f64 * m;
            if u < w {
                return base + (u / m).round() as u64;
            }
            u -= w;
            base += d;
        }
        // Past the last segment of a non-repeating profile: it holds.
        let m = self.segs.last().map_or(1.0, |s| s.1);
        if m == 0.0 {
            u64::MAX / 2
        } else {
            base + (u / m).round() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn steps_scale_the_rate_and_the_last_one_holds() {
        let p = RateProfile::parse("steps=0.1,0.9,0.1@2").unwrap();
        assert_eq!(p.at(0), 0.1);
        assert_eq!(p.at(3 * S), 0.9);
        assert_eq!(p.at(100 * S), 0.1);
        // Operational 0.1 s is reached after 1 s of the first step ...
        assert_eq!(p.warp(S / 10), S);
        // ... the first step holds 0.2 s of it, the second 1.8 s.
        assert_eq!(p.warp(S / 5 + 9 * S / 10), 3 * S);
        assert!((p.mean(0, 6 * S) - 1.1 / 3.0).abs() < 1e-9);
        // A unit-rate fixed process through it: 10 sends per second in the
        // first step at rate 100/s, 90 in the second.
        let sends: Vec<u64> = (0..200).map(|i| p.warp(i * S / 100)).collect();
        let first = sends.iter().filter(|&&t| t < 2 * S).count();
        let second = sends
            .iter()
            .filter(|&&t| (2 * S..4 * S).contains(&t))
            .count();
        assert_eq!((first, second), (20, 180));
    }

    #[test]
    fn diurnal_has_mean_one_and_peak_three() {
        let p = RateProfile::parse("diurnal=10").unwrap();
        assert!((p.mean(0, 10 * S) - 1.0).abs() < 0.01);
        let peak = (0..100).map(|i| p.at(i * S / 10)).fold(0.0, f64::max);
        assert!((2.9..=3.0).contains(&peak), "peak {peak}");
        assert!(p.at(0) < 0.1);
        // Repeats.
        assert_eq!(p.at(5 * S), p.at(15 * S));
        assert!(p.warp(p.cycle().1 as u64).abs_diff(10 * S) < 1_000);
    }

    #[test]
    fn bursts_send_nothing_while_off() {
        let p = RateProfile::parse("bursts=1,3").unwrap();
        assert_eq!(p.at(S / 2), 4.0);
        assert_eq!(p.at(2 * S), 0.0);
        for i in 0..1000 {
            let t = p.warp(i * 10_000_000) % (4 * S);
            assert!(t <= S, "a send during the pause at {t}");
        }
        assert!((p.mean(0, 8 * S) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn bad_profiles_say_what_is_wrong() {
        for (s, want) in [
            ("ramp=3", "unknown profile"),
            ("steps=0.1,0.5", "@SECS"),
            ("steps=a@1", "not a fraction"),
            ("steps=0,0@1", "every step is 0"),
            ("bursts=1", "ON,OFF"),
            ("diurnal=-1", "positive"),
            ("steps", "expected steps"),
        ] {
            let e = RateProfile::parse(s).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
