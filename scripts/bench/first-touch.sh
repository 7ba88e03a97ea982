#!/usr/bin/env bash
# What a page fault costs on this machine: the time per 4 KiB page of the
# first touch of fresh anonymous memory (no huge pages), three rounds of
# MB megabytes (default 256), with SLEEP seconds between rounds (default
# 0; a few seconds lets a VM's free-page reporting hand freed memory back
# to the host first). Compiles a small C program with cc.
# Usage: scripts/bench/first-touch.sh [MB] [SLEEP]
set -euo pipefail
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/touch.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
int main(int argc, char **argv) {
    size_t size = (size_t)atoi(argv[1]) << 20;
    int pause = atoi(argv[2]);
    for (int round = 0; round < 3; round++) {
        char *p = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) { perror("mmap"); return 1; }
        madvise(p, size, MADV_NOHUGEPAGE);
        double t0 = ns();
        for (size_t i = 0; i < size; i += 4096) p[i] = 1;
        double t1 = ns();
        printf("round %d: %.2f us per 4 KiB page on first touch (%zu pages)\n",
               round, (t1 - t0) / 1e3 / (size / 4096), size / 4096);
        munmap(p, size);
        if (pause) sleep(pause);
    }
    return 0;
}
C
cc -O2 -o "$tmp/touch" "$tmp/touch.c"
"$tmp/touch" "${1:-256}" "${2:-0}"
