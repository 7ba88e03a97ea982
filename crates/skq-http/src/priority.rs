//! Priority rules of the HTTP server (`skq serve http --priority RULE`):
//! each request is classified from its head, as it arrives, through
//! skq-net's classifier callback (the same mechanism as the cache server's
//! rules and the RPC server's class byte).
//!
//! A rule is `CLASS:COND[&COND...]`: all conditions must hold, the first
//! matching rule wins, and a request no rule matches is regular.
//!
//! | part | meaning |
//! |---|---|
//! | `CLASS` | `high`, `regular` or `batch` |
//! | `path=P` | the request target, as sent (not percent-decoded), starts with `P` |
//! | `header=NAME:VALUE` | a header `NAME` (any case) whose value is exactly `VALUE` (surrounding blanks ignored) |
//! | `header=NAME` | a header `NAME` is present, whatever its value |
//! | `any` | every request |
//!
//! E.g. `--priority 'high:path=/api/' --priority 'batch:header=X-Priority:batch'`.
//!
//! The classifier is a byte-at-a-time state machine over the head, whose
//! whole state (phase, position, two 64-bit masks) fits in the 64 bytes
//! skq-net keeps per connection, so a head split over reads is classified
//! exactly as if whole. It decides as soon as the first rule that can still
//! match does (a `path=` rule at the end of the request target), or at the
//! head's end. A head longer than [`crate::protocol::MAX_HEAD`] is regular.

use std::fmt;

use skq_net::classify::{Class, ClassState, Classifier};

/// Most rules.
pub const MAX_RULES: usize = 32;
/// Most conditions over all rules (one bit each in the state).
pub const MAX_CONDS: usize = 64;
/// Longest path prefix, header name or header value a rule may name.
pub const MAX_TEXT: usize = 256;

/// One condition of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// The request target starts with this.
    Path(Vec<u8>),
    /// A header with this (lower-case) name, and this value if given.
    Header(Vec<u8>, Option<Vec<u8>>),
    /// Always.
    Any,
}

/// One rule: a class and the conditions (indices into the rule set's flat
/// condition list) that select it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    class: Class,
    conds: Vec<usize>,
}

/// A parsed rule set, first match wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<Rule>,
    conds: Vec<Cond>,
}

/// A rule that could not be parsed; the message names the rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong.
    pub why: String,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--priority `{}`: {}", self.rule, self.why)
    }
}

impl std::error::Error for RuleError {}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn parse_cond(c: &str) -> Result<Cond, String> {
    let len_ok = |what: &str, s: &str| {
        if s.is_empty() || s.len() > MAX_TEXT {
            Err(format!(
                "{what} must be 1..={MAX_TEXT} bytes, got {}",
                s.len()
            ))
        } else {
            Ok(())
        }
    };
    if c == "any" {
        return Ok(Cond::Any);
    }
    if let Some(p) = c.strip_prefix("path=") {
        len_ok("path prefix", p)?;
        if p.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err("path prefix holds a space or control character".into());
        }
        return Ok(Cond::Path(p.as_bytes().to_vec()));
    }
    if let Some(h) = c.strip_prefix("header=") {
        let (name, value) = match h.split_once(':') {
            Some((n, v)) => (n, Some(v.trim_matches([' ', '\t']))),
            None => (h, None),
        };
        len_ok("header name", name)?;
        if !name.bytes().all(is_token) {
            return Err(format!("header name `{name}` is not an HTTP token"));
        }
        if let Some(v) = value {
            len_ok("header value", v)?;
            if v.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
                return Err("header value holds a control character".into());
            }
        }
        return Ok(Cond::Header(
            name.to_ascii_lowercase().into_bytes(),
            value.map(|v| v.as_bytes().to_vec()),
        ));
    }
    Err(format!(
        "condition `{c}` is unknown: expected path=PREFIX, header=NAME[:VALUE] or any"
    ))
}

