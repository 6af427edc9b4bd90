#!/usr/bin/env python3
"""Completion lag and operations in flight, per trace file, from `ncclwatch dump`.

    gpu/trace_lag.py [--ncclwatch BIN] FILE.ncclwatch...

An operation holds one of its thread's event handles (4,096 a thread) from
its start until its completion (its last kernel channel stopped). For each
file this prints: operations, completed, never completed; the most in flight
at once; and, per (function, channels), how long completion took after the
start (p50, p99, max) and how many never completed. Where a plugin ran out of
handles, this tells a backlog (many in flight, all completing) from
operations that never complete.
"""

import argparse
import collections
import re
import subprocess
import sys

OP_RE = re.compile(r"^@\d+ (\S+) .*?\bop \{ (.*)\}\s*$")
DONE_RE = re.compile(r"^@\d+ op_done \{ (.*)\}\s*$")


def fields(text):
    out = {}
    for m in re.finditer(r"(\w+): (-?\d+|true|false|\"[^\"]*\"|\w+)", text):
        out.setdefault(m.group(1), m.group(2))
    return out


def pct(v, p):
    if not v:
        return float("nan")
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def analyse(path, binary):
    proc = subprocess.run([binary, "dump", path], capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{path}: ncclwatch dump failed ({proc.returncode}): {proc.stderr.strip()[:300]}")
        return
    ops = {}        # event_id -> [func, nchannels, start]
    done_at = {}    # event_id -> done_ns
    lag = collections.defaultdict(list)
    order = []      # tracked event ids in file order
    untracked = 0
    for line in proc.stdout.splitlines():
        m = OP_RE.match(line)
        if m:
            func = m.group(1)
            f = fields(m.group(2))
            start = int(f.get("start_ns", 0))
            key = (func, int(f.get("nchannels", 0)))
            inline = re.search(r"completion \{[^}]*done_after_start_ns: (\d+)", m.group(2))
            if inline:
                lag[key].append(int(inline.group(1)))
                ops[("inline", len(ops))] = [key, start, start + int(inline.group(1))]
                continue
            if "completion_tracked: true" not in m.group(2):
                untracked += 1
                continue
            ops[int(f["event_id"])] = [key, start, None]
            order.append(int(f["event_id"]))
            continue
        m = DONE_RE.match(line)
        if m:
            f = fields(m.group(1))
            done_at[int(f["event_id"])] = int(f["done_ns"])
    never = collections.Counter()
    events = []
    stuck = []
    last_start = max((v[1] for v in ops.values()), default=0)
    pos = {eid: i for i, eid in enumerate(order)}
    for eid, (key, start, end) in ops.items():
        if end is None:
            end = done_at.get(eid)
            if end is None:
                never[key] += 1
                events.append((start, 1))
                stuck.append((start, key, len(order) - 1 - pos.get(eid, 0)))
                continue
            lag[key].append(end - start)
        events.append((start, 1))
        events.append((end, -1))
    events.sort()
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    total = len(ops)
    print(f"{path}: {total} tracked operations, {total - sum(never.values())} completed, "
          f"{sum(never.values())} never completed, {untracked} untracked; at most {peak} in flight at once")
    for start, key, after in sorted(stuck)[:12]:
        print(f"  never completed: {key[0]} ch {key[1]}, started {(last_start - start) / 1e6:.3f} s before the "
              f"last operation's start, {after} tracked operations after it in the file")
    for key in sorted(set(lag) | set(never)):
        v = lag.get(key, [])
        print(f"  {key[0]:<14} ch {key[1]:>2}: {len(v):>6} completed, lag p50 {pct(v, .5) / 1e3:9.1f} us, "
              f"p99 {pct(v, .99) / 1e3:9.1f} us, max {max(v) / 1e3 if v else float('nan'):9.1f} us; "
              f"never completed {never.get(key, 0)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ncclwatch", default="ncclwatch")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    for f in a.files:
        analyse(f, a.ncclwatch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
