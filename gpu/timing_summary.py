#!/usr/bin/env python3
"""Summarises the timing shim's lines (OUTDIR/timing.txt of gpu/overhead.sh).

    python3 gpu/timing_summary.py OUTDIR/timing.txt [--callbacks KernelCh,stop,state,Coll,P2p]

One row per (configuration, thread): the enqueuing thread ('main', the
process's own thread) and NCCL's proxy thread ('proxy', the thread that
starts kernel-channel events). Columns: the nanoseconds the thread spent in
the plugin per Coll/P2p operation, then the mean nanoseconds per call of each
callback; each the median over processes, [min, max] after it. Markdown on
stdout.
"""
import argparse
import collections
import re
import statistics
import sys

LINE = re.compile(r"(\S+) round (\d+) nranks (\d+): pid \d+ tid \d+ '([^']*)': (\d+) ns in the plugin per Coll/P2p; (.*)")
CALL = re.compile(r"(\w+) (\d+) x (\d+) ns")


def parse(path):
    """{(config, nranks, thread): {column: [values]}}; raises ValueError naming the line it cannot read."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            m = LINE.match(line)
            if not m:
                raise ValueError(f"{path}:{no}: not a timing shim line: {line[:80]!r}")
            cfg, _rnd, nranks, name, per_op, rest = m.groups()
            calls = {c.group(1): int(c.group(3)) for c in CALL.finditer(rest)}
            thread = "proxy" if "KernelCh" in calls else "main" if name != "(exited)" else name
            row = out[(cfg, int(nranks), thread)]
            row["per op"].append(int(per_op))
            for k, v in calls.items():
                row[k].append(v)
    return out


def cell(values):
    if not values:
        return ""
    return f"{statistics.median(values):.0f} [{min(values)}, {max(values)}]"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timing")
    ap.add_argument("--callbacks", default="KernelCh,stop,state,Coll,P2p")
    a = ap.parse_args(argv)
    try:
        rows = parse(a.timing)
    except (OSError, ValueError) as e:
        print(f"timing_summary: {e}", file=sys.stderr)
        return 2
    if not rows:
        print(f"timing_summary: {a.timing}: no timing shim lines", file=sys.stderr)
        return 2
    cols = ["per op"] + [c for c in a.callbacks.split(",") if c]
    print("| config | ranks | thread | processes | " + " | ".join(f"{c} (ns)" for c in cols) + " |")
    print("| --- " * (4 + len(cols)) + "|")
    for (cfg, n, thread), r in sorted(rows.items(), key=lambda kv: (kv[0][2], kv[0][1], kv[0][0])):
        print(f"| {cfg} | {n} | {thread} | {len(r['per op'])} | " + " | ".join(cell(r.get(c, [])) for c in cols) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
