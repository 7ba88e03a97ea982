//! The `async-*` modes: an application's handler written once as async
//! code, run on an async runtime instead of one of this layer's sans-I/O
//! drivers ([`crate::Mode::Async`]).
//!
//! `async-MODE` runs it on skq-async with the skq scheduling mode `MODE`
//! (any mode `--mode` accepts for the skq driver: `async-hybrid`,
//! `async-best2+steal`, ...); `async-tokio` on tokio's multi-thread runtime.
//! This module only names the runtime; the application starts it through
//! the async drivers ([`crate::async_driver`]: `skq serve rpc` with its own
//! async handler, `skq serve http` with its protocol), and
//! [`crate::Server::start`] refuses an async mode with a message naming it.
//!
//! **Invariants.** The part after `async-` is parsed by the same parser as
//! every other mode, so `async-vanilla+steal` is refused as `vanilla+steal`
//! is; only skq policies and `tokio` are accepted after the prefix. A mode
//! prints back as it parses.

use std::fmt;

use skq_core::Policy;

use crate::spec::ModeError;

/// The prefix of the async modes.
pub const ASYNC_PREFIX: &str = "async-";

/// Which async runtime runs the application's async handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncRuntime {
    /// skq-async, its tasks scheduled by this skq policy.
    Skq {
        /// The policy.
        policy: Policy,
        /// The steal setting, as for [`crate::Mode::Skq`].
        steal: Option<bool>,
    },
    /// tokio's multi-thread runtime.
    Tokio,
}

impl Default for AsyncRuntime {
    /// skq-async with `hybrid`.
    fn default() -> Self {
        AsyncRuntime::Skq {
            policy: Policy::Hybrid,
            steal: None,
        }
    }
}

impl AsyncRuntime {
    /// The runtime `inner` (the mode after `async-`) names; `inner` parsed
    /// as a mode by `parse`. The error names the whole mode.
    pub(crate) fn from_inner(
        full: &str,
        inner: Result<crate::Mode, ModeError>,
    ) -> Result<AsyncRuntime, ModeError> {
        let unknown = || ModeError::Unknown {
            mode: full.to_string(),
            expected: "after `async-` an skq mode (vanilla, shared, queue, cpu, best2, \
                       hybrid, optionally +steal) or tokio",
        };
        match inner {
            Ok(crate::Mode::Skq { policy, steal }) => Ok(AsyncRuntime::Skq { policy, steal }),
            Ok(crate::Mode::Tokio) => Ok(AsyncRuntime::Tokio),
            Ok(_) | Err(ModeError::Unknown { .. }) => Err(unknown()),
            Err(e @ ModeError::Refused(_)) => Err(e),
        }
    }

    /// The skq mode of the runtime (`None` for tokio).
    pub fn skq_mode(self) -> Option<crate::Mode> {
        match self {
            AsyncRuntime::Skq { policy, steal } => Some(crate::Mode::Skq { policy, steal }),
            AsyncRuntime::Tokio => None,
        }
    }
}

impl fmt::Display for AsyncRuntime {
    /// `async-MODE`, as it parses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.skq_mode() {
            Some(m) => write!(f, "{ASYNC_PREFIX}{m}"),
            None => write!(f, "{ASYNC_PREFIX}tokio"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Driver, Mode, ServerConfig, ServerSpec};

    use super::*;

    #[test]
    fn async_modes_parse_and_print_back() {
        for s in [
            "async-hybrid",
            "async-cpu",
            "async-best2+steal",
            "async-hybrid-steal",
            "async-vanilla",
            "async-tokio",
        ] {
            let m: Mode = s.parse().unwrap();
            assert!(matches!(m, Mode::Async(_)), "{s}");
            assert_eq!(m.to_string(), s);
            assert_eq!(m.driver(), Driver::Async);
            assert!(!m.is_skq());
        }
        assert_eq!(
            "async-tokio".parse::<Mode>(),
            Ok(Mode::Async(AsyncRuntime::Tokio))
        );
        for bad in [
            "async-epoll-1to1",
            "async-async-hybrid",
            "async-",
            "async-x",
        ] {
            let e = bad.parse::<Mode>().unwrap_err();
            assert!(
                matches!(&e, ModeError::Unknown { mode, .. } if mode == bad),
                "{bad}: {e:?}"
            );
            assert!(e.to_string().starts_with("unknown mode `"), "{bad}: {e}");
        }
        let e = "async-vanilla+steal".parse::<Mode>().unwrap_err();
        assert!(matches!(e, ModeError::Refused(_)), "{e:?}");
        assert!(
            e.to_string().starts_with("vanilla+steal is not allowed"),
            "{e}"
        );
    }

    #[test]
    fn async_specs_round_trip_and_configure_the_core() {
        let mut s = ServerSpec::new("async-best2+steal".parse().unwrap(), 4);
        s.sched.steal_k = Some(2);
        s.sched.batch_workers = vec![3];
        let json = s.to_json();
        assert!(json.contains(r#""mode":"async-best2+steal""#), "{json}");
        assert_eq!(ServerSpec::parse_arg(&json).unwrap(), s);
        let c = ServerConfig::from_spec(&s);
        c.validate().unwrap();
        assert_eq!(c.mode_name(), "async-best2+steal");
        let core = c.core_config().unwrap();
        assert_eq!(
            (core.workers, core.steal_k, core.batch_workers),
            (4, 2, 1 << 3)
        );

        let t = ServerConfig::from_spec(&ServerSpec::new("async-tokio".parse().unwrap(), 4));
        t.validate().unwrap();
        assert_eq!(t.mode_name(), "async-tokio");
        assert!(t.core_config().is_err());
        let mut e = t.clone();
        e.sched.batch_workers = vec![1];
        assert!(e.validate().is_err());
        // An elastic worker count: skq-async takes it, tokio refuses it.
        let mut e = c.clone();
        e.sched.min_workers = Some(2);
        e.validate().unwrap();
        assert_eq!(e.elastic_config().map(|e| (e.min, e.max)), Some((2, 4)));
        let mut e = t.clone();
        e.sched.min_workers = Some(2);
        assert!(e
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--min-workers needs an skq mode"));
    }
}
