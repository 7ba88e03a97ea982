#!/usr/bin/env bash
# Runs commands one at a time behind the load gate that quiet-loop.sh uses for its
# jobs: each waits, holding /tmp/skq-measure.lock only while it checks or runs, until
# the 1-minute load is under LOAD_MAX (0.30) and the 5-minute under LOAD5_MAX (0.90),
# then runs with the lock held, so no build or other measurement can start beside it.
#
#   bash scripts/bench/gated.sh OUT 'CMD 1' 'CMD 2' ...
#
# Each command runs with bash -c from the repository root; its start, end, exit
# status, load and HEAD are appended to OUT/runs.txt, each failed check to
# OUT/probes.txt, its output to OUT/cmdN.log (N counting on from the commands an
# earlier invocation left in OUT). For hand-written measurements (scripts whose jobs
# quiet-loop.sh does not know), so that their figures too start under the gate.
# PERIOD (20) seconds between checks; HOST_PROBE (below) adds the host probe.
set -u
out=${1:?usage: gated.sh OUT 'CMD' ...}
shift
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p "$out"
. scripts/bench/load-gate.sh
PERIOD=${PERIOD:-20}
# HOST_PROBE=N: once the load passes, scripts/bench/host-probe.py must also find
# at most N sleeps of 500 µs late by more than 200 µs on every CPU (the host's
# holds, which the load average does not see; quiet-loop.sh's gate). Off unless set.
HOST_PROBE=${HOST_PROBE:-}
[[ -z $HOST_PROBE || $HOST_PROBE =~ ^[0-9]+$ ]] || { echo "gated: HOST_PROBE is a count of late sleeps, not $HOST_PROBE" >&2; exit 2; }
host_gate() {
    [ -z "$HOST_PROBE" ] && return 0
    local probe prc
    probe=$(python3 scripts/bench/host-probe.py --max-late "$HOST_PROBE" 2>&1)
    prc=$?
    echo "$(date +%T) host probe (at most $HOST_PROBE late): $(tr '\n' ' ' <<< "$probe")" >> "$out/probes.txt"
    if [ $prc -ne 0 ]; then
        line="$line; host probe FAIL"
        return 1
    fi
    line="$line; host probe pass"
}
# Numbers go on from the commands an earlier invocation left in OUT, so a
# second invocation does not overwrite the first one's logs.
n=$(ls "$out" | sed -n 's/^cmd\([0-9]*\)\.log$/\1/p' | sort -n | tail -1)
n=${n:-0}
for cmd in "$@"; do
    n=$((n + 1))
    while true; do
        exec 9>/tmp/skq-measure.lock
        flock 9
        if line=$(load_gate) && host_gate; then
            echo "cmd$n start $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) $(git rev-parse --short HEAD)${HOST_PROBE:+ (host probe passed)}: $cmd" >> "$out/runs.txt"
            bash -c "$cmd" > "$out/cmd$n.log" 2>&1
            echo "cmd$n end $(date +%T) rc=$?" >> "$out/runs.txt"
            flock -u 9; exec 9>&-
            break
        fi
        echo "$(date +%T) cmd$n: $line" >> "$out/probes.txt"
        flock -u 9; exec 9>&-
        sleep "$PERIOD"
    done
done
