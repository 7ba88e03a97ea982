//! IO variance (SKQ §6.7's disk-backed pages): a chosen fraction of file
//! reads misses the page cache.
//!
//! Two ways, stated in every output through [`IoVariance::label`]:
//! * **fadvise** — before the read, `posix_fadvise(POSIX_FADV_DONTNEED)`
//!   drops the file's cached pages, so the read really goes to storage.
//!   Real, but on fast or host-cached virtual disks a miss costs little, and
//!   on tmpfs nothing at all.
//! * **emulate** — the read is served from the cache, then the worker waits
//!   on the clock (absolute deadline, minimal timer slack, BRIEF §8) for a
//!   storage latency drawn from a fixed or exponential distribution: the
//!   queueing effect of a slow read on a machine whose storage is too fast.
//!
//! Which reads miss is decided per request by a per-connection generator
//! (xorshift64*), so no state is shared between workers.

use std::fmt;

/// Latency distribution of an emulated miss.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Latency {
    /// Always the mean.
    Fixed,
    /// Exponential with the given mean.
    Exponential,
}

/// How file reads miss the page cache.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IoVariance {
    /// Every read is served from the page cache (no variance added).
    None,
    /// A fraction `miss` of reads drops the file's pages first.
    Fadvise {
        /// Fraction of reads, 0..=1.
        miss: f64,
    },
    /// A fraction `miss` of reads waits `mean_us` (fixed or exponential).
    Emulate {
        /// Fraction of reads, 0..=1.
        miss: f64,
        /// Mean emulated storage latency in µs.
        mean_us: f64,
        /// Distribution.
        latency: Latency,
    },
}

impl IoVariance {
    /// Builds the variance the CLI flags describe; the message names the flag.
    pub fn from_flags(mode: &str, miss: f64, mean_us: f64, dist: &str) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&miss) {
            return Err(format!("--io-miss: {miss} is not a fraction in 0..=1"));
        }
        match mode {
            "none" => Ok(IoVariance::None),
            "fadvise" => Ok(IoVariance::Fadvise { miss }),
            "emulate" => {
                if !(mean_us.is_finite() && mean_us > 0.0 && mean_us <= 1e7) {
                    return Err(format!(
                        "--io-latency-us: {mean_us} is not in (0, 10000000] microseconds"
                    ));
                }
                let latency = match dist {
                    "fixed" => Latency::Fixed,
                    "exp" | "exponential" => Latency::Exponential,
                    other => {
                        return Err(format!(
                            "--io-dist: unknown `{other}`; expected fixed or exp"
                        ))
                    }
                };
                Ok(IoVariance::Emulate {
                    miss,
                    mean_us,
                    latency,
                })
            }
            other => Err(format!(
                "--io-variance: unknown `{other}`; expected none, fadvise or emulate"
            )),
        }
    }

    /// The one-line description every output carries (`io=none`,
    /// `io=fadvise miss=0.100`, `io=emulated miss=0.100 latency=exp(1000us)`).
    pub fn label(&self) -> String {
        self.to_string()
    }

    /// Whether misses are emulated by waiting (workers then want minimal timer slack).
    pub fn is_emulated(&self) -> bool {
        matches!(self, IoVariance::Emulate { .. })
    }
}

impl fmt::Display for IoVariance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoVariance::None => write!(f, "io=none"),
            IoVariance::Fadvise { miss } => write!(f, "io=fadvise miss={miss:.3}"),
            IoVariance::Emulate {
                miss,
                mean_us,
                latency,
            } => {
                let d = match latency {
                    Latency::Fixed => "fixed",
                    Latency::Exponential => "exp",
                };
                write!(f, "io=emulated miss={miss:.3} latency={d}({mean_us}us)")
            }
        }
    }
}

/// A tiny per-connection random source (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is remapped).
    pub fn new(seed: u64) -> Rng {
        // splitmix64 finaliser, so nearby seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (v >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What to do for one read, drawn from `v` with `rng`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Draw {
    /// Read from the cache.
    Hit,
    /// Drop the file's cached pages, then read.
    DropCache,
    /// Read, then wait this many nanoseconds.
    Wait(u64),
}

/// Draws the fate of one read.
pub fn draw(v: &IoVariance, rng: &mut Rng) -> Draw {
    match *v {
        IoVariance::None => Draw::Hit,
        IoVariance::Fadvise { miss } => {
            if rng.next_f64() < miss {
                Draw::DropCache
            } else {
                Draw::Hit
            }
        }
        IoVariance::Emulate {
            miss,
            mean_us,
            latency,
        } => {
            if rng.next_f64() >= miss {
                return Draw::Hit;
            }
            let us = match latency {
                Latency::Fixed => mean_us,
                Latency::Exponential => -mean_us * (1.0 - rng.next_f64()).ln(),
            };
            Draw::Wait((us * 1000.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_labels() {
        assert_eq!(
            IoVariance::from_flags("none", 0.0, 1.0, "exp")
                .unwrap()
                .label(),
            "io=none"
        );
        assert_eq!(
            IoVariance::from_flags("fadvise", 0.25, 1.0, "exp")
                .unwrap()
                .label(),
            "io=fadvise miss=0.250"
        );
        assert_eq!(
            IoVariance::from_flags("emulate", 0.1, 1000.0, "exp")
                .unwrap()
                .label(),
            "io=emulated miss=0.100 latency=exp(1000us)"
        );
        assert!(IoVariance::from_flags("emulate", 1.5, 1000.0, "exp")
            .unwrap_err()
            .starts_with("--io-miss"));
        assert!(IoVariance::from_flags("emulate", 0.5, 0.0, "exp")
            .unwrap_err()
            .starts_with("--io-latency-us"));
        assert!(IoVariance::from_flags("disk", 0.5, 1.0, "exp")
            .unwrap_err()
            .starts_with("--io-variance"));
    }

    #[test]
    fn draws_follow_the_fraction_and_the_mean() {
        let v = IoVariance::Emulate {
            miss: 0.2,
            mean_us: 1000.0,
            latency: Latency::Exponential,
        };
        let mut rng = Rng::new(7);
        let (mut misses, mut total_ns) = (0u64, 0u64);
        let n = 100_000;
        for _ in 0..n {
            if let Draw::Wait(ns) = draw(&v, &mut rng) {
                misses += 1;
                total_ns += ns;
            }
        }
        let frac = misses as f64 / n as f64;
        let mean_us = total_ns as f64 / misses as f64 / 1000.0;
        assert!((0.19..0.21).contains(&frac), "{frac}");
        assert!((950.0..1050.0).contains(&mean_us), "{mean_us}");
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| draw(&IoVariance::None, &mut rng) == Draw::Hit));
        let all = IoVariance::Fadvise { miss: 1.0 };
        assert!((0..1000).all(|_| draw(&all, &mut rng) == Draw::DropCache));
    }
}
