//! Where requests come from: service-time sources and arrival processes.
//!
//! A [`Scenario`] fixes everything about one load point except the model that
//! serves it. [`Generator`] turns it into a deterministic stream of
//! [`Request`]s in arrival order.
//!
//! Common random numbers: the stream is drawn in an order that does not depend
//! on the rate, so two load points of one sweep see the same connections, the
//! same service times and the same inter-arrival gaps up to a scale factor.
//! Curves are then smooth in the load, and two models compared at one point
//! face the very same requests.

use std::sync::Arc;

use anyhow::{bail, Context};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::Exp1;
use skq_proto::workload::{ConnClass, ServiceSpec};

/// Salt mixed into the seed for per-connection draws (classes), so they do not
/// depend on how many requests follow.
const CLASS_SALT: u64 = 0x243F_6A88_85A3_08D3;

/// Where service times come from.
#[derive(Clone, Debug)]
pub enum Service {
    /// A catalogue workload (BRIEF §9), sampled by `skq_proto` itself.
    Spec(ServiceSpec),
    /// Measured service times (ns), resampled uniformly with replacement.
    Samples(Arc<[u64]>),
}

impl Service {
    /// Mean service time in ns (theoretical for a spec, empirical for samples).
    pub fn mean_ns(&self) -> f64 {
        match self {
            Service::Spec(s) => s.mean(),
            Service::Samples(v) => v.iter().map(|&x| x as f64).sum::<f64>() / v.len().max(1) as f64,
        }
    }

    /// A short description for reports.
    pub fn name(&self) -> String {
        match self {
            Service::Spec(s) => s.workload.name().to_string(),
            Service::Samples(v) => format!("empirical({} samples)", v.len()),
        }
    }

    /// The nominal mean (µs) to put in result metadata, when there is one.
    pub fn nominal_us(&self) -> Option<f64> {
        Some(self.mean_ns() / 1000.0)
    }

    /// The emulation scale factor recorded in result metadata.
    pub fn scale(&self) -> f64 {
        match self {
            Service::Spec(s) => s.scale,
            Service::Samples(_) => 1.0,
        }
    }

    fn class<R: Rng>(&self, rng: &mut R) -> ConnClass {
        match self {
            Service::Spec(s) => s.conn_class(rng),
            Service::Samples(_) => ConnClass::PER_REQUEST,
        }
    }

    /// The class of a probe or high-priority connection: the mix's
    /// shortest (`ServiceSpec::light_class`), as `skq load` gives its
    /// probes (SKQ §6.8's measurement client sends light requests).
    fn light_class(&self) -> ConnClass {
        match self {
            Service::Spec(s) => s.light_class(),
            Service::Samples(_) => ConnClass::PER_REQUEST,
        }
    }

    #[inline]
    fn sample<R: Rng>(&self, class: ConnClass, rng: &mut R) -> u64 {
        match self {
            Service::Spec(s) => s.sample(class, rng),
            Service::Samples(v) => v[rng.gen_range(0..v.len())],
        }
    }
}

/// One recorded arrival of a trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceRecord {
    /// Arrival time, ns from the start of the trace.
    pub at_ns: u64,
    /// Connection number (taken modulo the scenario's connection count).
    pub conn: u32,
    /// Service time (ns); `None` = draw from the scenario's service source.
    pub service_ns: Option<u64>,
}

/// A trace of arrivals to replay, sorted by time.
#[derive(Clone, Debug)]
pub struct Trace {
    records: Vec<TraceRecord>,
}

impl Trace {
    /// Parses `arrival_us,connection[,service_us]` lines; `#` starts a comment,
    /// and a first line that does not parse as numbers is taken as a header.
    pub fn parse(text: &str) -> anyhow::Result<Trace> {
        let mut records = Vec::new();
        for (no, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let num = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
            let (Some(at), Some(conn)) = (num(f[0]), f.get(1).and_then(|s| num(s))) else {
                if records.is_empty() && no == 0 {
                    continue; // header
                }
                bail!(
                    "trace line {}: expected `arrival_us,connection[,service_us]`, got `{line}`",
                    no + 1
                );
            };
            let service_ns = match f.get(2) {
                Some(s) if !s.is_empty() => Some(
                    (num(s).with_context(|| {
                        format!("trace line {}: bad service time `{s}`", no + 1)
                    })? * 1000.0)
                        .round() as u64,
                ),
                _ => None,
            };
            records.push(TraceRecord {
                at_ns: (at * 1000.0).round() as u64,
                conn: conn as u32,
                service_ns,
            });
        }
        if records.len() < 2 {
            bail!("trace has {} records; at least 2 are needed", records.len());
        }
        records.sort_by_key(|r| r.at_ns);
        Ok(Trace { records })
    }

