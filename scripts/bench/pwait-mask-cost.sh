#!/usr/bin/env bash
# What the signal mask of a blocking poll costs: skq-rt's pollers call
# epoll_pwait2 with a mask that unblocks the wake-up signal (so a targeted
# wake-up can end that one thread's poll), and the kernel swaps the thread's
# mask in and out under the process's signal lock on every call. This times
# N calls of epoll_pwait2 on an empty set with a zero timeout, without and
# with a mask, REPS times, on CPU 0, single-threaded (the uncontended cost).
#
# Usage: scripts/bench/pwait-mask-cost.sh [N] [REPS]   (defaults 1000000, 3)
# Needs a C compiler (cc). Measure on a quiet machine.
set -euo pipefail
n=${1:-1000000} reps=${2:-3}
command -v cc >/dev/null || { echo "no C compiler (cc)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/pw.c" <<'C'
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    int reps = atoi(argv[2]);
    int ep = epoll_create1(0);
    struct epoll_event ev[4];
    struct timespec zero = {0, 0};
    sigset_t open, wake;
    sigemptyset(&open);
    sigemptyset(&wake);
    sigaddset(&wake, SIGRTMIN + 1);
    sigprocmask(SIG_BLOCK, &wake, NULL); /* blocked outside the poll, as in skq-rt */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (long i = 0; i < n; i++) syscall(SYS_epoll_pwait2, ep, ev, 4, &zero, NULL, 8);
        double t1 = now();
        for (long i = 0; i < n; i++) syscall(SYS_epoll_pwait2, ep, ev, 4, &zero, &open, 8);
        double t2 = now();
        printf("run %d: without a mask %.0f ns per call, with one %.0f ns (+%.0f)\n", r + 1,
               (t1 - t0) / n * 1e9, (t2 - t1) / n * 1e9, ((t2 - t1) - (t1 - t0)) / n * 1e9);
    }
    return 0;
}
C
cc -O2 -o "$tmp/pw" "$tmp/pw.c"
echo "# $(date -u +%FT%TZ); load $(cut -d' ' -f1-3 /proc/loadavg); $(uname -r); clock source $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo ?)"
taskset -c 0 "$tmp/pw" "$n" "$reps"
