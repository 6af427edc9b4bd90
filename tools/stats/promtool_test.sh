#!/usr/bin/env bash
# `ncclwatch stats --format=prometheus` of every GPU recording passes
# Prometheus' own checker (`promtool check metrics`: the text format's
# parser, then its lint: HELP on every metric, counters named _total), and
# the node_exporter textfile recipe of docs/metrics.md leaves one such
# .prom file, with the job_id label, and no partial file a scrape could
# read.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ncclwatch=$PWD/tools/ncclwatch
command -v promtool > /dev/null || fail "no promtool (Debian's prometheus package: scripts/install_deps.sh)"
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/promtool_test.XXXXXX")

checked=0
while IFS= read -r dir; do
  status=0
  "$ncclwatch" stats --format=prometheus "$dir" > "$tmp/out.prom" 2> "$tmp/err.txt" || status=$?
  # A recording stats cannot use (no file of a usable job) writes no metrics.
  if ((status != 0)); then
    [[ ! -s "$tmp/out.prom" ]] || fail "stats of $dir: exit $status with output"
    continue
  fi
  grep -q '^ncclwatch_calls_total{' "$tmp/out.prom" || fail "stats of $dir: no ncclwatch_calls_total"
  promtool check metrics < "$tmp/out.prom" > "$tmp/lint.txt" 2>&1 ||
    fail "promtool check metrics on stats of $dir: $(cat "$tmp/lint.txt")"
  checked=$((checked + 1))
done < <(find testdata -name '*.ncclwatch' -printf '%h\n' | sort -u)
((checked >= 20)) || fail "only $checked recordings checked"
echo "promtool: $checked recordings pass"

# The textfile collector's recipe (docs/metrics.md).
# A PyTorch recording: its headers carry torchrun's job id.
dir=testdata/torch/count-events-4r
job=$("$ncclwatch" dump "$dir" | sed -n 's/.*job_id: "\([^"]*\)".*/\1/p' | head -1)
[[ -n "$job" ]] || fail "no job id in $dir"
textfile_dir=$tmp/textfile
mkdir "$textfile_dir"
NCCLWATCH_JOB_ID=$job TRACES=$dir TEXTFILE_DIR=$textfile_dir PATH=$(dirname "$ncclwatch"):$PATH bash -c '
  ncclwatch stats --format=prometheus --job="$NCCLWATCH_JOB_ID" "$TRACES" > "$TEXTFILE_DIR/.ncclwatch-$NCCLWATCH_JOB_ID.tmp" &&
    mv "$TEXTFILE_DIR/.ncclwatch-$NCCLWATCH_JOB_ID.tmp" "$TEXTFILE_DIR/ncclwatch-$NCCLWATCH_JOB_ID.prom"'
files=("$textfile_dir"/*)
[[ ${#files[@]} -eq 1 && "${files[0]}" == *.prom ]] || fail "the textfile folder holds: $(ls -a "$textfile_dir")"
promtool check metrics < "${files[0]}" || fail "promtool on the textfile"
grep -q "^ncclwatch_calls_total{job_id=\"$job\",comm=" "${files[0]}" || fail "no job_id label: $(head -5 "${files[0]}")"
echo "PASS"
