//! Tail episodes: a point whose p99 comes from a few of its one-second
//! intervals rather than from the load as a whole.
//!
//! On the 2-CPU VMs of 2026-12-05 some points passed every self-check and
//! were not disturbed, yet read a p99 ten times their neighbours': the
//! main job's epoll-shared at bimodal-1 0.6 read 36.2 ms where every other
//! run read 3.3 ms, its one-second intervals 45.5 and 65.2 ms for the first
//! two seconds and 3.3–3.8 ms for the other six. A stall of the server's
//! CPU by the host, or a burst of arrivals, held the whole tail. Such a
//! point can decide a curve's max load (that night's ratio of 1.83 against
//! 1.00 in an earlier run), so the summary names it.
//!
//! The rule, per point with at least [`MIN_INTERVALS`] intervals that had
//! replies: set aside the worst intervals by p99, one at a time and at most
//! [`MAX_SHARE`] of them; if the point's p99 is then more than [`FACTOR`]
//! times the p99 of every interval left, the set-aside intervals are an
//! episode. An interval's p99 bounds the share of its latencies above it,
//! so the intervals left, merged, have a p99 no higher than their largest;
//! the point's p99 is over twice what the rest of the run reached.
//!
//! A saturated point spreads its tail over every interval and is not an
//! episode; neither is a run too short to have intervals to compare (the
//! cache's 2-s points). The finding is information: it changes no verdict
//! and is not a `--strict` problem.

use skq_report::result::PointResult;

/// At most this share of a point's intervals may be set aside.
pub const MAX_SHARE: f64 = 0.25;
/// The point's p99 over the largest p99 of the intervals left.
pub const FACTOR: f64 = 2.0;
/// Fewest intervals with replies for the rule to apply.
pub const MIN_INTERVALS: usize = 4;

/// The intervals that held a point's tail.
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    /// Starts of the set-aside intervals, seconds into the measured window,
    /// in time order.
    pub starts_s: Vec<f64>,
    /// Intervals with replies.
    pub intervals: usize,
    /// The point's p99, µs.
    pub p99_us: f64,
    /// The largest p99 among the intervals left, µs.
    pub others_p99_us: f64,
}

impl Episode {
    /// One line: which intervals, and the p99 with and without them.
    pub fn describe(&self) -> String {
        let at: Vec<String> = self
            .starts_s
            .iter()
            .map(|s| format!("{s:.0}–{:.0} s", s + 1.0))
            .collect();
        format!(
            "p99 {:.0} µs from {} of {} one-second intervals ({}); every other interval's p99 ≤ {:.0} µs",
            self.p99_us,
            self.starts_s.len(),
            self.intervals,
            at.join(", "),
            self.others_p99_us
        )
    }
}

/// The episode that holds `r`'s tail, if one does (module documentation).
pub fn tail_episode(r: &PointResult) -> Option<Episode> {
    let p99 = r.latency.p99.value;
    if !p99.is_finite() {
        return None;
    }
    let mut ivs: Vec<(f64, f64)> = r
        .intervals
        .iter()
        .filter_map(|i| i.p99_us.filter(|v| v.is_finite()).map(|v| (i.start_s, v)))
        .collect();
    let n = ivs.len();
    if n < MIN_INTERVALS {
        return None;
    }
    ivs.sort_by(|a, b| b.1.total_cmp(&a.1));
    let most = ((n as f64) * MAX_SHARE).floor() as usize;
    (1..=most).find_map(|m| {
        let others = ivs[m].1;
        (p99 > FACTOR * others).then(|| {
            let mut starts_s: Vec<f64> = ivs[..m].iter().map(|i| i.0).collect();
            starts_s.sort_by(f64::total_cmp);
            Episode {
                starts_s,
                intervals: n,
                p99_us: p99,
                others_p99_us: others,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use skq_report::result::IntervalPoint;

    fn point(p99: f64, ivs: &[f64]) -> PointResult {
        let mut r = PointResult::default();
        r.latency.p99.value = p99;
        r.intervals = ivs
            .iter()
            .enumerate()
            .map(|(k, &v)| IntervalPoint {
                start_s: k as f64,
                offered_rps: 3200.0,
                achieved_rps: 3200.0,
                p50_us: Some(v / 8.0),
                p99_us: Some(v),
            })
            .collect();
        r
    }

    #[test]
    fn a_tail_held_by_two_of_eight_intervals_is_an_episode() {
        // main2's epoll-shared at bimodal-1 0.6 (quiet-2026-12-05e).
        let r = point(
            36225.0,
            &[
                45466.0, 65225.0, 3323.0, 3315.0, 3259.0, 3362.0, 3755.0, 3337.0,
            ],
        );
        let e = tail_episode(&r).expect("an episode");
        assert_eq!(e.starts_s, vec![0.0, 1.0]);
        assert_eq!((e.intervals, e.others_p99_us), (8, 3755.0));
        let d = e.describe();
        assert!(d.contains("2 of 8") && d.contains("0–1 s, 1–2 s"), "{d}");
    }

    #[test]
    fn one_interval_is_set_aside_before_two() {
        // main3's hybrid at exponential 0.75: one bad second.
        let r = point(
            10646.0,
            &[
                3233.0, 2999.0, 3370.0, 3517.0, 3065.0, 3173.0, 15135.0, 4103.0,
            ],
        );
        let e = tail_episode(&r).expect("an episode");
        assert_eq!((e.starts_s.clone(), e.others_p99_us), (vec![6.0], 4103.0));
    }

    #[test]
    fn a_tail_spread_over_the_run_is_not_an_episode() {
        // main2's tokio at bimodal-1 0.85: saturated, every interval long.
        let r = point(
            189989.0,
            &[
                245694.0, 296616.0, 183828.0, 59228.0, 22274.0, 47956.0, 21651.0, 40911.0,
            ],
        );
        assert_eq!(tail_episode(&r), None);
        // A steady point.
        let r = point(3000.0, &[2900.0, 3100.0, 3000.0, 2950.0, 3050.0, 2980.0]);
        assert_eq!(tail_episode(&r), None);
    }

    #[test]
    fn no_more_than_a_quarter_of_the_intervals_is_set_aside() {
        // Three bad seconds of eight: more than a quarter, so the tail is
        // the run's, not an episode.
        let r = point(
            30000.0,
            &[
                40000.0, 41000.0, 39000.0, 3000.0, 3100.0, 3200.0, 3000.0, 3100.0,
            ],
        );
        assert_eq!(tail_episode(&r), None);
        // The same two bad seconds of eight are an episode.
        let r = point(
            30000.0,
            &[
                40000.0, 41000.0, 3300.0, 3000.0, 3100.0, 3200.0, 3000.0, 3100.0,
            ],
        );
        assert_eq!(tail_episode(&r).map(|e| e.starts_s), Some(vec![0.0, 1.0]));
    }

    #[test]
    fn short_points_and_missing_figures_are_not_judged() {
        // Two-second points (the cache's sweeps) have nothing to compare.
        assert_eq!(tail_episode(&point(30000.0, &[60000.0, 3000.0])), None);
        // Three intervals with replies are too few, whatever the rest.
        let mut r = point(30000.0, &[60000.0, 3000.0, 3000.0, 3000.0]);
        r.intervals[3].p99_us = None;
        assert_eq!(tail_episode(&r), None);
        // A point without a p99 (no replies).
        let r = point(f64::NAN, &[60000.0, 3000.0, 3000.0, 3000.0, 3000.0]);
        assert_eq!(tail_episode(&r), None);
    }
}
