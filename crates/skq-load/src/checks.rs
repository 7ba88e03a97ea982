//! The generator's self-checks (BRIEF §8, after the Lancet tool).
//!
//! * achieved vs target rate (flagged beyond ±5%);
//! * Anderson–Darling A² of sampled inter-arrival gaps against an exponential
//!   whose mean is estimated from the sample (Stephens' modified statistic
//!   `A²·(1 + 0.6/n)`, 5% critical value 1.341);
//! * lag-1 Spearman rank correlation of latency samples in send order: a large
//!   value means consecutive samples are not independent, so the confidence
//!   intervals are optimistic (flagged when |r| > 0.1 *and* significant at
//!   3σ, `|r|·√(n−1) > 3`);
//! * p99 of send lateness (actual − scheduled send time) under a threshold.

use skq_report::result::Checks;

/// 5% critical value of Stephens' modified A² for the exponential with
/// estimated mean.
pub const AD_CRITICAL_5PCT: f64 = 1.341;
/// Largest |achieved − target| / target accepted, percent.
pub const RATE_TOLERANCE_PCT: f64 = 5.0;
/// Largest lag-1 rank correlation treated as independent.
pub const MAX_LAG1_CORR: f64 = 0.1;

/// Stephens' modified Anderson–Darling statistic `A²·(1 + 0.6/n)` of `gaps`
/// against an exponential with the sample mean. `None` with fewer than 8 gaps.
pub fn anderson_darling_exp(gaps: &[f64]) -> Option<f64> {
    let n = gaps.len();
    if n < 8 {
        return None;
    }
    let mean = gaps.iter().sum::<f64>() / n as f64;
    if mean <= 0.0 {
        return Some(f64::INFINITY);
    }
    let mut x: Vec<f64> = gaps.to_vec();
    x.sort_by(f64::total_cmp);
    // F(x) = 1 − e^{−x/mean}; ln F and ln(1 − F) computed stably.
    let ln_cdf = |v: f64| (-(-(v.max(1e-300)) / mean).exp_m1()).ln();
    let ln_sf = |v: f64| -v / mean;
    let nf = n as f64;
    let mut s = 0.0;
    for i in 0..n {
        let w = (2 * i + 1) as f64;
        s += w * (ln_cdf(x[i]) + ln_sf(x[n - 1 - i]));
    }
    let a2 = -nf - s / nf;
    Some(a2 * (1.0 + 0.6 / nf))
}

/// Ranks (1-based, ties averaged) of `v`.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        i = j + 1;
    }
    r
}

/// Lag-1 Spearman rank correlation of a series (0 with fewer than 3 values
/// or no variation).
pub fn lag1_spearman(series: &[f64]) -> f64 {
    if series.len() < 3 {
        return 0.0;
    }
    let r = ranks(series);
    let (a, b) = (&r[..r.len() - 1], &r[1..]);
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    if saa == 0.0 || sbb == 0.0 {
        0.0
    } else {
        sab / (saa * sbb).sqrt()
    }
}

/// What the checks are computed from.
#[derive(Clone, Debug, Default)]
pub struct CheckInput {
    /// Target request rate of the load connections.
    pub target_rps: f64,
    /// Replies per second received in the measured window.
    pub achieved_rps: f64,
    /// Requests per second sent in the measured window.
    pub sent_rps: f64,
    /// Sampled inter-arrival gaps (any unit), when the schedule is Poisson.
    pub poisson_gaps: Option<Vec<f64>>,
    /// Latency samples in send order.
    pub latency_series: Vec<f64>,
    /// p99 of send lateness, µs.
    pub lateness_p99_us: f64,
    /// Threshold for the lateness p99, µs.
    pub max_lateness_us: f64,
    /// Total correctness errors.
    pub errors: u64,
}