impl Rules {
    /// Parses every rule; the first bad one is reported by name.
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Rules, RuleError> {
        let mut out = Rules::default();
        for (i, text) in texts.iter().enumerate() {
            let text = text.as_ref();
            let err = |why: String| RuleError {
                rule: text.to_string(),
                why,
            };
            if i == MAX_RULES {
                return Err(err(format!("at most {MAX_RULES} rules")));
            }
            let (class, conds) = text
                .split_once(':')
                .ok_or_else(|| err("expected CLASS:CONDITION (e.g. high:path=/api/)".into()))?;
            let class = Class::parse(class).ok_or_else(|| {
                err(format!(
                    "class `{class}` is unknown: expected high, regular or batch"
                ))
            })?;
            let mut rule = Rule {
                class,
                conds: Vec::new(),
            };
            for c in conds.split('&') {
                let cond = parse_cond(c).map_err(err)?;
                if cond == Cond::Any {
                    continue;
                }
                if out.conds.len() == MAX_CONDS {
                    return Err(err(format!(
                        "at most {MAX_CONDS} conditions over all rules"
                    )));
                }
                rule.conds.push(out.conds.len());
                out.conds.push(cond);
            }
            out.rules.push(rule);
        }
        Ok(out)
    }

    /// Whether there are no rules (no classification at all).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    fn mask(&self, pick: impl Fn(&Cond) -> bool) -> u64 {
        self.conds
            .iter()
            .enumerate()
            .filter(|(_, c)| pick(c))
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// The first rule that holds, if no earlier one can still hold.
    /// `open` marks the conditions not decided yet.
    fn decide(&self, met: u64, open: u64) -> Option<Class> {
        for r in &self.rules {
            let need = r.conds.iter().fold(0u64, |m, &i| m | 1 << i);
            if need & met == need {
                return Some(r.class);
            }
            if need & !met & !open != 0 {
                continue; // a condition failed for good
            }
            return None; // may still hold
        }
        Some(Class::Regular)
    }
}

// State layout (little-endian): [0] phase, [1..3] position in the current
// token, [3..11] conditions met, [11..19] conditions still alive in the
// current token (path or header line).
const METHOD: u8 = 0;
const TARGET: u8 = 1;
const TO_EOL: u8 = 2;
const NAME: u8 = 3;
const BLANK: u8 = 4;
const VALUE: u8 = 5;

fn get64(s: &ClassState, at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
}

