#!/usr/bin/env python3
"""Runs memcached 1.6.18's perl text-protocol tests (t/*.t) against several targets and
compares them assertion by assertion. Driven by scripts/memcached-suite.sh, which fetches
the source and builds skq-kv first; see docs/MEMCACHED-SUITE.md.

For each target a build directory is made the way t/lib/MemcachedTest.pm expects its
working directory: `t` (a link to the source's t/), `memcached-debug` (launcher.py, which
maps memcached's options to skq's or execs the real memcached) and `timedrun` (which execs
its command, so the pid the test signals is the server's). Each test file runs as
`perl t/<file>` in its own session; the session's process group is killed afterwards so no
server outlives its file. The targets run side by side (`--jobs`); a file with an unexpected
result or a timeout then runs again alone on every target, and that result is judged.

Gate: an assertion (file, number) that passes on memcached and does not pass on an skq
target (failed, or never reached) must be listed in the expected-failures file, else the
run exits 1. Listed assertions that pass are reported, so the list can shrink.
"""

import argparse
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Out of scope: never run. (pattern, reason)
OUT_OF_SCOPE = [
    (r"^binary.*\.t$", "binary protocol"),
    (r"^issue_50\.t$", "binary protocol (starts memcached with -B binary)"),
    (r"sasl", "SASL"),
    (r"^ascii-auth\.t$", "authentication (-Y authfile), the text-protocol form of SASL"),
    (r"^ssl_.*\.t$", "TLS"),
    (r"^udp\.t$", "UDP"),
    (r"extstore", "extstore (flash storage)"),
    (r"^proxy\.t$", "proxy"),
]

TAP_LINE = re.compile(r"^(not ok|ok)\s+(\d+)\b(.*)$")
TAP_PLAN = re.compile(r"^1\.\.(\d+)")


def out_of_scope(name):
    for pat, why in OUT_OF_SCOPE:
        if re.search(pat, name):
            return why
    return None


def make_builddir(root, target, src_t):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    links = {
        "t": src_t,
        "memcached-debug": os.path.join(HERE, "launcher.py"),
        "timedrun": os.path.join(HERE, "timedrun"),
    }
    for name, dest in links.items():
        p = os.path.join(d, name)
        if os.path.islink(p) and os.readlink(p) == dest:
            continue
        if os.path.lexists(p):
            os.remove(p)
        os.symlink(dest, p)
    return d


def parse_tap(text):
    """(plan or None, {number: 'pass'|'fail'|'skip'})."""
    plan = None
    res = {}
    for line in text.splitlines():
        m = TAP_PLAN.match(line)
        if m and plan is None:
            plan = int(m.group(1))
            continue
        m = TAP_LINE.match(line)
        if not m:
            continue
        n = int(m.group(2))
        rest = m.group(3)
        if re.search(r"#\s*skip", rest, re.I):
            res[n] = "skip"
        elif m.group(1) == "ok":
            res[n] = "pass"
        elif re.search(r"#\s*TODO", rest, re.I):
            res[n] = "skip"
        else:
            res[n] = "fail"
    return plan, res


def from_log(target, name, logdir):
    """A file's result parsed again from the log of an earlier run (--reuse-logs)."""
    with open(os.path.join(logdir, "{}.{}.log".format(target, name))) as f:
        plan, res = parse_tap(f.read())
    return {"plan": plan, "res": res, "timed_out": False, "secs": 0.0}


