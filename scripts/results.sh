#!/usr/bin/env bash
# One command per row of docs/RESULTS.md: runs a seed experiment the way the
# row reports it, RUNS times, each run on a quiet machine, and keeps what the
# row shows.
#
#   bash scripts/results.sh NAME [--runs N] [--dir DIR] [--no-wait]
#   bash scripts/results.sh list
#
# NAME is one of the experiments `list` prints, or `all` (every one in turn:
# about an hour and a half for two runs).
#
# Each run goes to DIR/NAME-runK (DIR defaults to docs/results/results-DATE)
# and keeps, for `skq bench` experiments:
#   summary.txt  summary.json  points.csv  points.json  plots/p99-*.svg  bench.log
# (the per-point histograms, logs and report.html are dropped: they are large
# and everything the row shows is in these). Every `skq bench` run uses
# `--strict`: a run whose decisive point failed a self-check or was disturbed
# by another process exits 3; this script records that, goes on with the next
# run, prints which runs failed at the end, and exits 3 if any did.
#
# Quiet: before each run the script waits (up to 20 min, unless --no-wait)
# for the 1-minute load average to fall below 0.30, and holds
# /tmp/skq-measure.lock while it measures, so builds that take the same lock
# wait for it. It prints the load it saw.
#
# It needs target/release/skq (built here if missing: `cargo build --release
# -p skq`); `zippydb` preloads its database into /dev/shm if it is missing;
# `sphinx` and `memcached` need memcached, `http` nginx (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

SKQ=target/release/skq
LOCK=/tmp/skq-measure.lock
DB=/dev/shm/skq-rocksdb

# name | what | how long one run takes here
experiments() {
  cat <<'EOF'
pipes       SKQ §6.1 pipe scalability: skq modes against epoll-1to1 and epoll-shared (skq pipes)   ~1 min
zygos       ZygOS max load at SLO against the M/G/8 bound: the main job (skq bench, built-in sweep)  ~3 min
gis         SKQ §6.5 GIS application server (examples/gis.toml)                                   ~4 min
zippydb     SKQ §6.6 RocksDB under ZippyDB (examples/zippydb.toml)                               ~5 min
http        SKQ §6.7 web server with IO variance (examples/http-io.toml)                         ~3 min
nginx       skq's web server against nginx (examples/http-vs-nginx.toml)                         ~2 min
priority    SKQ §6.8 event prioritization (examples/priority-skq68.toml and -vanilla)            ~2 min
colocation  QStack priority co-location with diffusion (examples/priority-colocation.toml)       ~1 min
elastic     QStack elastic cores on a load step (examples/elastic-step.toml)                     ~1 min
sphinx      Sphinx thread-per-core KV against memcached (examples/sphinx.toml)                   ~9 min
EOF
}

usage() {
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  echo
  echo "experiments:"
  experiments | sed 's/^/  /'
}

NAME=${1:-}
if [[ -z "$NAME" || "$NAME" == -h || "$NAME" == --help ]]; then
  usage
  exit 0
fi
shift
RUNS=2
DIR=docs/results/results-$(date -u +%Y-%m-%d)
WAIT=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
    --dir) DIR=${2:?--dir needs a folder}; shift 2 ;;
    --no-wait) WAIT=0; shift ;;
    *) echo "results.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$RUNS" =~ ^[1-9][0-9]*$ ]]; then
  echo "results.sh: --runs must be a positive whole number, not '$RUNS'" >&2
  exit 2
fi

if [[ "$NAME" == list ]]; then
  experiments
  exit 0
fi
if [[ "$NAME" != all ]] && ! experiments | awk '{print $1}' | grep -qx "$NAME"; then
  echo "results.sh: unknown experiment '$NAME'; one of: $(experiments | awk '{print $1}' | tr '\n' ' ')all" >&2
  exit 2
fi

if [[ ! -x "$SKQ" ]]; then
  echo "[results] building $SKQ"
  flock "$LOCK" cargo build --release -p skq
fi
mkdir -p "$DIR"

wait_quiet() {
  [[ "$WAIT" == 1 ]] || return 0
  local i l
  for i in $(seq 600); do
    l=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$l" 'BEGIN { exit !(l < 0.30) }'; then return 0; fi
    (( i % 30 == 1 )) && echo "[results] waiting for a quiet machine (1-min load $l)"
    sleep 2
  done
  echo "[results] the machine did not get quiet in 20 min (load $(cut -d' ' -f1 /proc/loadavg)); measuring anyway, say so beside the figures"
}

