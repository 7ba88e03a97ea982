//! Maximum load at SLO (ZygOS §3): the highest throughput whose p99 stays at
//! or below the SLO (default 10 × mean service time).
//!
//! Points are (offered or achieved load, p99). The curve is walked in order of
//! load; the answer is the load where it first crosses the SLO, linearly
//! interpolated between the last point under and the first point over. If the
//! first point is already over, there is no load that meets the SLO (`None`).
//! If no point crosses, the highest measured load is returned and flagged as a
//! lower bound.

/// The answer of [`max_load_at_slo`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaxLoad {
    /// Load at which p99 reaches the SLO.
    pub load: f64,
    /// True when no measured point exceeded the SLO, so the true maximum is at
    /// least `load` (the sweep stopped too early to see the knee).
    pub lower_bound: bool,
}

/// Computes maximum load at SLO from `(load, p99)` points (any order).
pub fn max_load_at_slo(points: &[(f64, f64)], slo: f64) -> Option<MaxLoad> {
    let mut pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(l, p)| l.is_finite() && !p.is_nan())
        .collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = *pts.first()?;
    if first.1 > slo {
        return None;
    }
    for w in pts.windows(2) {
        let ((l0, p0), (l1, p1)) = (w[0], w[1]);
        if p1 > slo {
            let load = if p1 > p0 {
                l0 + (slo - p0) / (p1 - p0) * (l1 - l0)
            } else {
                l0
            };
            return Some(MaxLoad {
                load,
                lower_bound: false,
            });
        }
    }
    let last = pts.last().expect("non-empty");
    Some(MaxLoad {
        load: last.0,
        lower_bound: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_the_crossing() {
        let pts = [(0.2, 1.0), (0.4, 2.0), (0.6, 6.0), (0.8, 30.0)];
        let m = max_load_at_slo(&pts, 10.0).unwrap();
        assert!((m.load - (0.6 + 4.0 / 24.0 * 0.2)).abs() < 1e-12);
        assert!(!m.lower_bound);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(max_load_at_slo(&[], 1.0), None);
        assert_eq!(max_load_at_slo(&[(0.1, 5.0)], 1.0), None);
        let m = max_load_at_slo(&[(0.5, 1.0), (0.1, 0.5)], 2.0).unwrap();
        assert_eq!(
            m,
            MaxLoad {
                load: 0.5,
                lower_bound: true
            }
        );
    }
}