impl Classifier for Rules {
    fn classify(&self, state: &mut ClassState, offset: usize, bytes: &[u8]) -> Option<Class> {
        if offset == 0 {
            state[..19].fill(0);
        }
        let mut phase = state[0];
        let mut pos = u16::from_le_bytes([state[1], state[2]]) as usize;
        let mut met = get64(state, 3);
        let mut alive = get64(state, 11);
        let paths = self.mask(|c| matches!(c, Cond::Path(_)));
        let headers = self.mask(|c| matches!(c, Cond::Header(..)));
        for (k, &b) in bytes.iter().enumerate() {
            match phase {
                // Blank lines before a request are skipped, as the server does.
                METHOD if offset + k == pos && (b == b'\r' || b == b'\n') => pos += 1,
                METHOD if b == b' ' => (phase, pos, alive) = (TARGET, 0, paths),
                METHOD => {}
                TARGET if b == b' ' || b == b'\r' || b == b'\n' => {
                    phase = if b == b'\n' { NAME } else { TO_EOL };
                    (pos, alive) = (0, headers);
                    if let Some(c) = self.decide(met, headers) {
                        return Some(c);
                    }
                }
                TARGET => {
                    alive = each(alive, |i| match &self.conds[i] {
                        Cond::Path(p) if pos < p.len() => {
                            if p[pos] != b {
                                return false;
                            }
                            if pos + 1 == p.len() {
                                met |= 1 << i;
                            }
                            true
                        }
                        _ => true,
                    });
                    pos += 1;
                }
                TO_EOL if b == b'\n' => (phase, pos, alive) = (NAME, 0, headers),
                TO_EOL => {}
                NAME if pos == 0 && (b == b'\r' || b == b'\n') => {
                    return self.decide(met, 0);
                }
                NAME if b == b':' => {
                    alive = each(alive, |i| match &self.conds[i] {
                        Cond::Header(n, v) if n.len() == pos => {
                            if v.is_none() {
                                met |= 1 << i;
                            }
                            v.is_some()
                        }
                        _ => false,
                    });
                    (phase, pos) = (BLANK, 0);
                }
                NAME if b == b'\n' => (pos, alive) = (0, headers),
                NAME => {
                    alive = each(alive, |i| match &self.conds[i] {
                        Cond::Header(n, _) => n.get(pos) == Some(&b.to_ascii_lowercase()),
                        _ => false,
                    });
                    pos = pos.saturating_add(1);
                }
                BLANK | VALUE if b == b'\r' || b == b'\n' => {
                    // The value ended: a value condition holds if all its
                    // bytes matched (blanks after it were allowed below).
                    each(alive, |i| {
                        if let Cond::Header(_, Some(v)) = &self.conds[i] {
                            if v.len() <= pos {
                                met |= 1 << i;
                            }
                        }
                        false
                    });
                    phase = if b == b'\n' { NAME } else { TO_EOL };
                    (pos, alive) = (0, headers);
                }
                BLANK if b == b' ' || b == b'\t' => {}
                BLANK | VALUE => {
                    phase = VALUE;
                    alive = each(alive, |i| match &self.conds[i] {
                        Cond::Header(_, Some(v)) => match v.get(pos) {
                            Some(&want) => want == b,
                            None => b == b' ' || b == b'\t',
                        },
                        _ => false,
                    });
                    pos = pos.saturating_add(1);
                }
                _ => return Some(Class::Regular),
            }
        }
        state[0] = phase;
        state[1..3].copy_from_slice(&(pos.min(u16::MAX as usize) as u16).to_le_bytes());
        state[3..11].copy_from_slice(&met.to_le_bytes());
        state[11..19].copy_from_slice(&alive.to_le_bytes());
        None
    }

    fn window(&self) -> usize {
        crate::protocol::MAX_HEAD
    }
}

