#!/usr/bin/env bash
# Server CPU per reply of the cache with 2 workers, small values (issue 26's
# zero-copy change, checked for a regression on the common path): `skq serve
# kv --arch ARCH --workers 2` on CPU 0, `skq load --protocol memcached
# --kv-workload etc --rate 10000` on CPU 1 for 4 s after 1 s of warm-up;
# server utime+stime from /proc over the generator's run / its sends.
# Usage: bash scripts/bench/kv-small-cpu.sh SKQ_BINARY tpc|shared PORT
# Measure on a quiet machine.
bin=$1; arch=$2; port=$3
taskset -c 0 $bin serve kv --arch $arch --workers 2 --addr 127.0.0.1:$port >/dev/null 2>&1 &
pid=$!
sleep 0.5
t0=$(awk '{print $14+$15}' /proc/$pid/stat)
taskset -c 1 target/release/skq load --addr 127.0.0.1:$port --protocol memcached --kv-workload etc --rate 10000 --connections 64 --duration 4 --warmup 1 --quiet --json /tmp/kvl.json >/dev/null 2>&1
t1=$(awk '{print $14+$15}' /proc/$pid/stat)
kill $pid; wait $pid 2>/dev/null
python3 -c "
import json,os
a=json.load(open('/tmp/kvl.json')); n=a.get('client_sent_total') or a['sent']
tick=os.sysconf('SC_CLK_TCK')
print('$arch', '$bin', 'cpu us/reply %.1f' % (($t1-$t0)/tick*1e6/n), 'p99', a['latency']['p99']['value'])"
