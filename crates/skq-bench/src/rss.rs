//! Emulated RSS for the sweep (BRIEF §8): what was asked ([`RssSpec`]), what
//! was in force ([`RssStatus`], shown by every output), and the namespace
//! the servers and load generators run in ([`RssEnv`]).
//!
//! [`RssEnv::start`] creates one [`RpsNamespace`] for the whole sweep with
//! RPS over the chosen CPUs. Where the machine refuses (not root, no
//! namespaces, no iproute2, no RPS), the sweep runs on the host's loopback
//! and the status says why. The namespace is deleted when the `RssEnv` is
//! dropped (normal end, `?` return or panic) and, on a second Ctrl-C, by
//! the emergency path of [`crate::interrupt`]; namespaces left by a killed
//! harness are removed at the next start ([`skq_sys::netns::remove_stale`]).
//!
//! Flow migration (`rss_migrate_ms = N`): while a point runs, the mask is
//! rewritten every N ms, alternating between the whole set and one of its
//! CPUs in turn ([`migration_set`]); each point starts from the whole set.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use skq_sys::netns::{self, RpsNamespace};

use crate::config::Settings;
use crate::interrupt;

/// Shortest flow migration period accepted, ms.
pub const MIN_MIGRATE_MS: u64 = 20;

/// Which CPUs emulated RSS spreads flows over (`--rss`, `[sweep] rss`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RssSpec {
    /// No namespace: the host's loopback.
    #[default]
    Off,
    /// Every CPU the harness may use.
    All,
    /// These CPUs.
    Cpus(Vec<usize>),
}

impl std::str::FromStr for RssSpec {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<RssSpec> {
        match s.trim() {
            "off" | "none" | "false" => Ok(RssSpec::Off),
            "all" | "on" | "true" => Ok(RssSpec::All),
            list => parse_cpu_list(list).map(RssSpec::Cpus).map_err(|_| {
                anyhow::anyhow!("`{s}` is not off, all or a CPU list such as 0,1 or 0-3")
            }),
        }
    }
}

impl TryFrom<String> for RssSpec {
    type Error = anyhow::Error;
    fn try_from(s: String) -> Result<RssSpec> {
        s.parse()
    }
}

impl From<RssSpec> for String {
    fn from(r: RssSpec) -> String {
        match r {
            RssSpec::Off => "off".into(),
            RssSpec::All => "all".into(),
            RssSpec::Cpus(c) => cpu_list(&c),
        }
    }
}

impl RssSpec {
    /// The CPUs to spread over, given those the harness may use; `None`
    /// when off. A listed CPU the harness may not use is an error.
    pub fn resolve(&self, allowed: &[usize]) -> Result<Option<Vec<usize>>> {
        match self {
            RssSpec::Off => Ok(None),
            RssSpec::All => Ok(Some(allowed.to_vec())),
            RssSpec::Cpus(c) => {
                if let Some(bad) = c.iter().find(|c| !allowed.contains(c)) {
                    bail!(
                        "`rss`: CPU {bad} is not among the CPUs this process may use ({})",
                        cpu_list(allowed)
                    );
                }
                Ok(Some(c.clone()))
            }
        }
    }
}

/// `0,1`, `0-3` or `0-1,4`: CPUs, ascending, deduplicated.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>> {
    let cpus = skq_core::parse_cpu_list(s).map_err(anyhow::Error::msg)?;
    Ok(cpus.into_iter().map(|c| c as usize).collect())
}

/// CPUs as a compact list (`0-3,6`).
pub fn cpu_list(cpus: &[usize]) -> String {
    let cpus: Vec<u32> = cpus.iter().map(|&c| c as u32).collect();
    skq_core::format_cpu_list(&cpus)
}

/// The mask of migration step `step` (0 = the point's start): even steps
/// the whole set, odd steps one CPU of it in turn.
pub fn migration_set(cpus: &[usize], step: u64) -> Vec<usize> {
    if step.is_multiple_of(2) || cpus.is_empty() {
        cpus.to_vec()
    } else {
        vec![cpus[(step / 2) as usize % cpus.len()]]
    }
}

