#!/usr/bin/env python3
"""Stands where memcached's t/lib/MemcachedTest.pm expects `memcached-debug`.

MemcachedTest.pm runs `$builddir/timedrun 600 $builddir/memcached-debug ARGS` and then
connects to the port it passed with `-p` (or the unix socket of `-s`). This launcher reads
memcached's options and either execs the real memcached unchanged (target `memcached`) or
execs `skq-kv` (the same code as `skq serve kv`) with the equivalent flags (targets
`skq-shared`, `skq-tpc`). It execs, so the pid the test holds (and signals) is the server's.

An option skq has no equivalent for, and that changes what a client sees, is refused: the
launcher writes `REFUSED <test file> <option>: <why>` to $MCS_REFUSALS, prints it to stderr
and exits 64, so the test's `new_memcached` dies and the suite's report names the reason.
Options that change nothing a text-protocol client can observe are accepted and dropped
(listed in IGNORED with the reason).

Environment: MCS_TARGET (memcached | skq-shared | skq-tpc), MCS_SKQ_BIN (skq-kv binary),
MCS_MEMCACHED_BIN (default /usr/bin/memcached), MCS_REFUSALS, MCS_FILE (current test file).
"""

import os
import subprocess
import sys

# Options taking a value, as memcached 1.6.18 parses them (getopt string of memcached.c).
WITH_VALUE = set("apsUmcluPfntDRbBIYeoNT")

# Options accepted and dropped: none changes a text-protocol reply.
IGNORED = {
    "-u": "user to run as (the launcher never drops privileges)",
    "-U": "UDP port (UDP is out of scope; TCP replies are unaffected)",
    "-v": "verbosity of the server's own log",
    "-vv": "verbosity of the server's own log",
    "-vvv": "verbosity of the server's own log",
    "-b": "listen backlog",
    "-R": "requests per event before yielding (fairness, not results)",
}
# `-o` sub-options accepted and dropped: privilege handling, and tuning of memcached's slab
# allocator and LRU threads, which skq (a log-structured arena per partition) does not
# have. They change memory layout and the slab/LRU statistics, not a command's reply; the
# tests that read those statistics fail and are listed in expected-failures.txt.
IGNORED_O = {
    "relaxed_privileges": "privilege dropping (seccomp) is memcached's own hardening",
    "modern": "memcached 1.5+ defaults (slab_reassign, lru_maintainer, ...)",
    "no_modern": "memcached 1.4 slab/LRU behaviour",
    "slab_chunk_max": "slab chunk size",
    "slab_reassign": "slab page mover",
    "slab_automove": "slab page mover policy",
    "slab_automove_window": "slab page mover policy",
    "lru_crawler": "background expiry crawler",
    "no_lru_crawler": "background expiry crawler",
    "lru_maintainer": "segmented LRU thread",
    "no_lru_maintainer": "segmented LRU thread",
    "hash_algorithm": "hash function of the index",
}

# Why a refused option is refused (anything else: "no skq equivalent").
REFUSED_WHY = {
    "-s": "unix socket: skq listens on TCP only",
    "-a": "unix socket permissions: skq listens on TCP only",
    "-A": "the shutdown command is not served",
    "-C": "CAS cannot be turned off",
    "-M": "no 'return errors instead of evicting' mode: skq always evicts",
    "-F": "flush_all cannot be turned off",
    "-d": "no daemon mode",
    "-e": "no restartable memory file",
    "-W": "the watch command is not served",
    "-X": "lru_crawler metadump is not served",
    "-Y": "no authentication",
    "-P": "no pid file",
    "-L": "no large pages",
    "-k": "no mlockall",
    "-r": "no core-size setting",
    "-f": "no slab growth factor: no slab allocator",
    "-n": "no slab minimum size: no slab allocator",
    "-S": "no SASL",
    "-Z": "no TLS",
    "watcher_logbuf_size": "the watch command is not served",
    "worker_logbuf_size": "the watch command is not served",
    "read_buf_mem_limit": "per-connection read-buffer limit is not configurable",
    "temporary_ttl": "no temporary-item LRU",
}

HELP = """skq-kv via the memcached test launcher (memcached 1.6.18 options it maps):
-p, --port=<num>          TCP port to listen on
-l, --listen=<addr>       interface to listen on
-t, --threads=<num>       number of worker threads (--workers)
-m, --memory-limit=<num>  item memory in megabytes (-m)
-c, --conn-limit=<num>    max simultaneous connections (--max-conns)
-I, --max-item-size=<num> largest item (--max-item-size)
-B, --protocol=ascii      the text protocol (the only one served)
-o idle_timeout=<secs>    close idle connections (--idle-timeout)
"""


def refuse(opt, why):
    line = "REFUSED {} {}: {}".format(os.environ.get("MCS_FILE", "?"), opt, why)
    path = os.environ.get("MCS_REFUSALS")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    sys.stderr.write("memcached-suite launcher: " + line + "\n")
    sys.exit(64)


