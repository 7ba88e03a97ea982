//! Latency distributions for the CDF plot, from the generator's
//! HdrHistogram interval log (or, when there is none, from the percentiles
//! in its JSON result).
//!
//! The interval log does not say its unit. The generator's JSON does
//! (microseconds), so the unit is inferred by comparing the merged
//! histogram's mean with the JSON's mean latency and taking the nearest
//! power of 1000 (ns, µs or ms). The CDF is always returned in µs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use base64::Engine as _;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use skq_report::result::PointResult;

/// Merges the load connections' intervals of an interval log (the
/// untagged ones; `skq load` tags the probe, high-priority and best-effort
/// connections' whole-window histograms) into one histogram.
pub fn read_log(path: &Path) -> Result<Histogram<u64>> {
    read_class(path, None)?.ok_or_else(|| anyhow!("{}: no intervals in the log", path.display()))
}

/// Merges the intervals of an interval log that carry `tag` (`None`: the
/// untagged ones) into one histogram; `None` when the log has none.
pub fn read_class(path: &Path, tag: Option<&str>) -> Result<Option<Histogram<u64>>> {
    Ok(read_classes(path)?.remove(&tag.map(String::from)))
}

/// Every class of an interval log in one pass: the intervals merged per tag
/// (`None`: the untagged ones).
pub fn read_classes(path: &Path) -> Result<BTreeMap<Option<String>, Histogram<u64>>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut merged: BTreeMap<Option<String>, Histogram<u64>> = BTreeMap::new();
    let mut de = Deserializer::new();
    for entry in IntervalLogIterator::new(&bytes) {
        let entry =
            entry.map_err(|e| anyhow!("{}: malformed interval log: {e:?}", path.display()))?;
        let LogEntry::Interval(ilh) = entry else {
            continue;
        };
        let raw = base64::engine::general_purpose::STANDARD
            .decode(ilh.encoded_histogram())
            .with_context(|| format!("{}: bad base64 histogram", path.display()))?;
        let h: Histogram<u64> = de
            .deserialize(&mut &raw[..])
            .map_err(|e| anyhow!("{}: bad histogram encoding: {e:?}", path.display()))?;
        let tag = ilh.tag().map(|t| t.as_str().to_string());
        let m = merged.entry(tag).or_insert_with(|| {
            // Intervals may cover different ranges: let the sum grow.
            let mut m = Histogram::new_from(&h);
            m.auto(true);
            m
        });
        m.add(&h)
            .map_err(|e| anyhow!("{}: merging intervals: {e:?}", path.display()))?;
    }
    Ok(merged)
}

/// Factor that turns the histogram's values into µs, judged against the
/// JSON result's mean latency (µs).
pub fn unit_to_us(h: &Histogram<u64>, r: &PointResult) -> f64 {
    let (hm, jm) = (h.mean(), r.latency.mean);
    if !(hm > 0.0 && jm > 0.0) {
        return 1.0;
    }
    // hist = json × 1000^k → k = round(log1000(hm / jm)).
    let k = ((hm / jm).log10() / 3.0).round().clamp(-1.0, 2.0);
    10f64.powf(-3.0 * k)
}

/// `(latency µs, cumulative fraction)` points of a histogram, one per
/// distinct recorded value range, thinned to at most `max_points`.
pub fn cdf_points(h: &Histogram<u64>, to_us: f64, max_points: usize) -> Vec<(f64, f64)> {
    let total = h.len();
    if total == 0 {
        return Vec::new();
    }
    let mut pts = Vec::new();
    for v in h.iter_recorded() {
        let frac = v.quantile_iterated_to();
        pts.push((
            h.highest_equivalent(v.value_iterated_to()) as f64 * to_us,
            frac,
        ));
    }
    thin(pts, max_points)
}

/// A coarse CDF from a result's percentiles (p50, p90, p99, p99.9, max):
/// what the report can show when the interval log is missing.
pub fn cdf_from_percentiles(r: &PointResult) -> Vec<(f64, f64)> {
    let l = &r.latency;
    let mut pts = vec![
        (0.0, 0.0),
        (l.p50.value, 0.5),
        (l.p90.value, 0.9),
        (l.p99.value, 0.99),
        (l.p999.value, 0.999),
    ];
    if l.max > 0.0 {
        pts.push((l.max, 1.0));
    }
    pts.retain(|p| p.0.is_finite());
    pts
}

