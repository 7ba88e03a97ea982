//! The cache's spec: what serves it and with how many workers, as one value
//! that `skq bench` hands `skq serve kv` (`--spec JSON|@FILE`) and that the
//! server's flags (`--arch`, `--mode`, `--workers`, `--pin`) build the same.
//! Parsed once, at the edge; a bad value gives one line naming its field
//! (skq-net's spec reader). Unknown fields are refused.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::KvMode;

/// What `skq serve kv` runs as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvSpec {
    /// `tpc`, or the shared store's driver (`hybrid`, `epoll-1to1`, ...).
    pub mode: KvMode,
    /// Worker threads (1..=64).
    pub workers: usize,
    /// Pin worker threads to CPUs.
    #[serde(default)]
    pub pin: bool,
    /// skq's scheduler tunables (the shared store on an skq mode only).
    #[serde(default, skip_serializing_if = "KvSched::is_default")]
    pub sched: KvSched,
}

/// The tunables of skq's scheduler that `skq serve kv` passes on, each the
/// flag of the same name (`poll_groups` is `--poll-groups`); `None` keeps
/// the core's default. They mean something only to the shared store on an
/// skq mode: a baseline or thread-per-core refuses them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KvSched {
    /// Events taken per steal (1..=8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_k: Option<usize>,
    /// Idle worker's steal retry period (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steal_retry_us: Option<u64>,
    /// Poller hand-over threshold (µs of processing per event; 0 = always).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub promote_min_us: Option<u64>,
    /// Epoll sets the workers are split into (1..=workers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_groups: Option<usize>,
    /// Most workers blocked in one epoll set (0 = every idle worker).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pollers: Option<usize>,
    /// Hybrid's cache-miss penalty (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub penalty_ns: Option<u64>,
}

impl KvSched {
    /// Whether every tunable keeps the core's default.
    pub fn is_default(&self) -> bool {
        *self == KvSched::default()
    }

    /// Sets these tunables in the server layer's scheduler spec, leaving
    /// the others (the cache's batch of 64, batch workers) as they are.
    pub fn apply(&self, s: &mut skq_net::SchedSpec) {
        s.steal_k = self.steal_k;
        s.steal_retry_us = self.steal_retry_us;
        s.promote_min_us = self.promote_min_us;
        s.poll_groups = self.poll_groups;
        s.pollers = self.pollers;
        s.penalty_ns = self.penalty_ns;
    }

    /// The flag of the first tunable set, if any.
    pub fn first_given(&self) -> Option<&'static str> {
        let mut s = skq_net::SchedSpec::default();
        self.apply(&mut s);
        s.core_tunable_given()
    }
}

impl KvSpec {
    /// A `--spec` value: JSON text, or `@FILE` holding it.
    pub fn parse_arg(arg: &str) -> Result<KvSpec, skq_net::SpecError> {
        skq_net::parse_spec_arg(arg)
    }

    /// The JSON form (one line), as `--spec` takes it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a spec always serialises")
    }
}

impl Serialize for KvMode {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for KvMode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KvMode, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_back_as_printed_and_bad_fields_are_named() {
        for m in [
            "tpc",
            "tpc-strict",
            "hybrid",
            "best2+steal",
            "epoll-1to1",
            "epoll-shared",
            "tokio",
            "tokio-spawn-blocking",
        ] {
            let spec = KvSpec {
                mode: m.parse().unwrap(),
                workers: 2,
                pin: true,
                sched: KvSched::default(),
            };
            assert_eq!(spec.mode.to_string(), m);
            assert_eq!(KvSpec::parse_arg(&spec.to_json()).unwrap(), spec);
        }
        assert_eq!(
            "epoll".parse::<KvMode>().unwrap().to_string(),
            "epoll-shared"
        );
        for bad in ["async-hybrid", "async-tokio", "fastest"] {
            assert!(bad.parse::<KvMode>().is_err(), "{bad}");
        }
        let e = KvSpec::parse_arg(r#"{"mode":"fastest","workers":2}"#).unwrap_err();
        assert!(e.to_string().contains("field `mode`"), "{e}");
        let e = KvSpec::parse_arg(r#"{"mode":"tpc","workers":2,"steal_k":1}"#).unwrap_err();
        assert!(e.to_string().contains("steal_k"), "{e}");
    }

    #[test]
    fn scheduler_tunables_read_back_and_stay_out_of_a_default_spec() {
        let plain = KvSpec {
            mode: "cpu".parse().unwrap(),
            workers: 2,
            pin: false,
            sched: KvSched::default(),
        };
        assert!(!plain.to_json().contains("sched"), "{}", plain.to_json());
        let tuned = KvSpec {
            sched: KvSched {
                poll_groups: Some(2),
                pollers: Some(1),
                steal_k: Some(2),
                ..KvSched::default()
            },
            ..plain
        };
        assert_eq!(KvSpec::parse_arg(&tuned.to_json()).unwrap(), tuned);
        assert_eq!(tuned.sched.first_given(), Some("--steal-k"));
        assert_eq!(KvSched::default().first_given(), None);
        let e =
            KvSpec::parse_arg(r#"{"mode":"cpu","workers":2,"sched":{"rtshare":5}}"#).unwrap_err();
        assert!(e.to_string().contains("sched"), "{e}");
    }
}