/// Emulated RSS as it was in force, for every output.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RssStatus {
    /// Servers and generators ran in an RPS namespace.
    pub on: bool,
    /// The CPUs RPS spread flows over.
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// Flow migration period, ms.
    #[serde(default)]
    pub migrate_ms: Option<u64>,
    /// The namespace's name.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Why it was off.
    #[serde(default)]
    pub off_reason: Option<String>,
}

impl RssStatus {
    /// Off, with the reason.
    pub fn off(reason: impl Into<String>) -> RssStatus {
        RssStatus {
            off_reason: Some(reason.into()),
            ..Default::default()
        }
    }

    /// One line: on over which CPUs, with which migration, or off and why.
    pub fn describe(&self) -> String {
        if self.on {
            let migrate = match self.migrate_ms {
                Some(ms) => format!(
                    "flows migrate every {ms} ms (the mask alternates between all of them and one CPU in turn)"
                ),
                None => "no flow migration".into(),
            };
            format!(
                "on: RPS spreads flows over CPUs {} by flow hash, as a NIC's RSS would (network namespace {}); {migrate}",
                cpu_list(&self.cpus),
                self.namespace.as_deref().unwrap_or("?"),
            )
        } else {
            format!(
                "off: {}; on the host's loopback every flow is processed on its sender's CPU",
                self.off_reason.as_deref().unwrap_or("not recorded")
            )
        }
    }

    /// Short form for point records: `off`, `0,1` or `0,1 migrate 500ms`.
    pub fn label(&self) -> String {
        match (self.on, self.migrate_ms) {
            (false, _) => "off".into(),
            (true, None) => cpu_list(&self.cpus),
            (true, Some(ms)) => format!("{} migrate {ms}ms", cpu_list(&self.cpus)),
        }
    }

    /// Whether it was asked for and the machine refused.
    pub fn refused(&self) -> bool {
        !self.on
            && self
                .off_reason
                .as_deref()
                .is_some_and(|r| !r.starts_with("not requested"))
    }
}

/// The sweep's RPS namespace.
pub struct RssEnv {
    ns: RpsNamespace,
    cpus: Vec<usize>,
    migrate: Option<Duration>,
    // Deletes the namespace on the emergency path (a second Ctrl-C).
    _emergency: interrupt::Cleanup,
}

/// Flow migration during one point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Migrations {
    /// Mask rewrites done.
    pub rewrites: u64,
    /// Why migration stopped early.
    pub error: Option<String>,
}

fn to_u32(cpus: &[usize]) -> Vec<u32> {
    cpus.iter().map(|&c| c as u32).collect()
}

impl RssEnv {
    /// Creates the namespace `settings` ask for, or says why not. `allowed`
    /// are the CPUs the harness may use. An `Err` is a configuration error
    /// (a listed CPU not allowed); a refusal by the machine is `Ok((None,
    /// status))`.
    pub fn start(settings: &Settings, allowed: &[usize]) -> Result<(Option<RssEnv>, RssStatus)> {
        let Some(cpus) = settings.rss.resolve(allowed)? else {
            return Ok((None, RssStatus::off("not requested (rss = off)")));
        };
        if settings.rss_migrate_ms.is_some() && cpus.len() < 2 {
            bail!(
                "`rss_migrate_ms`: flows can only move between two CPUs or more; rss is {}",
                cpu_list(&cpus)
            );
        }
        // Namespaces of harnesses that were killed before cleaning up.
        let _ = netns::remove_stale();
        let ns = match RpsNamespace::create(&to_u32(&cpus)) {
            Ok(ns) => ns,
            Err(e) => return Ok((None, RssStatus::off(e.to_string()))),
        };
        let name = ns.name().to_string();
        let emergency = interrupt::on_emergency(move || {
            let _ = netns::delete(&name);
        });
        let status = RssStatus {
            on: true,
            cpus: cpus.clone(),
            migrate_ms: settings.rss_migrate_ms,
            namespace: Some(ns.name().to_string()),
            off_reason: None,
        };
        Ok((
            Some(RssEnv {
                ns,
                cpus,
                migrate: settings.rss_migrate_ms.map(Duration::from_millis),
                _emergency: emergency,
            }),
            status,
        ))
    }

