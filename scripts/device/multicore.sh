#!/usr/bin/env bash
# The main job with spun service on real cores, run on a lent many-core
# machine (the device tool's 16-CPU machines) where nothing can be built or
# installed: everything it needs travels in .dev/ (git-ignored).
#
#   here:   bash scripts/device/multicore.sh --pack     # fills .dev/
#   there:  bash scripts/device/multicore.sh [--runs N] [--out DIR]
#                [--config FILE] [--workers N,N,...] [--workloads W,...]
#                [--pipes N,N,...] [--cpus LIST --name TAG]
#
# --pack strips target/release/skq into .dev/skq and copies the shared
# libraries it links that a bare machine may lack (librocksdb and its
# compression libraries) into .dev/lib, and memcached (with its libraries)
# into .dev/bin for sweeps that compare against it.
#
# --config picks the sweep (default multicore-spin.toml); --workers runs it
# once per worker count in each run (default: the file's count);
# --workloads replaces the file's workloads; --pipes
# runs `skq pipes` (spun service, hybrid and cpu against epoll-1to1 and
# epoll-shared) at these worker counts once, after the sweeps, into
# DIR/pipes.json, then hybrid against epoll-shared again with one event per
# blocking poll at every set size (`--batch-polls-above 64`) into
# DIR/pipes-one-event.json: the default takes batches in sets of more than
# 8 workers while events are short (docs/ARCHITECTURE.md, "Batches from a
# set of more than 8 workers"), which only a machine with many cores times.
#
# --cpus confines the sweeps to a CPU list (taskset -c LIST; server on its
# first half, generator on the rest), so several copies of this script can
# run side by side on disjoint CPU sets, each with its own --name TAG (files
# DIR/env-TAG.txt and DIR/TAG-runK*.tar.gz). skq bench then judges a point's
# disturbance from the counters of those CPUs alone.
#
# A run prints the machine (CPUs, kernel, whether `ip netns` works: without
# it emulated RSS is off and loopback packets are processed on the sending
# CPU), then runs `skq bench --config
# crates/skq-bench/examples/multicore-spin.toml --strict` N times (default 2)
# and keeps each run's summary, points and plots as DIR/runK.tar.gz
# (DIR defaults to $OUT, the device tool's return folder, else
# results/multicore). A run whose decisive point failed a self-check exits 3
# from skq bench; the script records it and goes on.
set -uo pipefail
cd "$(dirname "$0")/../.."

if [[ "${1:-}" == --pack ]]; then
  set -e
  mkdir -p .dev/lib
  strip -o .dev/skq target/release/skq
  ldd target/release/skq | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libgcc_s.so*|libdl.so*|ld-linux*) ;;
      *) cp -L "$lib" .dev/lib/ ;;
    esac
  done
  # memcached and what it links, for sweeps that compare against it.
  if command -v memcached >/dev/null; then
    mkdir -p .dev/bin
    cp -L "$(command -v memcached)" .dev/bin/
    ldd "$(command -v memcached)" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libc.so*|libm.so*|libpthread.so*|libgcc_s.so*|libdl.so*|ld-linux*) ;;
        *) cp -L "$lib" .dev/lib/ ;;
      esac
    done
  fi
  grep -qx '/.dev/' .git/info/exclude 2>/dev/null || echo '/.dev/' >> .git/info/exclude
  du -sh .dev
  exit 0
fi

RUNS=2
DIR=${OUT:-results/multicore}
CFG=crates/skq-bench/examples/multicore-spin.toml
WORKERS=
WORKLOADS=
PIPES=
CPUS=
TAG=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) RUNS=${2:?--runs needs a number}; shift 2 ;;
    --out) DIR=${2:?--out needs a folder}; shift 2 ;;
    --config) CFG=${2:?--config needs a file}; shift 2 ;;
    --workers) WORKERS=${2:?--workers needs counts such as 4,8}; shift 2 ;;
    --workloads) WORKLOADS=${2:?--workloads needs names such as bimodal-1}; shift 2 ;;
    --pipes) PIPES=${2:?--pipes needs counts such as 4,8,16}; shift 2 ;;
    --cpus) CPUS=${2:?--cpus needs a CPU list such as 0-3}; shift 2 ;;
    --name) TAG=${2:?--name needs a tag}; shift 2 ;;
    *) echo "multicore.sh: unknown option '$1' (see the header of this script)" >&2; exit 2 ;;
  esac
