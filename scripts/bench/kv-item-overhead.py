#!/usr/bin/env python3
"""Memory per cached item: skq's cache against memcached, same script.

    python3 scripts/bench/kv-item-overhead.py [--items 200000] [--key-size 30]
        [--value-size 200] [--servers memcached,kv-tpc,kv-hybrid] [--threads 2]
        [--out FILE]

For each server: start it with a 1 GiB memory limit, read its resident size
(VmRSS), store --items distinct keys of --key-size bytes with values of
--value-size bytes (pipelined `set ... noreply`, then one `get` of the first
key to wait for them all), read VmRSS again, and check with `stats` how many
items it holds. Overhead per item = RSS growth / items held − key − value
bytes: what the store spends on headers, index, alignment and slab or segment
slack per item. memcached allocates 1 MiB slab pages as they fill, skq's cache
its 2 MiB segments (`docs/KV-MEMORY.md`), so both grow with the items stored;
the last partly filled page or segment is counted too (under 0.5% of the
growth at the default 200,000 items).
Needs: bash scripts/setup.sh; cargo build --release -p skq.
"""
import argparse
import os
import socket
import subprocess
import sys
import time

from benchlib import free_port, stop

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKQ = os.path.join(ROOT, "target/release/skq")
STOCK = "/usr/bin/memcached"


def command(server, threads, port):
    t = str(threads)
    if server == "memcached":
        return [STOCK, "-u", "root", "-U", "0", "-l", "127.0.0.1", "-m", "1024", "-c", "4096",
                "-p", str(port), "-t", t]
    cmd = [SKQ, "serve", "kv", "--addr", f"127.0.0.1:{port}", "--workers", t, "-m", "1024"]
    if server == "kv-tpc":
        return cmd + ["--arch", "tpc"]
    return cmd + ["--arch", "shared", "--mode", server[len("kv-"):]]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def read_until(sock, marker):
    buf = b""
    while not buf.endswith(marker):
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise RuntimeError(f"connection closed; got {buf[-200:]!r}")
        buf += chunk
    return buf


def measure(server, args):
    port = free_port()
    p = subprocess.Popen(command(server, args.threads, port), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                time.sleep(0.025)
        else:
            raise RuntimeError(f"{server} did not start")
        time.sleep(0.3)
        before = rss_kib(p.pid)
        value = b"v" * args.value_size
        batch = []
        for i in range(args.items):
            key = f"k{i:0{args.key_size - 1}d}".encode()[: args.key_size]
            batch.append(b"set %s 0 0 %d noreply\r\n%s\r\n" % (key, len(value), value))
            if len(batch) == 2000:
                sock.sendall(b"".join(batch))
                batch = []
        if batch:
            sock.sendall(b"".join(batch))
        first = f"k{0:0{args.key_size - 1}d}".encode()[: args.key_size]
        sock.sendall(b"get %s\r\n" % first)
        read_until(sock, b"END\r\n")
        sock.sendall(b"stats\r\n")
        stats = read_until(sock, b"END\r\n").decode(errors="replace")
        items = 0
        for line in stats.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] == "curr_items":
                items = int(f[2])
        time.sleep(0.3)
        after = rss_kib(p.pid)
        sock.close()
    finally:
        stop(p)
    growth = (after - before) * 1024
    per_item = growth / max(items, 1)
    return {
        "items": items,
        "rss_before_mib": before / 1024,
        "rss_after_mib": after / 1024,
        "bytes_per_item": per_item,
        "overhead_per_item": per_item - args.key_size - args.value_size,
    }


def main():
    ap = argparse.ArgumentParser(description="memory per cached item against memcached")
    ap.add_argument("--items", type=int, default=200000)
    ap.add_argument("--key-size", type=int, default=30)
    ap.add_argument("--value-size", type=int, default=200)
    ap.add_argument("--servers", default="memcached,kv-tpc,kv-hybrid")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.key_size < 2:
        sys.exit("--key-size: at least 2 bytes")
    for path in (SKQ, STOCK):
        if not os.path.exists(path):
            sys.exit(f"{path} missing: run bash scripts/setup.sh and cargo build --release -p skq")
    lines = [f"# kv-item-overhead: python3 scripts/bench/kv-item-overhead.py "
             f"--items {args.items} --key-size {args.key_size} --value-size {args.value_size} "
             f"--threads {args.threads}",
             f"{'server':<11} {'items':>8} {'RSS before':>11} {'RSS after':>10} "
             f"{'bytes/item':>11} {'overhead/item':>14}"]
    print("\n".join(lines), flush=True)
    for s in args.servers.split(","):
        r = measure(s, args)
        line = (f"{s:<11} {r['items']:>8} {r['rss_before_mib']:>9.1f}Mi {r['rss_after_mib']:>8.1f}Mi "
                f"{r['bytes_per_item']:>11.1f} {r['overhead_per_item']:>14.1f}")
        print(line, flush=True)
        lines.append(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
