#!/usr/bin/env python3
"""What writing a fresh 2 MiB arena segment costs in page faults, against populating
it first with one madvise(MADV_POPULATE_WRITE) (Linux 5.14+).

Maps 2 MiB of anonymous memory (huge pages off, as the cache's segments run), then
either writes every byte (one fault per 4 KiB page on first touch) or populates the
range in one call and then writes it; 200 repetitions each, three rounds, median and
p10 per segment. The cache's arena appends records into such segments, one fault per
16 records of 260 bytes while it grows (docs/KV-PROFILE.md, page faults).

Usage: taskset -c 0 python3 scripts/bench/fault-cost.py   (quiet machine, under the lock)
"""
import ctypes
import sys
import time

SEG = 2 << 20
MADV_NOHUGEPAGE = 15
MADV_POPULATE_WRITE = 23
PROT_RW = 0x3
MAP_PRIVATE_ANON = 0x22

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]


def one(populate):
    p = libc.mmap(None, SEG, PROT_RW, MAP_PRIVATE_ANON, -1, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        sys.exit("mmap failed")
    libc.madvise(p, SEG, MADV_NOHUGEPAGE)
    t = time.perf_counter_ns()
    if populate and libc.madvise(p, SEG, MADV_POPULATE_WRITE) != 0:
        sys.exit(f"madvise(MADV_POPULATE_WRITE) failed: errno {ctypes.get_errno()}")
    libc.memset(p, 1, SEG)
    d = time.perf_counter_ns() - t
    libc.munmap(p, SEG)
    return d


def main():
    if len(sys.argv) > 1:
        print(__doc__)
        sys.exit(2)
    for rnd in range(1, 4):
        for populate in (False, True):
            ds = sorted(one(populate) for _ in range(200))
            what = "populate, then write" if populate else "write (faults)      "
            print(f"round {rnd} {what}: median {ds[100] / 1e3:.1f} us per 2 MiB segment "
                  f"({ds[100] / 512:.0f} ns per 4 KiB page), p10 {ds[20] / 1e3:.1f} us")


if __name__ == "__main__":
    main()
