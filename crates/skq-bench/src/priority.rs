//! The priority experiments' figures for one curve (SKQ §6.8, QStack's
//! co-location): the probe client's p99 at the lowest load and at the
//! peak, the regular clients' p99 at both, the peak throughput, and the
//! best-effort clients' throughput. Summaries carry them as
//! [`PrioritySummary`]; every summary table shows them in its
//! "high-pri / probe p99 µs low→peak" column.
//!
//! "Low" is the curve's lowest offered load; "peak" is the highest offered
//! load whose regular p99 stayed within the SLO (the top of the usable
//! curve: past it the queues grow without bound and every latency is the
//! length of the run); the lowest point when none did.

use serde::{Deserialize, Serialize};
use skq_report::result::{Latency, PointResult};

use crate::config::Curve;

/// Priority figures of one curve.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PrioritySummary {
    /// `high` (the probe was the high-priority client), `regular`, or
    /// empty when the curve had no probe.
    pub probe_class: String,
    /// Probe p99 at the lowest load (µs).
    pub probe_p99_low_us: Option<f64>,
    /// Probe p99 at the peak (µs).
    pub probe_p99_peak_us: Option<f64>,
    /// Regular clients' p99 at the lowest load (µs).
    pub regular_p99_low_us: Option<f64>,
    /// Regular clients' p99 at the peak (µs).
    pub regular_p99_peak_us: Option<f64>,
    /// Offered load fraction of the peak point.
    pub peak_load: Option<f64>,
    /// Achieved throughput of the regular clients at the peak (req/s).
    pub peak_rps: Option<f64>,
    /// Best-effort throughput at the lowest load and at the peak (req/s).
    pub batch_rps_low: Option<f64>,
    /// See `batch_rps_low`.
    pub batch_rps_peak: Option<f64>,
    /// Best-effort p99 at the peak (µs).
    pub batch_p99_peak_us: Option<f64>,
}

/// The lowest-rate point of `points` and the peak: the highest-rate point
/// whose regular p99 is within `slo_us` (any, without an SLO), the lowest
/// when none is. `None` for no points. [`PrioritySummary::of`] and
/// `skq pool` (`crate::pool`) both judge a curve by it.
pub fn low_and_peak<T>(
    points: &[T],
    rate: impl Fn(&T) -> f64,
    regular_p99: impl Fn(&T) -> f64,
    slo_us: Option<f64>,
) -> Option<(&T, &T)> {
    let low = points.iter().min_by(|a, b| rate(a).total_cmp(&rate(b)))?;
    let within = |x: &T| {
        let p99 = regular_p99(x);
        slo_us.is_none_or(|s| p99.is_finite() && p99 <= s)
    };
    let peak = points
        .iter()
        .filter(|p| within(p))
        .max_by(|a, b| rate(a).total_cmp(&rate(b)))
        .unwrap_or(low);
    Some((low, peak))
}

impl PrioritySummary {
    /// The figures of `curve` from its measured points `(load, result)`;
    /// None when the curve ran no probe and no best-effort clients.
    pub fn of(
        curve: &Curve,
        points: &[(f64, &PointResult)],
        slo_us: Option<f64>,
    ) -> Option<PrioritySummary> {
        let has_probe = curve.prio.probe_rps > 0.0;
        if (!has_probe && curve.prio.batch_rps <= 0.0) || points.is_empty() {
            return None;
        }
        let (low, peak) = low_and_peak(
            points,
            |p| p.1.target_rps,
            |p| p.1.latency.p99.value,
            slo_us,
        )?;
        let probe = |x: &PointResult| -> Option<f64> {
            let l = if curve.prio.probe_high {
                x.high_priority_latency.as_ref()
            } else {
                x.probe_latency.as_ref()
            };
            l.filter(|l| l.count > 0).map(|l| l.p99.value)
        };
        let batch_rps = |x: &PointResult| -> Option<f64> {
            let l: &Latency = x.batch_latency.as_ref()?;
            (x.meta.duration_s > 0.0).then(|| l.count as f64 / x.meta.duration_s)
        };
        Some(PrioritySummary {
            probe_class: match (has_probe, curve.prio.probe_high) {
                (false, _) => String::new(),
                (true, true) => "high".into(),
                (true, false) => "regular".into(),
            },
            probe_p99_low_us: probe(low.1),
            probe_p99_peak_us: probe(peak.1),
            regular_p99_low_us: Some(low.1.latency.p99.value),
            regular_p99_peak_us: Some(peak.1.latency.p99.value),
            peak_load: Some(peak.0),
            peak_rps: Some(peak.1.achieved_rps),
            batch_rps_low: batch_rps(low.1),
            batch_rps_peak: batch_rps(peak.1),
            batch_p99_peak_us: peak
                .1
                .batch_latency
                .as_ref()
                .filter(|l| l.count > 0)
                .map(|l| l.p99.value),
        })
    }

