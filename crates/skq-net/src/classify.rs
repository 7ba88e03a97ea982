//! Application-defined request classification (QStack's *fastcallup*).
//!
//! An application registers a [`Classifier`] with its protocol
//! ([`crate::Protocol::classifier`]). The connection layer shows it the
//! first bytes of every request as they arrive, and keeps 64 bytes of
//! per-connection state for it ([`ClassState`]) that persist across reads,
//! so a request split over several reads is classified as if it had
//! arrived whole. The answer is a [`Class`]: high, regular or batch.
//!
//! How the bytes are fed ([`ClassTracker`]): for each request, in order,
//! `classify(state, offset, bytes)` is called with the bytes that arrived
//! since the previous call, `offset` being how many bytes of this request
//! it saw before (0 = a new request starts: reset what is per request).
//! It returns `Some(class)` once it has decided, and is not called again
//! for that request. A request still undecided after
//! [`Classifier::window`] bytes, or served before a verdict, is regular.
//! The state is zeroed when the connection opens, dropped when it closes,
//! and never shared between connections.
//!
//! What the class does: the connection's *level* is the class of its most
//! recently classified request. It rises as soon as a pending high request
//! is classified and falls back when the next request classifies regular.
//! The skq driver hands the level to the scheduler
//! ([`skq_rt::Skq::set_class`]), where it governs the connection's next
//! activation: harvested first, queued on the high queue, stolen first,
//! and (batch) kept off reserved workers under diffusion. The epoll and
//! tokio drivers run the same connection code, so the classifier runs
//! there too (and `Cx::class` reports it), but they have one queue level
//! and ignore the result.
//!
//! The tracker works on bytes already read, not in the kernel: a request's
//! class takes effect from the activation after the one that read its first
//! bytes (QStack classifies in its own stack, before queueing; unmodified
//! Linux gives us no hook there). For a connection whose requests share a
//! class, such as a latency-critical client, every activation after the
//! first is placed by the right class.

pub use skq_core::Class;

/// Bytes of per-connection state a classifier may keep.
pub const STATE_BYTES: usize = 64;

/// A classifier's per-connection state: zeroed at accept, kept across
/// reads and requests, private to one connection.
pub type ClassState = [u8; STATE_BYTES];

/// Decides a request's class from its first bytes. Must accept any input
/// (it sees raw bytes from the network) and must not block.
pub trait Classifier: Send + Sync + 'static {
    /// Sees the next `bytes` of the current request, which begin `offset`
    /// bytes into it; returns the class once decided.
    fn classify(&self, state: &mut ClassState, offset: usize, bytes: &[u8]) -> Option<Class>;

    /// Most bytes of a request looked at; undecided after that = regular.
    fn window(&self) -> usize {
        STATE_BYTES
    }
}

/// Feeds one connection's requests to a classifier and keeps its level.
#[derive(Clone, Debug)]
pub struct ClassTracker {
    state: ClassState,
    /// Bytes of the current request already shown to the classifier.
    fed: usize,
    verdict: Option<Class>,
    level: Class,
}

impl Default for ClassTracker {
    fn default() -> Self {
        ClassTracker::new()
    }
}

impl ClassTracker {
    /// A fresh connection: zeroed state, level regular.
    pub fn new() -> ClassTracker {
        ClassTracker {
            state: [0; STATE_BYTES],
            fed: 0,
            verdict: None,
            level: Class::Regular,
        }
    }

    /// Shows the classifier the part of `pending` (the unserved input,
    /// starting at the current request's first byte) it has not seen yet.
    /// Returns the current request's class once decided.
    pub fn feed(&mut self, c: &dyn Classifier, pending: &[u8]) -> Option<Class> {
        if self.verdict.is_some() {
            return self.verdict;
        }
        let window = c.window().max(1);
        let end = pending.len().min(window);
        if end > self.fed {
            let v = c.classify(&mut self.state, self.fed, &pending[self.fed..end]);
            self.fed = end;
            if v.is_some() {
                self.decide(v);
                return v;
            }
        }
        if self.fed >= window {
            self.decide(Some(Class::Regular));
        }
        self.verdict
    }

    fn decide(&mut self, v: Option<Class>) {
        self.verdict = v;
        if let Some(v) = v {
            self.level = v;
        }
    }

