//! What the server under test says about each point: the worker imbalance
//! figure, steals per second, migrations per second, and wake-ups and
//! events queued behind a busy worker per event delivered, read from the
//! server's own statistics file (`skq serve rpc|rocksdb --stats-json`, the
//! `skq_net::ServerStats` it writes at shutdown).
//!
//! * **Imbalance** is SKQ's figure (§6.5): `(busiest − least busy) /
//!   busiest` of the workers' processing time, as a percent. Processing time
//!   is what the protocol recorded per worker (`per_worker[].busy_ns`: the
//!   service each request was delivered), so it is the same number the server
//!   prints as `imbalance`, on every driver.
//! * **Steals/s** and **migrations/s** come from the skq scheduler's
//!   per-worker counters (`scheduler.per_worker[].steals_made` and the sum of
//!   `migrations`: CPU-follow, balance, steal, exit), divided by the time the
//!   server ran. Drivers without the skq scheduler (`epoll-1to1`,
//!   `epoll-shared`, tokio) report none: their threads' hand-offs are not
//!   counted, so the cells stay empty rather than read 0.
//! * **Wake-ups per event** and **behind busy per event** come from the same
//!   counters (`wakeups`: pushes that claimed an idle worker, a wake-up
//!   sent when that worker is another one and none when a worker that
//!   harvested readiness claims itself; `queued_behind_busy`: events pushed
//!   onto a worker's queue while it was processing a batch), summed over
//!   the workers and divided by the events they delivered (`delivered`):
//!   the scheduler's hand-offs behind each event, beside the context
//!   switches per reply that `/proc` gives for every driver. None when no
//!   event was delivered.
//!
//! The server runs for one point (warm-up included) and is stopped after it,
//! so each figure covers that point alone. When a point is measured again
//! (a late generator), the figures are those of the last attempt.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The server's own figures for one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerPointStats {
    /// `(busiest − least busy) / busiest` worker processing time, percent.
    pub imbalance_pct: f64,
    /// Busiest worker's processing time (ms).
    pub busiest_ms: f64,
    /// Least busy worker's processing time (ms).
    pub least_busy_ms: f64,
    /// Sources stolen per second (skq driver only).
    pub steals_per_s: Option<f64>,
    /// Sources moved between workers per second, all reasons (skq driver only).
    pub migrations_per_s: Option<f64>,
    /// Idle workers claimed by a push (the scheduler's `wakeups`: a wake-up
    /// when another worker is claimed, none when the harvester claims
    /// itself), per event delivered (skq driver only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wakeups_per_event: Option<f64>,
    /// Events pushed onto a worker's queue while it processed a batch, per
    /// event delivered (skq driver only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind_busy_per_event: Option<f64>,
    /// Seconds the server ran.
    pub secs: f64,
    /// Elastic worker count: the resource manager's decisions as (ms since
    /// `started_ns`, demand in busy workers, active workers); empty with a
    /// fixed count. A demand the server could not measure (NaN) is
    /// written as null, hence None.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elastic: Vec<(f64, Option<f64>, usize)>,
    /// CLOCK_MONOTONIC ns the server started at (skq driver only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ns: Option<u64>,
}

