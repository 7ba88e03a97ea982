//! memcached text protocol: `get <key>` and `set <key> 0 0 <len>`.
//!
//! Keys are derived from a key index, so a reply can be checked against the
//! request at the head of the connection's FIFO (memcached answers each
//! connection in order): a `VALUE` line must name the requested key, a GET may
//! also end with a bare `END` (a miss), a SET must get `STORED`.
//!
//! Key-value mixes (`--kv-workload`):
//!
//! | name      | keys                    | values                         | gets |
//! |-----------|-------------------------|--------------------------------|------|
//! | etc       | GEV(30.8, 8.20, 0.0787) | GPD(0, 214.5, 0.348), ≤ 500 kB | 97%  |
//! | sphinx-ro | 30 B                    | 200 B                          | 100% |
//! | sphinx-wo | 30 B                    | 200 B                          | 0%   |
//! | custom    | `--key-size`            | `--value-size`                 | `--get-ratio` |
//!
//! The ETC parameters are the fits of Atikoglu et al. (SIGMETRICS 2012) as
//! used by the mutilate load generator; each key's size is fixed by its index
//! (a hash picks its GEV quantile), so gets and sets of one key agree.

use rand::Rng;

use super::{find_crlf, Answers, Codec, Op, Parsed, Request};

/// Largest value an ETC set writes.
const ETC_VALUE_CAP: u32 = 500_000;

/// A size distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeDist {
    /// Always this many bytes.
    Fixed(u32),
    /// ETC key sizes (generalised extreme value).
    EtcKey,
    /// ETC value sizes (generalised Pareto).
    EtcValue,
}

/// What `--kv-workload` and its companions describe.
#[derive(Clone, Debug, PartialEq)]
pub struct KvSpec {
    /// Mix name, for reports.
    pub name: String,
    /// Key sizes.
    pub key_size: SizeDist,
    /// Value sizes for sets.
    pub value_size: SizeDist,
    /// Fraction of gets.
    pub get_ratio: f64,
    /// Number of distinct keys (uniform popularity).
    pub keyspace: u32,
}

impl KvSpec {
    /// Builds a mix from its name; `custom` takes the explicit sizes.
    pub fn named(
        name: &str,
        key_size: u32,
        value_size: u32,
        get_ratio: f64,
        keyspace: u32,
    ) -> Result<KvSpec, String> {
        let (k, v, g) = match name {
            "etc" => (SizeDist::EtcKey, SizeDist::EtcValue, 0.97),
            "sphinx-ro" => (SizeDist::Fixed(30), SizeDist::Fixed(200), 1.0),
            "sphinx-wo" => (SizeDist::Fixed(30), SizeDist::Fixed(200), 0.0),
            "custom" => (
                SizeDist::Fixed(key_size),
                SizeDist::Fixed(value_size),
                get_ratio,
            ),
            _ => {
                return Err(format!(
                    "unknown --kv-workload `{name}`; expected etc, sphinx-ro, sphinx-wo or custom"
                ))
            }
        };
        if !(0.0..=1.0).contains(&g) {
            return Err(format!("--get-ratio {g} must be between 0 and 1"));
        }
        if !(1..=250).contains(&key_size) {
            return Err(format!(
                "--key-size {key_size} must be 1..=250 (memcached's limit)"
            ));
        }
        if keyspace == 0 {
            return Err("--keyspace must be at least 1".into());
        }
        Ok(KvSpec {
            name: name.into(),
            key_size: k,
            value_size: v,
            get_ratio: g,
            keyspace,
        })
    }

    /// Length of key `idx`'s name.
    pub fn key_len(&self, idx: u32) -> usize {
        let digits = decimal_digits(idx) + 1;
        let want = match self.key_size {
            SizeDist::Fixed(n) => n as usize,
            _ => {
                // A fixed per-key uniform from a hash, through the GEV quantile.
                let u = (splitmix(idx as u64) >> 11) as f64 / (1u64 << 53) as f64;
                let u = u.clamp(1e-9, 1.0 - 1e-9);
                let (mu, sigma, xi) = (30.7984, 8.20449, 0.078688);
                (mu + sigma * ((-u.ln()).powf(-xi) - 1.0) / xi)
                    .round()
                    .clamp(1.0, 250.0) as usize
            }
        };
        want.max(digits)
    }