    /// Input at the front was consumed (a request served, or bytes
    /// discarded): what follows starts a new request. A request served
    /// without a verdict counts as regular.
    pub fn request_done(&mut self) {
        if self.verdict.is_none() && self.fed > 0 {
            self.level = Class::Regular;
        }
        self.verdict = None;
        self.fed = 0;
    }

    /// The class of the request now at the front, if decided.
    pub fn verdict(&self) -> Option<Class> {
        self.verdict
    }

    /// The connection's level: the class of its latest classified request.
    pub fn level(&self) -> Class {
        self.level
    }

    /// The classifier's state (for tests and diagnostics).
    pub fn state(&self) -> &ClassState {
        &self.state
    }
}

/// Classifies by one byte at a fixed offset (a flag in a binary header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlagByte {
    /// Offset of the flag in the request.
    pub offset: usize,
    /// Class of each flag value: `map[v]` for v < 3, else regular.
    pub map: [Class; 3],
}

impl FlagByte {
    /// Flag value 0 regular, 1 high, 2 batch.
    pub fn new(offset: usize) -> FlagByte {
        FlagByte {
            offset,
            map: [Class::Regular, Class::High, Class::Batch],
        }
    }
}

impl Classifier for FlagByte {
    #[inline]
    fn classify(&self, _state: &mut ClassState, offset: usize, bytes: &[u8]) -> Option<Class> {
        let i = self.offset.checked_sub(offset)?;
        let &v = bytes.get(i)?;
        Some(self.map.get(v as usize).copied().unwrap_or(Class::Regular))
    }

    fn window(&self) -> usize {
        self.offset + 1
    }
}

/// Most bytes a [`Prefixes`] rule may hold.
pub const MAX_PREFIX: usize = 48;

/// Classifies by the bytes a request starts with (a keyword match): the
/// first rule whose prefix the request starts with gives the class; none
/// matching = regular. E.g. `GET /api/` high, `POST /report` batch.
///
/// Incremental: the state holds a bitmask of rules still possible
/// (bytes 0..8), so each byte is looked at once however the request is
/// split.
#[derive(Clone, Debug, Default)]
pub struct Prefixes {
    rules: Vec<(Vec<u8>, Class)>,
}

/// Why a [`Prefixes`] rule set was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// More rules than the state can track.
    #[error("at most 64 prefix rules, got {0}")]
    TooMany(usize),
    /// A prefix longer than [`MAX_PREFIX`] or empty.
    #[error("prefix rule {index} is {len} bytes: allowed 1..={MAX_PREFIX}")]
    Length {
        /// Which rule (from 0).
        index: usize,
        /// Its length.
        len: usize,
    },
}

impl Prefixes {
    /// A rule set, first match wins.
    pub fn new(rules: Vec<(Vec<u8>, Class)>) -> Result<Prefixes, PrefixError> {
        if rules.len() > 64 {
            return Err(PrefixError::TooMany(rules.len()));
        }
        for (index, (p, _)) in rules.iter().enumerate() {
            if p.is_empty() || p.len() > MAX_PREFIX {
                return Err(PrefixError::Length {
                    index,
                    len: p.len(),
                });
            }
        }
        Ok(Prefixes { rules })
    }

    fn all(&self) -> u64 {
        if self.rules.len() == 64 {
            u64::MAX
        } else {
            (1u64 << self.rules.len()) - 1
        }
    }
}

impl Classifier for Prefixes {
    fn classify(&self, state: &mut ClassState, offset: usize, bytes: &[u8]) -> Option<Class> {
        let mut alive = if offset == 0 {
            self.all()
        } else {
            u64::from_le_bytes(state[..8].try_into().expect("8 bytes"))
        };
        for (k, &b) in bytes.iter().enumerate() {
            let pos = offset + k;
            // Rules longer than `pos` look at this byte; shorter ones have
            // matched already and wait behind an earlier, longer rule.
            let mut m = alive;
            while m != 0 {
                let r = m.trailing_zeros() as usize;
                m &= m - 1;
                let p = &self.rules[r].0;
                if p.len() > pos && p[pos] != b {
                    alive &= !(1u64 << r);
                }
            }
            if alive == 0 {
                return Some(Class::Regular);
            }
            // The first rule still possible decides once it is complete.
            let first = alive.trailing_zeros() as usize;
            if self.rules[first].0.len() <= pos + 1 {
                return Some(self.rules[first].1);
            }
        }
        state[..8].copy_from_slice(&alive.to_le_bytes());
        None
    }

