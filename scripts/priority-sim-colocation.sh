#!/usr/bin/env bash
# QStack's co-location experiment in the simulator (virtual time, the real
# skq-core policy code) under hybrid and vanilla: 16 workers, latency-critical requests (exponential,
# mean 10 µs) from 240 connections at the offered loads below, plus a
# best-effort client (16 connections registered BATCH) sending 1 ms requests
# as its own Poisson stream at BE req/s. Each BE rate is run without
# diffusion and with workers 14,15 as batch workers, for seeds 1 and 2;
# the output is the simulator's table per run (latency-critical p99,
# best-effort throughput and p99). Usage: scripts/priority-sim-colocation.sh [SKQ_BINARY] > FILE
set -euo pipefail
skq=${1:-target/release/skq}
common=(-m hybrid,vanilla --workload exponential --mean-us 10 --workers 16
    --connections 256 --batch-conns 16 --batch-service-us 1000
    --loads 0.3,0.5,0.7 --requests 2000000)
for seed in 1 2; do
    for be in 500 1000 1500; do
        for diffusion in none 14,15; do
            extra=()
            [ "$diffusion" != none ] && extra=(--batch-workers "$diffusion")
            echo "## seed ${seed}, BE ${be} req/s, batch workers: ${diffusion}"
            echo "\$ skq sim ${common[*]} --seed $seed --batch-rps $be ${extra[*]}"
            "$skq" sim "${common[@]}" --seed "$seed" --batch-rps "$be" "${extra[@]}"
            echo
        done
    done
done