def drop_relaxed_privileges(argv):
    """MemcachedTest.pm adds `-o relaxed_privileges` to every start; Debian's build (not a
    debug build) rejects that sub-option, so it is removed, and nothing else is changed."""
    out = []
    for opt, val in split_args(argv):
        if opt == "-o":
            subs = [s for s in (val or "").split(",") if s != "relaxed_privileges"]
            if subs:
                out += ["-o", ",".join(subs)]
        else:
            out += [opt] if val is None else [opt, val]
    return out


def split_args(argv):
    """memcached's argv as (option, value) pairs; value None for flags."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and len(a) >= 2 and a[1] != "-" and not a.startswith("-vv"):
            letter = a[1]
            if letter in WITH_VALUE:
                if len(a) > 2:
                    out.append(("-" + letter, a[2:]))
                elif i + 1 < len(argv):
                    out.append(("-" + letter, argv[i + 1]))
                    i += 1
                else:
                    out.append(("-" + letter, None))
            else:
                out.append((a, None))
        else:
            out.append((a, None))
        i += 1
    return out


def size_bytes(v):
    """memcached's -I value (k/m suffixes) in bytes, or None."""
    try:
        mult = {"k": 1 << 10, "m": 1 << 20}.get(v[-1:].lower(), 1)
        return int(v[:-1] if mult > 1 else v) * mult
    except ValueError:
        return None


def skq_argv(target, pairs):
    if os.environ.get("MEMCACHED_PORT_FILENAME"):
        refuse("MEMCACHED_PORT_FILENAME", "skq does not write memcached's port file")
    # memcached's default TCP port.
    host, port = "127.0.0.1", "11211"
    flags = []
    arch = target.split("-", 1)[1]
    for opt, val in pairs:
        if opt in ("-h", "--help"):
            sys.stdout.write(HELP)
            sys.exit(0)
        if opt in ("-V", "--version"):
            sys.stdout.write("memcached 1.6.18 (skq-kv)\n")
            sys.exit(0)
        if opt in IGNORED:
            continue
        if opt == "-p":
            port = val
        elif opt == "-l":
            host = val
        elif opt == "-t":
            flags += ["--workers", val]
        elif opt == "-m":
            if val is not None and val.isdigit() and int(val) < 4:
                refuse("-m " + val, "skq needs -m >= 4 (two 2 MiB segments)")
            flags += ["-m", val]
        elif opt == "-c":
            flags += ["--max-conns", val]
        elif opt == "-I":
            size = size_bytes(val or "")
            if size is not None and size > 1 << 20:
                refuse("-I " + val, "skq's largest item limit is 1m")
            flags += ["--max-item-size", val]
        elif opt == "-B":
            if val != "ascii":
                refuse("-B " + str(val), "only the text protocol is served")
        elif opt == "-o":
            for sub in (val or "").split(","):
                name = sub.split("=", 1)[0]
                if name == "idle_timeout":
                    flags += ["--idle-timeout", sub.split("=", 1)[1] if "=" in sub else "0"]
                elif name not in IGNORED_O:
                    refuse("-o " + sub, REFUSED_WHY.get(name, "no skq equivalent"))
        else:
            shown = opt + ("" if val is None else " " + val)
            refuse(shown, REFUSED_WHY.get(opt, "no skq equivalent"))
    # Thread-per-core splits -m among its workers and needs 4 MiB each; when the test did
    # not ask for a thread count, use fewer workers rather than refuse a small -m (the
    # worker count is not visible to a text-protocol client).
    mem = dict(zip(flags[::2], flags[1::2])).get("-m", "64")
    if arch == "tpc" and "--workers" not in flags and mem.isdigit() and int(mem) < 16:
        flags += ["--workers", str(max(1, int(mem) // 4))]
    if port in ("0", "-1"):
        refuse("-p " + port, "no ephemeral or disabled TCP port in skq")
    if ":" in host and not host.startswith("["):
        host = "[" + host + "]"
    return ["--arch", arch, "--addr", "{}:{}".format(host, port)] + flags


def main():
    target = os.environ.get("MCS_TARGET", "memcached")
    argv = sys.argv[1:]
    if target == "memcached":
        exe = os.environ.get("MCS_MEMCACHED_BIN", "/usr/bin/memcached")
        if argv == ["-h"]:
            # MemcachedTest.pm picks a unix socket when the help mentions one; hiding it
            # makes the reference run over TCP like skq (and skips the 1 s wait the unix
            # socket path costs every start). Nothing else in the help is changed.
            out = subprocess.run([exe, "-h"], capture_output=True, text=True)
            sys.stdout.write(
                "".join(l for l in out.stdout.splitlines(True) if "unix-socket" not in l)
            )
            sys.exit(out.returncode)
        os.execv(exe, [exe] + drop_relaxed_privileges(argv))
    if target not in ("skq-shared", "skq-tpc"):
        sys.exit("memcached-suite launcher: unknown MCS_TARGET " + target)
    args = skq_argv(target, split_args(argv))
    exe = os.environ["MCS_SKQ_BIN"]
    # skq prints `listening on ...` and its shutdown line; the tests read
    # neither, and in the test's own stream they could split a TAP line.
    log = os.environ.get("MCS_SERVER_LOG")
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    os.execv(exe, [exe] + args)


if __name__ == "__main__":
    main()