    fn window(&self) -> usize {
        self.rules.iter().map(|(p, _)| p.len()).max().unwrap_or(1)
    }
}

/// The fuzz body for classifiers (the cargo-fuzz target
/// `fuzz/fuzz_targets/classifier.rs` and the seeded tests run it): treats
/// `data` as a stream of `\n`-terminated requests, feeds it to `c` once
/// whole and once in chunks whose sizes `cuts` gives (cycled), the way a
/// connection does, and asserts that nothing panics and that every verdict
/// reached in the split run is the one reached whole: a classifier's
/// decision never depends on read boundaries. (A request served before its
/// classifier decided counts as regular; with bytes of the following
/// request already buffered the whole run may have decided it, which is
/// why only decided verdicts are compared.) Returns the number of requests.
pub fn check_split(c: &dyn Classifier, data: &[u8], cuts: &[usize]) -> usize {
    let whole = run_stream(c, data, &[usize::MAX]);
    let split = run_stream(c, data, cuts);
    assert_eq!(whole.len(), split.len());
    for (i, (w, s)) in whole.iter().zip(&split).enumerate() {
        if s.0.is_some() {
            assert_eq!(
                w.0, s.0,
                "request {i}: the verdict depends on read boundaries"
            );
        }
    }
    whole.len()
}

/// The level one request leaves a fresh connection at, asserting that the
/// same level results when the request's first `i` bytes arrive before the
/// rest, for every `i` (what the rule sets' tests check of each rule).
pub fn class_at_every_split(c: &dyn Classifier, req: &[u8]) -> Class {
    let mut whole = ClassTracker::new();
    whole.feed(c, req);
    whole.request_done();
    for i in 0..=req.len() {
        let mut t = ClassTracker::new();
        t.feed(c, &req[..i]);
        t.feed(c, req);
        t.request_done();
        assert_eq!(t.level(), whole.level(), "split at {i} of {req:?}");
    }
    whole.level()
}