FAILED=()

# bench NAME RUN CONFIG... : one skq bench run under --strict.
bench() {
  local name=$1 k=$2
  shift 2
  local out="$DIR/$name-run$k"
  rm -rf "$out"
  mkdir -p "$out"
  wait_quiet
  echo "[results] $name run $k: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%T) UTC; $SKQ bench $* --out $out --strict"
  local rc
  set +e
  flock "$LOCK" "$SKQ" bench "$@" --out "$out" --strict 2>&1 | tee "$out/bench.log"
  rc=${PIPESTATUS[0]}
  set -e
  rm -rf "$out/hdr" "$out/logs" "$out/points" "$out/report.html" "$out/summary.csv"
  if [[ $rc -ne 0 ]]; then
    FAILED+=("$name run $k (skq bench exit $rc)")
  fi
  echo "[results] $name run $k: the row's figures (summary table):"
  sed -n '/^config /,/^disturbed decisive points/p' "$out/summary.txt" || true
}

run_one() {
  local name=$1 k
  for k in $(seq "$RUNS"); do
    case "$name" in
      pipes)
        local out="$DIR/pipes-run$k"
        rm -rf "$out"; mkdir -p "$out"
        wait_quiet
        echo "[results] pipes run $k: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%T) UTC"
        flock "$LOCK" "$SKQ" pipes --modes epoll-1to1,epoll-shared,vanilla,shared,cpu,hybrid \
          --json "$out/pipes.json" 2>&1 | tee "$out/pipes.txt"
        ;;
      zygos) bench zygos "$k" ;;
      gis) bench gis "$k" --config crates/skq-bench/examples/gis.toml ;;
      zippydb)
        if [[ ! -d "$DB" ]]; then
          echo "[results] preloading the ZippyDB database into $DB"
          flock "$LOCK" "$SKQ" db preload --db "$DB" --keys 10000000 --quiet
        fi
        bench zippydb "$k" --config crates/skq-bench/examples/zippydb.toml
        ;;
      http) bench http "$k" --config crates/skq-bench/examples/http-io.toml ;;
      nginx) bench nginx "$k" --config crates/skq-bench/examples/http-vs-nginx.toml ;;
      priority)
        # One seed for the pair (each run draws its own): a seed follows
        # the load's place in the list, so hybrid and vanilla meet the same
        # arrivals at 0.1 and 0.3, first and second in both files.
        local seed
        seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')
        bench priority "$k" --config crates/skq-bench/examples/priority-skq68.toml --seed "$seed"
        bench priority-vanilla "$k" --config crates/skq-bench/examples/priority-skq68-vanilla.toml --seed "$seed"
        ;;
      colocation) bench colocation "$k" --config crates/skq-bench/examples/priority-colocation.toml ;;
      elastic)
        bench elastic "$k" --config crates/skq-bench/examples/elastic-step.toml
        echo "[results] elastic run $k: CPU and p99 per phase"
        python3 scripts/bench/elastic_series.py "$DIR/elastic-run$k/points.json" 2>&1 | tee "$DIR/elastic-run$k/phases.txt" || true
        ;;
      sphinx) bench sphinx "$k" --config crates/skq-bench/examples/sphinx.toml ;;
    esac
  done
  echo "[results] $name: the row's figures, run by run (scripts/results-table.py)"
  if [[ "$name" == priority ]]; then
    python3 scripts/results-table.py "$DIR" priority priority-vanilla | tee "$DIR/$name-table.txt"
  else
    python3 scripts/results-table.py "$DIR" "$name" | tee "$DIR/$name-table.txt"
  fi
  if [[ "$name" == sphinx && "$RUNS" -ge 1 ]]; then
    local runs=()
    for k in $(seq "$RUNS"); do runs+=("$DIR/sphinx-run$k"); done
    echo "[results] sphinx: kv-tpc's update-only p99 against memcached's"
    python3 scripts/bench/sphinx-compare.py "${runs[@]}" | tee "$DIR/sphinx-compare.txt"
  fi
}

if [[ "$NAME" == all ]]; then
  for n in $(experiments | awk '{print $1}'); do run_one "$n"; done
else
  run_one "$NAME"
fi

echo "[results] outputs under $DIR"
if [[ ${#FAILED[@]} -gt 0 ]]; then
  echo "[results] runs whose decisive points failed a self-check or were disturbed (--strict):"
  printf '  %s\n' "${FAILED[@]}"
  exit 3
fi