    /// The records, in time order.
    pub fn records(&self) -> &[TraceRecord] {
        &self.records
    }

    /// The trace's own arrival rate (requests/s).
    pub fn rate_rps(&self) -> f64 {
        let span = (self.records.last().unwrap().at_ns - self.records[0].at_ns).max(1) as f64;
        (self.records.len() - 1) as f64 * 1e9 / span
    }
}

/// The arrival process.
#[derive(Clone, Debug)]
pub enum Arrivals {
    /// Poisson at the scenario's rate, each arrival on a uniformly chosen
    /// connection (the superposition of one Poisson source per connection).
    Poisson,
    /// Replay of a trace, time-compressed to the scenario's rate.
    Trace(Arc<Trace>),
}

/// Everything about one load point except the model that serves it.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Service-time source.
    pub service: Service,
    /// Number of workers (servers).
    pub workers: usize,
    /// Number of client connections; each is one source in the core.
    pub connections: usize,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Offered load (requests/s).
    pub rate_rps: f64,
    /// Requests to simulate, warm-up included.
    pub requests: usize,
    /// Leading requests excluded from the statistics.
    pub warmup: usize,
    /// Seed of every random draw of the run.
    pub seed: u64,
    /// Connections `0..high_conns` form the high-priority client: the core
    /// registers them `HIGH_PRIORITY` and their latency is reported apart
    /// (BRIEF §9 `priority`). Their traffic share is `high_conns / connections`.
    /// Under a per-connection workload (`gis`) they send the mix's lightest
    /// requests, as `skq load`'s probes do.
    pub high_conns: usize,
    /// Register connections `0..high_conns` as regular (a probe without
    /// priority), still recording them apart.
    pub probe_regular: bool,
    /// The last `batch_conns` connections form a best-effort (batch) client:
    /// the core registers them `BATCH`, their requests arrive as their own
    /// Poisson stream at `batch_rps` (on top of `rate_rps`), each needing
    /// `batch_service_ns`, and their latency is reported apart (QStack's
    /// co-location experiment). 0 = none.
    pub batch_conns: usize,
    /// Best-effort requests per second (with `batch_conns`).
    pub batch_rps: f64,
    /// Service time of every best-effort request (ns).
    pub batch_service_ns: u64,
}

impl Scenario {
    /// A Poisson scenario at `load` (fraction of `workers / S̄`), with 10% warm-up.
    pub fn at_load(
        service: Service,
        workers: usize,
        connections: usize,
        load: f64,
        requests: usize,
        seed: u64,
    ) -> Scenario {
        let rate_rps = load * workers as f64 * 1e9 / service.mean_ns();
        Scenario {
            service,
            workers,
            connections,
            arrivals: Arrivals::Poisson,
            rate_rps,
            requests,
            warmup: requests / 10,
            seed,
            high_conns: 0,
            probe_regular: false,
            batch_conns: 0,
            batch_rps: 0.0,
            batch_service_ns: 0,
        }
    }

    /// The first best-effort connection (`connections` when there are none).
    pub fn batch_from(&self) -> usize {
        self.connections - self.batch_conns.min(self.connections)
    }

    /// Best-effort requests in the run (in proportion to the regular ones).
    pub fn batch_requests(&self) -> usize {
        if self.batch_conns == 0 {
            return 0;
        }
        (self.requests as f64 * self.batch_rps / self.rate_rps).round() as usize
    }

    /// Offered load as a fraction of capacity (`rate × S̄ / workers`).
    pub fn load(&self) -> f64 {
        self.rate_rps * self.service.mean_ns() / 1e9 / self.workers as f64
    }

    /// Checks the parameters, naming the offending one.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.workers == 0 {
            bail!("workers must be at least 1");
        }
        if self.connections == 0 || self.connections > u32::MAX as usize {
            bail!(
                "connections must be in 1..=4294967295, got {}",
                self.connections
            );
        }
        if !(self.rate_rps.is_finite() && self.rate_rps > 0.0) {
            bail!(
                "offered load must be positive, got {} requests/s",
                self.rate_rps
            );
        }
        if self.high_conns >= self.connections {
            bail!(
                "high-priority connections ({}) must be fewer than connections ({})",
                self.high_conns,
                self.connections
            );
        }
        if self.batch_conns > 0 {
            if self.high_conns + self.batch_conns >= self.connections {
                bail!(
                    "high-priority ({}) and best-effort ({}) connections must leave some regular ones of {}",
                    self.high_conns,
                    self.batch_conns,
                    self.connections
                );
            }
            if !(self.batch_rps.is_finite() && self.batch_rps > 0.0) {
                bail!(
                    "best-effort rate must be positive, got {} requests/s",
                    self.batch_rps
                );
            }
            if self.batch_service_ns == 0 {
                bail!("best-effort service time must be positive");
            }
            if matches!(self.arrivals, Arrivals::Trace(_)) {
                bail!("best-effort connections need Poisson arrivals, not a trace");
            }
        }
        if self.warmup >= self.requests {
            bail!(
                "requests ({}) must exceed the warm-up ({})",
                self.requests,
                self.warmup
            );
        }
        if let Service::Samples(v) = &self.service {
            if v.is_empty() {
                bail!("no service-time samples");
            }
        }
        let mean = self.service.mean_ns();
        if mean.is_nan() || mean <= 0.0 {
            bail!("mean service time must be positive");
        }
        Ok(())
    }
}