/// Feeds `data` as a connection would: bytes arrive in chunks; after each
/// arrival every complete request at the front is "served" (its verdict and
/// the level recorded, then `request_done`).
fn run_stream(c: &dyn Classifier, data: &[u8], cuts: &[usize]) -> Vec<(Option<Class>, Class)> {
    let mut t = ClassTracker::new();
    let mut out = Vec::new();
    let (mut arrived, mut front, mut k) = (0usize, 0usize, 0usize);
    while arrived < data.len() {
        let step = cuts
            .get(k % cuts.len().max(1))
            .copied()
            .unwrap_or(usize::MAX)
            .max(1);
        k += 1;
        arrived = arrived.saturating_add(step).min(data.len());
        loop {
            let pending = &data[front..arrived];
            let v = t.feed(c, pending);
            let Some(end) = pending.iter().position(|&b| b == b'\n') else {
                break;
            };
            t.request_done();
            out.push((v, t.level()));
            front += end + 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Classifies `req` fed whole and split at every byte boundary (and at
    /// every pair of boundaries), asserting the same verdict.
    fn same_at_every_split(c: &dyn Classifier, req: &[u8]) -> Option<Class> {
        let whole = {
            let mut t = ClassTracker::new();
            t.feed(c, req);
            t.request_done();
            t.level()
        };
        for i in 0..=req.len() {
            for j in i..=req.len() {
                let mut t = ClassTracker::new();
                t.feed(c, &req[..i]);
                t.feed(c, &req[..j]);
                t.feed(c, req);
                t.request_done();
                assert_eq!(t.level(), whole, "split at {i},{j} of {req:?}");
            }
        }
        Some(whole)
    }

    #[test]
    fn flag_byte_is_the_same_split_at_every_byte() {
        let c = FlagByte::new(5);
        for (flag, want) in [
            (0u8, Class::Regular),
            (1, Class::High),
            (2, Class::Batch),
            (9, Class::Regular),
        ] {
            let req = [1, 2, 3, 4, 5, flag, 7, 8];
            assert_eq!(same_at_every_split(&c, &req), Some(want));
        }
        // Too short to reach the flag: regular once served.
        assert_eq!(same_at_every_split(&c, &[1, 2]), Some(Class::Regular));
    }

    #[test]
    fn prefixes_are_the_same_split_at_every_byte_first_rule_wins() {
        let c = Prefixes::new(vec![
            (b"GET /api/".to_vec(), Class::High),
            (b"GET /".to_vec(), Class::Regular),
            (b"POST /report".to_vec(), Class::Batch),
            (b"POST".to_vec(), Class::High),
        ])
        .unwrap();
        let cases: [(&[u8], Class); 6] = [
            (b"GET /api/x HTTP/1.1\r\n\r\n", Class::High),
            (b"GET /index HTTP/1.1\r\n\r\n", Class::Regular),
            (b"POST /report HTTP/1.1\r\n\r\n", Class::Batch),
            (b"POST /other HTTP/1.1\r\n\r\n", Class::High),
            (b"PUT / HTTP/1.1\r\n\r\n", Class::Regular),
            (b"GET /ap", Class::Regular),
        ];
        for (req, want) in cases {
            assert_eq!(same_at_every_split(&c, req), Some(want), "{req:?}");
        }
        assert!(Prefixes::new(vec![(Vec::new(), Class::High)]).is_err());
        assert!(Prefixes::new(vec![(vec![b'x'; 49], Class::High)]).is_err());
    }

    #[test]
    fn fuzz_body_random_streams_classify_the_same_however_split() {
        use rand::{Rng, SeedableRng};
        let prefixes = Prefixes::new(vec![
            (b"GET /api/".to_vec(), Class::High),
            (b"GET /".to_vec(), Class::Regular),
            (b"POST /report".to_vec(), Class::Batch),
            (b"P".to_vec(), Class::High),
        ])
        .unwrap();
        let flag = FlagByte::new(3);
        let pieces: [&[u8]; 6] = [
            b"GET /api/x\n",
            b"GET /a\n",
            b"POST /report\n",
            b"PUT\n",
            b"\n",
            b"P",
        ];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        for _ in 0..3000 {
            let mut data = Vec::new();
            for _ in 0..rng.gen_range(0..8) {
                if rng.gen_bool(0.3) {
                    let n = rng.gen_range(0..20);
                    data.extend((0..n).map(|_| rng.gen::<u8>()));
                } else {
                    data.extend_from_slice(pieces[rng.gen_range(0..pieces.len())]);
                }
            }
            let cuts: Vec<usize> = (0..4).map(|_| rng.gen_range(1..9)).collect();
            check_split(&prefixes, &data, &cuts);
            check_split(&flag, &data, &cuts);
        }
    }

    #[test]
    fn the_level_rises_with_a_high_request_and_falls_with_a_regular_one() {
        let c = FlagByte::new(0);
        let mut t = ClassTracker::new();
        assert_eq!(t.level(), Class::Regular);
        let mut seen = Vec::new();
        for flag in [1u8, 1, 0, 2, 1, 0] {
            assert_eq!(t.feed(&c, &[flag, 0xff]), Some(c.map[flag as usize]));
            seen.push(t.level());
            t.request_done();
            assert_eq!(
                t.level(),
                c.map[flag as usize],
                "kept until the next verdict"
            );
        }
        use Class::*;
        assert_eq!(seen, vec![High, High, Regular, Batch, High, Regular]);
    }

    /// Keeps a per-connection request counter in its state: every third
    /// request of a connection is high.
    struct EveryThird;
    impl Classifier for EveryThird {
        fn classify(&self, state: &mut ClassState, offset: usize, _: &[u8]) -> Option<Class> {
            if offset != 0 {
                return None;
            }
            state[0] = state[0].wrapping_add(1);
            Some(if state[0] % 3 == 0 {
                Class::High
            } else {
                Class::Regular
            })
        }
    }

    #[test]
    fn state_is_per_connection_and_fresh_for_a_new_one() {
        let (mut a, mut b) = (ClassTracker::new(), ClassTracker::new());
        let mut levels = Vec::new();
        for i in 0..6 {
            a.feed(&EveryThird, b"x");
            a.request_done();
            if i % 2 == 0 {
                b.feed(&EveryThird, b"y");
                b.request_done();
            }
            levels.push((a.level(), b.level()));
        }
        assert_eq!(a.state()[0], 6);
        assert_eq!(b.state()[0], 3, "b counted only its own requests");
        assert_eq!(levels[2].0, Class::High);
        assert_eq!(levels[4].1, Class::High);
        // A new connection starts from zero.
        let c = ClassTracker::new();
        assert_eq!(c.state(), &[0u8; STATE_BYTES]);
    }
}
