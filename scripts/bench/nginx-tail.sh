#!/usr/bin/env bash
# Why does docs-tuned nginx have a p99 of milliseconds at low open-loop load?
# Runs nginx (1 worker, CPU 0) with the configuration `skq bench` writes
# (sendfile, tcp_nopush, tcp_nodelay on) and with one setting changed at a
# time, and drives each with `skq load --protocol http` (64 connections, CPU
# 1) at a few rates. Prints p50/p99/p99.9 and the generator's self-check.
#
#   bash scripts/bench/nginx-tail.sh [RATES] [SECS]   (default "2000 5250 10500", 3)
#
# Measure on a quiet machine (load < 0.3, nothing else running).
set -euo pipefail
cd "$(dirname "$0")/../.."
SKQ=target/release/skq
RATES=${1:-2000 5250 10500}
SECS=${2:-3}
W=$(mktemp -d)
trap 'kill $(cat "$W"/nginx.pid 2>/dev/null) 2>/dev/null; sleep 0.3; rm -rf "$W"' EXIT
chmod 755 "$W"; mkdir -p "$W/www"
# The same ~640-byte page as skq bench's http sweeps.
python3 -c "print('<!doctype html><title>skq</title>' + 'x' * 600)" > "$W/www/index.html"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
conf() { # sendfile tcp_nopush tcp_nodelay
  cat <<CONF
daemon off;
master_process on;
worker_processes 1;
pid $W/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile $1;
    tcp_nopush $2;
    tcp_nodelay $3;
    open_file_cache max=1000 inactive=20s;
    open_file_cache_valid 30s;
    open_file_cache_min_uses 1;
    open_file_cache_errors on;
    keepalive_requests 1000000;
    client_body_temp_path $W/tmp-body;
    proxy_temp_path $W/tmp-proxy;
    fastcgi_temp_path $W/tmp-fastcgi;
    uwsgi_temp_path $W/tmp-uwsgi;
    scgi_temp_path $W/tmp-scgi;
    server {
        listen 127.0.0.1:$PORT;
        location / { root $W/www; }
    }
}
CONF
}
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%T) UTC; nginx $(nginx -v 2>&1 | cut -d/ -f2)"
printf '%-44s %-6s %-8s %-8s %-8s %s\n' config rate p50_us p99_us p999_us self-check
# The control: skq's own HTTP server (one epoll-1to1 worker) on the same page,
# CPUs and rates, so a tail that both show is the machine's or the generator's.
measure() { # label rate
  taskset -c 1 "$SKQ" load --addr 127.0.0.1:$PORT --protocol http --rate "$2" --connections 64 \
    --duration "$SECS" --warmup 0.5 --json "$W/p.json" >/dev/null 2>&1 || true
  python3 - "$W/p.json" "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
lat = d["latency"]
q = lambda k: lat[k]["value"]
c = d["checks"]
print(f"{sys.argv[2]:<44} {sys.argv[3]:<6} {q('p50'):<8.0f} {q('p99'):<8.0f} {q('p999'):<8.0f} "
      f"{'PASS' if c['pass'] else 'FAIL: ' + '; '.join(n[:60] for n in c['notes'] if not n.startswith('info'))}")
PY
}
taskset -c 0 "$SKQ" serve http --root "$W/www" --addr 127.0.0.1:$PORT --workers 1 --mode epoll-1to1 >"$W/skq.log" 2>&1 &
SKQ_PID=$!
sleep 0.5
for r in $RATES; do measure "skq serve http, epoll-1to1 (control)" "$r"; done
kill $SKQ_PID; wait $SKQ_PID 2>/dev/null || true; sleep 0.3
for variant in "on on on" "on off on" "off off on" "on on off"; do
  set -- $variant
  conf "$1" "$2" "$3" > "$W/nginx.conf"
  taskset -c 0 nginx -p "$W" -c "$W/nginx.conf" -e stderr 2>"$W/nginx.log" &
  sleep 0.5
  for r in $RATES; do measure "sendfile $1, tcp_nopush $2, tcp_nodelay $3" "$r"; done
  kill "$(cat "$W/nginx.pid")"; wait 2>/dev/null || true; sleep 0.3
done
