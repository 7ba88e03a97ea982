//! The generator's capacity against a sweep: before measuring, `skq bench`
//! compares every curve's top offered rate per generator thread with what
//! `skq load --capacity` recorded for that protocol and connection count on
//! this machine (`skq_report::capacity`), and says which curves will ask the
//! generator for more than it was seen to sustain within its lateness bound
//! (their top points may then fail the lateness self-check), which
//! curves' slowest points ask less than the rate from which the recorded
//! search met its bound (its slower steps failed: those points may fail
//! the lateness or read-lag self-check), and which protocols have no
//! recorded capacity yet.

use skq_report::capacity::{CapacityEntry, CapacityFile, Machine, Verdict};

use crate::config::Sweep;
use crate::sweep::plan;

/// Curves grouped by what they ask of the generator: protocol,
/// connections, threads, per-thread rate, the entry judged against, names.
type Group = (String, usize, usize, f64, CapacityEntry, String);

/// Lines to print before the sweep: a warning per group of curves that ask
/// the generator the same rate above its capacity, a note per (protocol,
/// connections) never measured. Empty when all is known
/// and within capacity. `file_desc` names the file in the notes.
pub fn capacity_lines(
    sweep: &Sweep,
    file: Option<&CapacityFile>,
    machine: &Machine,
    file_desc: &str,
) -> Vec<String> {
    let mut lines = Vec::new();
    let mut unknown: Vec<(String, usize)> = Vec::new();
    // Curves above capacity, grouped by what they ask of the generator.
    let mut above: Vec<Group> = Vec::new();
    // Curves whose slowest points ask less than the rate from which the
    // generator met its bound, grouped the same way.
    let mut below: Vec<Group> = Vec::new();
    for (c, pts) in sweep.curves.iter().zip(plan(sweep)) {
        // The RocksDB front end has no echo server to measure against.
        if c.load.protocol == "rocksdb" {
            continue;
        }
        // What the curve asks of the generator: protocol, connections, threads.
        let key = (
            c.load.protocol.clone(),
            c.connections,
            c.load.threads.max(1),
        );
        let top = pts.iter().map(|p| p.target_rps).fold(0.0, f64::max);
        let bottom = pts
            .iter()
            .map(|p| p.target_rps)
            .fold(f64::INFINITY, f64::min);
        if let Some((per, e)) = CapacityFile::check_slowest(
            file,
            machine,
            &c.load.protocol,
            c.connections,
            c.load.threads,
            bottom,
        ) {
            group(&mut below, key.clone(), per, e, &c.name);
        }
        match CapacityFile::check(
            file,
            machine,
            &c.load.protocol,
            c.connections,
            c.load.threads,
            top,
        ) {
            Verdict::Within(_) => {}
            Verdict::Above(per, e) => group(&mut above, key, per, e, &c.name),
            Verdict::Unknown => {
                let k = (c.load.protocol.clone(), c.connections);
                if !unknown.contains(&k) {
                    unknown.push(k);
                }
            }
        }
    }
    for (p, conns, threads, per, e, names) in above {
        let cap = e.usable_rps();
        if cap > 0.0 {
            lines.push(format!(
                "warning: {names}: up to {per:.0} req/s per generator thread ({p} over {conns} connections, {threads} thread(s)), above the {cap:.0} req/s one thread kept within its lateness bound here (`skq load --capacity`); the top points may fail the lateness self-check"
            ));
        } else {
            // A zero capacity is a measurement taken when the machine
            // itself missed the bound, not a generator that cannot send.
            lines.push(format!(
                "warning: {names}: when `skq load --capacity` measured {p} over {conns} connections here ({}), no rate kept one generator thread's lateness and read lag within {:.0} us (the machine's floor plus margin was {:.0} us then), so every point of these curves may fail the lateness self-check; on a quiet machine, `skq load --capacity --protocol {p} --capacity-conns {conns}` measures it again",
                age(e.measured_unix_s),
                e.bound_us,
                e.relative_bound_us
            ));
        }
    }
    for (p, conns, threads, per, e, names) in below {
        let from = e.met_from_rps.unwrap_or(0.0);
        lines.push(format!(
            "warning: {names}: down to {per:.0} req/s per generator thread ({p} over {conns} connections, {threads} thread(s)), below the {from:.0} req/s from which one thread kept its lateness and read lag within {:.0} us here (`skq load --capacity`, {}; its slower steps failed); the slowest points may fail the lateness or read-lag self-check",
            e.bound_us,
            age(e.measured_unix_s)
        ));
    }
    for (p, n) in unknown {
        lines.push(format!(
            "note: no generator capacity recorded for {p} over {n} connections on this machine ({file_desc}); `skq load --capacity --protocol {p} --capacity-conns {n}` measures it (about a minute)"
        ));
    }
    lines
}

/// Adds curve `name` to the group of `key` asking `per` req/s per thread,
/// or starts that group.
fn group(
    groups: &mut Vec<Group>,
    key: (String, usize, usize),
    per: f64,
    e: CapacityEntry,
    name: &str,
) {
    match groups
        .iter_mut()
        .find(|a| a.0 == key.0 && (a.1, a.2) == (key.1, key.2) && a.3 == per)
    {
        Some(a) => {
            if !a.5.split(", ").any(|n| n == name) {
                a.5.push_str(&format!(", {name}"));
            }
        }
        None => groups.push((key.0, key.1, key.2, per, e, name.to_string())),
    }
}

/// How long ago `unix_s` was, in words ("3 h ago").
fn age(unix_s: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = now.saturating_sub(unix_s);
    match secs {
        s if s < 120 => format!("{s} s ago"),
        s if s < 2 * 3600 => format!("{} min ago", s / 60),
        s if s < 2 * 86400 => format!("{} h ago", s / 3600),
        s => format!("{} days ago", s / 86400),
    }
}