/// One request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Sequence number in arrival order (0-based, warm-up included).
    pub idx: u64,
    /// Arrival time (ns).
    pub arrival: u64,
    /// Service time (ns).
    pub service: u64,
    /// Connection.
    pub conn: u32,
}

/// The deterministic request stream of a [`Scenario`].
pub struct Generator<'a> {
    sc: &'a Scenario,
    rng: SmallRng,
    classes: Vec<ConnClass>,
    gap_ns: f64,
    t: f64,
    next: usize,
    trace_scale: f64,
    /// Best-effort stream: its own generator, its next arrival, how many
    /// are left; and the regular stream's next request, drawn ahead.
    be_rng: SmallRng,
    be_t: f64,
    be_left: usize,
    lc_left: usize,
    lc_next: Option<(u64, u32, u64)>,
}

/// Salt of the best-effort stream's generator.
const BATCH_SALT: u64 = 0x6261_7463_685f_7374;

impl<'a> Generator<'a> {
    /// A stream positioned before the first request.
    pub fn new(sc: &'a Scenario) -> Generator<'a> {
        // Every connection draws, so the others keep the classes they drew
        // before the probe took the light one.
        let mut crng = SmallRng::seed_from_u64(sc.seed ^ CLASS_SALT);
        let classes = (0..sc.connections)
            .map(|i| {
                let drawn = sc.service.class(&mut crng);
                if i < sc.high_conns {
                    sc.service.light_class()
                } else {
                    drawn
                }
            })
            .collect();
        let trace_scale = match &sc.arrivals {
            Arrivals::Trace(t) => t.rate_rps() / sc.rate_rps,
            Arrivals::Poisson => 1.0,
        };
        Generator {
            sc,
            rng: SmallRng::seed_from_u64(sc.seed),
            classes,
            gap_ns: 1e9 / sc.rate_rps,
            t: 0.0,
            next: 0,
            trace_scale,
            be_rng: SmallRng::seed_from_u64(sc.seed ^ BATCH_SALT),
            be_t: 0.0,
            be_left: sc.batch_requests(),
            lc_left: sc.requests,
            lc_next: None,
        }
    }

    /// The next regular (Poisson) request: arrival, connection, service.
    fn poisson(&mut self) -> (u64, u32, u64) {
        let u: f64 = self.rng.sample(Exp1);
        self.t += u * self.gap_ns;
        let conn = self.rng.gen_range(0..self.sc.batch_from() as u32);
        let service = self
            .sc
            .service
            .sample(self.classes[conn as usize], &mut self.rng);
        (self.t as u64, conn, service)
    }

    /// With a best-effort stream: the earlier of the two streams' next
    /// requests (the regular stream is the same as without one).
    fn merged(&mut self) -> (u64, u32, u64) {
        if self.lc_next.is_none() && self.lc_left > 0 {
            self.lc_left -= 1;
            self.lc_next = Some(self.poisson());
        }
        if self.be_left > 0 && self.be_t == 0.0 {
            let u: f64 = self.be_rng.sample(Exp1);
            self.be_t = u * 1e9 / self.sc.batch_rps;
        }
        let be_at = (self.be_left > 0).then_some(self.be_t as u64);
        match (self.lc_next, be_at) {
            (Some(lc), Some(be)) if lc.0 <= be => self.lc_next.take().expect("some"),
            (Some(_), None) => self.lc_next.take().expect("some"),
            (_, Some(be)) => {
                self.be_left -= 1;
                let k = self.be_rng.gen_range(0..self.sc.batch_conns as u32);
                let u: f64 = self.be_rng.sample(Exp1);
                self.be_t += u * 1e9 / self.sc.batch_rps;
                (
                    be,
                    self.sc.batch_from() as u32 + k,
                    self.sc.batch_service_ns,
                )
            }
            (None, None) => unreachable!("total() counts every request"),
        }
    }

    /// The class each connection drew (per-connection workloads).
    pub fn classes(&self) -> &[ConnClass] {
        &self.classes
    }

    /// Number of requests the stream will yield in total.
    pub fn total(&self) -> usize {
        match &self.sc.arrivals {
            Arrivals::Poisson => self.sc.requests + self.sc.batch_requests(),
            Arrivals::Trace(t) => self.sc.requests.min(t.records().len()),
        }
    }
}

impl Iterator for Generator<'_> {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.next >= self.total() {
            return None;
        }
        let idx = self.next as u64;
        self.next += 1;
        let (arrival, conn, fixed) = match &self.sc.arrivals {
            Arrivals::Poisson if self.sc.batch_conns > 0 => {
                let (a, c, s) = self.merged();
                (a, c, Some(s))
            }
            Arrivals::Poisson => {
                let u: f64 = self.rng.sample(Exp1);
                self.t += u * self.gap_ns;
                let conn = self.rng.gen_range(0..self.sc.connections as u32);
                (self.t as u64, conn, None)
            }
            Arrivals::Trace(tr) => {
                let r = tr.records()[idx as usize];
                let rel = (r.at_ns - tr.records()[0].at_ns) as f64 * self.trace_scale;
                (
                    rel as u64,
                    r.conn % self.sc.connections as u32,
                    r.service_ns,
                )
            }
        };
        let service = match fixed {
            Some(s) => s,
            None => self
                .sc
                .service
                .sample(self.classes[conn as usize], &mut self.rng),
        };
        Some(Request {
            idx,
            arrival,
            service,
            conn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use skq_proto::workload::Workload;

    #[test]
    fn trace_parses_and_scales() {
        let t = Trace::parse("arrival_us,conn,service_us\n0,1,5\n10,2\n# c\n20,3,7\n").unwrap();
        assert_eq!(t.records().len(), 3);
        assert_eq!(t.records()[1].service_ns, None);
        assert!((t.rate_rps() - 100_000.0).abs() < 1e-6);
        let mut sc = Scenario::at_load(
            Service::Spec(ServiceSpec::new(Workload::Fixed, 1000.0)),
            1,
            2,
            0.5,
            3,
            1,
        );
        sc.warmup = 0;
        sc.arrivals = Arrivals::Trace(Arc::new(t));
        sc.rate_rps = 200_000.0; // twice the trace's own rate
        let reqs: Vec<_> = Generator::new(&sc).collect();
        assert_eq!(
            reqs.iter().map(|r| r.arrival).collect::<Vec<_>>(),
            vec![0, 5_000, 10_000]
        );
        assert_eq!(
            reqs.iter().map(|r| r.conn).collect::<Vec<_>>(),
            vec![1, 0, 1]
        );
        assert_eq!(reqs[0].service, 5_000);
        assert_eq!(reqs[1].service, 1_000);
        assert!(Trace::parse("0,1\nx,y\n")
            .unwrap_err()
            .to_string()
            .contains("line 2"));
    }

    #[test]
    fn high_priority_connections_send_the_gis_mix_lightest_requests() {
        let gis = ServiceSpec::new(Workload::Gis, 0.0);
        let light = gis.light_class();
        let svc = Service::Spec(gis);
        let plain = Scenario::at_load(svc.clone(), 8, 256, 0.5, 20_000, 5);
        let mut prio = plain.clone();
        prio.high_conns = 13;
        let (a, b) = (Generator::new(&plain), Generator::new(&prio));
        // With 256 connections some of the first 13 draw a heavier class
        // (1 − 0.95¹³ ≈ 0.49 for any one seed; this one does).
        assert!(a.classes()[..13].iter().any(|&c| c != light));
        assert!(b.classes()[..13].iter().all(|&c| c == light));
        // The other connections keep what they drew.
        assert_eq!(a.classes()[13..], b.classes()[13..]);
        // The probe's longest request is the others' shortest.
        let (probe, rest): (Vec<_>, Vec<_>) = Generator::new(&prio).partition(|r| r.conn < 13);
        let longest = probe.iter().map(|r| r.service).max();
        assert_eq!(longest, rest.iter().map(|r| r.service).min());
    }

    #[test]
    fn streams_share_random_numbers_across_loads() {
        let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, 1000.0));
        let a = Scenario::at_load(svc.clone(), 4, 8, 0.2, 1000, 9);
        let b = Scenario::at_load(svc, 4, 8, 0.8, 1000, 9);
        for (x, y) in Generator::new(&a).zip(Generator::new(&b)) {
            assert_eq!((x.conn, x.service), (y.conn, y.service));
            assert!((x.arrival as f64 - 4.0 * y.arrival as f64).abs() <= 4.0);
        }
    }
}
