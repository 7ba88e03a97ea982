//! Closed forms of single-server FCFS queues, used by `skq load --validate`.
//!
//! * **M/M/1**: the sojourn time (wait + service) of a FCFS M/M/1 queue is
//!   exponential with rate `μ − λ`, so its `q`-quantile is `−ln(1−q)/(μ−λ)`.
//! * **M/D/1**: the waiting-time distribution comes from the classic
//!   Erlang (1909) / Crommelin (1932) formula. With the service time `D` as the
//!   unit of time and `ρ = λD < 1`,
//!
//!   ```text
//!   P(W ≤ t) = (1 − ρ) · Σ_{k=0}^{⌊t⌋} (ρ(k − t))^k / k! · e^{−ρ(k − t)}
//!   ```
//!
//!   The terms alternate in sign and grow like `e^{2ρt}`, so in `f64` the sum
//!   is accurate to ~1e-6 up to `2ρt ≈ 20`; that covers the 99.9th percentile
//!   up to ρ = 0.9, well past the loads `--validate` uses. Sojourn is `W + D`;
//!   quantiles are found by bisection on the monotone CDF.

/// `q`-quantile of the M/M/1 FCFS sojourn time; times in any unit, rates in
/// its inverse. `None` when the queue is unstable (`λ ≥ μ`).
pub fn mm1_sojourn_quantile(lambda: f64, mu: f64, q: f64) -> Option<f64> {
    (lambda < mu && (0.0..1.0).contains(&q)).then(|| -(1.0 - q).ln() / (mu - lambda))
}

/// Mean M/M/1 sojourn time `1/(μ−λ)`.
pub fn mm1_mean_sojourn(lambda: f64, mu: f64) -> Option<f64> {
    (lambda < mu).then(|| 1.0 / (mu - lambda))
}

/// `P(W ≤ t)` for the M/D/1 waiting time with unit service time and load `rho`.
pub fn md1_wait_cdf(rho: f64, t: f64) -> f64 {
    if t < 0.0 {
        return 0.0;
    }
    let mut sum = 0.0;
    let mut k_fact_ln = 0.0; // ln k!
    for k in 0..=(t.floor() as u64) {
        if k > 0 {
            k_fact_ln += (k as f64).ln();
        }
        let x = rho * (t - k as f64); // = −ρ(k − t) ≥ 0
                                      // (−x)^k / k! · e^{x}, magnitude in log space.
        let mag = (if k == 0 { 0.0 } else { k as f64 * x.ln() }) - k_fact_ln + x;
        let term = if x == 0.0 && k > 0 { 0.0 } else { mag.exp() };
        sum += if k % 2 == 1 { -term } else { term };
    }
    ((1.0 - rho) * sum).clamp(0.0, 1.0)
}

/// `q`-quantile of the M/D/1 FCFS sojourn time with service time `d` (any
/// unit) and load `rho`. `None` when unstable or `q` is out of range.
pub fn md1_sojourn_quantile(rho: f64, d: f64, q: f64) -> Option<f64> {
    if !(0.0..1.0).contains(&rho) || !(0.0..1.0).contains(&q) {
        return None;
    }
    // P(W = 0) = 1 − ρ: below that the quantile is the bare service time.
    if q <= 1.0 - rho {
        return Some(d);
    }
    let (mut lo, mut hi) = (0.0, 1.0);
    while md1_wait_cdf(rho, hi) < q {
        hi *= 2.0;
        if hi > 1e4 {
            return None;
        }
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if md1_wait_cdf(rho, mid) < q {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(d * (1.0 + hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};

    #[test]
    fn mm1_closed_forms() {
        // μ = 1000/s, λ = 500/s: sojourn ~ Exp(500/s), median ln2/500 s.
        let p50 = mm1_sojourn_quantile(500.0, 1000.0, 0.5).unwrap();
        assert!((p50 - 2f64.ln() / 500.0).abs() < 1e-12);
        let p99 = mm1_sojourn_quantile(500.0, 1000.0, 0.99).unwrap();
        assert!((p99 - 100f64.ln() / 500.0).abs() < 1e-12);
        assert_eq!(mm1_mean_sojourn(500.0, 1000.0), Some(1.0 / 500.0));
        assert_eq!(mm1_sojourn_quantile(1000.0, 1000.0, 0.5), None);
        assert_eq!(mm1_sojourn_quantile(1.0, 2.0, 1.0), None);
    }

    #[test]
    fn md1_cdf_basics() {
        // Atom at zero of mass 1 − ρ; monotone; tends to 1.
        assert!((md1_wait_cdf(0.5, 0.0) - 0.5).abs() < 1e-12);
        let mut prev = 0.0;
        for i in 0..200 {
            let c = md1_wait_cdf(0.8, i as f64 * 0.1);
            assert!(c + 1e-9 >= prev, "not monotone at {i}");
            prev = c;
        }
        assert!(md1_wait_cdf(0.8, 20.0) > 0.999);
        // Mean wait ρ/(2(1−ρ)) from integrating the tail numerically.
        let rho: f64 = 0.6;
        let dt = 0.001;
        let mean: f64 = (0..30_000)
            .map(|i| (1.0 - md1_wait_cdf(rho, i as f64 * dt)) * dt)
            .sum();
        assert!(
            (mean - rho / (2.0 * (1.0 - rho))).abs() < 0.01,
            "mean wait {mean}"
        );
    }

    /// Simulates the Lindley recursion for FCFS M/D/1 and compares quantiles
    /// with the closed form.
    #[test]
    fn md1_quantiles_match_simulation() {
        let rho = 0.8;
        let mut rng = SmallRng::seed_from_u64(11);
        let gap = Exp::new(rho).unwrap(); // unit service, arrival rate ρ
        let mut w: f64 = 0.0;
        let mut soj = Vec::with_capacity(400_000);
        for _ in 0..400_000 {
            soj.push(w + 1.0);
            w = (w + 1.0 - gap.sample(&mut rng)).max(0.0);
        }
        soj.sort_by(f64::total_cmp);
        for q in [0.5, 0.9, 0.99] {
            let sim = soj[(q * soj.len() as f64) as usize];
            let th = md1_sojourn_quantile(rho, 1.0, q).unwrap();
            assert!((sim - th).abs() / th < 0.05, "q={q}: sim {sim} theory {th}");
        }
        assert_eq!(md1_sojourn_quantile(0.5, 2.0, 0.3), Some(2.0));
        assert_eq!(md1_sojourn_quantile(1.0, 1.0, 0.5), None);
    }
}