    /// The summary table's cell: `hi 410→430 (1.05×)` for the probe,
    /// `· BE 95/s` for best-effort throughput at the peak.
    pub fn cell(p: Option<&PrioritySummary>) -> String {
        let Some(p) = p else {
            return "-".into();
        };
        let mut parts = Vec::new();
        if let (Some(lo), Some(hi)) = (p.probe_p99_low_us, p.probe_p99_peak_us) {
            let tag = if p.probe_class == "high" { "hi" } else { "reg" };
            parts.push(format!("{tag} {lo:.0}→{hi:.0} ({:.2}×)", hi / lo.max(1e-9)));
        }
        if let Some(b) = p.batch_rps_peak {
            parts.push(format!("BE {b:.0}/s"));
        }
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" · ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigEntry;

    fn point(target: f64, achieved: f64, regular: f64, probe: f64, batch: u64) -> PointResult {
        let mut x = PointResult {
            target_rps: target,
            achieved_rps: achieved,
            ..PointResult::default()
        };
        x.meta.duration_s = 2.0;
        x.latency.p99.value = regular;
        let mut l = Latency {
            count: 100,
            ..Latency::default()
        };
        l.p99.value = probe;
        x.high_priority_latency = Some(l.clone());
        x.probe_latency = Some(l);
        x.batch_latency = Some(Latency {
            count: batch,
            ..Latency::default()
        });
        x
    }

    #[test]
    fn low_is_the_lowest_offered_load_and_peak_the_highest_throughput() {
        let e = ConfigEntry {
            mode: Some("hybrid".into()),
            probe_rps: Some(50.0),
            probe_class: Some("high".into()),
            batch_rps: Some(10.0),
            ..ConfigEntry::default()
        };
        let curve = Curve::from_entry(&e, 2).unwrap();
        let pts = [
            point(3000.0, 2990.0, 900.0, 800.0, 20),
            point(1000.0, 1000.0, 500.0, 400.0, 20),
            point(5000.0, 4000.0, 9000.0, 1000.0, 16),
        ];
        let refs: Vec<(f64, &PointResult)> =
            pts.iter().map(|x| (x.target_rps / 5000.0, x)).collect();
        // Without an SLO the peak is the highest load.
        let p = PrioritySummary::of(&curve, &refs, None).unwrap();
        assert_eq!(p.probe_class, "high");
        assert_eq!(
            (p.probe_p99_low_us, p.probe_p99_peak_us),
            (Some(400.0), Some(1000.0))
        );
        assert_eq!(p.regular_p99_peak_us, Some(9000.0));
        assert_eq!(p.peak_rps, Some(4000.0));
        assert_eq!((p.batch_rps_low, p.batch_rps_peak), (Some(10.0), Some(8.0)));
        assert_eq!(
            PrioritySummary::cell(Some(&p)),
            "hi 400→1000 (2.50×) · BE 8/s"
        );
        assert_eq!(PrioritySummary::cell(None), "-");
        // With one, the highest load within it.
        let p = PrioritySummary::of(&curve, &refs, Some(1000.0)).unwrap();
        assert_eq!(p.peak_load, Some(0.6));
        assert_eq!(p.probe_p99_peak_us, Some(800.0));
        // No probe, no best-effort traffic: no figures.
        let plain = Curve::from_entry(&ConfigEntry::default(), 2).unwrap();
        assert!(PrioritySummary::of(&plain, &refs, None).is_none());
        // A bad probe class names the configuration and key.
        let bad = ConfigEntry {
            probe_class: Some("urgent".into()),
            ..ConfigEntry::default()
        };
        let err = Curve::from_entry(&bad, 2).unwrap_err().to_string();
        assert!(err.contains("`probe_class`: `urgent` is unknown"), "{err}");
    }
}
