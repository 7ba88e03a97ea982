//! The generator's self-checks (BRIEF §8, after the Lancet tool).
//!
//! * rate: replies in the measured window against the requests the seed's
//!   schedule placed there (flagged beyond ±5%: the server did not keep
//!   up), and that count against the target's (flagged beyond the larger of
//!   5% and [`SCHEDULE_SIGMAS`] standard deviations of a Poisson count: the
//!   generator did not offer the target load). A Poisson schedule's count
//!   over a short window is itself random (500 req/s over 1 s: 500 ± 22),
//!   so a seed that offers 14% fewer requests is not a server that fell 14%
//!   short;
//! * Anderson–Darling A² of sampled *actual* inter-send gaps against an
//!   exponential whose mean is estimated from the sample (Stephens' modified
//!   statistic `A²·(1 + 0.6/n)`, 5% critical value 1.341). Only the excess of
//!   gaps over a threshold is tested (the larger of 20 µs and the thread's
//!   send-lateness p99.9, [`crate::worker::gap_threshold_ns`]): a Poisson
//!   process's excesses over any threshold are exponential again, also when
//!   each send is displaced by less than the threshold, and no generator can
//!   realise gaps shorter than its own send time. The scheduled gaps are tested too, as a check of the
//!   schedule generator;
//! * lag-1 Spearman rank correlation of latency samples in send order. When
//!   it is large (|r| > 0.1 *and* significant at 3σ, `|r|·√(n−1) > 3`),
//!   consecutive latencies are not independent and order-statistic intervals
//!   computed from all samples would be too narrow. As Lancet does, the series
//!   is then thinned (every 2nd, 4th, … sample) until the correlation is no
//!   longer significant, and the intervals are computed for the effective
//!   number of independent samples, count / stride. The check fails only
//!   when no stride leaving 100 samples gets there;
//! * p99 of send lateness (actual − scheduled send time) under a threshold;
//! * p99 of read lag (the generator's read time − the kernel's receive stamp
//!   of the data read) within the larger of a threshold and
//!   [`READ_LAG_SHARE`] of the latency p99: a generator that keeps its send
//!   schedule can still read replies late, and every reply's latency
//!   includes the wait (issue 27: 256-event polls over 384 connections at
//!   104k–128k req/s made memcached's p99 14–111 ms instead of 0.6–1.0 ms,
//!   with every send on time). Unlike late sends, late reads do not change
//!   the arrival process; they only add to the latencies, so a lag that is
//!   a small part of the p99 cannot have made it.

use skq_report::result::Checks;

/// 5% critical value of Stephens' modified A² for the exponential with
/// estimated mean.
pub const AD_CRITICAL_5PCT: f64 = 1.341;
/// How far the actual gaps' A² may exceed the scheduled times' of the same
/// sends before the excess is the generator's. A faithful generator moves
/// its sends by its lateness only, so the two statistics differ by noise:
/// simulated with send times of 5–20 µs and 1–5% of sends held by up to
/// 20–60 µs, at mean gaps of 40–312 µs (400 seeds each), the difference had
/// p95 0.09–0.41 and p99 0.17–0.67; recorded runs that piled short gaps at
/// the threshold gave 2.1–2.9, and a generator on a 20–40 µs timer tick 3.9
/// and more (tests below).
pub const AD_PAIRED_MARGIN: f64 = 0.5;
/// Largest |achieved − sent| / sent accepted, percent.
pub const RATE_TOLERANCE_PCT: f64 = 5.0;
/// How many standard deviations of a Poisson count (√(target × window))
/// the requests a schedule placed in the window may depart from the
/// target's count before the generator is said not to have offered it (a
/// faithful schedule departs further once in about 16,000 points).
pub const SCHEDULE_SIGMAS: f64 = 4.0;
/// Largest lag-1 rank correlation treated as independent.
pub const MAX_LAG1_CORR: f64 = 0.1;
/// Fewest samples a thinned series may keep.
pub const MIN_THINNED: usize = 100;
/// Share of the latency p99 the read-lag p99 may reach when that is more
/// than the read-lag threshold: the generator's reading then moved the
/// point's p99 by about this much at most.
pub const READ_LAG_SHARE: f64 = 0.1;

