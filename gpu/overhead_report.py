#!/usr/bin/env python3
"""Summarises gpu/overhead.sh results: tables and PASS/MISS for BENCHMARKS.md.

    python3 gpu/overhead_report.py OUTDIR/results.csv [--out REPORT.md] [--metric auto|cuda|wall]
                                         [--all-checks]

Input: the CSV that nccl_overhead appends to (one row per configuration, round,
rank count, op, mode and size; times in microseconds per operation, the maximum
over ranks). For each (rank count, mode, op, size, configuration) it takes the
median over rounds and the spread (half the min-max range, relative to the
median), and compares configurations by the ratio of their medians:

    default/noop   ncclwatch's own cost at default capture (above NCCL's floor)
    default/none   the whole cost of running with ncclwatch, default capture
    noop/none      NCCL's own instrumentation for the default events (the floor;
                   the default asks for Coll|P2p|KernelLaunch)
    channels/none  the whole cost with NCCLWATCH_COMPLETIONS=channels
    default_x/none the default with $EXTRA_ENV (e.g. a sampling interval)
    all/none       the whole cost with NCCLWATCH_EVENTS=all
    all/noop_all   ncclwatch's own cost with everything captured
    noop_ops/none  NCCL's own instrumentation of operations alone (no kernel channels)
    ops/none       the whole cost with NCCLWATCH_EVENTS=coll,p2p (no completions)

Metric (--metric auto): the CUDA-event time for pipelined runs (throughput of
back-to-back operations) and the wall clock for synced runs (latency of one
operation including the host's enqueue and synchronisation). Targets, checked
for every rank count, mode and op:

    default within 1% of noop at every size
    default within 3% of none at the smallest size (8 B)
    default within 2% of none at every size
    all within 5% of none at 1 MiB and above

Rows whose `plugin` column is not what the configuration should have loaded
are left out (and listed). Writes the report (markdown) to --out (default:
report.md next to the CSV) and prints it. Only the standard library is used.
"""

import argparse
import csv
import math
import os
import statistics
import sys
from collections import defaultdict

CONFIGS = ["none", "noop", "default", "noop_channels", "channels", "default_x", "noop_all", "all", "noop_ops", "ops",
           "noop_events", "events", "sampled"]
EXPECTED_PLUGIN = {
    "none": "-",
    "noop": "libnccl-profiler-noop.so",
    "noop_all": "libnccl-profiler-noop.so",
    "noop_ops": "libnccl-profiler-noop.so",
    "noop_events": "libnccl-profiler-noop.so",
    "noop_channels": "libnccl-profiler-noop.so",
    "channels": "libnccl-profiler-ncclwatch.so",
    "events": "libnccl-profiler-ncclwatch.so",
    "sampled": "libnccl-profiler-ncclwatch.so",
    "default": "libnccl-profiler-ncclwatch.so",
    "all": "libnccl-profiler-ncclwatch.so",
    "ops": "libnccl-profiler-ncclwatch.so",
    "default_tsc": "libnccl-profiler-ncclwatch.so",
    "default_mono": "libnccl-profiler-ncclwatch.so",
    "timed_noop": "libnccl-profiler-timing.so",
    "timed_default": "libnccl-profiler-timing.so",
    "timed_default_b": "libnccl-profiler-timing.so",
    "timed_default_c": "libnccl-profiler-timing.so",
}
# The floor each ncclwatch configuration is paired with, round by round.
FLOOR = {"channels": "noop_channels", "all": "noop_all", "ops": "noop_ops", "events": "noop_events", "sampled": "noop_events", "timed_default": "timed_noop", "timed_default_b": "timed_noop", "timed_default_c": "timed_noop"}
RATIOS = [  # (numerator, denominator)
    ("default", "noop"),
    ("default", "none"),
    ("noop", "none"),
    ("all", "none"),
    ("all", "noop_all"),
    ("noop_ops", "none"),
    ("ops", "none"),
    ("events", "none"),
    ("events", "noop_events"),
    ("events", "default"),
    ("channels", "none"),
    ("channels", "noop_channels"),
    ("default", "channels"),
    ("default_x", "none"),
    ("default_x", "default"),
    ("sampled", "none"),
    ("sampled", "events"),
]
MIB = 1 << 20
# (name, numerator, denominator, limit as a ratio, which sizes: fn(bytes, smallest))
TARGETS = [
    ("default within 1% of noop, every size", "default", "noop", 1.01, lambda b, smallest: True),
    ("default within 3% of none at 8 B", "default", "none", 1.03, lambda b, smallest: b == smallest and b <= 8),
    # The goal for the default capture (completions from CUDA events).
    ("default within 2% of none, every size", "default", "none", 1.02, lambda b, smallest: True),
    ("all within 5% of none at >= 1 MiB", "all", "none", 1.05, lambda b, smallest: b >= MIB),
]
OP_ORDER = {"allreduce": 0, "allgather": 1, "sendrecv": 2}
MODE_ORDER = {"pipelined": 0, "synced": 1}