/// Keeps the bits of `mask` for which `keep(bit index)` holds.
fn each(mask: u64, mut keep: impl FnMut(usize) -> bool) -> u64 {
    let mut out = mask;
    let mut m = mask;
    while m != 0 {
        let i = m.trailing_zeros() as usize;
        m &= m - 1;
        if !keep(i) {
            out &= !(1 << i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use skq_net::classify::ClassTracker;

    fn rules(r: &[&str]) -> Rules {
        Rules::parse(r).unwrap()
    }

    /// The class of `req` fed whole, asserting the same at every split.
    fn classify(r: &Rules, req: &[u8]) -> Class {
        skq_net::classify::class_at_every_split(r, req)
    }

    #[test]
    fn every_rule_kind_routes_as_documented() {
        let r = rules(&[
            "batch:path=/api/report",
            "high:path=/api/",
            "batch:header=X-Priority:batch",
            "high:header=x-priority:high&path=/static/",
            "regular:header=X-Regular",
            "high:header=X-Urgent",
        ]);
        use Class::*;
        let cases: [(&[u8], Class); 14] = [
            (b"GET /api/users HTTP/1.1\r\nHost: a\r\n\r\n", High),
            (b"GET /api/report/q3 HTTP/1.1\r\n\r\n", Batch),
            (b"GET /ap HTTP/1.1\r\n\r\n", Regular),
            (
                b"GET /index.html HTTP/1.1\r\nX-Priority: batch\r\n\r\n",
                Batch,
            ),
            (b"GET /x HTTP/1.1\r\nx-PRIORITY:batch  \r\n\r\n", Batch),
            (b"GET /x HTTP/1.1\r\nX-Priority: batches\r\n\r\n", Regular),
            (b"GET /x HTTP/1.1\r\nX-Priority: Batch\r\n\r\n", Regular),
            (
                b"GET /static/a.css HTTP/1.1\r\nX-Priority: high\r\n\r\n",
                High,
            ),
            (b"GET /other HTTP/1.1\r\nX-Priority: high\r\n\r\n", Regular),
            // Earlier rules win: X-Regular before X-Urgent.
            (
                b"GET / HTTP/1.1\r\nX-Urgent: 1\r\nX-Regular: 1\r\n\r\n",
                Regular,
            ),
            (b"GET / HTTP/1.1\r\nX-Urgent:\r\n\r\n", High),
            (b"GET / HTTP/1.1\r\nX-Urgent-Not: 1\r\n\r\n", Regular),
            (b"\r\nGET /api/x HTTP/1.1\r\n\r\n", High),
            (b"GET / HTTP/1.1\nX-Priority: batch\n\n", Batch),
        ];
        for (req, want) in cases {
            assert_eq!(classify(&r, req), want, "{}", String::from_utf8_lossy(req));
        }
        assert_eq!(
            classify(&rules(&["batch:any"]), b"GET / HTTP/1.1\r\n\r\n"),
            Batch
        );
        assert_eq!(
            classify(&Rules::default(), b"GET /api/ HTTP/1.1\r\n\r\n"),
            Regular
        );
    }

    #[test]
    fn a_path_rule_decides_at_the_end_of_the_target() {
        let r = rules(&["high:path=/api/", "batch:header=X-B"]);
        let mut t = ClassTracker::new();
        assert_eq!(t.feed(&r, b"GET /api/x "), Some(Class::High));
        // A header rule must wait for the head's end.
        let mut t = ClassTracker::new();
        assert_eq!(t.feed(&r, b"GET /x HTTP/1.1\r\nX-B: 1\r\n"), None);
        assert_eq!(
            t.feed(&r, b"GET /x HTTP/1.1\r\nX-B: 1\r\n\r\n"),
            Some(Class::Batch)
        );
    }

    #[test]
    fn parse_errors_name_the_rule() {
        for (bad, what) in [
            ("high", "expected CLASS:CONDITION"),
            ("urgent:any", "class `urgent` is unknown"),
            ("high:path=", "path prefix must be 1..=256"),
            ("high:path=/a b", "space or control"),
            ("high:header=", "header name must be"),
            ("high:header=X Y:1", "not an HTTP token"),
            ("high:header=X:", "header value must be"),
            ("high:cookie=a", "condition `cookie=a` is unknown"),
        ] {
            let e = Rules::parse(&["regular:any", bad]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--priority `{bad}`: ")), "{e}");
            assert!(e.contains(what), "{e}");
        }
        let many: Vec<String> = (0..33).map(|i| format!("high:path=/{i}")).collect();
        assert!(Rules::parse(&many)
            .unwrap_err()
            .to_string()
            .contains("at most 32 rules"));
    }

    #[test]
    fn fuzz_body_rules_decide_the_same_however_split() {
        use rand::{Rng, SeedableRng};
        let r = rules(&[
            "high:path=/api/",
            "batch:header=X-Priority:batch",
            "high:header=X-Urgent",
        ]);
        let pieces: [&[u8]; 7] = [
            b"GET /api/x HTTP/1.1\r\n",
            b"GET / HTTP/1.1\r\n",
            b"X-Priority: batch\r\n",
            b"X-Urgent: 1\r\n",
            b"Host: h\r\n",
            b"\r\n",
            b"X-Pri",
        ];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..2000 {
            let mut data = Vec::new();
            for _ in 0..rng.gen_range(0..8) {
                if rng.gen_bool(0.2) {
                    let n = rng.gen_range(0..20);
                    data.extend((0..n).map(|_| rng.gen::<u8>()));
                } else {
                    data.extend_from_slice(pieces[rng.gen_range(0..pieces.len())]);
                }
            }
            let cuts: Vec<usize> = (0..4).map(|_| rng.gen_range(1..12)).collect();
            skq_net::classify::check_split(&r, &data, &cuts);
            // Whole heads, too, split at every byte.
            let mut t = ClassTracker::new();
            t.feed(&r, &data);
            let whole = t.verdict();
            for i in 0..data.len() {
                let mut t = ClassTracker::new();
                t.feed(&r, &data[..i]);
                assert_eq!(t.feed(&r, &data), whole, "split at {i} of {data:?}");
            }
        }
    }
}
