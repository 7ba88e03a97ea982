//! Facebook's ZippyDB workload, as db_bench's `mixgraph` benchmark models it.
//!
//! Source of every parameter: Z. Cao, S. Dong, S. Vemuri, D. H. C. Du,
//! "Characterizing, Modeling, and Benchmarking RocksDB Key-Value Workloads at
//! Facebook", FAST '20 (the ZippyDB fit of §5 and its appendix), as published
//! for db_bench in the RocksDB wiki page "RocksDB Trace, Replay, Analyzer,
//! and Workload Generation" and in db_bench's `mixgraph` flags:
//!
//! | what | db_bench flag | value |
//! |---|---|---|
//! | key size | `-key_size` | 48 bytes |
//! | operation mix | `-mix_get_ratio/-mix_put_ratio/-mix_seek_ratio` | 0.83 / 0.14 / 0.03 (the mix SKQ §6.6 runs) |
//! | key ranges | `-keyrange_num` | 30 |
//! | key-range hotness `a·e^(b·x) + c·e^(d·x)`, x = 1..=30 | `-keyrange_dist_a/b/c/d` | 14.18, −2.917, 0.0164, −0.08082 |
//! | value size: generalized Pareto (θ = 0) | `-value_k/-value_sigma` | k = 0.2615, σ = 25.45 |
//! | largest value | `-mix_max_value_size` (default) | 1024 bytes |
//! | scan length: generalized Pareto (θ = 0) | `-iter_k/-iter_sigma` | k = 2.517, σ = 14.236 |
//! | longest scan | `-mix_max_scan_len` (default) | 10,000 entries |
//!
//! How a request is drawn, as db_bench does: the operation from the mix; a key
//! range from the two-term-exponential hotness (the hotness ranks are laid
//! over the key space in a seeded random order, so the hot range is not
//! always the first); a key uniformly inside that range (db_bench's
//! prefix-distribution mode with no per-key power model); for a PUT a value
//! size `x = σ·(u^(−k) − 1)/k`, raised to 10 if smaller and wrapped modulo the
//! largest if larger; for a SEEK a scan length drawn the same way with the
//! iterator's parameters, always taken modulo the longest scan (a scan of 0 becomes 1:
//! our SEEK returns at least one entry). db_bench's diurnal sine rate is not
//! modelled: `skq load` sets the rate.
//!
//! Used by the load generator (`skq load --protocol rocksdb`), by `skq db`
//! (to build and sample the database) and by the simulator's `zippydb`
//! workload, so all three draw the same requests.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::request::{Op, Request};

/// A generalized Pareto distribution with θ = 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gpd {
    /// Shape k.
    pub k: f64,
    /// Scale σ.
    pub sigma: f64,
}

impl Gpd {
    /// The inverse of the CDF at `u` ∈ (0, 1] (db_bench's `ParetoCdfInversion`
    /// draws `u` and uses it as the survival probability; the two agree in law).
    pub fn inverse(&self, u: f64) -> f64 {
        if self.k == 0.0 {
            -self.sigma * u.ln()
        } else {
            self.sigma * (u.powf(-self.k) - 1.0) / self.k
        }
    }

    /// P(X ≤ x).
    pub fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        1.0 - (1.0 + self.k * x / self.sigma).powf(-1.0 / self.k)
    }
}

/// db_bench's ZippyDB parameters (see the module table).
pub mod params {
    use super::Gpd;
    /// Key size in bytes.
    pub const KEY_SIZE: usize = crate::db::KEY_LEN;
    /// GET, PUT, SEEK shares.
    pub const MIX: [f64; 3] = [0.83, 0.14, 0.03];
    /// Key ranges (prefixes).
    pub const KEY_RANGES: usize = 30;
    /// Key-range hotness a, b, c, d.
    pub const RANGE_DIST: [f64; 4] = [14.18, -2.917, 0.0164, -0.08082];
    /// Value size.
    pub const VALUE: Gpd = Gpd {
        k: 0.2615,
        sigma: 25.45,
    };
    /// Smallest value db_bench writes.
    pub const VALUE_MIN: u32 = 10;
    /// Largest value (db_bench's default `mix_max_value_size`).
    pub const VALUE_MAX: u32 = 1024;
    /// Scan length.
    pub const SCAN: Gpd = Gpd {
        k: 2.517,
        sigma: 14.236,
    };
    /// Longest scan (db_bench's default `mix_max_scan_len`).
    pub const SCAN_MAX: u32 = 10_000;
}