def human_bytes(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= (1 << shift) and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d B" % b


def fmt_us(v):
    if v >= 1000:
        return "%.0f" % v
    if v >= 100:
        return "%.1f" % v
    return "%.2f" % v


def fmt_pct(ratio):
    return "%+.1f%%" % ((ratio - 1.0) * 100.0)


class Cell:
    """The values of one (nranks, mode, op, bytes, config) over rounds."""

    def __init__(self):
        self.by_round = {}

    def add(self, rnd, value):
        self.by_round[rnd] = value

    @property
    def values(self):
        return list(self.by_round.values())

    def median(self):
        return statistics.median(self.values)

    def spread(self):
        """Half the min-max range relative to the median (0.01 = +-1%)."""
        v = self.values
        m = statistics.median(v)
        return (max(v) - min(v)) / 2.0 / m if m > 0 else 0.0

    def text(self):
        if not self.by_round:
            return "n/a"
        return "%s ±%.1f%%" % (fmt_us(self.median()), self.spread() * 100.0)


def load(path, metric):
    cells = defaultdict(Cell)  # (nranks, mode, op, bytes, config) -> Cell
    skipped = []
    versions = set()
    rounds = defaultdict(set)  # (nranks, config) -> rounds
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            try:
                cfg = row["config"]
                mode = row["mode"]
                nranks = int(row["nranks"])
                op = row["op"]
                nbytes = int(row["bytes"])
                rnd = int(row["round"])
                use = metric
                if use == "auto":
                    use = "cuda" if mode == "pipelined" else "wall"
                value = float(row["us_per_op_" + use])
            except (KeyError, ValueError) as e:
                skipped.append("unreadable row %r (%s)" % (row, e))
                continue
            want = EXPECTED_PLUGIN.get(cfg)
            got = row.get("plugin", "")
            if want is not None and got and got != want:
                skipped.append("%s round %d nranks %d: plugin %s loaded, expected %s" % (cfg, rnd, nranks, got, want))
                continue
            if row.get("nccl_version"):
                versions.add(row["nccl_version"])
            cells[(nranks, mode, op, nbytes, cfg)].add(rnd, value)
            rounds[(nranks, cfg)].add(rnd)
    return cells, skipped, versions, rounds


def paired_ratios(a, b):
    """Per-round ratios a/b for the rounds both have."""
    common = sorted(set(a.by_round) & set(b.by_round))
    return [a.by_round[r] / b.by_round[r] for r in common if b.by_round[r] > 0]


# A row is bistable when its values, pooled over configurations, split into
# two groups (the split with the least spread within each, on a log scale)
# whose medians are at least MODE_GAP apart, each holding at least
# MODE_MIN_SHARE of the values, and at least one configuration has values in
# both: a difference between configurations alone is not two modes.
MODE_GAP = 1.25
MODE_MIN_SHARE = 0.15


def two_modes(by_config):
    """The boundary between a row's two modes (a value >= it is 'slow'), or None.

    by_config: {configuration: [values]}. Some rows run at one of two speeds
    per process whatever the plugin (NCCL's proxy thread keeping up or not):
    their median over rounds then measures how often a configuration lands in
    the slow mode, and the report says so.
    """
    v = sorted(x for xs in by_config.values() for x in xs if x > 0)
    n = len(v)
    if n < 6:
        return None
    lv = [math.log(x) for x in v]

    def sse(xs):
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs)

    lo = max(3, int(math.ceil(MODE_MIN_SHARE * n)))
    best, at = None, None
    for i in range(lo, n - lo + 1):
        cost = sse(lv[:i]) + sse(lv[i:])
        if best is None or cost < best:
            best, at = cost, i
    if at is None or statistics.median(v[at:]) < MODE_GAP * statistics.median(v[:at]):
        return None
    cut = (v[at - 1] * v[at]) ** 0.5
    if not any(any(x < cut for x in xs) and any(x >= cut for x in xs) for xs in by_config.values()):
        return None
    return cut