    /// Appends key `idx`'s name: `k` then the zero-padded index.
    pub fn write_key(&self, idx: u32, out: &mut Vec<u8>) {
        let len = self.key_len(idx);
        out.push(b'k');
        let digits = idx.to_string();
        out.resize(out.len() + len - 1 - digits.len(), b'0');
        out.extend_from_slice(digits.as_bytes());
    }

    /// Draws the key, operation and value size of a request.
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R, req: &mut Request) {
        req.key = rng.gen_range(0..self.keyspace);
        req.op = if rng.gen::<f64>() < self.get_ratio {
            Op::Get
        } else {
            Op::Set
        };
        req.value_len = match self.value_size {
            SizeDist::Fixed(n) => n,
            _ => {
                let u: f64 = rng.gen();
                let (sigma, xi) = (214.476, 0.348238);
                ((sigma * ((1.0 - u).powf(-xi) - 1.0) / xi).round() as u32).clamp(1, ETC_VALUE_CAP)
            }
        };
    }
}

fn decimal_digits(mut v: u32) -> usize {
    let mut d = 1;
    while v >= 10 {
        v /= 10;
        d += 1;
    }
    d
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The memcached text codec.
#[derive(Clone, Debug)]
pub struct Memcached {
    /// The key-value mix (for key names).
    pub spec: KvSpec,
}

impl Codec for Memcached {
    fn encode(&self, req: &Request, out: &mut Vec<u8>) {
        match req.op {
            // A SEEK is never drawn for memcached; it reads like a get.
            Op::Get | Op::Seek => {
                out.extend_from_slice(b"get ");
                self.spec.write_key(req.key, out);
                out.extend_from_slice(b"\r\n");
            }
            Op::Set => {
                out.extend_from_slice(b"set ");
                self.spec.write_key(req.key, out);
                out.extend_from_slice(format!(" 0 0 {}\r\n", req.value_len).as_bytes());
                out.resize(out.len() + req.value_len as usize, b'v');
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    fn parse(&self, buf: &[u8], head: Option<&Request>) -> Parsed {
        let Some(eol) = find_crlf(buf) else {
            return if buf.len() > 4096 {
                Parsed::Fatal("memcached reply line over 4 KiB".into())
            } else {
                Parsed::Incomplete
            };
        };
        let line = &buf[..eol];
        let reply = |len, ok, miss| Parsed::Reply {
            len,
            answers: Answers::Head(ok),
            service_ns: None,
            miss,
        };
        let is_get = head.is_some_and(|h| h.op == Op::Get);
        let is_set = head.is_some_and(|h| h.op == Op::Set);
        if let Some(rest) = line.strip_prefix(b"VALUE ") {
            let mut parts = rest.split(|&b| b == b' ');
            let (key, _flags, bytes) = (parts.next(), parts.next(), parts.next());
            let Some(n) = bytes
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|s| s.parse::<usize>().ok())
            else {
                return Parsed::Fatal("malformed VALUE line".into());
            };
            let total = eol + 2 + n + 2 + 5; // line, data, CRLF, "END\r\n"
            if buf.len() < total {
                return Parsed::Incomplete;
            }
            if &buf[total - 5..total] != b"END\r\n" || &buf[eol + 2 + n..eol + 4 + n] != b"\r\n" {
                return Parsed::Fatal("VALUE block not followed by END".into());
            }
            let ok = is_get
                && head.is_some_and(|h| {
                    let mut k = Vec::with_capacity(64);
                    self.spec.write_key(h.key, &mut k);
                    key == Some(&k[..])
                });
            return reply(total, ok, false);
        }
        match line {
            b"END" => reply(eol + 2, is_get, true),
            b"STORED" => reply(eol + 2, is_set, false),
            // NOT_STORED, ERROR, SERVER_ERROR ...: a reply, but a wrong one.
            _ => reply(eol + 2, false, false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn sphinx() -> Memcached {
        Memcached {
            spec: KvSpec::named("sphinx-ro", 30, 200, 1.0, 1000).unwrap(),
        }
    }

    #[test]
    fn keys_have_the_requested_size() {
        let mc = sphinx();
        let mut k = Vec::new();
        mc.spec.write_key(42, &mut k);
        assert_eq!(k.len(), 30);
        assert!(k.starts_with(b"k0") && k.ends_with(b"42"));
        let etc = KvSpec::named("etc", 30, 200, 0.5, 100_000).unwrap();
        let mean = (0..10_000).map(|i| etc.key_len(i) as f64).sum::<f64>() / 10_000.0;
        assert!((30.0..40.0).contains(&mean), "ETC mean key size {mean}");
        assert_eq!(etc.key_len(7), etc.key_len(7));
    }

    #[test]
    fn mixes_draw_their_operations() {
        let mut rng = SmallRng::seed_from_u64(1);
        let wo = KvSpec::named("sphinx-wo", 30, 200, 1.0, 10).unwrap();
        let mut r = Request::new(0);
        for _ in 0..100 {
            wo.draw(&mut rng, &mut r);
            assert_eq!((r.op, r.value_len), (Op::Set, 200));
            assert!(r.key < 10);
        }
        assert!(KvSpec::named("nope", 30, 200, 1.0, 10)
            .unwrap_err()
            .contains("sphinx-ro"));
        assert!(KvSpec::named("custom", 30, 200, 1.5, 10)
            .unwrap_err()
            .contains("--get-ratio"));
    }

    #[test]
    fn checks_replies_against_the_head_request() {
        let mc = sphinx();
        let mut get = Request::new(0);
        get.key = 5;
        let mut wire = Vec::new();
        mc.encode(&get, &mut wire);
        assert_eq!(wire.len(), 4 + 30 + 2);
        assert!(wire.starts_with(b"get k000") && wire.ends_with(b"5\r\n"));
        let mut key = Vec::new();
        mc.spec.write_key(5, &mut key);
        let mut hit = b"VALUE ".to_vec();
        hit.extend_from_slice(&key);
        hit.extend_from_slice(b" 0 3\r\nabc\r\nEND\r\n");
        let ok = mc.parse(&hit, Some(&get));
        assert_eq!(
            ok,
            Parsed::Reply {
                len: hit.len(),
                answers: Answers::Head(true),
                service_ns: None,
                miss: false
            }
        );
        assert_eq!(
            mc.parse(&hit[..hit.len() - 1], Some(&get)),
            Parsed::Incomplete
        );
        let mut other = get;
        other.key = 6;
        assert!(matches!(
            mc.parse(&hit, Some(&other)),
            Parsed::Reply {
                answers: Answers::Head(false),
                ..
            }
        ));
        assert!(matches!(
            mc.parse(b"END\r\n", Some(&get)),
            Parsed::Reply {
                answers: Answers::Head(true),
                miss: true,
                ..
            }
        ));
        let mut set = get;
        set.op = Op::Set;
        assert!(matches!(
            mc.parse(b"STORED\r\n", Some(&set)),
            Parsed::Reply {
                answers: Answers::Head(true),
                ..
            }
        ));
        assert!(matches!(
            mc.parse(b"STORED\r\n", Some(&get)),
            Parsed::Reply {
                answers: Answers::Head(false),
                ..
            }
        ));
        assert!(matches!(
            mc.parse(b"SERVER_ERROR x\r\n", Some(&set)),
            Parsed::Reply {
                answers: Answers::Head(false),
                ..
            }
        ));
        assert!(matches!(
            mc.parse(b"VALUE k 0 zz\r\n", Some(&get)),
            Parsed::Fatal(_)
        ));
    }
}