/// Whether a lag-1 correlation `r` over `n` samples counts as dependence.
fn correlated(r: f64, n: usize) -> bool {
    r.abs() > MAX_LAG1_CORR && r.abs() * (n as f64 - 1.0).max(0.0).sqrt() > 3.0
}

/// The smallest stride (1, 2, 4, …) at which every `stride`-th element of
/// `series` shows no significant lag-1 correlation, or `None` when no stride
/// leaving [`MIN_THINNED`] samples does.
pub fn decorrelation_stride(series: &[f64]) -> Option<usize> {
    let mut k = 1;
    loop {
        let thinned: Vec<f64> = series.iter().step_by(k).copied().collect();
        if !correlated(lag1_spearman(&thinned), thinned.len()) {
            return Some(k);
        }
        k *= 2;
        if series.len() / k < MIN_THINNED {
            return None;
        }
    }
}

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
    /// Requests per second sent in the measured window (the load
    /// connections' requests scheduled there).
    pub sent_rps: f64,
    /// The measured window, seconds (0: unknown, and the schedule's count
    /// must then be within [`RATE_TOLERANCE_PCT`] of the target's).
    pub window_s: f64,
    /// Excesses of sampled actual inter-send gaps over `gap_threshold_us`
    /// (any unit), when the schedule is Poisson.
    pub poisson_gaps: Option<Vec<f64>>,
    /// Sampled scheduled gaps in schedule order (a test of the schedule
    /// itself), when the schedule is Poisson.
    pub scheduled_gaps: Option<Vec<f64>>,
    /// The reference for `poisson_gaps`: the scheduled gaps at the same
    /// sampled sends, through the same threshold, when the schedule is
    /// Poisson.
    pub reference_gaps: Option<Vec<f64>>,
    /// Threshold applied to `poisson_gaps` (µs).
    pub gap_threshold_us: f64,
    /// Latency samples in send order.
    pub latency_series: Vec<f64>,
    /// Average number of requests between consecutive `latency_series`
    /// samples (1 when every request was kept).
    pub series_spacing: f64,
    /// Number of latencies in the histograms the intervals come from.
    pub latency_count: u64,
    /// p99 of send lateness, µs.
    pub lateness_p99_us: f64,
    /// Threshold for the lateness p99, µs.
    pub max_lateness_us: f64,
    /// p99 of read lag, µs (None: no stamped reads).
    pub read_lag_p99_us: Option<f64>,
    /// Threshold for the read-lag p99, µs (see [`READ_LAG_SHARE`]).
    pub max_read_lag_us: f64,
    /// p99 of latency from the scheduled send, µs.
    pub latency_p99_us: f64,
    /// Total correctness errors.
    pub errors: u64,
}

/// The arrivals verdict from the actual gaps' A² and the reference's (the
/// scheduled times of the same sends): the actual must pass the 5% test, or
/// exceed the reference by no more than [`AD_PAIRED_MARGIN`]. Without a
/// reference the actual alone decides. No statistic (too few gaps): passes.
pub fn arrivals_ok(actual: Option<f64>, reference: Option<f64>) -> bool {
    match (actual, reference) {
        (Some(a), _) if a <= AD_CRITICAL_5PCT => true,
        (Some(a), Some(r)) => a - r <= AD_PAIRED_MARGIN,
        (Some(_), None) => false,
        (None, _) => true,
    }
}