    /// The namespace.
    pub fn namespace(&self) -> &RpsNamespace {
        &self.ns
    }

    /// Sets the mask back to the whole set (a point's start).
    pub fn reset(&self) -> Result<()> {
        self.ns.set_rps_cpus(&to_u32(&self.cpus))?;
        Ok(())
    }

    /// Runs `f` while a helper thread migrates flows (when a period is set),
    /// then stops it and sets the whole set back.
    pub fn while_migrating<T>(&self, f: impl FnOnce() -> T) -> (T, Migrations) {
        let Some(period) = self.migrate else {
            return (f(), Migrations::default());
        };
        let (out, m) = std::thread::scope(|s| {
            let (stop, stopped) = mpsc::channel::<()>();
            let helper = s.spawn(move || {
                let mut m = Migrations::default();
                let mut step = 0;
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
                    step += 1;
                    let set = migration_set(&self.cpus, step);
                    if let Err(e) = self.ns.set_rps_cpus(&to_u32(&set)) {
                        m.error = Some(e.to_string());
                        break;
                    }
                    m.rewrites += 1;
                }
                m
            });
            let out = f();
            drop(stop);
            (out, helper.join().unwrap_or_default())
        });
        let mut m = m;
        if let Err(e) = self.reset() {
            m.error.get_or_insert(format!("{e:#}"));
        }
        (out, m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print() {
        assert_eq!("off".parse::<RssSpec>().unwrap(), RssSpec::Off);
        assert_eq!("all".parse::<RssSpec>().unwrap(), RssSpec::All);
        assert_eq!(
            "0-2,5,1".parse::<RssSpec>().unwrap(),
            RssSpec::Cpus(vec![0, 1, 2, 5])
        );
        let e = "fast".parse::<RssSpec>().unwrap_err().to_string();
        assert!(e.contains("`fast`") && e.contains("CPU list"), "{e}");
        assert!("3-1".parse::<RssSpec>().is_err());
        assert_eq!(String::from(RssSpec::Cpus(vec![0, 1, 2, 3, 6])), "0-3,6");
        assert_eq!(cpu_list(&[0, 1]), "0,1");
        assert_eq!(cpu_list(&[1, 3, 4, 5, 9]), "1,3-5,9");
        assert_eq!(RssSpec::All.resolve(&[0, 1]).unwrap(), Some(vec![0, 1]));
        let e = RssSpec::Cpus(vec![0, 7]).resolve(&[0, 1]).unwrap_err();
        assert!(e.to_string().contains("CPU 7"), "{e}");
        assert_eq!(RssSpec::Off.resolve(&[0, 1]).unwrap(), None);
    }

    #[test]
    fn migration_alternates_whole_set_and_one_cpu_in_turn() {
        let steps: Vec<Vec<usize>> = (0..6).map(|k| migration_set(&[0, 1], k)).collect();
        assert_eq!(
            steps,
            [
                vec![0, 1],
                vec![0],
                vec![0, 1],
                vec![1],
                vec![0, 1],
                vec![0]
            ]
        );
        assert_eq!(migration_set(&[2, 3, 5], 5), vec![5]);
    }

    #[test]
    fn status_lines_say_on_where_or_off_why() {
        let on = RssStatus {
            on: true,
            cpus: vec![0, 1],
            migrate_ms: Some(500),
            namespace: Some("skq-1-0".into()),
            off_reason: None,
        };
        let d = on.describe();
        assert!(d.starts_with("on: RPS spreads flows over CPUs 0,1"), "{d}");
        assert!(d.contains("skq-1-0") && d.contains("every 500 ms"), "{d}");
        assert_eq!(on.label(), "0,1 migrate 500ms");
        assert!(!on.refused());
        let asked_not = RssStatus::off("not requested (rss = off)");
        assert!(asked_not.describe().starts_with("off: not requested"));
        assert!(!asked_not.refused());
        assert_eq!(asked_not.label(), "off");
        let refused = RssStatus::off("network namespaces not permitted: `ip netns add` ...");
        assert!(refused.refused());
        assert!(refused.describe().contains("not permitted"));
    }
}
