#!/usr/bin/env python3
"""Flame graphs and flat profiles from `perf script` output (stdlib only).

    perf record -F 999 --call-graph dwarf -p PID -o perf.data -- sleep 3
    perf script -i perf.data | python3 scripts/flamegraph.py --title T --svg out.svg \
        [--top 25] [--folded out.folded]

Reads the samples `perf script` prints (a header line, then one frame per
line, leaf first, then a blank line), folds identical stacks, and writes:
  * an SVG flame graph (root at the bottom, width = share of samples; hover a
    frame for its name, samples and share),
  * on stdout, the functions with the most samples on top of the stack
    ("self") and anywhere on it ("total"), as a table for docs.

Frames are named by symbol, with the offset, the Rust hash suffix and the
argument list removed; an unknown symbol is named by its object file
(`[unknown] (libc.so.6)` becomes `libc.so.6`). The process's command name is
the root frame, so the threads of one server fold together.
"""
import argparse
import collections
import hashlib
import html
import re
import sys

HASH = re.compile(r"::h[0-9a-f]{16}$")
OFFSET = re.compile(r"\+0x[0-9a-f]+$")


def frame_name(line):
    """`ffffffff81000000 do_syscall_64+0x5c ([kernel.kallsyms])` -> `do_syscall_64`."""
    parts = line.strip().split(None, 1)
    if len(parts) < 2:
        return None
    rest = parts[1]
    obj = ""
    if rest.endswith(")") and " (" in rest:
        rest, obj = rest.rsplit(" (", 1)
        obj = obj[:-1].rsplit("/", 1)[-1]
    sym = OFFSET.sub("", rest.strip())
    if sym in ("", "[unknown]"):
        return obj or "[unknown]"
    sym = HASH.sub("", sym)
    # C++/Rust demangled names with arguments: keep the path only.
    if "(" in sym and not sym.startswith("("):
        sym = sym.split("(", 1)[0]
    return sym


def read_stacks(stream):
    """Yields (comm, [root..leaf]) per sample."""
    comm, frames = None, []
    for line in stream:
        if not line.strip():
            if comm is not None:
                yield comm, list(reversed(frames))
            comm, frames = None, []
            continue
        if line[0] not in " \t":
            comm = line.split()[0]
            frames = []
            continue
        name = frame_name(line)
        if name:
            frames.append(name)
    if comm is not None:
        yield comm, list(reversed(frames))


def fold(stacks):
    folded = collections.Counter()
    for comm, frames in stacks:
        folded[tuple([comm] + frames)] += 1
    return folded


class Node:
    __slots__ = ("name", "count", "children")

    def __init__(self, name):
        self.name, self.count, self.children = name, 0, {}


def tree(folded):
    root = Node("all")
    for stack, n in folded.items():
        root.count += n
        node = root
        for f in stack:
            node = node.children.setdefault(f, Node(f))
            node.count += n
    return root


def color(name):
    h = int(hashlib.md5(name.encode()).hexdigest()[:6], 16)
    if name.startswith(("__x64_sys", "do_syscall", "entry_SYSCALL")) or "kernel" in name:
        return f"rgb({200 + h % 55},{120 + (h >> 8) % 60},{60 + (h >> 16) % 40})"
    return f"rgb({220 + h % 35},{90 + (h >> 8) % 110},{30 + (h >> 16) % 40})"


def svg(root, title, width=1200, row=16):
    depth = 0

    def measure(node, d):
        nonlocal depth
        depth = max(depth, d)
        for c in node.children.values():
            measure(c, d + 1)

    measure(root, 0)
    height = (depth + 1) * row + 60
    total = max(root.count, 1)
    scale = (width - 20) / total
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="monospace" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="#fdfdf6"/>',
        f'<text x="{width // 2}" y="20" text-anchor="middle" font-size="15">{html.escape(title)}</text>',
        f'<text x="10" y="40" fill="#555">{total} samples; width = share of samples; '
        f"hover a frame for its figures</text>",
    ]

    def draw(node, x, d):
        w = node.count * scale
        if w < 0.3:
            return
        y = height - (d + 1) * row - 4
        pct = 100.0 * node.count / total
        label = html.escape(node.name)
        out.append(
            f'<g><title>{label} ({node.count} samples, {pct:.2f}%)</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row - 1}" '
            f'fill="{color(node.name)}" rx="2"/>'
        )
        chars = int(w / 7)
        if chars >= 3:
            text = node.name if len(node.name) <= chars else node.name[: chars - 2] + ".."
            out.append(f'<text x="{x + 3:.2f}" y="{y + row - 4}">{html.escape(text)}</text>')
        out.append("</g>")
        cx = x
        for c in sorted(node.children.values(), key=lambda c: c.name):
            draw(c, cx, d + 1)
            cx += c.count * scale

    draw(root, 10, 0)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def flat(folded, top):
    self_c, total_c = collections.Counter(), collections.Counter()
    n = 0
    for stack, c in folded.items():
        n += c
        self_c[stack[-1]] += c
        for f in set(stack[1:]):
            total_c[f] += c
    lines = [f"{'self %':>7} {'total %':>8}  function ({n} samples)"]
    for name, c in self_c.most_common(top):
        lines.append(f"{100.0 * c / max(n, 1):7.2f} {100.0 * total_c[name] / max(n, 1):8.2f}  {name}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--title", default="flame graph")
    ap.add_argument("--svg", help="write the flame graph here")
    ap.add_argument("--folded", help="also write the folded stacks here")
    ap.add_argument("--top", type=int, default=25, help="rows of the flat profile")
    ap.add_argument("input", nargs="?", help="perf script output (default: stdin)")
    args = ap.parse_args()
    stream = open(args.input) if args.input else sys.stdin
    folded = fold(read_stacks(stream))
    if not folded:
        sys.exit("flamegraph.py: no samples in the input (is it `perf script` output?)")
    if args.folded:
        with open(args.folded, "w") as f:
            for stack, c in sorted(folded.items()):
                f.write(";".join(stack) + f" {c}\n")
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg(tree(folded), args.title))
    print(flat(folded, args.top))


if __name__ == "__main__":
    main()