def nccl_version_text(versions):
    out = []
    for v in sorted(versions):
        try:
            n = int(v)
            out.append("%d.%d.%d" % (n // 10000, (n // 100) % 100, n % 100))
        except ValueError:
            out.append(v)
    return ", ".join(out) or "?"


def build_report(path, metric, all_checks=False):
    cells, skipped, versions, rounds = load(path, metric)
    keys = sorted({k[:4] for k in cells}, key=lambda k: (-k[0], MODE_ORDER.get(k[1], 9), OP_ORDER.get(k[2], 9), k[3]))
    configs = [c for c in CONFIGS if any(k[4] == c for k in cells)]
    configs += sorted({k[4] for k in cells} - set(configs))
    lines = []
    w = lines.append

    w("# ncclwatch GPU overhead")
    w("")
    w("Source: `%s`; NCCL %s." % (path, nccl_version_text(versions)))
    nr = sorted({k[0] for k in rounds}, reverse=True)
    for n in nr:
        w("Rounds with %d ranks: %s." % (n, ", ".join("%s %d" % (c, len(rounds[(n, c)])) for c in configs)))
    w("")
    w("Times are microseconds per operation (the maximum over ranks), the median over rounds "
      "±half the min-max range; %s. Ratios are of medians, as the change from the second "
      "configuration to the first." %
      ("pipelined: CUDA-event time of a batch / iterations; synced: median wall clock of one "
       "enqueue + stream synchronisation" if metric == "auto" else "metric: " + metric))
    w("")

    # ---------------------------------------------------------------- targets
    checks = []  # (target name, ok, key, ratio, paired min, paired max)
    for name, num, den, limit, which in TARGETS:
        for k in keys:
            nranks, mode, op, nbytes = k
            smallest = min(kk[3] for kk in keys if kk[:3] == k[:3])
            if not which(nbytes, smallest):
                continue
            a, b = cells.get(k + (num,)), cells.get(k + (den,))
            if a is None or b is None or not a.by_round or not b.by_round or b.median() <= 0:
                continue
            ratio = a.median() / b.median()
            pr = paired_ratios(a, b)
            checks.append((name, ratio <= limit, limit, k, ratio, min(pr) if pr else ratio, max(pr) if pr else ratio))

    w("## Targets")
    w("")
    if not checks:
        w("No target could be checked (configurations missing).")
    else:
        w("| target | checked | pass | miss |")
        w("| --- | --- | --- | --- |")
        for name, _, _, _, _ in TARGETS:
            these = [c for c in checks if c[0] == name]
            w("| %s | %d | %d | %d |" % (name, len(these), sum(1 for c in these if c[1]),
                                         sum(1 for c in these if not c[1])))
        w("")
        listed = checks if all_checks else [c for c in checks if not c[1]]
        w("%s: the ratio of medians; in brackets the range of the per-round ratios (same round, "
          "so drift between rounds cancels). A MISS whose bracket reaches the limit is marked "
          "(noise): some rounds passed." % ("Every check" if all_checks else "The misses"))
        w("")
        if not listed:
            w("No misses.")
        else:
            w("| result | target | ranks | mode | op | size | ratio | per-round |")
            w("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, ok, limit, k, ratio, lo, hi in listed:
            nranks, mode, op, nbytes = k
            res = "PASS" if ok else ("MISS (noise)" if lo <= limit else "MISS")
            w("| %s | %s | %d | %s | %s | %s | %s | [%s, %s] |" % (
                res, name, nranks, mode, op, human_bytes(nbytes), fmt_pct(ratio), fmt_pct(lo), fmt_pct(hi)))
    w("")

    # ---------------------------------------------------------------- tables
    ratio_cols = [(a, b) for a, b in RATIOS if a in configs and b in configs]
    for nranks in nr:
        for mode in sorted({k[1] for k in keys if k[0] == nranks}, key=lambda m: MODE_ORDER.get(m, 9)):
            w("## %d GPUs, %s" % (nranks, mode))
            w("")
            head = ["op", "size"] + ["%s (us)" % c for c in configs] + ["%s/%s" % r for r in ratio_cols]
            w("| " + " | ".join(head) + " |")
            w("| " + " | ".join(["---"] * len(head)) + " |")
            for k in keys:
                if k[0] != nranks or k[1] != mode:
                    continue
                row = [k[2], human_bytes(k[3])]
                for c in configs:
                    cell = cells.get(k + (c,))
                    row.append(cell.text() if cell else "n/a")
                for a, b in ratio_cols:
                    ca, cb = cells.get(k + (a,)), cells.get(k + (b,))
                    if ca and cb and ca.by_round and cb.by_round and cb.median() > 0:
                        row.append(fmt_pct(ca.median() / cb.median()))
                    else:
                        row.append("n/a")
                w("| " + " | ".join(row) + " |")
            w("")

    # ---------------------------------------------------------------- paired
    ours = [c for c in configs if c not in ("none", "noop", "noop_all", "noop_ops", "timed_noop") and FLOOR.get(c, "noop") in configs]
    if ours:
        w("## ncclwatch over its floor, paired by round")
        w("")
        w("Each configuration of ncclwatch against the do-nothing plugin asking for the same events "
          "(`noop`; `noop_all` for `all`; `noop_ops` for `ops`), as the median of the per-round ratios (both ran in the "
          "same round, so drift between rounds cancels), in brackets their min and max.")
        w("")
        head = ["ranks", "mode", "op", "size"] + ["%s/%s" % (c, FLOOR.get(c, "noop")) for c in ours]
        w("| " + " | ".join(head) + " |")
        w("| " + " | ".join(["---"] * len(head)) + " |")
        for k in keys:
            row = [str(k[0]), k[1], k[2], human_bytes(k[3])]
            for c in ours:
                a, b = cells.get(k + (c,)), cells.get(k + (FLOOR.get(c, "noop"),))
                pr = paired_ratios(a, b) if a and b else []
                row.append("%s [%s, %s]" % (fmt_pct(statistics.median(pr)), fmt_pct(min(pr)), fmt_pct(max(pr)))
                           if pr else "n/a")
            w("| " + " | ".join(row) + " |")
        w("")

    # ---------------------------------------------------------------- modes
    bistable = []
    for k in keys:
        cut = two_modes({c: cells[k + (c,)].values for c in configs if cells.get(k + (c,))})
        if cut is not None:
            bistable.append((k, cut))
    if bistable:
        w("## Rows with two modes")
        w("")
        w("In these rows a process ran at one of two speeds (pooled over configurations, the "
          "values split into two groups whose medians are at least %.0f%% apart, and some "
          "configuration has values in both). Per "
          "configuration: the processes in the slow mode, then the median of each mode. Compare "
          "within a mode; the median over rounds above mostly measures how often a configuration "
          "landed in the slow one." % ((MODE_GAP - 1) * 100))
        w("")
        head = ["ranks", "mode", "op", "size", "boundary (us)"] + configs
        w("| " + " | ".join(head) + " |")
        w("| " + " | ".join(["---"] * len(head)) + " |")
        for k, cut in bistable:
            row = [str(k[0]), k[1], k[2], human_bytes(k[3]), fmt_us(cut)]
            for c in configs:
                cell = cells.get(k + (c,))
                if not cell or not cell.by_round:
                    row.append("n/a")
                    continue
                fast = [x for x in cell.values if x < cut]
                slow = [x for x in cell.values if x >= cut]
                row.append("slow %d/%d; %s / %s" % (
                    len(slow), len(cell.values), fmt_us(statistics.median(fast)) if fast else "-",
                    fmt_us(statistics.median(slow)) if slow else "-"))
            w("| " + " | ".join(row) + " |")
        w("")

    drops = os.path.join(os.path.dirname(os.path.abspath(path)), "drops.csv")
    if os.path.exists(drops):
        # runs, runs with drops, events dropped, clocks, ops untracked, completions implied
        per = defaultdict(lambda: [0, 0, 0, set(), 0, 0])
        with open(drops, newline="") as f:
            for row in csv.DictReader(f):
                if int(row.get("closed") or 0) == 0:
                    continue  # not ncclwatch
                e = per[(int(row["nranks"]), row["config"])]
                d = int(row.get("dropped") or 0)
                e[0] += 1
                e[1] += d > 0
                e[2] += d
                if row.get("clock"):
                    e[3].add(row["clock"])
                e[4] += int(row.get("untracked") or 0)
                e[5] += int(row.get("implied") or 0)
        if per:
            w("## Events ncclwatch dropped, and its clock")
            w("")
            w("From each process's closing log line (NCCL_DEBUG=INFO): events lost because a "
              "thread's buffer was full or its event handles ran out; operations recorded without "
              "completion tracking because every event handle waited for a completion (not lost); "
              "completions a later operation on the communicator proved (NCCL did not deliver a "
              "kernel-channel event).")
            w("")
            w("| ranks | config | runs | runs with drops | events dropped | ops untracked | completions implied | clock |")
            w("| --- | --- | --- | --- | --- | --- | --- | --- |")
            for (n, c), (runs, with_drops, dropped, clocks, untracked, implied) in sorted(
                    per.items(), key=lambda x: (-x[0][0], x[0][1])):
                w("| %d | %s | %d | %d | %d | %d | %d | %s |" % (n, c, runs, with_drops, dropped, untracked, implied,
                                                               "; ".join(sorted(clocks)) or "?"))
            w("")

    if skipped:
        w("## Rows left out")
        w("")
        for s in skipped:
            w("- " + s)
        w("")

    machine = os.path.join(os.path.dirname(os.path.abspath(path)), "machine.txt")
    if os.path.exists(machine):
        w("## Machine")
        w("")
        w("```")
        with open(machine) as f:
            w(f.read().rstrip("\n"))
        w("```")
        w("")
    summary = {name: [sum(1 for c in checks if c[0] == name and c[1]),
                      sum(1 for c in checks if c[0] == name)] for name, *_ in TARGETS}
    return "\n".join(lines), summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="results.csv written by nccl_overhead / overhead.sh")
    ap.add_argument("--out", help="report file (default: report.md next to the CSV; '-' for none)")
    ap.add_argument("--metric", choices=["auto", "cuda", "wall"], default="auto")
    ap.add_argument("--all-checks", action="store_true", help="list every check, not only the misses")
    args = ap.parse_args()
    text, summary = build_report(args.csv, args.metric, args.all_checks)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.csv)), "report.md")
    if out != "-":
        with open(out, "w") as f:
            f.write(text + "\n")
    print(text)
    for name, (ok, n) in summary.items():
        print("target: %s: %d/%d pass" % (name, ok, n), file=sys.stderr)
    if out != "-":
        print("report written to %s" % out, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
