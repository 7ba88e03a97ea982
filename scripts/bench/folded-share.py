#!/usr/bin/env python3
"""Share of a profile's samples under given functions, from folded stacks.

    python3 scripts/bench/folded-share.py FILE.folded [FILE.folded ...] [--frames a,b,c]

FILE.folded is what `scripts/flamegraph.py --folded` writes (one line per
distinct stack: `frame;frame;...;leaf COUNT`, as `kv-profile.py --flame`
leaves it). For each file and each frame name, prints the percentage of
samples whose stack contains a frame with that name in it (substring match,
so `tcp_sendmsg` also counts `tcp_sendmsg_locked`), and the total sample count.
A sample counts once per name however often the name occurs in its stack, so
the shares of nested functions overlap and do not add up to 100.
"""
import argparse

DEFAULT = ("do_epoll_wait,finish_task_switch,tcp_sendmsg,__tcp_transmit_skb,sock_def_readable,"
           "tcp_recvmsg,asm_exc_page_fault,clear_page,clock_nanosleep,futex")


def shares(path, frames):
    total = 0
    hits = dict.fromkeys(frames, 0)
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            stack, _, count = line.rpartition(" ")
            n = int(count)
            total += n
            names = stack.split(";")
            for fr in frames:
                if any(fr in name for name in names):
                    hits[fr] += n
    return total, hits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--frames", default=DEFAULT, help="comma-separated frame names")
    args = ap.parse_args()
    frames = [f for f in args.frames.split(",") if f]
    results = [(p, *shares(p, frames)) for p in args.files]
    width = max(len(f) for f in frames)
    print(f"{'frame':<{width}}  " + "  ".join(f"{i + 1:>7}" for i in range(len(results))))
    for fr in frames:
        print(f"{fr:<{width}}  " + "  ".join(
            f"{100 * hits[fr] / max(total, 1):6.1f}%" for _, total, hits in results))
    print(f"{'samples':<{width}}  " + "  ".join(f"{total:>7}" for _, total, _ in results))
    for i, (p, _, _) in enumerate(results):
        print(f"{i + 1}: {p}")


if __name__ == "__main__":
    main()