done

SKQ=target/release/skq
if [[ -x .dev/skq ]]; then
  SKQ=.dev/skq
  export LD_LIBRARY_PATH=$PWD/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [[ -d .dev/bin ]] && export PATH=$PWD/.dev/bin:$PATH
fi
[[ -f "$CFG" ]] || { echo "multicore.sh: no sweep file '$CFG'" >&2; exit 2; }
PIN=()
if [[ -n "$CPUS" ]]; then
  [[ -n "$TAG" ]] || { echo "multicore.sh: --cpus needs --name (side-by-side runs keep apart by it)" >&2; exit 2; }
  PIN=(taskset -c "$CPUS")
fi
ENV_TXT=$DIR/env${TAG:+-$TAG}.txt
mkdir -p "$DIR"
RSS=()
{
  echo "date: $(date -u +%FT%TZ)"
  echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-))"
  echo "kernel: $(uname -r)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  [[ -n "$CPUS" ]] && echo "confined to CPUs $CPUS (taskset)"
  probe=skq-probe${TAG:+-$TAG}  # side-by-side copies probe apart
  if command -v ip >/dev/null && ip netns add "$probe" 2>/dev/null; then
    ip netns del "$probe"
    echo "netns: works (emulated RSS on, as the sweep says)"
  else
    echo "netns: unavailable (emulated RSS off: --rss off)"
    RSS=(--rss off)
  fi
} | tee "$ENV_TXT"
grep -q unavailable "$ENV_TXT" && RSS=(--rss off)

FAILED=0
SWEEPS=0
for k in $(seq "$RUNS"); do
  # One pass per --workers count, or one with the file's own count.
  counts=${WORKERS//,/ }
  for w in ${counts:-file}; do
    [[ "$w" == file ]] && w=
    name=${TAG:+$TAG-}run$k${w:+-w$w}
    out=$(mktemp -d)/$name
    mkdir -p "$out"
    echo "[multicore] $name at $(date -u +%T) UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
    "${PIN[@]}" "$SKQ" bench --config "$CFG" "${RSS[@]}" ${w:+--workers "$w"} ${WORKLOADS:+--workloads "$WORKLOADS"} --out "$out" --strict > "$out/bench.log" 2>&1
    rc=$?
    SWEEPS=$((SWEEPS + 1))
    echo "[multicore] $name: skq bench exit $rc"
    [[ $rc -ne 0 ]] && FAILED=$((FAILED + 1))
    sed -n '/^config /,/^disturbed decisive points/p' "$out/summary.txt" 2>/dev/null || tail -20 "$out/bench.log"
    rm -rf "$out/hdr" "$out/logs" "$out/points" "$out/report.html" "$out/summary.csv"
    tar -C "$(dirname "$out")" -czf "$DIR/$name.tar.gz" "$name"
  done
done
echo "[multicore] $FAILED of $SWEEPS sweeps had a decisive point that failed a self-check"
if [[ -n "$PIPES" ]]; then
  echo "[multicore] pipes at $PIPES workers, $(date -u +%T) UTC"
  "$SKQ" pipes --modes epoll-1to1,epoll-shared,cpu,hybrid --workers "$PIPES" \
    --emulated-workers 0 --json "$DIR/pipes.json" 2>&1 | tee "$DIR/pipes.txt"
  echo "[multicore] pipes with one-event polls (--batch-polls-above 64), $(date -u +%T) UTC"
  "$SKQ" pipes --modes epoll-shared,hybrid --baseline epoll-shared --workers "$PIPES" \
    --emulated-workers 0 --batch-polls-above 64 --json "$DIR/pipes-one-event.json" 2>&1 |
    tee "$DIR/pipes-one-event.txt"
fi
