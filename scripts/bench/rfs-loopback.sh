#!/usr/bin/env bash
# Does steering loopback's receive processing to the receiving socket's CPU
# (RFS on `lo`) take the server's receive work off the generator's CPU?
# Runs generator-ab.sh's point (stock memcached on CPU 0, `skq load` on
# CPU 1) with RFS off and on, in turns, twice, and prints the generator's
# lines prefixed by the setting. Restores RFS off at the end (the default
# of the VMs this project measures on). Needs root (sysfs, procfs).
# Usage: bash scripts/bench/rfs-loopback.sh [RATE:CONNS]   (default 80000:384)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
point=${1:-80000:384}
rps=/sys/class/net/lo/queues/rx-0
[ -w "$rps/rps_cpus" ] || { echo "rfs-loopback.sh: needs root ($rps/rps_cpus not writable)" >&2; exit 2; }
all=$(printf '%x' $(( (1 << $(nproc)) - 1 )))
on() { echo 32768 > /proc/sys/net/core/rps_sock_flow_entries; echo 32768 > "$rps/rps_flow_cnt"; echo "$all" > "$rps/rps_cpus"; }
off() { echo 0 > "$rps/rps_cpus"; echo 0 > "$rps/rps_flow_cnt"; echo 0 > /proc/sys/net/core/rps_sock_flow_entries; }
trap off EXIT
echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD); load $(cut -d' ' -f1-3 /proc/loadavg); point $point"
for _ in 1 2; do
    for m in off on; do
        $m
        bash scripts/bench/generator-ab.sh target/release/skq target/release/skq 1 "$point" 2>&1 \
            | grep -E "^(before|after) " | sed "s/^/rfs-$m /"
    done
done