def run_file(builddir, target, name, env, timeout, logdir, refusals):
    env = dict(env)
    env["MCS_TARGET"] = target
    env["MCS_FILE"] = name
    env["MCS_REFUSALS"] = refusals
    # skq's own lines (`listening on`, and notices) go to a log
    # of their own: written into the test's stream they could land inside a
    # TAP line and turn an `ok` into a line the parser does not read.
    env["MCS_SERVER_LOG"] = os.path.join(logdir, "{}.{}.server.log".format(target, name))
    start = time.time()
    p = subprocess.Popen(
        ["perl", os.path.join("t", name)],
        cwd=builddir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
    # Servers a test left behind are in the test's process group.
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    text = out.decode("utf-8", "replace")
    with open(os.path.join(logdir, "{}.{}.log".format(target, name)), "w") as f:
        f.write(text)
    plan, res = parse_tap(text)
    return {
        "plan": plan,
        "res": res,
        "timed_out": timed_out,
        "secs": time.time() - start,
    }


def load_expected(path):
    """{(file, number or '*'): reason}. Lines: `file.t:N reason`, `file.t:N-M,K reason`
    or `file.t:* reason`; `#` starts a comment line."""
    exp = {}
    if not path or not os.path.exists(path):
        return exp
    with open(path) as f:
        for raw in f:
            line = "" if raw.lstrip().startswith("#") else raw.strip()
            if not line:
                continue
            head, _, reason = line.partition(" ")
            fname, _, nums = head.partition(":")
            if not reason.strip():
                sys.exit("expected-failures: {!r} has no reason".format(raw.rstrip()))
            if nums in ("", "*"):
                exp[(fname, "*")] = reason.strip()
                continue
            for part in nums.split(","):
                lo, _, hi = part.partition("-")
                for n in range(int(lo), int(hi or lo) + 1):
                    exp[(fname, n)] = reason.strip()
    return exp


def ranges(nums):
    """[1, 2, 3, 7] -> '1-3,7'."""
    out = []
    for n in nums:
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ",".join(str(a) if a == b else "{}-{}".format(a, b) for a, b in out)


def listed(exp, fname, n):
    return (fname, n) in exp or (fname, "*") in exp


def judge_file(f, results, targets, exp):
    """(unexpected, now passing) for one file: assertions that pass on memcached and not
    on an skq target without being listed, and listed ones that pass."""
    unexpected = []
    now_pass = []
    if "memcached" not in targets:
        return unexpected, now_pass
    base = results[(f, "memcached")]["res"]
    for t in targets:
        if t == "memcached":
            continue
        got = results[(f, t)]["res"]
        for n in sorted(base):
            if base[n] != "pass":
                continue
            ok = got.get(n) in ("pass", "skip")
            if not ok and not listed(exp, f, n):
                unexpected.append((f, n, t, got.get(n, "not run")))
            if ok and (f, n) in exp:
                now_pass.append((f, n, t))
    return unexpected, now_pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, help="memcached source tree (has t/)")
    ap.add_argument("--work", required=True, help="scratch directory for build dirs and logs")
    ap.add_argument("--skq-bin", required=True)
    ap.add_argument("--targets", default="memcached,skq-shared,skq-tpc")
    ap.add_argument("--files", default="", help="comma-separated subset of t/ files")
    ap.add_argument("--expected", default=os.path.join(HERE, "expected-failures.txt"))
    ap.add_argument("--skip-time", default=os.path.join(HERE, "skipped-for-time.txt"))
    ap.add_argument(
        "--all",
        action="store_true",
        help="also run the slow files and those expected to fail whole on skq",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=3,
        help="targets run side by side (1: one after another); files with unexpected "
        "results run again alone",
    )
    ap.add_argument("--timeout", type=int, default=120, help="seconds per file and target")
    ap.add_argument("--results", default="", help="write the table here too")
    ap.add_argument(
        "--reuse-logs",
        action="store_true",
        help="judge the logs of the previous run again (after editing the expected failures)",
    )
    args = ap.parse_args()

    src_t = os.path.join(os.path.abspath(args.src), "t")
    targets = args.targets.split(",")
    work = os.path.abspath(args.work)
    logdir = os.path.join(work, "logs")
    os.makedirs(logdir, exist_ok=True)
    refusals = os.path.join(work, "refusals.txt")
    if os.path.exists(refusals) and not args.reuse_logs:
        os.remove(refusals)

    slow = load_expected(args.skip_time)
    exp = load_expected(args.expected)
    every = sorted(f for f in os.listdir(src_t) if f.endswith(".t"))
    chosen = args.files.split(",") if args.files else every
    skipped = []
    run = []
    for f in chosen:
        why = out_of_scope(f)
        if why is None and not args.all and (f, "*") in slow:
            why = "time: " + slow[(f, "*")]
        if why is None and not args.all and (f, "*") in exp:
            why = "expected to fail whole on skq (--all runs it): " + exp[(f, "*")]
        if why:
            skipped.append((f, why))
        else:
            run.append(f)

    env = dict(os.environ)
    env["MCS_SKQ_BIN"] = os.path.abspath(args.skq_bin)
    env.pop("T_MEMD_USE_DAEMON", None)
    env.pop("SSL_TEST", None)
    results = {}
    dirs = {t: make_builddir(work, t, src_t) for t in targets}
    printing = threading.Lock()

    def one(f, t, note=""):
        if args.reuse_logs:
            r = from_log(t, f, logdir)
        else:
            r = run_file(dirs[t], t, f, env, args.timeout, logdir, refusals)
        with printing:
            print(
                "  {:<28} {:<11} {:>3}/{:<3} {:5.1f}s{}{}".format(
                    f,
                    t,
                    sum(1 for v in r["res"].values() if v == "pass"),
                    r["plan"] if r["plan"] is not None else "?",
                    r["secs"],
                    " TIMEOUT" if r["timed_out"] else "",
                    note,
                ),
                flush=True,
            )
        return r

    def target_pass(t):
        return {(f, t): one(f, t) for f in run}

    # The targets run side by side (each its files in order, in its own build directory):
    # most files wait on sleeps and timeouts, so this takes about a third of the time of
    # one target after another. Files never run side by side on the same target.
    jobs = max(1, min(args.jobs, len(targets)))
    if jobs == 1 or args.reuse_logs:
        for t in targets:
            results.update(target_pass(t))
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for part in pool.map(target_pass, targets):
                results.update(part)

    # A file with an unexpected result, or a timeout, runs again alone, every target one
    # after another, before it is judged: side by side, two servers can draw the same
    # random port (MemcachedTest.pm picks one in 30000-49999 and checks it free, which
    # races with the other target), and timing-sensitive files share two CPUs with the
    # other targets. The second result is the one judged; both are in the printed list.
    if jobs > 1 and not args.reuse_logs:
        again = [
            f
            for f in run
            if judge_file(f, results, targets, exp)[0]
            or any(results[(f, t)]["timed_out"] for t in targets)
        ]
        if again:
            print("Run again alone (unexpected results or timeouts side by side): {}".format(
                ", ".join(again)), flush=True)
        for f in again:
            for t in targets:
                results[(f, t)] = one(f, t, "  (alone)")

    refused = {}
    if os.path.exists(refusals):
        with open(refusals) as fh:
            for line in fh:
                parts = line.split(" ", 2)
                if len(parts) == 3:
                    refused.setdefault(parts[1], set()).add(parts[2].strip())

    unexpected = []
    now_pass = []
    lines = []
    head = "{:<28}".format("file") + "".join("{:>14}".format(t) for t in targets)
    lines.append(head + "  note")
    lines.append("-" * len(head) + "------")
    totals = {t: [0, 0] for t in targets}
    ref = "memcached" if "memcached" in targets else None
    for f in run:
        cells = []
        plans = [results[(f, t)]["plan"] or 0 for t in targets]
        total = max(plans + [max(results[(f, t)]["res"].keys(), default=0) for t in targets])
        for t in targets:
            r = results[(f, t)]
            passed = sum(1 for v in r["res"].values() if v in ("pass", "skip"))
            totals[t][0] += passed
            totals[t][1] += total
            cells.append("{:>14}".format("{}/{}{}".format(passed, total, "T" if r["timed_out"] else "")))
        note = "; ".join(sorted(refused.get(f, [])))
        lines.append("{:<28}".format(f) + "".join(cells) + ("  refused " + note if note else ""))
        u, n = judge_file(f, results, targets, exp)
        unexpected += u
        now_pass += n
    lines.append("-" * len(head) + "------")
    lines.append(
        "{:<28}".format("total (assertions)")
        + "".join("{:>14}".format("{}/{}".format(*totals[t])) for t in targets)
    )
    lines.append("")
    lines.append("Not run (out of scope or too slow), {} files:".format(len(skipped)))
    for f, why in skipped:
        lines.append("  {:<28} {}".format(f, why))
    table = "\n".join(lines) + "\n"
    print()
    print(table)
    if args.results:
        with open(args.results, "w") as fh:
            fh.write(table)

    if now_pass:
        print("Listed as expected failures but passing now (the list can shrink):")
        for f, n, t in sorted(set(now_pass)):
            print("  {}:{} on {}".format(f, n, t))
    if unexpected:
        print("UNEXPECTED: passes on memcached, not on skq, not in {}:".format(args.expected))
        for f, n, t, got in unexpected[:40]:
            print("  {}:{} on {} ({}); log: {}/{}.{}.log".format(f, n, t, got, logdir, t, f))
        if len(unexpected) > 40:
            print("  ... and {} more".format(len(unexpected) - 40))
        print("As expected-failures lines (each needs its reason):")
        by_file = {}
        for f, n, _, _ in unexpected:
            by_file.setdefault(f, set()).add(n)
        for f in sorted(by_file):
            print("  {}:{} <why>".format(f, ranges(sorted(by_file[f]))))
        sys.exit(1)
    if ref:
        print("memcached-suite: every assertion that passes on memcached passes on skq "
              "or is listed in {}".format(os.path.relpath(args.expected)))


if __name__ == "__main__":
    main()