/// Runs every check; `pass` also requires zero correctness errors.
pub fn evaluate(inp: &CheckInput) -> Checks {
    let mut notes = Vec::new();
    let rate_error_pct = if inp.target_rps > 0.0 {
        (inp.achieved_rps - inp.target_rps) / inp.target_rps * 100.0
    } else {
        0.0
    };
    let rate_ok = rate_error_pct.abs() <= RATE_TOLERANCE_PCT;
    if !rate_ok {
        let sent_err = (inp.sent_rps - inp.target_rps) / inp.target_rps.max(1e-9) * 100.0;
        let who = if sent_err.abs() > RATE_TOLERANCE_PCT {
            "the generator did not send at the target rate"
        } else {
            "the server did not keep up"
        };
        notes.push(format!(
            "rate: achieved {:.0} rps vs target {:.0} ({rate_error_pct:+.1}%, sent {sent_err:+.1}%): {who}",
            inp.achieved_rps, inp.target_rps
        ));
    }
    let ad_statistic = inp.poisson_gaps.as_deref().and_then(anderson_darling_exp);
    let ad_ok = !matches!(ad_statistic, Some(a) if a > AD_CRITICAL_5PCT);
    if let (false, Some(a)) = (ad_ok, ad_statistic) {
        notes.push(format!(
            "arrivals: inter-arrival gaps are not exponential (Anderson-Darling A2 = {a:.2} > {AD_CRITICAL_5PCT}, n = {})",
            inp.poisson_gaps.as_ref().map_or(0, Vec::len)
        ));
    }
    let lag1 = lag1_spearman(&inp.latency_series);
    let n = inp.latency_series.len() as f64;
    let independence_ok =
        !(lag1.abs() > MAX_LAG1_CORR && lag1.abs() * (n - 1.0).max(0.0).sqrt() > 3.0);
    if !independence_ok {
        notes.push(format!(
            "independence: lag-1 rank correlation of latency samples is {lag1:.2} (n = {n}); confidence intervals are optimistic"
        ));
    }
    let lateness_ok = inp.lateness_p99_us <= inp.max_lateness_us;
    if !lateness_ok {
        notes.push(format!(
            "lateness: p99 send lateness {:.1} us exceeds {:.1} us; the generator could not keep its schedule",
            inp.lateness_p99_us, inp.max_lateness_us
        ));
    }
    if inp.errors > 0 {
        notes.push(format!(
            "correctness: {} missing/duplicate/out-of-order/bad replies or failed connections",
            inp.errors
        ));
    }
    let pass = rate_ok && ad_ok && independence_ok && lateness_ok && inp.errors == 0;
    Checks {
        rate_error_pct,
        rate_ok,
        ad_statistic,
        ad_ok,
        lag1_rank_corr: lag1,
        independence_ok,
        lateness_p99_us: inp.lateness_p99_us,
        lateness_ok,
        pass,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, Exp};

    fn exp_gaps(seed: u64, n: usize) -> Vec<f64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let e = Exp::new(1.0 / 250.0).unwrap();
        (0..n).map(|_| e.sample(&mut rng)).collect()
    }

    #[test]
    fn ad_accepts_exponential_most_of_the_time() {
        let accepted = (0..100)
            .filter(|&s| anderson_darling_exp(&exp_gaps(s, 2000)).unwrap() <= AD_CRITICAL_5PCT)
            .count();
        // Nominal 95%; allow sampling noise.
        assert!((88..=100).contains(&accepted), "accepted {accepted}/100");
    }

    #[test]
    fn ad_rejects_fixed_and_uniform_gaps() {
        let fixed = vec![250.0; 2000];
        assert!(anderson_darling_exp(&fixed).unwrap() > AD_CRITICAL_5PCT);
        let mut rng = SmallRng::seed_from_u64(1);
        let uni: Vec<f64> = (0..2000).map(|_| rng.gen_range(0.0..500.0)).collect();
        assert!(anderson_darling_exp(&uni).unwrap() > AD_CRITICAL_5PCT);
        assert_eq!(anderson_darling_exp(&[1.0; 3]), None);
    }

    #[test]
    fn spearman_sees_correlation() {
        let iid = exp_gaps(5, 5000);
        assert!(lag1_spearman(&iid).abs() < 0.05);
        // An AR(1) series with strong memory.
        let mut x = 0.0;
        let ar: Vec<f64> = iid
            .iter()
            .map(|e| {
                x = 0.9 * x + e;
                x
            })
            .collect();
        assert!(lag1_spearman(&ar) > 0.7);
        assert_eq!(lag1_spearman(&[1.0, 1.0, 1.0, 1.0]), 0.0);
    }

    #[test]
    fn evaluate_flags_each_failure() {
        let good = CheckInput {
            target_rps: 1000.0,
            achieved_rps: 1010.0,
            sent_rps: 1000.0,
            poisson_gaps: Some(exp_gaps(9, 1000)),
            latency_series: exp_gaps(10, 1000),
            lateness_p99_us: 5.0,
            max_lateness_us: 50.0,
            errors: 0,
        };
        let c = evaluate(&good);
        assert!(c.pass, "{:?}", c.notes);
        let c = evaluate(&CheckInput {
            achieved_rps: 800.0,
            ..good.clone()
        });
        assert!(!c.rate_ok && !c.pass && c.notes[0].contains("server did not keep up"));
        let c = evaluate(&CheckInput {
            lateness_p99_us: 500.0,
            ..good.clone()
        });
        assert!(!c.lateness_ok && !c.pass && c.notes[0].starts_with("lateness"));
        let c = evaluate(&CheckInput {
            poisson_gaps: Some(vec![1.0; 1000]),
            ..good.clone()
        });
        assert!(!c.ad_ok && !c.pass);
        let c = evaluate(&CheckInput { errors: 2, ..good });
        assert!(!c.pass && c.notes[0].starts_with("correctness"));
    }
}
