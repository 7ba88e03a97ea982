//! Idealized, zero-overhead queueing models: the yardsticks of ZygOS §3.
//!
//! These are *not* scheduling policies of the runtime (those live in
//! `skq_core` and are driven by [`crate::core_model`]); they are the textbook
//! systems every measurement is judged against:
//!
//! | name                    | model          | what it idealizes                              |
//! |-------------------------|----------------|------------------------------------------------|
//! | `centralized-fcfs`      | M/G/n          | one queue, any idle worker takes the oldest    |
//! | `centralized-prio`      | M/G/n, 2 levels | as above, but a freed worker takes the oldest high-priority request first (non-preemptive) |
//! | `partitioned-fcfs`      | n × M/G/1      | each request to a uniformly random worker      |
//! | `partitioned-fcfs-conn` | n × M/G/1      | each *connection* pinned to a random worker    |
//! | `centralized-ps`        | M/G/n/PS       | k jobs share n workers, each at rate min(1, n/k) |
//! | `partitioned-ps`        | n × M/G/1/PS   | per-request random worker, processor sharing   |
//!
//! `centralized-prio` is the floor of SKQ §6.8 for any non-preemptive
//! scheduler: the high-priority client (connections `0..high_conns`, unless
//! `probe_regular`) never waits behind queued regular work, only for the
//! first busy worker to finish.
//!
//! `partitioned-fcfs` is the formal n × M/G/1 (every queue sees Poisson λ/n);
//! `partitioned-fcfs-conn` adds the imbalance of hashing few connections
//! (or per-connection service classes, as in `gis`) onto workers.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::str::FromStr;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::stats::{Recorder, Summary};
use crate::workload::{Generator, Request, Scenario};

/// Salt for the worker-assignment stream (kept apart from the request stream).
const ASSIGN_SALT: u64 = 0x1319_8A2E_0370_7344;

/// One of the idealized models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reference {
    /// M/G/n first-come first-served.
    CentralizedFcfs,
    /// M/G/n with two-level non-preemptive priority.
    CentralizedPrio,
    /// n × M/G/1, each request to a random worker.
    PartitionedFcfs,
    /// n × M/G/1 with each connection assigned to a random worker.
    PartitionedFcfsConn,
    /// M/G/n processor sharing.
    CentralizedPs,
    /// n × M/G/1 processor sharing, each request to a random worker.
    PartitionedPs,
}

impl Reference {
    /// Every reference model.
    pub const ALL: [Reference; 6] = [
        Reference::CentralizedFcfs,
        Reference::CentralizedPrio,
        Reference::PartitionedFcfs,
        Reference::PartitionedFcfsConn,
        Reference::CentralizedPs,
        Reference::PartitionedPs,
    ];