fn thin(pts: Vec<(f64, f64)>, max_points: usize) -> Vec<(f64, f64)> {
    if pts.len() <= max_points || max_points < 2 {
        return pts;
    }
    let step = pts.len() as f64 / (max_points - 1) as f64;
    let mut out: Vec<_> = (0..max_points - 1)
        .map(|i| pts[(i as f64 * step) as usize])
        .collect();
    out.push(*pts.last().expect("non-empty"));
    out
}

/// Writes an interval log of `(tag, histogram)` intervals, 1 s each from
/// time 0, in the format `skq load --hdr-log` writes and [`read_classes`]
/// reads (fixtures for this crate's tests and its integration tests).
pub fn write_interval_log(path: &Path, hists: &[(Option<&str>, &Histogram<u64>)]) -> Result<()> {
    use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
    use hdrhistogram::serialization::V2Serializer;
    use std::time::{Duration, SystemTime};
    let mut buf = Vec::new();
    let mut ser = V2Serializer::new();
    {
        let mut w = IntervalLogWriterBuilder::new()
            .with_base_time(SystemTime::UNIX_EPOCH)
            .begin_log_with(&mut buf, &mut ser)
            .context("starting an interval log")?;
        for (i, (tag, h)) in hists.iter().enumerate() {
            w.write_histogram(
                h,
                Duration::from_secs(i as u64),
                Duration::from_secs(1),
                tag.and_then(Tag::new),
            )
            .with_context(|| format!("writing interval {i} of an interval log"))?;
        }
    }
    std::fs::write(path, buf).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_log(path: &Path, hists: &[Histogram<u64>]) {
        let tagged: Vec<_> = hists.iter().map(|h| (None, h)).collect();
        write_interval_log(path, &tagged).unwrap();
    }

    #[test]
    fn tagged_intervals_are_read_apart_from_the_load_s() {
        let dir = std::env::temp_dir().join(format!("skq-bench-tags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.hlog");
        let hist = |n: u64, v: u64| {
            let mut h = Histogram::<u64>::new(3).unwrap();
            h.record_n(v, n).unwrap();
            h
        };
        let (a, b, p, hi) = (hist(10, 1000), hist(20, 2000), hist(3, 5000), hist(4, 7000));
        write_interval_log(
            &path,
            &[
                (None, &a),
                (None, &b),
                (Some("probe"), &p),
                (Some("high"), &hi),
            ],
        )
        .unwrap();
        assert_eq!(read_log(&path).unwrap().len(), 30);
        let probe = read_class(&path, Some("probe")).unwrap().unwrap();
        assert_eq!((probe.len(), probe.max()), (3, p.max()));
        assert_eq!(read_class(&path, Some("high")).unwrap().unwrap().len(), 4);
        assert!(read_class(&path, Some("batch")).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn merges_intervals_and_infers_nanoseconds() {
        let dir = std::env::temp_dir().join(format!("skq-bench-hdr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.hlog");
        let mut a = Histogram::<u64>::new(3).unwrap();
        let mut b = Histogram::<u64>::new(3).unwrap();
        for v in 1..=500u64 {
            a.record(v * 1000).unwrap(); // ns: 1..500 µs
            b.record((500 + v) * 1000).unwrap(); // ns: 501..1000 µs
        }
        write_log(&path, &[a, b]);
        let h = read_log(&path).unwrap();
        assert_eq!(h.len(), 1000);
        let mut r = PointResult::default();
        r.latency.mean = 500.5;
        let f = unit_to_us(&h, &r);
        assert_eq!(f, 1e-3);
        let cdf = cdf_points(&h, f, 50);
        assert!(cdf.len() <= 50);
        assert!(cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let last = cdf.last().unwrap();
        assert!(
            (last.1 - 1.0).abs() < 1e-9 && (last.0 - 1000.0).abs() < 2.0,
            "{last:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_or_empty_logs_are_errors() {
        assert!(read_log(Path::new("/nonexistent/x.hlog")).is_err());
        let p = std::env::temp_dir().join(format!("skq-bench-empty-{}.hlog", std::process::id()));
        std::fs::write(&p, "#only a comment\n").unwrap();
        assert!(read_log(&p)
            .unwrap_err()
            .to_string()
            .contains("no intervals"));
        std::fs::remove_file(&p).unwrap();
    }
}