fn u64_at(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// Reads a `--stats-json` file's text; `secs` is how long the server ran.
pub fn from_stats_json(text: &str, secs: f64) -> Result<ServerPointStats> {
    let v: Value = serde_json::from_str(text).context("server statistics: not JSON")?;
    let workers = v
        .get("per_worker")
        .and_then(Value::as_array)
        .context("server statistics: no per_worker list")?;
    let busy: Vec<u64> = workers.iter().map(|w| u64_at(w, &["busy_ns"])).collect();
    let hi = busy.iter().copied().max().unwrap_or(0);
    let lo = busy.iter().copied().min().unwrap_or(0);
    let imbalance_pct = if hi == 0 {
        0.0
    } else {
        (hi - lo) as f64 / hi as f64 * 100.0
    };
    let per_s = |n: u64| (secs > 0.0).then(|| n as f64 / secs);
    let sched = v
        .get("scheduler")
        .and_then(|s| s.get("per_worker"))
        .and_then(Value::as_array);
    let sum = |ws: &[Value], k: &str| ws.iter().map(|w| u64_at(w, &[k])).sum::<u64>();
    let (steals_per_s, migrations_per_s, wakeups_per_event, behind_busy_per_event) = match sched {
        Some(ws) => {
            let migrations: u64 = ws
                .iter()
                .map(|w| {
                    ["cpu_follow", "balance", "steal", "exit"]
                        .iter()
                        .map(|k| u64_at(w, &["migrations", k]))
                        .sum::<u64>()
                })
                .sum();
            let events = sum(ws, "delivered");
            let per_event = |k: &str| (events > 0).then(|| sum(ws, k) as f64 / events as f64);
            (
                per_s(sum(ws, "steals_made")),
                per_s(migrations),
                per_event("wakeups"),
                per_event("queued_behind_busy"),
            )
        }
        None => (None, None, None, None),
    };
    let scheduler = v.get("scheduler");
    let elastic = scheduler
        .and_then(|s| s.get("elastic"))
        .map(|e| serde_json::from_value(e.clone()))
        .transpose()
        .context("server statistics: malformed elastic decisions")?
        .unwrap_or_default();
    let started_ns = scheduler
        .and_then(|s| s.get("started_ns"))
        .and_then(Value::as_u64);
    Ok(ServerPointStats {
        elastic,
        started_ns,
        imbalance_pct,
        busiest_ms: hi as f64 / 1e6,
        least_busy_ms: lo as f64 / 1e6,
        steals_per_s,
        migrations_per_s,
        wakeups_per_event,
        behind_busy_per_event,
        secs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_imbalance_steals_and_migrations() {
        let text = r#"{
            "imbalance": 0.75,
            "per_worker": [{"busy_ns": 4000000}, {"busy_ns": 1000000}, {"busy_ns": 2000000}],
            "scheduler": {"per_worker": [
                {"steals_made": 3, "migrations": {"cpu_follow": 1, "balance": 2, "steal": 3, "exit": 0},
                 "delivered": 30, "wakeups": 6, "queued_behind_busy": 3},
                {"steals_made": 5, "migrations": {"cpu_follow": 0, "balance": 0, "steal": 5, "exit": 1},
                 "delivered": 10, "wakeups": 4, "queued_behind_busy": 0}
            ]}
        }"#;
        let s = from_stats_json(text, 2.0).unwrap();
        assert_eq!(s.imbalance_pct, 75.0);
        assert_eq!((s.busiest_ms, s.least_busy_ms), (4.0, 1.0));
        assert_eq!(s.steals_per_s, Some(4.0));
        assert_eq!(s.migrations_per_s, Some(6.0));
        // (6 + 4) wake-ups and 3 events behind a busy worker over 40 events.
        assert_eq!(s.wakeups_per_event, Some(0.25));
        assert_eq!(s.behind_busy_per_event, Some(0.075));
        // A driver without the skq scheduler: no steal or migration figures.
        let s =
            from_stats_json(r#"{"per_worker": [{"busy_ns": 0}, {"busy_ns": 0}]}"#, 1.0).unwrap();
        assert_eq!((s.imbalance_pct, s.steals_per_s), (0.0, None));
        assert_eq!((s.wakeups_per_event, s.behind_busy_per_event), (None, None));
        assert!(s.elastic.is_empty() && s.started_ns.is_none());
        assert!(from_stats_json("{}", 1.0).is_err());
        // Elastic decisions and the server's start time.
        let s = from_stats_json(
            r#"{"per_worker": [{"busy_ns": 1}], "scheduler": {"per_worker": [],
                "started_ns": 77, "elastic": [[20.0, 1.5, 2], [40.5, 6.0, 8], [60.0, null, 8]]}}"#,
            1.0,
        )
        .unwrap();
        assert_eq!(s.started_ns, Some(77));
        // A scheduler that delivered nothing has no per-event figure.
        assert_eq!(s.wakeups_per_event, None);
        // An unmeasured demand (null) keeps the decision.
        assert_eq!(
            s.elastic,
            [(20.0, Some(1.5), 2), (40.5, Some(6.0), 8), (60.0, None, 8)]
        );
    }
}
