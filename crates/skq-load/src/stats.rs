//! Latency histograms and percentile confidence intervals.
//!
//! Each generator thread records into its own [`Hist`] (an HdrHistogram of
//! nanoseconds, 3 significant digits); the threads' histograms are merged
//! after the run. Percentile confidence intervals come from order statistics:
//! for `n` samples the rank of the `q`-quantile is binomial(n, q), so the
//! samples at ranks `n·q ∓ 1.96·√(n·q·(1−q))` bracket the true quantile with
//! about 95% probability, whatever the distribution (distribution-free).

use hdrhistogram::Histogram;
use skq_report::result::{Estimate, Latency};

/// A nanosecond latency histogram (auto-resizing, 3 significant digits).
#[derive(Clone, Debug)]
pub struct Hist(pub Histogram<u64>);

impl Default for Hist {
    fn default() -> Self {
        Hist::new()
    }
}

impl Hist {
    /// An empty histogram.
    pub fn new() -> Hist {
        let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
        h.auto(true);
        Hist(h)
    }

    /// Records one value in nanoseconds (values below 1 ns count as 1 ns).
    pub fn record(&mut self, ns: u64) {
        self.0.saturating_record(ns.max(1));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Hist) {
        self.0
            .add(&other.0)
            .expect("auto-resizing histograms always add");
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The value (ns) of the sample of 1-based `rank` in sorted order, clamped
    /// to `1..=count`. Zero for an empty histogram.
    pub fn value_at_rank(&self, rank: u64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = rank.clamp(1, n);
        let mut seen = 0;
        for v in self.0.iter_recorded() {
            seen += v.count_at_value();
            if seen >= rank {
                return self.0.median_equivalent(v.value_iterated_to());
            }
        }
        self.0.max()
    }

    /// Point estimate and 95% confidence interval of the `q`-quantile (ns).
    pub fn quantile_ci(&self, q: f64) -> (u64, u64, u64) {
        self.quantile_ci_with(q, self.count())
    }

    /// Like [`Hist::quantile_ci`], with the interval as wide as `n_eff`
    /// independent samples allow (`n_eff` below the count when consecutive
    /// samples are correlated; 0 or above the count means the count).
    pub fn quantile_ci_with(&self, q: f64, n_eff: u64) -> (u64, u64, u64) {
        let n = self.count();
        let (_, mid, _) = quantile_ranks(n, q);
        let n_eff = if n_eff == 0 { n } else { n_eff.min(n) };
        let (lo, _, hi) = quantile_ranks(n_eff, q);
        // Ranks among n_eff samples, as fractions, mapped onto the n recorded.
        let scale = |r: u64| ((r as f64 / n_eff.max(1) as f64) * n as f64).round() as u64;
        let (lo, hi) = if n_eff == n {
            (lo, hi)
        } else {
            (scale(lo.saturating_sub(1)).max(1), scale(hi))
        };
        (
            self.value_at_rank(lo),
            self.value_at_rank(mid),
            self.value_at_rank(hi),
        )
    }

    /// The summary written into results, in microseconds.
    pub fn summary(&self) -> Latency {
        self.summary_with(self.count())
    }

    /// Like [`Hist::summary`], with confidence intervals for `n_eff`
    /// independent samples (see [`Hist::quantile_ci_with`]).
    pub fn summary_with(&self, n_eff: u64) -> Latency {
        let est = |q: f64| {
            let (lo, v, hi) = self.quantile_ci_with(q, n_eff);
            Estimate {
                value: v as f64 / 1e3,
                ci_low: lo as f64 / 1e3,
                ci_high: hi as f64 / 1e3,
            }
        };
        let n = self.count();
        Latency {
            count: n,
            mean: if n == 0 { 0.0 } else { self.0.mean() / 1e3 },
            p50: est(0.5),
            p90: est(0.9),
            p99: est(0.99),
            p999: est(0.999),
            max: if n == 0 {
                0.0
            } else {
                self.0.max() as f64 / 1e3
            },
        }
    }
}

/// 1-based ranks `(low, point, high)` of the 95% order-statistic confidence
/// interval of the `q`-quantile among `n` samples (normal approximation of the
/// binomial; the bounds are widened outward and clamped to `1..=n`).
pub fn quantile_ranks(n: u64, q: f64) -> (u64, u64, u64) {
    if n == 0 {
        return (0, 0, 0);
    }
    let nf = n as f64;
    let centre = nf * q;
    let half = 1.96 * (nf * q * (1.0 - q)).sqrt();
    let lo = (centre - half).floor().max(1.0) as u64;
    let mid = centre.ceil().max(1.0) as u64;
    let hi = ((centre + half).ceil() + 1.0).min(nf) as u64;
    (lo.min(n), mid.min(n), hi.max(mid.min(n)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};

    #[test]
    fn ranks_are_ordered_and_clamped() {
        for n in [1u64, 2, 10, 100, 12345] {
            for q in [0.5, 0.9, 0.99, 0.999] {
                let (l, m, h) = quantile_ranks(n, q);
                assert!(
                    1 <= l && l <= m && m <= h && h <= n,
                    "n={n} q={q}: {l} {m} {h}"
                );
            }
        }
        assert_eq!(quantile_ranks(0, 0.5), (0, 0, 0));
    }

    #[test]
    fn merged_histograms_equal_one_histogram() {
        let mut rng = SmallRng::seed_from_u64(3);
        let exp = Exp::new(1.0 / 100_000.0).unwrap();
        let (mut a, mut b, mut all) = (Hist::new(), Hist::new(), Hist::new());
        for i in 0..20_000 {
            let v = exp.sample(&mut rng) as u64;
            if i % 3 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a.count(), 20_000);
        for q in [0.5, 0.9, 0.99, 0.999] {
            assert_eq!(a.quantile_ci(q), all.quantile_ci(q));
        }
        assert_eq!(a.0.max(), all.0.max());
    }

    /// Over many independent sample sets the interval covers the true
    /// quantile about 95% of the time, and always brackets the point estimate.
    #[test]
    fn effective_n_restores_coverage_of_correlated_samples() {
        // Every draw recorded 10 times: 20,000 samples but only 2,000
        // independent ones. Intervals computed as if all were independent are
        // too narrow; with n_eff = 2,000 they cover the truth about 95% of
        // the time again.
        let mean = 100_000.0;
        let exp = Exp::new(1.0 / mean).unwrap();
        let q = 0.99;
        let truth = -mean * (1.0f64 - q).ln();
        let (mut naive, mut eff) = (0, 0);
        let trials = 200;
        for seed in 0..trials {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut h = Hist::new();
            for _ in 0..2_000 {
                let v = exp.sample(&mut rng) as u64;
                (0..10).for_each(|_| h.record(v));
            }
            let covers = |(lo, v, hi): (u64, u64, u64)| {
                assert!(lo <= v && v <= hi);
                lo as f64 <= truth * 1.001 && truth * 0.999 <= hi as f64
            };
            naive += u32::from(covers(h.quantile_ci(q)));
            eff += u32::from(covers(h.quantile_ci_with(q, 2_000)));
        }
        let (naive, eff) = (naive as f64 / 200.0, eff as f64 / 200.0);
        assert!(naive < 0.7, "naive coverage {naive}");
        assert!((0.88..=1.0).contains(&eff), "effective-n coverage {eff}");
        // n_eff at or above the count changes nothing.
        let mut h = Hist::new();
        (1..=1000u64).for_each(|v| h.record(v * 1000));
        assert_eq!(h.quantile_ci_with(0.5, 0), h.quantile_ci(0.5));
        assert_eq!(h.quantile_ci_with(0.5, 5000), h.quantile_ci(0.5));
    }

    #[test]
    fn ci_covers_true_quantile_about_95_percent() {
        let mean = 100_000.0;
        let exp = Exp::new(1.0 / mean).unwrap();
        for q in [0.5, 0.99] {
            let truth = -mean * (1.0f64 - q).ln();
            let mut covered = 0;
            let trials = 200;
            for seed in 0..trials {
                let mut rng = SmallRng::seed_from_u64(seed);
                let mut h = Hist::new();
                for _ in 0..2_000 {
                    h.record(exp.sample(&mut rng) as u64);
                }
                let (lo, v, hi) = h.quantile_ci(q);
                assert!(lo <= v && v <= hi);
                // hdr buckets are 0.1% wide: allow that much slack.
                if lo as f64 <= truth * 1.001 && truth * 0.999 <= hi as f64 {
                    covered += 1;
                }
            }
            let frac = covered as f64 / trials as f64;
            assert!((0.88..=0.995).contains(&frac), "q={q}: coverage {frac}");
        }
    }

    #[test]
    fn summary_in_microseconds() {
        let mut h = Hist::new();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50.value - 500.0).abs() < 1.0, "{}", s.p50.value);
        assert!((s.max - 1000.0).abs() < 1.0);
        assert!(s.p99.ci_low <= s.p99.value && s.p99.value <= s.p99.ci_high);
    }
}
