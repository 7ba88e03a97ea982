//! Priority rules of the cache server (`skq serve kv --priority RULE`): a
//! small rule set that classifies each memcached request from its first
//! line, through skq-net's classifier callback.
//!
//! A rule is `CLASS:COND[&COND...]`, all conditions must hold, the first
//! matching rule wins, and a request no rule matches is regular:
//!
//! | part | meaning |
//! |---|---|
//! | `CLASS` | `high`, `regular` or `batch` |
//! | `cmd=NAME[\|NAME...]` | the command is one of these (`get`, `gets`, `mg`, `set`, ...) |
//! | `prefix=P` | the first key starts with `P` (at most 40 bytes) |
//! | `multikey` | a retrieval naming two or more keys (`get a b`) |
//! | `any` | every request |
//!
//! E.g. `--priority regular:multikey --priority 'high:cmd=get|gets|mg&prefix=user:'`
//! makes single-key reads of `user:` keys high and multi-key gets regular.
//!
//! The classifier keeps the first [`LINE_WINDOW`] bytes of a request line in
//! its per-connection state and decides at the line's end or when the
//! window is full, so a request split over reads is classified exactly as
//! if whole. Decisions look only at the window: a key prefix must fit in it
//! (rules are refused otherwise), and `multikey` needs the second key to
//! start within it.

use std::fmt;

use skq_net::classify::{Class, ClassState, Classifier};

/// Bytes of a request line the rules look at.
pub const LINE_WINDOW: usize = 60;
/// Longest key prefix a rule may name (command + space + prefix must fit).
pub const MAX_KEY_PREFIX: usize = 40;
/// Most rules.
pub const MAX_RULES: usize = 32;

/// One condition of a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// The command is one of these names.
    Cmd(Vec<Vec<u8>>),
    /// The first key starts with this.
    Prefix(Vec<u8>),
    /// A retrieval with two or more keys.
    MultiKey,
    /// Always.
    Any,
}

/// One rule: a class and the conditions that select it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The class given.
    pub class: Class,
    /// All must hold.
    pub conds: Vec<Cond>,
    /// The rule as written.
    pub text: String,
}

/// A parsed rule set, first match wins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    rules: Vec<Rule>,
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

impl Rule {
    /// Parses `CLASS:COND[&COND...]`.
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let err = |why: String| RuleError {
            rule: text.to_string(),
            why,
        };
        let (class, conds) = text.split_once(':').ok_or_else(|| {
            err("expected CLASS:CONDITION (e.g. high:cmd=get&prefix=user:)".into())
        })?;
        let class = Class::parse(class).ok_or_else(|| {
            err(format!(
                "class `{class}` is unknown: expected high, regular or batch"
            ))
        })?;
        let mut out = Vec::new();
        for c in conds.split('&') {
            let cond = if c == "multikey" {
                Cond::MultiKey
            } else if c == "any" {
                Cond::Any
            } else if let Some(names) = c.strip_prefix("cmd=") {
                let names: Vec<Vec<u8>> = names.split('|').map(|n| n.as_bytes().to_vec()).collect();
                if let Some(bad) = names
                    .iter()
                    .find(|n| n.is_empty() || n.len() > 12 || !n.iter().all(u8::is_ascii_lowercase))
                {
                    return Err(err(format!(
                        "command `{}` is not a lower-case memcached command name",
                        String::from_utf8_lossy(bad)
                    )));
                }
                Cond::Cmd(names)
            } else if let Some(p) = c.strip_prefix("prefix=") {
                if p.is_empty() || p.len() > MAX_KEY_PREFIX {
                    return Err(err(format!(
                        "key prefix must be 1..={MAX_KEY_PREFIX} bytes, got {}",
                        p.len()
                    )));
                }
                if p.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    return Err(err("key prefix holds a space or control character".into()));
                }
                Cond::Prefix(p.as_bytes().to_vec())
            } else {
                return Err(err(format!(
                    "condition `{c}` is unknown: expected cmd=NAME[|NAME...], prefix=P, multikey or any"
                )));
            };
            out.push(cond);
        }
        Ok(Rule {
            class,
            conds: out,
            text: text.to_string(),
        })
    }

    fn matches(&self, line: &Line<'_>) -> bool {
        self.conds.iter().all(|c| match c {
            Cond::Any => true,
            Cond::Cmd(names) => names.iter().any(|n| n.as_slice() == line.cmd),
            Cond::Prefix(p) => line.key.is_some_and(|k| k.starts_with(p)),
            Cond::MultiKey => line.keys >= 2,
        })
    }
}

