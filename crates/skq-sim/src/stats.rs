//! Latency bookkeeping: every model records sojourn times here, and the
//! summary is the same [`skq_report::result::Latency`] the load generator fills.

use skq_report::result::{Estimate, Latency};

/// Collects the sojourn time (completion − arrival) of every request past the
/// warm-up. Storage is allocated once, up front.
#[derive(Clone, Debug)]
pub struct Recorder {
    warmup: u64,
    high_conns: u32,
    samples: Vec<u64>,
    high_samples: Vec<u64>,
    batch_from: u32,
    batch_samples: Vec<u64>,
    service_sum: u128,
    completed: u64,
    first_arrival: u64,
    last_arrival: u64,
    last_done: u64,
    last_measured_done: u64,
}

impl Recorder {
    /// A recorder for `total` requests of which the first `warmup` are ignored.
    pub fn new(total: usize, warmup: usize) -> Recorder {
        Recorder::with_high(total, warmup, 0)
    }

    /// A recorder that keeps the requests of connections `0..high_conns`
    /// (the high-priority client) apart from the others.
    pub fn with_high(total: usize, warmup: usize, high_conns: usize) -> Recorder {
        Recorder {
            warmup: warmup as u64,
            high_conns: high_conns.min(u32::MAX as usize) as u32,
            samples: Vec::with_capacity(total.saturating_sub(warmup)),
            high_samples: Vec::new(),
            batch_from: u32::MAX,
            batch_samples: Vec::new(),
            service_sum: 0,
            completed: 0,
            first_arrival: u64::MAX,
            last_arrival: 0,
            last_done: 0,
            last_measured_done: 0,
        }
    }

    /// Keeps the requests of connections `batch_from..` (the best-effort
    /// client) apart as well.
    pub fn with_batch_from(mut self, batch_from: usize) -> Recorder {
        self.batch_from = batch_from.min(u32::MAX as usize) as u32;
        self
    }

    /// Records request `idx` (arrival order) that arrived at `arrival`, needed
    /// `service` ns of work and completed at `done`.
    #[inline]
    pub fn record(&mut self, idx: u64, arrival: u64, service: u64, done: u64) {
        self.record_in(Kind::Regular, idx, arrival, service, done);
    }

    /// Records a request of connection `conn` (see [`Recorder::record`]);
    /// those of high-priority connections go to their own statistics.
    #[inline]
    pub fn record_on(&mut self, conn: u32, idx: u64, arrival: u64, service: u64, done: u64) {
        let kind = if conn < self.high_conns {
            Kind::High
        } else if conn >= self.batch_from {
            Kind::Batch
        } else {
            Kind::Regular
        };
        self.record_in(kind, idx, arrival, service, done);
    }

    #[inline]
    fn record_in(&mut self, kind: Kind, idx: u64, arrival: u64, service: u64, done: u64) {
        self.completed += 1;
        self.last_done = self.last_done.max(done);
        if idx < self.warmup {
            return;
        }
        match kind {
            Kind::High => self.high_samples.push(done - arrival),
            Kind::Batch => self.batch_samples.push(done - arrival),
            Kind::Regular => self.samples.push(done - arrival),
        }
        self.last_measured_done = self.last_measured_done.max(done);
        self.service_sum += service as u128;
        self.first_arrival = self.first_arrival.min(arrival);
        self.last_arrival = self.last_arrival.max(arrival);
    }

    /// Requests completed so far, warm-up included.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Latest completion time seen.
    pub fn last_done(&self) -> u64 {
        self.last_done
    }

    /// Summarises what was recorded.
    pub fn finish(mut self) -> Summary {
        let n = self.samples.len() + self.high_samples.len() + self.batch_samples.len();
        let span_ns = self.last_arrival.saturating_sub(self.first_arrival);
        let busy_ns = self.last_measured_done.saturating_sub(self.first_arrival);
        let measured_service_us = (n > 0).then(|| self.service_sum as f64 / n as f64 / 1000.0);
        let high = (self.high_conns > 0).then(|| summarize(&mut self.high_samples));
        let batch = (self.batch_from < u32::MAX).then(|| summarize(&mut self.batch_samples));
        Summary {
            latency: summarize(&mut self.samples),
            high,
            batch,
            measured: n as u64,
            completed: self.completed,
            span_s: span_ns as f64 / 1e9,
            served_span_s: busy_ns as f64 / 1e9,
            measured_service_us,
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Regular,
    High,
    Batch,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Sojourn-time statistics of the measured requests (µs), high-priority
    /// connections excluded.
    pub latency: Latency,
    /// The same for the high-priority connections, when there are any.
    pub high: Option<Latency>,
    /// The same for the best-effort connections, when there are any
    /// (excluded from `latency`).
    pub batch: Option<Latency>,
    /// Requests past the warm-up (high-priority ones included).
    pub measured: u64,
    /// Requests completed, warm-up included.
    pub completed: u64,
    /// Time between the first and last measured arrival (s).
    pub span_s: f64,
    /// Time from the first measured arrival to the last measured completion (s).
    pub served_span_s: f64,
    /// Mean service time of the measured requests (µs).
    pub measured_service_us: Option<f64>,
}

/// Percentiles (µs) with 95% confidence intervals from order statistics.
///
/// The interval takes the ranks `n·q ± 1.96·√(n·q·(1−q))`, which assumes
/// independent samples. Sojourn times of consecutive requests in a queue are
/// positively correlated, so the true interval is wider; it is reported to
/// show the sampling resolution, not as a guarantee.
pub fn summarize(samples: &mut [u64]) -> Latency {
    let n = samples.len();
    if n == 0 {
        return Latency::default();
    }
    samples.sort_unstable();
    let us = |v: u64| v as f64 / 1000.0;
    let at = |rank: f64| us(samples[(rank.max(1.0).ceil() as usize).min(n) - 1]);
    let est = |q: f64| {
        let nf = n as f64;
        let half = 1.96 * (nf * q * (1.0 - q)).sqrt();
        Estimate {
            value: at(nf * q),
            ci_low: at(nf * q - half),
            ci_high: at(nf * q + half + 1.0),
        }
    };
    let sum: u128 = samples.iter().map(|&v| v as u128).sum();
    Latency {
        count: n as u64,
        mean: sum as f64 / n as f64 / 1000.0,
        p50: est(0.5),
        p90: est(0.9),
        p99: est(0.99),
        p999: est(0.999),
        max: us(samples[n - 1]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_set() {
        let mut v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        v.reverse();
        let l = summarize(&mut v);
        assert_eq!(l.count, 1000);
        assert_eq!(l.p50.value, 500.0);
        assert_eq!(l.p99.value, 990.0);
        assert_eq!(l.p999.value, 999.0);
        assert_eq!(l.max, 1000.0);
        assert!((l.mean - 500.5).abs() < 1e-9);
        assert!(l.p99.ci_low < 990.0 && l.p99.ci_high > 990.0);
    }

    #[test]
    fn warmup_is_excluded() {
        let mut r = Recorder::new(4, 2);
        for i in 0..4 {
            r.record(i, 100 * i, 10, 100 * i + 50 + i);
        }
        let s = r.finish();
        assert_eq!((s.measured, s.completed), (2, 4));
        assert_eq!(s.latency.max, 0.053);
        assert_eq!(s.measured_service_us, Some(0.01));
    }
}