/// Folds a drawn size into `[min, max]` as db_bench does: below `min` becomes
/// `min`, above `max` wraps modulo `max`.
pub fn fold(x: f64, min: u32, max: u32) -> u32 {
    let v = x.max(0.0).min(u64::MAX as f64) as u64;
    let v = if v > u64::from(max) {
        v % u64::from(max)
    } else {
        v
    };
    (v as u32).max(min)
}

/// A drawn scan length as db_bench takes it, modulo the longest scan
/// (`scan_length % mix_max_scan_len`), then at least 1.
pub fn wrap_scan(x: f64) -> u32 {
    let v = x.max(0.0).min(u64::MAX as f64) as u64 % u64::from(params::SCAN_MAX);
    (v as u32).max(1)
}

/// What each operation costs the server, for emulating extra service (and
/// for the simulator): a GET, a PUT, and a SEEK as a fixed part plus a part
/// per entry scanned. Fitted by `skq db sample` from real RocksDB calls.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// GET (ns).
    pub get_ns: f64,
    /// PUT (ns).
    pub put_ns: f64,
    /// SEEK, fixed part (ns).
    pub seek_base_ns: f64,
    /// SEEK, per entry returned (ns).
    pub seek_entry_ns: f64,
}

impl CostModel {
    /// Fitted on 2026-11-23 on the 2-core development VM (shared) by three
    /// runs of `skq db sample --keys 10000000 --requests 100000` on a
    /// 10M-key database in /dev/shm (docs/results/zippydb-2026-11-23.txt):
    /// the runs' mean GET and PUT times and least-squares lines of SEEK time
    /// against entries returned, averaged. Modelled mean ≈ 19.5 µs per
    /// ZippyDB request.
    pub const MEASURED: CostModel = CostModel {
        get_ns: 15_840.0,
        put_ns: 5_580.0,
        seek_base_ns: 26_530.0,
        seek_entry_ns: 291.0,
    };

    /// The cost of one operation (`len` = entries scanned, for a SEEK).
    pub fn cost_ns(&self, op: Op, len: u32) -> f64 {
        match op {
            Op::Get => self.get_ns,
            Op::Set => self.put_ns,
            Op::Seek => self.seek_base_ns + self.seek_entry_ns * f64::from(len),
        }
    }
}

/// The ZippyDB request generator over a key space of `keys` records
/// (`crate::db::key_of(i)` for `i < keys`).
#[derive(Clone, Debug)]
pub struct ZippyDb {
    /// Records in the key space.
    pub keys: u64,
    /// Cumulative probability of each key range in key-space order.
    range_cdf: Vec<f64>,
    /// Cumulative GET, PUT shares (SEEK takes the rest).
    mix_cdf: [f64; 2],
    /// When set, each request asks for `factor × cost` of extra emulated
    /// service (its `service_ns`).
    extra: Option<(CostModel, f64)>,
}