/// Runs every check; `pass` also requires zero correctness errors.
pub fn evaluate(inp: &CheckInput) -> Checks {
    let mut notes = Vec::new();
    // The server is judged on what was sent, the generator on what it was
    // asked to offer.
    let offered_rps = if inp.sent_rps > 0.0 {
        inp.sent_rps
    } else {
        inp.target_rps
    };
    let rate_error_pct = if offered_rps > 0.0 {
        (inp.achieved_rps - offered_rps) / offered_rps * 100.0
    } else {
        0.0
    };
    let kept_up = rate_error_pct.abs() <= RATE_TOLERANCE_PCT;
    let sent_err = if inp.target_rps > 0.0 {
        (inp.sent_rps - inp.target_rps) / inp.target_rps * 100.0
    } else {
        0.0
    };
    let expected_n = inp.target_rps * inp.window_s;
    let count_sd_pct = if expected_n > 0.0 {
        100.0 / expected_n.sqrt()
    } else {
        0.0
    };
    let allowed_pct = RATE_TOLERANCE_PCT.max(SCHEDULE_SIGMAS * count_sd_pct);
    let offered_ok = sent_err.abs() <= allowed_pct;
    let rate_ok = kept_up && offered_ok;
    if !offered_ok {
        notes.push(format!(
            "rate: sent {:.0} rps vs target {:.0} ({sent_err:+.1}%, beyond the {allowed_pct:.1}% a Poisson count over {:.1} s allows): the generator did not offer the target load",
            inp.sent_rps, inp.target_rps, inp.window_s
        ));
    } else if sent_err.abs() > RATE_TOLERANCE_PCT {
        notes.push(format!(
            "info: this seed's schedule offered {:.0} rps vs target {:.0} ({sent_err:+.1}%, {:.1} standard deviations of a Poisson count over {:.1} s); replies are judged against what was sent",
            inp.sent_rps,
            inp.target_rps,
            sent_err.abs() / count_sd_pct.max(1e-9),
            inp.window_s
        ));
    }
    if !kept_up {
        notes.push(format!(
            "rate: achieved {:.0} rps vs {:.0} rps sent ({rate_error_pct:+.1}%, target {:.0}): the server did not keep up",
            inp.achieved_rps, offered_rps, inp.target_rps
        ));
    }
    // The test asks whether the generator sent a Poisson process. With a
    // fixed seed the sample is fixed too, so a test at 5% would fail the
    // same one point in twenty on every run and every server, and a sample
    // just under the critical value would fail about every other run. The
    // same statistic on the scheduled times of the same sends separates the
    // two: only what the actual gaps add to the schedule's own deviation,
    // beyond the noise a faithful generator's lateness makes
    // (`AD_PAIRED_MARGIN`), is the generator's doing.
    let ad_statistic = inp.poisson_gaps.as_deref().and_then(anderson_darling_exp);
    let ad_reference = inp.reference_gaps.as_deref().and_then(anderson_darling_exp);
    let ad_ok = arrivals_ok(ad_statistic, ad_reference);
    let n_gaps = inp.poisson_gaps.as_ref().map_or(0, Vec::len);
    match (ad_statistic, ad_reference) {
        (Some(a), Some(r)) if a > AD_CRITICAL_5PCT && ad_ok => notes.push(format!(
            "info: actual inter-send gaps beyond {:.0} us gave Anderson-Darling A2 = {a:.2} > {AD_CRITICAL_5PCT} (n = {n_gaps}), and the scheduled times of the same sends {r:.2}: within {AD_PAIRED_MARGIN} of the seed's sample, not the generator's doing",
            inp.gap_threshold_us
        )),
        (Some(a), r) if !ad_ok => notes.push(format!(
            "arrivals: actual inter-send gaps beyond {:.0} us are not exponential (Anderson-Darling A2 = {a:.2} > {AD_CRITICAL_5PCT}, n = {n_gaps}{})",
            inp.gap_threshold_us,
            r.map_or(String::new(), |r| format!(
                "; the scheduled times of the same sends give {r:.2}, {:.2} less, more than the {AD_PAIRED_MARGIN} a faithful generator's lateness explains",
                a - r
            ))
        )),
        _ => {}
    }
    let ad_scheduled = inp.scheduled_gaps.as_deref().and_then(anderson_darling_exp);
    if let Some(a) = ad_scheduled.filter(|&a| a > AD_CRITICAL_5PCT) {
        // At 5% one seed's correct schedule in twenty fails; report it, but
        // the check is on what was actually sent. A run repeated with the
        // same seed repeats the sample, so the note names the seed's share.
        notes.push(format!(
            "info: scheduled gaps gave Anderson-Darling A2 = {a:.2} > {AD_CRITICAL_5PCT} (expected for 5% of seeds)"
        ));
    }
    let lag1 = lag1_spearman(&inp.latency_series);
    let n = inp.latency_series.len();
    let stride = decorrelation_stride(&inp.latency_series);
    let independence_ok = stride.is_some();
    let spacing = inp.series_spacing.max(1.0);
    // Requests between samples treated as independent. A series that was
    // already sampled only proves independence at its own spacing.
    let requests_stride = (stride.unwrap_or(n.max(1)) as f64 * spacing)
        .round()
        .max(1.0);
    let effective_n = ((inp.latency_count as f64 / requests_stride).floor() as u64).max(1);
    match stride {
        None => notes.push(format!(
            "independence: lag-1 rank correlation of latency samples is {lag1:.2} (n = {n}) and stays significant however the series is thinned; confidence intervals are optimistic"
        )),
        Some(k) if k > 1 => notes.push(format!(
            "info: latencies are correlated (lag-1 rank correlation {lag1:.2}); samples {requests_stride:.0} requests apart are independent, so confidence intervals use n = {effective_n}"
        )),
        _ => {}
    }
    let lateness_ok = inp.lateness_p99_us <= inp.max_lateness_us;
    if !lateness_ok {
        notes.push(format!(
            "lateness: p99 send lateness {:.1} us exceeds {:.1} us; the generator could not keep its schedule",
            inp.lateness_p99_us, inp.max_lateness_us
        ));
    }
    let read_lag_bound = inp.max_read_lag_us.max(READ_LAG_SHARE * inp.latency_p99_us);
    let read_lag_ok = inp.read_lag_p99_us.is_none_or(|l| l <= read_lag_bound);
    if let Some(l) = inp.read_lag_p99_us.filter(|_| !read_lag_ok) {
        notes.push(format!(
            "read lag: replies waited in the socket {l:.1} us at p99 before the generator read them, more than {:.1} us and {:.0}% of the latency p99 ({:.1} us); every latency includes that wait",
            inp.max_read_lag_us,
            READ_LAG_SHARE * 100.0,
            inp.latency_p99_us
        ));
    }
    if inp.errors > 0 {
        notes.push(format!(
            "correctness: {} missing/duplicate/out-of-order/bad replies or failed connections",
            inp.errors
        ));
    }
    let pass = rate_ok && ad_ok && independence_ok && lateness_ok && read_lag_ok && inp.errors == 0;
    Checks {
        rate_error_pct,
        rate_ok,
        ad_statistic,
        ad_threshold_us: inp.poisson_gaps.as_ref().map(|_| inp.gap_threshold_us),
        ad_scheduled,
        ad_reference,
        ad_ok,
        lag1_rank_corr: lag1,
        independence_ok,
        decorrelation_stride: requests_stride as u64,
        effective_n: effective_n.min(inp.latency_count),
        lateness_p99_us: inp.lateness_p99_us,
        lateness_ok,
        read_lag_p99_us: inp.read_lag_p99_us,
        read_lag_ok,
        pass,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Hist;
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
            window_s: 1.0,
            poisson_gaps: Some(exp_gaps(9, 1000)),
            scheduled_gaps: Some(exp_gaps(11, 1000)),
            reference_gaps: Some(exp_gaps(12, 1000)),
            gap_threshold_us: 20.0,
            latency_series: exp_gaps(10, 1000),
            series_spacing: 1.0,
            latency_count: 1000,
            lateness_p99_us: 5.0,
            max_lateness_us: 50.0,
            read_lag_p99_us: Some(8.0),
            max_read_lag_us: 50.0,
            latency_p99_us: 500.0,
            errors: 0,
        };
        let c = evaluate(&good);
        assert!(c.pass, "{:?}", c.notes);
        let c = evaluate(&CheckInput {
            achieved_rps: 800.0,
            ..good.clone()
        });
        assert!(!c.rate_ok && !c.pass && c.notes[0].contains("server did not keep up"));
        // A seed whose schedule put 429 requests into a 1-s window at 500
        // req/s (3.2 standard deviations of the Poisson count) offered less;
        // a server that answered them all kept up.
        let sparse = CheckInput {
            target_rps: 500.0,
            achieved_rps: 429.0,
            sent_rps: 429.0,
            ..good.clone()
        };
        let c = evaluate(&sparse);
        assert!(c.rate_ok && c.pass, "{:?}", c.notes);
        assert!((c.rate_error_pct).abs() < 1e-9);
        assert!(
            c.notes[0].starts_with("info: this seed's schedule offered 429"),
            "{:?}",
            c.notes
        );
        // ... and one that answered 80% of them did not.
        let c = evaluate(&CheckInput {
            achieved_rps: 343.0,
            ..sparse.clone()
        });
        assert!(
            !c.rate_ok && c.notes[1].contains("server did not keep up"),
            "{:?}",
            c.notes
        );
        // Over 10 s the same shortfall is 10 standard deviations: the
        // generator did not offer the load, whatever the server did.
        let c = evaluate(&CheckInput {
            window_s: 10.0,
            ..sparse.clone()
        });
        assert!(!c.rate_ok && !c.pass, "{:?}", c.notes);
        assert!(
            c.notes[0].contains("generator did not offer the target load"),
            "{:?}",
            c.notes
        );
        // Without a window only the 5% bound is left.
        let c = evaluate(&CheckInput {
            window_s: 0.0,
            ..sparse
        });
        assert!(!c.rate_ok, "{:?}", c.notes);
        let c = evaluate(&CheckInput {
            lateness_p99_us: 500.0,
            ..good.clone()
        });
        assert!(!c.lateness_ok && !c.pass && c.notes[0].starts_with("lateness"));
        let c = evaluate(&CheckInput {
            read_lag_p99_us: Some(900.0),
            ..good.clone()
        });
        assert!(!c.read_lag_ok && !c.pass && c.lateness_ok, "{:?}", c.notes);
        assert!(c.notes[0].starts_with("read lag"), "{:?}", c.notes);
        // A lag that is a small share of a large p99 cannot have made it.
        let c = evaluate(&CheckInput {
            read_lag_p99_us: Some(900.0),
            latency_p99_us: 10_000.0,
            ..good.clone()
        });
        assert!(c.read_lag_ok && c.pass, "{:?}", c.notes);
        let c = evaluate(&CheckInput {
            read_lag_p99_us: Some(1_100.0),
            latency_p99_us: 10_000.0,
            ..good.clone()
        });
        assert!(!c.read_lag_ok, "{:?}", c.notes);
        // No stamped reads: nothing to judge.
        let c = evaluate(&CheckInput {
            read_lag_p99_us: None,
            ..good.clone()
        });
        assert!(c.read_lag_ok && c.pass, "{:?}", c.notes);
        let c = evaluate(&CheckInput {
            poisson_gaps: Some(vec![1.0; 1000]),
            ..good.clone()
        });
        assert!(!c.ad_ok && !c.pass);
        assert!(c.notes[0].starts_with("arrivals"), "{:?}", c.notes);
        // The same deviation in the scheduled times of the same sends is the
        // seed's sample: reported, not failed.
        let c = evaluate(&CheckInput {
            poisson_gaps: Some(vec![1.0; 1000]),
            reference_gaps: Some(vec![1.0; 1000]),
            ..good.clone()
        });
        assert!(c.ad_ok && c.pass, "{:?}", c.notes);
        assert!(c.ad_reference.unwrap() > AD_CRITICAL_5PCT);
        assert!(c.notes[0].contains("the seed's sample"), "{:?}", c.notes);
        // A bad reference alone changes nothing.
        let c = evaluate(&CheckInput {
            reference_gaps: Some(vec![1.0; 1000]),
            ..good.clone()
        });
        assert!(c.ad_ok && c.pass && c.notes.is_empty(), "{:?}", c.notes);
        let c = evaluate(&CheckInput {
            errors: 2,
            ..good.clone()
        });
        assert!(!c.pass && c.notes[0].starts_with("correctness"));
        // A flawed schedule is reported, but the check is on actual gaps.
        let c = evaluate(&CheckInput {
            scheduled_gaps: Some(vec![1.0; 1000]),
            ..good.clone()
        });
        assert!(c.pass && c.ad_scheduled.unwrap() > AD_CRITICAL_5PCT);
        assert!(c.notes[0].starts_with("info: scheduled gaps"));
        // Independent latencies keep every sample.
        assert_eq!((c.decorrelation_stride, c.effective_n), (1, 1000));
    }

    #[test]
    fn stretched_short_gaps_fail_whole_but_pass_beyond_the_threshold() {
        // A generator that needs 30 µs per send turns every shorter gap of a
        // Poisson schedule (mean 250 µs) into 30 µs.
        let mut sent = exp_gaps(21, 4000);
        sent.iter_mut().for_each(|g| *g = g.max(30.0));
        assert!(anderson_darling_exp(&sent).unwrap() > AD_CRITICAL_5PCT);
        let ex = crate::worker::excess_gaps(&sent, 40.0);
        assert!(ex.len() > 3000);
        assert!(anderson_darling_exp(&ex).unwrap() <= AD_CRITICAL_5PCT);
        // A process that is not Poisson fails beyond the threshold too.
        let mut rng = SmallRng::seed_from_u64(4);
        let uni: Vec<f64> = (0..4000).map(|_| rng.gen_range(0.0..500.0)).collect();
        let ex = crate::worker::excess_gaps(&uni, 40.0);
        assert!(anderson_darling_exp(&ex).unwrap() > AD_CRITICAL_5PCT);
    }

    /// Sends of a Poisson schedule (mean 125 µs) by a generator that needs
    /// `write` µs per send and is held up now and then (2% of sends, by up to
    /// 40 µs): the actual send times, and the lateness of each send.
    fn jittered_sends(seed: u64, n: usize, write: f64) -> (Vec<f64>, Vec<f64>, Hist) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let e = Exp::new(1.0 / 125.0).unwrap();
        let (mut sched, mut prev) = (0.0f64, f64::NEG_INFINITY);
        let (mut actual, mut scheduled, mut late) = (Vec::new(), Vec::new(), Hist::new());
        for _ in 0..n {
            sched += e.sample(&mut rng);
            let held: f64 = if rng.gen::<f64>() < 0.02 {
                rng.gen_range(0.0..40.0)
            } else {
                rng.gen_range(0.0..1.0)
            };
            let at = (sched + held).max(prev + write);
            late.record(((at - sched) * 1e3) as u64);
            actual.push(at);
            scheduled.push(sched);
            prev = at;
        }
        (actual, scheduled, late)
    }

    fn gaps(times: &[f64]) -> Vec<f64> {
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn jitter_under_the_threshold_passes_and_a_ticking_generator_fails() {
        use crate::worker::{excess_gaps, gap_threshold_ns};
        // A faithful generator with send jitter fails at about the test's
        // level, 5% (fixed seeds, so the count is exact).
        let mut failed = 0;
        for seed in 0..40 {
            let (actual, _, late) = jittered_sends(seed, 2000, 15.0);
            let t = gap_threshold_ns(&late) as f64 / 1e3;
            assert!((20.0..60.0).contains(&t), "threshold {t} µs");
            let ex = excess_gaps(&gaps(&actual), t);
            assert!(ex.len() > 1000);
            failed += usize::from(anderson_darling_exp(&ex).unwrap() > AD_CRITICAL_5PCT);
        }
        assert!(failed <= 4, "{failed} of 40 failed");
        // A generator that keeps within the lateness bound but sends on a
        // 40 µs timer tick (each send at the next tick after its time) is
        // not Poisson beyond the threshold: its gaps are multiples of 40 µs.
        let (_, scheduled, _) = jittered_sends(9, 8000, 0.0);
        let ticked: Vec<f64> = scheduled.iter().map(|s| (s / 40.0).ceil() * 40.0).collect();
        let mut late = Hist::new();
        for (a, s) in ticked.iter().zip(&scheduled) {
            late.record(((a - s) * 1e3) as u64);
        }
        assert!(
            late.quantile_ci(0.99).1 <= 50_000,
            "the lateness check would pass"
        );
        let t = gap_threshold_ns(&late) as f64 / 1e3;
        let ex = excess_gaps(&gaps(&ticked), t);
        assert!(ex.len() > 4000, "threshold {t} µs left {} gaps", ex.len());
        assert!(anderson_darling_exp(&ex).unwrap() > AD_CRITICAL_5PCT);
    }

    /// A Poisson schedule of mean 312 µs (3,200 req/s) from `schedule_seed`,
    /// sent by a faithful generator (5 µs per send, 1% of sends held by up
    /// to 20 µs) whose jitter comes from `jitter_seed`: the (actual,
    /// reference) A² beyond the threshold, as the generator computes them.
    fn paired_a2(schedule_seed: u64, jitter_seed: u64, tick: Option<f64>) -> (f64, f64) {
        use crate::worker::{excess_gaps, gap_threshold_ns};
        let mut rng = SmallRng::seed_from_u64(schedule_seed);
        let mut jitter = SmallRng::seed_from_u64(jitter_seed);
        let e = Exp::new(1.0 / 312.0).unwrap();
        let (mut sched, mut prev) = (0.0f64, f64::NEG_INFINITY);
        let (mut actual, mut scheduled, mut late) = (Vec::new(), Vec::new(), Hist::new());
        for _ in 0..2000 {
            sched += e.sample(&mut rng);
            let held: f64 = if jitter.gen::<f64>() < 0.01 {
                jitter.gen_range(0.0..20.0)
            } else {
                jitter.gen_range(0.0..1.0)
            };
            let at = match tick {
                Some(t) => (sched / t).ceil() * t,
                None => (sched + held).max(prev + 5.0),
            };
            late.record(((at - sched) * 1e3) as u64);
            actual.push(at);
            scheduled.push(sched);
            prev = at;
        }
        let t = gap_threshold_ns(&late) as f64 / 1e3;
        let a2 = |times: &[f64]| anderson_darling_exp(&excess_gaps(&gaps(times), t)).unwrap();
        (a2(&actual), a2(&scheduled))
    }

    #[test]
    fn a_borderline_seed_does_not_fail_a_faithful_generator_and_a_ticking_one_still_fails() {
        // The seeds (of 400) whose own sample sits just under the critical
        // value, as the main job's load 0.2 did (A² 1.29 on 2026-11-28).
        let borderline: Vec<u64> = (0..400)
            .filter(|&s| {
                let (_, r) = paired_a2(s, 0, None);
                (1.1..=AD_CRITICAL_5PCT).contains(&r)
            })
            .collect();
        assert!(borderline.len() >= 4, "{borderline:?}");
        // Each such schedule sent 20 times with fresh jitter: the unpaired
        // rule (fail above the critical value unless the reference is above
        // it too) fails a faithful generator often; the paired rule almost
        // never.
        let (mut unpaired, mut paired, mut runs) = (0, 0, 0);
        for &s in &borderline {
            for j in 1..=20 {
                let (a, r) = paired_a2(s, j, None);
                runs += 1;
                unpaired += usize::from(a > AD_CRITICAL_5PCT && r <= AD_CRITICAL_5PCT);
                paired += usize::from(!arrivals_ok(Some(a), Some(r)));
            }
        }
        assert!(unpaired * 10 >= runs, "unpaired rule: {unpaired} of {runs}");
        assert!(paired * 100 <= runs, "paired rule: {paired} of {runs}");
        // Over all 400 schedules the paired rule fails a faithful generator
        // no more often than the 5% test would.
        let failed = (0..400)
            .filter(|&s| {
                let (a, r) = paired_a2(s, s + 1000, None);
                !arrivals_ok(Some(a), Some(r))
            })
            .count();
        assert!(failed <= 20, "{failed} of 400");
        // A generator on a 20 µs timer tick fails on every schedule, the
        // borderline ones included.
        for s in borderline.iter().copied().chain(0..20) {
            let (a, r) = paired_a2(s, 0, Some(20.0));
            assert!(!arrivals_ok(Some(a), Some(r)), "seed {s}: {a:.2} vs {r:.2}");
        }
    }

    #[test]
    fn the_arrivals_verdict_charges_the_generator_only_with_what_it_adds() {
        // Under the critical value: passes whatever the reference.
        assert!(arrivals_ok(Some(1.2), Some(0.3)));
        assert!(arrivals_ok(Some(1.2), None));
        // Over it: the seed's share is excused, the generator's is not.
        assert!(arrivals_ok(Some(1.42), Some(1.29)));
        assert!(!arrivals_ok(Some(1.95), Some(1.29)));
        // A bad seed no longer hides a generator that adds to it.
        assert!(arrivals_ok(Some(1.9), Some(1.7)));
        assert!(!arrivals_ok(Some(4.0), Some(1.7)));
        // No reference: the actual alone; too few gaps: nothing to judge.
        assert!(!arrivals_ok(Some(1.5), None));
        assert!(arrivals_ok(None, Some(3.0)));
    }

    /// A recorded run (`SKQ_LOAD_GAPS_DIR`): its lateness quantile `q` (ns)
    /// and its sampled (actual, reference) gaps.
    fn recorded(text: &str, q: &str) -> (f64, Vec<f64>, Vec<f64>) {
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let at = head.iter().position(|w| *w == q).unwrap();
        let quantile: f64 = head[at + 1].parse().unwrap();
        let (mut actual, mut reference) = (Vec::new(), Vec::new());
        for l in lines {
            let mut w = l.split_whitespace().map(|v| v.parse::<f64>().unwrap());
            actual.push(w.next().unwrap());
            reference.push(w.next().unwrap());
        }
        (quantile, actual, reference)
    }

    #[test]
    fn recorded_runs_against_memcached_pass_beyond_the_lateness_p999() {
        use crate::worker::{excess_gaps, MIN_GAP_THRESHOLD_NS};
        // Two runs of `skq load` against memcached -t 1 at 8,000 req/s (24
        // and 96 connections, 2-CPU VM, 2026-11-27), lateness p99 20 µs: the
        // gaps scheduled shorter than one send come out about one send long,
        // 20–25 µs, and pile up just above a threshold at the lateness p99.
        for text in [
            include_str!("../tests/data/gaps-memcached-8000-24.txt"),
            include_str!("../tests/data/gaps-memcached-8000-96.txt"),
        ] {
            let a2 = |q| {
                let (t, actual, reference) = recorded(text, q);
                let t = t.max(MIN_GAP_THRESHOLD_NS as f64);
                (
                    anderson_darling_exp(&excess_gaps(&actual, t)).unwrap(),
                    anderson_darling_exp(&excess_gaps(&reference, t)).unwrap(),
                )
            };
            let (old, old_ref) = a2("p99");
            assert!(old > AD_CRITICAL_5PCT && old_ref <= AD_CRITICAL_5PCT);
            // The pile-up is the generator's, and the paired rule says so.
            assert!(!arrivals_ok(Some(old), Some(old_ref)), "{old} vs {old_ref}");
            let (new, new_ref) = a2("p99.9");
            assert!(new <= AD_CRITICAL_5PCT && new_ref <= AD_CRITICAL_5PCT);
        }
    }

    /// Latencies that come in runs of 8 equal values.
    fn runs_of_8(seed: u64, n: usize) -> Vec<f64> {
        exp_gaps(seed, n / 8)
            .into_iter()
            .flat_map(|v| std::iter::repeat_n(v, 8))
            .collect()
    }

    #[test]
    fn correlated_latencies_are_thinned_and_widen_the_intervals() {
        let series = runs_of_8(3, 16_000);
        assert!(lag1_spearman(&series) > 0.8);
        // Every 8th value is a fresh draw; strides 2 and 4 stay correlated.
        assert_eq!(decorrelation_stride(&series), Some(8));
        let inp = CheckInput {
            target_rps: 1000.0,
            achieved_rps: 1000.0,
            sent_rps: 1000.0,
            latency_series: series,
            series_spacing: 1.0,
            latency_count: 16_000,
            lateness_p99_us: 5.0,
            max_lateness_us: 50.0,
            read_lag_p99_us: Some(8.0),
            max_read_lag_us: 50.0,
            latency_p99_us: 500.0,
            ..CheckInput::default()
        };
        let c = evaluate(&inp);
        assert!(c.independence_ok && c.pass, "{:?}", c.notes);
        assert_eq!((c.decorrelation_stride, c.effective_n), (8, 2000));
        assert!(c.notes[0].contains("n = 2000"), "{:?}", c.notes);
        // A sampled series counts its spacing: every 8th sample of a series
        // that kept every 10th request is every 80th request.
        let c = evaluate(&CheckInput {
            series_spacing: 10.0,
            latency_count: 160_000,
            ..inp.clone()
        });
        assert_eq!((c.decorrelation_stride, c.effective_n), (80, 2000));
        // A trend never decorrelates: the check fails.
        let trend: Vec<f64> = (0..1000).map(f64::from).collect();
        let c = evaluate(&CheckInput {
            latency_series: trend,
            latency_count: 1000,
            ..inp
        });
        assert!(!c.independence_ok && !c.pass);
        assert!(c.notes[0].starts_with("independence"));
    }
}
