//! The cache's spec: what serves it and with how many workers, as one value
//! that `skq bench` hands `skq serve kv` (`--spec JSON|@FILE`) and that the
//! server's flags (`--arch`, `--mode`, `--workers`, `--pin`) build the same.
//! Parsed once, at the edge; a bad value gives one line naming its field
//! (skq-net's spec reader). Unknown fields are refused.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use skq_net::CoreTunables;

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
    /// skq's scheduler tunables (the shared store on an skq mode only;
    /// thread-per-core and the baselines refuse them).
    #[serde(default, skip_serializing_if = "CoreTunables::is_default")]
    pub sched: CoreTunables,
    /// `--idle-tick-us`: a thread per CPU sleeping this many µs in a loop
    /// (`None`, the default: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_tick_us: Option<u64>,
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
                sched: CoreTunables::default(),
                idle_tick_us: None,
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
            sched: CoreTunables::default(),
            idle_tick_us: None,
        };
        assert!(!plain.to_json().contains("sched"), "{}", plain.to_json());
        assert!(
            !plain.to_json().contains("idle_tick"),
            "{}",
            plain.to_json()
        );
        let ticking = KvSpec {
            idle_tick_us: Some(2000),
            ..plain.clone()
        };
        assert_eq!(KvSpec::parse_arg(&ticking.to_json()).unwrap(), ticking);
        let tuned = KvSpec {
            sched: CoreTunables {
                poll_groups: Some(2),
                pollers: Some(1),
                steal_k: Some(2),
                ..CoreTunables::default()
            },
            ..plain
        };
        assert_eq!(KvSpec::parse_arg(&tuned.to_json()).unwrap(), tuned);
        assert_eq!(tuned.sched.first_given(), Some("--steal-k"));
        assert_eq!(CoreTunables::default().first_given(), None);
        let e =
            KvSpec::parse_arg(r#"{"mode":"cpu","workers":2,"sched":{"rtshare":5}}"#).unwrap_err();
        assert!(e.to_string().contains("sched"), "{e}");
    }
}