impl ZippyDb {
    /// The generator with db_bench's ZippyDB parameters; `layout_seed` fixes
    /// which key range gets which hotness rank.
    pub fn new(keys: u64, layout_seed: u64) -> Result<ZippyDb, String> {
        if keys < params::KEY_RANGES as u64 {
            return Err(format!(
                "the ZippyDB key space needs at least {} keys (one per key range), got {keys}",
                params::KEY_RANGES
            ));
        }
        let [a, b, c, d] = params::RANGE_DIST;
        let weights: Vec<f64> = (1..=params::KEY_RANGES)
            .map(|x| {
                let x = x as f64;
                a * (b * x).exp() + c * (d * x).exp()
            })
            .collect();
        let mut order: Vec<usize> = (0..params::KEY_RANGES).collect();
        order.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(layout_seed));
        // order[r] = hotness rank of key range r.
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let range_cdf = order
            .iter()
            .map(|&rank| {
                acc += weights[rank] / total;
                acc
            })
            .collect();
        let [g, p, _] = params::MIX;
        Ok(ZippyDb {
            keys,
            range_cdf,
            mix_cdf: [g, g + p],
            extra: None,
        })
    }

    /// Each drawn request asks for `factor × model.cost_ns(op, len)` of extra
    /// service (0 = none): real RocksDB work plus emulated extra latency in
    /// proportion to each operation's real cost.
    pub fn with_extra(mut self, model: CostModel, factor: f64) -> ZippyDb {
        self.extra = (factor > 0.0).then_some((model, factor));
        self
    }

    /// Probability of each key range, in key-space order.
    pub fn range_probabilities(&self) -> Vec<f64> {
        let mut prev = 0.0;
        self.range_cdf
            .iter()
            .map(|&c| {
                let p = c - prev;
                prev = c;
                p
            })
            .collect()
    }

    /// Keys `[start, end)` of key range `r`.
    pub fn range_bounds(&self, r: usize) -> (u64, u64) {
        let n = params::KEY_RANGES as u64;
        let r = r as u64;
        (self.keys * r / n, self.keys * (r + 1) / n)
    }

    /// Draws a key index.
    pub fn draw_key<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let u: f64 = rng.gen();
        let r = self
            .range_cdf
            .partition_point(|&c| c <= u)
            .min(params::KEY_RANGES - 1);
        let (lo, hi) = self.range_bounds(r);
        rng.gen_range(lo..hi)
    }

    /// Draws a value size in bytes.
    pub fn draw_value_len<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let u: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
        fold(
            params::VALUE.inverse(u),
            params::VALUE_MIN,
            params::VALUE_MAX,
        )
    }

    /// Draws a scan length in entries.
    pub fn draw_scan_len<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let u: f64 = 1.0 - rng.gen::<f64>();
        wrap_scan(params::SCAN.inverse(u))
    }

    /// Fills `req`'s operation, key and size (value length for a PUT, scan
    /// length for a SEEK, 0 for a GET).
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R, req: &mut Request) {
        let u: f64 = rng.gen();
        req.key = self.draw_key(rng).min(u64::from(u32::MAX)) as u32;
        (req.op, req.value_len) = if u < self.mix_cdf[0] {
            (Op::Get, 0)
        } else if u < self.mix_cdf[1] {
            (Op::Set, self.draw_value_len(rng))
        } else {
            (Op::Seek, self.draw_scan_len(rng))
        };
        if let Some((m, f)) = self.extra {
            req.service_ns = (f * m.cost_ns(req.op, req.value_len)).min(f64::from(u32::MAX)) as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;

    /// Pearson's chi-square statistic of `observed` counts against
    /// `expected` probabilities over `n` draws.
    fn chi_square(observed: &[u64], expected: &[f64], n: u64) -> f64 {
        observed
            .iter()
            .zip(expected)
            .map(|(&o, &p)| {
                let e = p * n as f64;
                (o as f64 - e).powi(2) / e
            })
            .sum()
    }

    /// Upper 0.1% point of chi-square with `dof` degrees of freedom
    /// (Wilson–Hilferty approximation; z = 3.09).
    fn chi_square_critical(dof: usize) -> f64 {
        let k = dof as f64;
        let z = 3.090;
        k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
    }

    /// P(fold(X) ∈ [lo, hi)) for lo ≥ min: the raw draw lands in [lo, hi)
    /// or in one of its images [lo + j·max, hi + j·max). The series is summed
    /// exactly for j < J and its remainder, over which the density is nearly
    /// flat across one period, as (hi − lo)/max · P(X ≥ J·max).
    fn folded_bin(g: Gpd, lo: f64, hi: f64, max: f64) -> f64 {
        const J: usize = 20_000;
        let mut p = 0.0;
        for j in 0..J {
            let off = j as f64 * max;
            p += g.cdf(hi + off) - g.cdf(lo + off);
        }
        p + (hi - lo) / max * (1.0 - g.cdf(J as f64 * max))
    }

    #[test]
    fn operation_mix_and_key_ranges_fit_their_parameters() {
        let z = ZippyDb::new(300_000, 7).unwrap();
        let mut rng = SmallRng::seed_from_u64(11);
        let n = 400_000u64;
        let mut ops = [0u64; 3];
        let mut ranges = vec![0u64; params::KEY_RANGES];
        let per_range = z.keys / params::KEY_RANGES as u64;
        for _ in 0..n {
            let mut r = Request::new(0);
            z.draw(&mut rng, &mut r);
            ops[match r.op {
                Op::Get => 0,
                Op::Set => 1,
                Op::Seek => 2,
            }] += 1;
            ranges[(u64::from(r.key) / per_range) as usize] += 1;
        }
        let chi = chi_square(&ops, &params::MIX, n);
        assert!(chi < chi_square_critical(2), "op mix {ops:?}: chi² {chi}");
        let probs = z.range_probabilities();
        // The hottest range takes most accesses (the paper's hot prefix).
        let hottest = probs.iter().cloned().fold(0.0, f64::max);
        assert!(hottest > 0.7 && hottest < 0.85, "hottest range {hottest}");
        let chi = chi_square(&ranges, &probs, n);
        assert!(
            chi < chi_square_critical(params::KEY_RANGES - 1),
            "key ranges: chi² {chi}"
        );
    }

    #[test]
    fn keys_are_48_bytes_and_scan_and_value_sizes_fit_their_pareto_laws() {
        let mut k = [0u8; params::KEY_SIZE];
        crate::db::key_of(123, &mut k);
        assert_eq!(k.len(), 48);
        let z = ZippyDb::new(1_000, 1).unwrap();
        let mut rng = SmallRng::seed_from_u64(5);
        let n = 300_000u64;
        // Scan lengths: bins over the whole folded range [1, 10 000).
        let edges = [
            1.0, 2.0, 5.0, 10.0, 30.0, 100.0, 300.0, 1_000.0, 3_000.0, 10_000.0,
        ];
        let max = f64::from(params::SCAN_MAX);
        let mut expected: Vec<f64> = edges
            .windows(2)
            .map(|w| folded_bin(params::SCAN, w[0], w[1], max))
            .collect();
        // Raw draws below 1 (and the fold's exact multiples of max) become 1.
        expected[0] += 1.0 - expected.iter().sum::<f64>();
        let mut counts = vec![0u64; edges.len() - 1];
        for _ in 0..n {
            let s = f64::from(z.draw_scan_len(&mut rng));
            let b = edges.partition_point(|&e| e <= s) - 1;
            counts[b] += 1;
        }
        let chi = chi_square(&counts, &expected, n);
        assert!(
            chi < chi_square_critical(counts.len() - 1),
            "scan lengths {counts:?} vs {expected:?}: chi² {chi}"
        );
        // Value sizes: [10, 1024].
        let edges = [10.0, 11.0, 20.0, 30.0, 50.0, 100.0, 200.0, 1_024.0];
        let max = f64::from(params::VALUE_MAX);
        let mut expected: Vec<f64> = edges
            .windows(2)
            .map(|w| folded_bin(params::VALUE, w[0], w[1], max))
            .collect();
        expected[0] += 1.0 - expected.iter().sum::<f64>();
        let mut counts = vec![0u64; edges.len() - 1];
        for _ in 0..n {
            let v = f64::from(z.draw_value_len(&mut rng));
            assert!((10.0..=1024.0).contains(&v));
            let b = (edges.partition_point(|&e| e <= v) - 1).min(counts.len() - 1);
            counts[b] += 1;
        }
        let chi = chi_square(&counts, &expected, n);
        assert!(
            chi < chi_square_critical(counts.len() - 1),
            "value sizes {counts:?} vs {expected:?}: chi² {chi}"
        );
    }

    #[test]
    fn a_wrong_parameter_is_detected() {
        // The test above can fail: the same check against a generator with
        // another scan shape rejects it.
        let wrong = Gpd {
            k: 1.5,
            sigma: 14.236,
        };
        let mut rng = SmallRng::seed_from_u64(5);
        let n = 300_000u64;
        let edges = [
            1.0, 2.0, 5.0, 10.0, 30.0, 100.0, 300.0, 1_000.0, 3_000.0, 10_000.0,
        ];
        let max = f64::from(params::SCAN_MAX);
        let mut expected: Vec<f64> = edges
            .windows(2)
            .map(|w| folded_bin(params::SCAN, w[0], w[1], max))
            .collect();
        expected[0] += 1.0 - expected.iter().sum::<f64>();
        let mut counts = vec![0u64; edges.len() - 1];
        for _ in 0..n {
            let s = f64::from(wrap_scan(wrong.inverse(1.0 - rng.gen::<f64>())));
            counts[edges.partition_point(|&e| e <= s) - 1] += 1;
        }
        assert!(chi_square(&counts, &expected, n) > chi_square_critical(counts.len() - 1));
    }

    #[test]
    fn extra_service_follows_the_cost_model() {
        let m = CostModel {
            get_ns: 10.0,
            put_ns: 20.0,
            seek_base_ns: 100.0,
            seek_entry_ns: 2.0,
        };
        let z = ZippyDb::new(1_000, 1).unwrap().with_extra(m, 3.0);
        let mut rng = SmallRng::seed_from_u64(9);
        for _ in 0..1_000 {
            let mut r = Request::new(0);
            z.draw(&mut rng, &mut r);
            let want = match r.op {
                Op::Get => 30,
                Op::Set => 60,
                Op::Seek => 300 + 6 * r.value_len,
            };
            assert_eq!(r.service_ns, want);
        }
    }

    #[test]
    fn fold_follows_db_bench() {
        assert_eq!(fold(3.0, 10, 1024), 10);
        assert_eq!(fold(500.7, 10, 1024), 500);
        assert_eq!(fold(1030.0, 10, 1024), 10); // 1030 % 1024 = 6, raised to 10
        assert_eq!(wrap_scan(12_345.0), 2_345);
        assert_eq!(wrap_scan(10_000.0), 1);
        assert_eq!(wrap_scan(0.4), 1);
    }
}