impl Rules {
    /// Parses every rule; the first bad one is reported by name.
    pub fn parse<S: AsRef<str>>(texts: &[S]) -> Result<Rules, RuleError> {
        if texts.len() > MAX_RULES {
            return Err(RuleError {
                rule: texts[MAX_RULES].as_ref().to_string(),
                why: format!("at most {MAX_RULES} rules"),
            });
        }
        let rules = texts
            .iter()
            .map(|t| Rule::parse(t.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(Rules { rules })
    }

    /// How many rules there are.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules (no classification at all).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The class of a request whose first line (or its first
    /// [`LINE_WINDOW`] bytes) is `line`.
    pub fn class_of_line(&self, line: &[u8]) -> Class {
        let parsed = Line::parse(line);
        self.rules
            .iter()
            .find(|r| r.matches(&parsed))
            .map_or(Class::Regular, |r| r.class)
    }
}

/// What the rules look at in a request line.
struct Line<'a> {
    cmd: &'a [u8],
    key: Option<&'a [u8]>,
    keys: usize,
}

impl<'a> Line<'a> {
    fn parse(line: &'a [u8]) -> Line<'a> {
        let line = line.split(|&b| b == b'\n').next().unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut tokens = line.split(|&b| b == b' ').filter(|t| !t.is_empty());
        let cmd = tokens.next().unwrap_or(b"");
        // gat/gats put the expiry time before the keys.
        if matches!(cmd, b"gat" | b"gats") {
            tokens.next();
        }
        let retrieval = matches!(cmd, b"get" | b"gets" | b"gat" | b"gats");
        let key = tokens.next();
        let keys = match key {
            None => 0,
            Some(_) if retrieval => 1 + tokens.count(),
            Some(_) => 1,
        };
        Line { cmd, key, keys }
    }
}

/// The classifier: the request line's first bytes accumulate in the state
/// (byte 0 = how many, then the bytes), decided at `\n` or a full window.
impl Classifier for Rules {
    fn classify(&self, state: &mut ClassState, offset: usize, bytes: &[u8]) -> Option<Class> {
        if offset == 0 {
            state[0] = 0;
        }
        for &b in bytes {
            let n = state[0] as usize;
            if b == b'\n' || n == LINE_WINDOW {
                return Some(self.class_of_line(&state[1..1 + n]));
            }
            state[1 + n] = b;
            state[0] += 1;
        }
        let n = state[0] as usize;
        (n == LINE_WINDOW).then(|| self.class_of_line(&state[1..1 + n]))
    }

    fn window(&self) -> usize {
        LINE_WINDOW + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "regular:multikey",
            "high:cmd=get|gets|mg&prefix=user:",
            "batch:cmd=set&prefix=report:",
            "batch:prefix=bulk",
            "high:cmd=version",
        ]);
        use Class::*;
        let cases: [(&[u8], Class); 12] = [
            (b"get user:1\r\n", High),
            (b"gets user:77\r\n", High),
            (b"mg user:9 v\r\n", High),
            (b"get user:1 user:2\r\n", Regular),
            (b"get session:1\r\n", Regular),
            (b"set user:1 0 0 1\r\nx\r\n", Regular),
            (b"set report:q3 0 0 1\r\nx\r\n", Batch),
            (b"delete bulk:7\r\n", Batch),
            (b"version\r\n", High),
            (b"gat 100 user:1 user:2\r\n", Regular),
            (b"gat 100 user:1\r\n", Regular),
            (b"\r\n", Regular),
        ];
        for (req, want) in cases {
            assert_eq!(classify(&r, req), want, "{}", String::from_utf8_lossy(req));
        }
        // gat names the expiry first: its key is `user:1`, but `gat` is
        // not in the high rule's commands; with it, it is.
        let r2 = rules(&["high:cmd=gat&prefix=user:"]);
        assert_eq!(classify(&r2, b"gat 100 user:1\r\n"), High);
        assert_eq!(classify(&rules(&["batch:any"]), b"anything\r\n"), Batch);
        assert_eq!(classify(&Rules::default(), b"get user:1\r\n"), Regular);
    }

    #[test]
    fn a_long_line_is_decided_on_its_window() {
        let r = rules(&["high:prefix=user:", "batch:multikey"]);
        let mut long = b"get user:".to_vec();
        long.extend(std::iter::repeat_n(b'k', 200));
        long.extend_from_slice(b"\r\n");
        assert_eq!(classify(&r, &long), Class::High);
        let mut multi = b"get ".to_vec();
        for i in 0..30 {
            multi.extend_from_slice(format!("k{i} ").as_bytes());
        }
        multi.extend_from_slice(b"\r\n");
        assert_eq!(classify(&r, &multi), Class::Batch);
    }

    #[test]
    fn parse_errors_name_the_rule() {
        for (bad, what) in [
            ("high", "expected CLASS:CONDITION"),
            ("urgent:any", "class `urgent` is unknown"),
            ("high:cmd=", "not a lower-case memcached command"),
            ("high:cmd=GET", "not a lower-case memcached command"),
            ("high:prefix=", "key prefix must be 1..=40"),
            ("high:size>10", "condition `size>10` is unknown"),
            ("high:prefix=a b", "space or control"),
        ] {
            let e = Rules::parse(&["regular:any", bad]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--priority `{bad}`: ")), "{e}");
            assert!(e.contains(what), "{e}");
        }
        let many: Vec<String> = (0..33).map(|i| format!("high:prefix=k{i}")).collect();
        assert!(Rules::parse(&many)
            .unwrap_err()
            .to_string()
            .contains("at most 32"));
    }

    #[test]
    fn fuzz_body_rules_decide_the_same_however_split() {
        use rand::{Rng, SeedableRng};
        let r = rules(&[
            "regular:multikey",
            "high:cmd=get|gets|mg&prefix=user:",
            "batch:cmd=set&prefix=report:",
        ]);
        let pieces: [&[u8]; 7] = [
            b"get user:1\r\n",
            b"get user:1 user:2\r\n",
            b"set report:1 0 0 1\r\nx\r\n",
            b"mg user:abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz v\r\n",
            b"gat 1 user:1\r\n",
            b"\r\n",
            b"get ",
        ];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        for _ in 0..2000 {
            let mut data = Vec::new();
            for _ in 0..rng.gen_range(0..6) {
                if rng.gen_bool(0.25) {
                    let n = rng.gen_range(0..30);
                    data.extend((0..n).map(|_| rng.gen::<u8>()));
                } else {
                    data.extend_from_slice(pieces[rng.gen_range(0..pieces.len())]);
                }
            }
            let cuts: Vec<usize> = (0..4).map(|_| rng.gen_range(1..12)).collect();
            skq_net::classify::check_split(&r, &data, &cuts);
        }
    }
}