    /// The model's name on the command line and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            Reference::CentralizedFcfs => "centralized-fcfs",
            Reference::CentralizedPrio => "centralized-prio",
            Reference::PartitionedFcfs => "partitioned-fcfs",
            Reference::PartitionedFcfsConn => "partitioned-fcfs-conn",
            Reference::CentralizedPs => "centralized-ps",
            Reference::PartitionedPs => "partitioned-ps",
        }
    }

    /// Simulates `sc` to completion; returns the summary and the number of
    /// simulated events (one arrival and one departure per request).
    pub fn run(self, sc: &Scenario) -> (Summary, u64) {
        let gen = Generator::new(sc);
        let total = gen.total();
        let mut rec = Recorder::with_high(total, sc.warmup, sc.high_conns);
        let n = sc.workers;
        let mut arng = SmallRng::seed_from_u64(sc.seed ^ ASSIGN_SALT);
        match self {
            Reference::CentralizedFcfs => {
                // Service starts in arrival order at the earliest free worker.
                let mut free: BinaryHeap<Reverse<u64>> = (0..n).map(|_| Reverse(0)).collect();
                for r in gen {
                    let Reverse(f) = free.pop().expect("n > 0");
                    let done = f.max(r.arrival) + r.service;
                    free.push(Reverse(done));
                    rec.record_on(r.conn, r.idx, r.arrival, r.service, done);
                }
            }
            Reference::CentralizedPrio => {
                // Queued requests start when a worker frees, high first; an
                // arrival that finds nothing queued and a free worker starts.
                let high_below = if sc.probe_regular {
                    0
                } else {
                    sc.high_conns as u32
                };
                let mut free: BinaryHeap<Reverse<u64>> = (0..n).map(|_| Reverse(0)).collect();
                let (mut high, mut regular) = (VecDeque::new(), VecDeque::new());
                let dispatch = |until: u64,
                                free: &mut BinaryHeap<Reverse<u64>>,
                                high: &mut VecDeque<Request>,
                                regular: &mut VecDeque<Request>,
                                rec: &mut Recorder| {
                    while let Some(&Reverse(f)) = free.peek() {
                        if f > until {
                            break;
                        }
                        let Some(next) = high.pop_front().or_else(|| regular.pop_front()) else {
                            break;
                        };
                        free.pop();
                        let done = f.max(next.arrival) + next.service;
                        free.push(Reverse(done));
                        rec.record_on(next.conn, next.idx, next.arrival, next.service, done);
                    }
                };
                for r in gen {
                    dispatch(r.arrival, &mut free, &mut high, &mut regular, &mut rec);
                    if r.conn < high_below {
                        high.push_back(r);
                    } else {
                        regular.push_back(r);
                    }
                    dispatch(r.arrival, &mut free, &mut high, &mut regular, &mut rec);
                }
                dispatch(u64::MAX, &mut free, &mut high, &mut regular, &mut rec);
            }
            Reference::PartitionedFcfs | Reference::PartitionedFcfsConn => {
                let conn_worker: Vec<usize> = if self == Reference::PartitionedFcfsConn {
                    (0..sc.connections).map(|_| arng.gen_range(0..n)).collect()
                } else {
                    Vec::new()
                };
                let mut free = vec![0u64; n];
                for r in gen {
                    let w = if conn_worker.is_empty() {
                        arng.gen_range(0..n)
                    } else {
                        conn_worker[r.conn as usize]
                    };
                    let done = free[w].max(r.arrival) + r.service;
                    free[w] = done;
                    rec.record_on(r.conn, r.idx, r.arrival, r.service, done);
                }
            }
            Reference::CentralizedPs => {
                let mut ps = PsServer::new(n as f64);
                for r in gen {
                    ps.arrive(&r, &mut rec);
                }
                ps.advance(f64::INFINITY, &mut rec);
            }
            Reference::PartitionedPs => {
                let mut servers: Vec<PsServer> = (0..n).map(|_| PsServer::new(1.0)).collect();
                for r in gen {
                    servers[arng.gen_range(0..n)].arrive(&r, &mut rec);
                }
                for s in &mut servers {
                    s.advance(f64::INFINITY, &mut rec);
                }
            }
        }
        debug_assert_eq!(rec.completed(), total as u64);
        (rec.finish(), 2 * total as u64)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Reference {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let alias = match s {
            "fcfs" | "mgn" => Some(Reference::CentralizedFcfs),
            "ps" => Some(Reference::CentralizedPs),
            _ => None,
        };
        alias
            .or_else(|| Reference::ALL.iter().copied().find(|r| r.name() == s))
            .ok_or_else(|| {
                let names: Vec<_> = Reference::ALL.iter().map(|r| r.name()).collect();
                format!(
                    "unknown reference model `{s}`; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A job in a processor-sharing server, ordered by the virtual time at which
/// it finishes.
#[derive(Clone, Copy, Debug)]
struct PsJob {
    vfinish: f64,
    conn: u32,
    idx: u64,
    arrival: u64,
    service: u64,
}

impl PartialEq for PsJob {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for PsJob {}
impl PartialOrd for PsJob {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for PsJob {
    /// Reversed, so `BinaryHeap` pops the earliest finisher (ties: oldest).
    fn cmp(&self, o: &Self) -> Ordering {
        o.vfinish
            .total_cmp(&self.vfinish)
            .then(o.idx.cmp(&self.idx))
    }
}

/// Processor sharing over `cap` unit-speed servers.
///
/// With k jobs present each progresses at rate min(1, cap/k). All jobs present
/// progress alike, so one "virtual time" V (service attained by any job present
/// since V = 0) describes them all: a job arriving at V₀ with work s leaves when
/// V reaches V₀ + s. The model is exact; only event times are rounded to ns.
struct PsServer {
    cap: f64,
    v: f64,
    t: f64,
    jobs: BinaryHeap<PsJob>,
}

impl PsServer {
    fn new(cap: f64) -> PsServer {
        PsServer {
            cap,
            v: 0.0,
            t: 0.0,
            jobs: BinaryHeap::new(),
        }
    }

    fn rate(&self) -> f64 {
        (self.cap / self.jobs.len() as f64).min(1.0)
    }

    /// Moves time forward to `to`, completing every job that finishes by then.
    fn advance(&mut self, to: f64, rec: &mut Recorder) {
        while let Some(top) = self.jobs.peek().copied() {
            let rate = self.rate();
            let t_done = self.t + (top.vfinish - self.v) / rate;
            if t_done > to {
                self.v += (to - self.t) * rate;
                self.t = to;
                return;
            }
            self.jobs.pop();
            self.t = t_done;
            self.v = top.vfinish;
            let done = (t_done.round() as u64).max(top.arrival + top.service);
            rec.record_on(top.conn, top.idx, top.arrival, top.service, done);
        }
        if to.is_finite() {
            self.t = to;
        }
    }

    fn arrive(&mut self, r: &Request, rec: &mut Recorder) {
        self.advance(r.arrival as f64, rec);
        self.jobs.push(PsJob {
            vfinish: self.v + r.service as f64,
            conn: r.conn,
            idx: r.idx,
            arrival: r.arrival,
            service: r.service,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Service;
    use skq_proto::workload::{ServiceSpec, Workload};

    fn sc(workers: usize, load: f64, n: usize) -> Scenario {
        let svc = Service::Spec(ServiceSpec::new(Workload::Fixed, 1000.0));
        Scenario::at_load(svc, workers, 64, load, n, 5)
    }

    #[test]
    fn ps_shares_the_server() {
        // Two jobs of 10 and 30 arriving together on one server: the short one
        // leaves at 20 (half rate), the long one at 40.
        let mut rec = Recorder::new(2, 0);
        let mut ps = PsServer::new(1.0);
        let req = |idx, service| Request {
            idx,
            arrival: 0,
            service,
            conn: 0,
        };
        ps.arrive(&req(0, 10), &mut rec);
        ps.arrive(&req(1, 30), &mut rec);
        ps.advance(f64::INFINITY, &mut rec);
        let s = rec.finish();
        assert_eq!(s.latency.max, 0.04);
        assert!((s.latency.mean - 0.03).abs() < 1e-12);
    }

    #[test]
    fn centralized_prio_without_a_high_client_is_centralized_fcfs() {
        let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, 1000.0));
        let s = Scenario::at_load(svc, 4, 64, 0.85, 20_000, 3);
        let (fcfs, _) = Reference::CentralizedFcfs.run(&s);
        let (prio, _) = Reference::CentralizedPrio.run(&s);
        assert_eq!(fcfs.latency.mean, prio.latency.mean);
        assert_eq!(fcfs.latency.p99.value, prio.latency.p99.value);
    }

    #[test]
    fn centralized_prio_serves_the_high_client_before_queued_regular_work() {
        let svc = Service::Spec(ServiceSpec::new(Workload::Exponential, 1000.0));
        let mut s = Scenario::at_load(svc, 4, 64, 0.9, 50_000, 7);
        s.high_conns = 4;
        let (prio, _) = Reference::CentralizedPrio.run(&s);
        s.probe_regular = true;
        let (probe, _) = Reference::CentralizedPrio.run(&s);
        let (fcfs, _) = Reference::CentralizedFcfs.run(&s);
        let (high, as_regular) = (prio.high.unwrap(), probe.high.unwrap());
        // Registered regular, the same connections see plain M/G/n ...
        assert_eq!(as_regular.mean, fcfs.high.unwrap().mean);
        // ... and with priority they wait less than before and than the rest.
        assert!(high.p99.value < as_regular.p99.value);
        assert!(high.mean < prio.latency.mean);
        assert_eq!(prio.completed, 50_000);
    }

    #[test]
    fn every_model_completes_every_request() {
        for m in Reference::ALL {
            let (s, ev) = m.run(&sc(4, 0.7, 20_000));
            assert_eq!(s.completed, 20_000, "{m}");
            assert_eq!(ev, 40_000);
            assert!(
                s.latency.p50.value >= 1.0,
                "{m}: sojourn below service time"
            );
            assert_eq!(m.name().parse::<Reference>().unwrap(), m);
        }
    }

    #[test]
    fn centralized_beats_partitioned_for_fcfs() {
        let c = Reference::CentralizedFcfs.run(&sc(8, 0.8, 100_000)).0;
        let p = Reference::PartitionedFcfs.run(&sc(8, 0.8, 100_000)).0;
        assert!(c.latency.p99.value < p.latency.p99.value);
    }
}
