#!/usr/bin/env bash
# CPU per reply of two builds, interleaved: cost-per-reply.py with the build
# BEFORE, then with AFTER, RUNS times at each rate, each invocation one run of
# MODES (default hybrid,epoll-shared: a mode the change does not touch is the
# control for the host's drift between invocations). Then, per build,
# cost-ratios.py's hybrid / epoll-shared ratios with the user-space / kernel
# split, and the medians per rate and mode of CPU, user and kernel µs per reply.
#
#   bash scripts/bench/cost-ab.sh OUT BEFORE AFTER [RATES] [RUNS] [MODES]
#
# BEFORE and AFTER are `skq` binaries (copy the build of each commit aside);
# RATES default "3200 9600 14400" (the main job's loads 0.2, 0.6, 0.9), RUNS 3.
# Outputs OUT/before.txt, OUT/after.txt (cost-per-reply.py logs; an
# invocation's points are one run, its `run` column 1) and OUT/summary.txt.
# Measure on a quiet machine, behind the gate (scripts/bench/gated.sh).
set -euo pipefail
out=${1:?usage: cost-ab.sh OUT BEFORE AFTER [RATES] [RUNS] [MODES]}
before=${2:?BEFORE binary}
after=${3:?AFTER binary}
rates=${4:-3200 9600 14400}
runs=${5:-3}
modes=${6:-hybrid,epoll-shared}
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
for b in "$before" "$after"; do
    [ -x "$b" ] || { echo "cost-ab: $b is not an executable" >&2; exit 2; }
done
mkdir -p "$out"
: > "$out/before.txt"
: > "$out/after.txt"
echo "# $(date -u +%FT%TZ) before=$before after=$after rates '$rates' runs $runs modes $modes" | tee "$out/summary.txt"
for rate in $rates; do
    for run in $(seq 1 "$runs"); do
        for which in before after; do
            bin=$before
            [ "$which" = after ] && bin=$after
            echo "## rate $rate, run $run, $which" >&2
            SKQ=$bin python3 scripts/bench/cost-per-reply.py --runs 1 --modes "$modes" \
                --rate "$rate" --secs 10 >> "$out/$which.txt"
        done
    done
done
python3 - "$out" "$modes" <<'PY' | tee -a "$out/summary.txt"
import statistics, subprocess, sys
sys.path.insert(0, "scripts/bench")
from benchlib import read_cost_log
out, modes = sys.argv[1], sys.argv[2].split(",")
for which in ("before", "after"):
    print(f"## {which}")
    if {"hybrid", "epoll-shared"} <= set(modes):
        r = subprocess.run(["python3", "scripts/bench/cost-ratios.py", f"{out}/{which}.txt"],
                           capture_output=True, text=True)
        print(r.stdout.rstrip())
    pts = [(blk["rate"], p) for blk in read_cost_log(f"{out}/{which}.txt") for p in blk["points"]]
    for rate in sorted({r for r, _ in pts}):
        for m in modes:
            ps = [p for r, p in pts if r == rate and p["mode"] == m]
            if not ps:
                continue
            med = lambda k: statistics.median(p[k] for p in ps if p[k] is not None)
            print(f"{rate:>6} req/s {m:<14} median of {len(ps)} ({sum(p['passed'] for p in ps)} passing): "
                  f"CPU {med('cpu_us'):.2f} us per reply, user {med('user_us'):.2f}, "
                  f"kernel {med('sys_us'):.2f}")
PY
