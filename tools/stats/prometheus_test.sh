#!/usr/bin/env bash
# What a Prometheus user gets from `ncclwatch stats`, checked by Prometheus'
# own programs (Debian's prometheus, prometheus-node-exporter and
# prometheus-pushgateway packages: scripts/install_deps.sh):
#   - `promtool check metrics` passes the --format=prometheus output of
#     every recording (the text format's parser, then its lint: HELP on
#     every metric, counters named _total);
#   - Prometheus' OpenMetrics parser (promtool's OpenMetrics backfill) reads
#     the --format=openmetrics output of every recording, every sample;
#   - the textfile and Pushgateway recipes of docs/metrics.md, run as
#     written there against a real node_exporter and a real Pushgateway on
#     the loopback, give a scrape in which ncclwatch_calls_total is a
#     counter with the job's job_id label, and leave no partial file a
#     scrape could read.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ncclwatch=$PWD/tools/ncclwatch
doc=$PWD/docs/metrics.md
for tool in promtool prometheus-node-exporter prometheus-pushgateway curl python3; do
  command -v "$tool" > /dev/null || fail "no $tool (scripts/install_deps.sh installs it)"
done
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/prometheus_test.XXXXXX")
daemons=()
trap 'for p in "${daemons[@]}"; do kill "$p" 2> /dev/null || true; done' EXIT

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

  # OpenMetrics: the backfill wants a timestamp on every sample; it stores
  # each sample once, so the count it reports is the sample lines' count.
  "$ncclwatch" stats --format=openmetrics "$dir" > "$tmp/out.om"
  [[ "$(tail -n 1 "$tmp/out.om")" == "# EOF" ]] || fail "openmetrics of $dir does not end with # EOF"
  sed -E '/^[^#]/s/$/ 1700000000/' "$tmp/out.om" > "$tmp/stamped.om"
  rm -rf "$tmp/blocks"
  promtool tsdb create-blocks-from openmetrics "$tmp/stamped.om" "$tmp/blocks" > "$tmp/backfill.txt" 2>&1 ||
    fail "Prometheus' OpenMetrics parser on stats of $dir: $(cat "$tmp/backfill.txt")"
  want=$(grep -vc '^#' "$tmp/out.om")
  # The block table: BLOCK ULID, MIN TIME, MAX TIME, DURATION, NUM SAMPLES, ...
  got=$(awk 'length($1) == 26 && $1 ~ /^[0-9A-Z]+$/ { n += $5 } END { print n + 0 }' "$tmp/backfill.txt")
  ((got == want)) || fail "openmetrics of $dir: the parser stored $got of $want samples: $(cat "$tmp/backfill.txt")"
  checked=$((checked + 1))
done < <(find testdata -name '*.ncclwatch' -printf '%h\n' | sort -u)
((checked >= 20)) || fail "only $checked recordings checked"
echo "promtool: $checked recordings pass, in both formats"

# recipe NAME: the fenced block after `<!-- metrics-recipe: NAME -->`.
recipe() {
  awk -v want="<!-- metrics-recipe: $1 -->" '
    $0 == want { armed = 1; next }
    armed && /^```/ { if (inside) exit; inside = 1; next }
    inside { print }' "$doc"
}

# A free loopback port (the daemon takes it right after).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# scrape URL OUT: waits until the daemon answers, then saves its metrics.
scrape() {
  local tries=0
  until curl --silent --fail "$1" > "$2"; do
    tries=$((tries + 1))
    ((tries < 600)) || fail "no answer from $1"
    sleep 0.05
  done
}

# A scrape's ncclwatch_calls_total is a counter with job_id=$2.
typed_with_job() {
  grep -qx '# TYPE ncclwatch_calls_total counter' "$1" || fail "$3: ncclwatch_calls_total is not a counter: $(grep ncclwatch_calls "$1" | head -3)"
  grep -q "^ncclwatch_calls_total{.*job_id=\"$2\"" "$1" || fail "$3: no job_id=\"$2\": $(grep ncclwatch_calls "$1" | head -3)"
}

# A PyTorch recording: its headers carry torchrun's job id.
dir=testdata/torch/count-events-4r
job=$("$ncclwatch" dump "$dir" | sed -n 's/.*job_id: "\([^"]*\)".*/\1/p' | head -1)
[[ -n "$job" ]] || fail "no job id in $dir"
export NCCLWATCH_JOB_ID=$job TRACES=$dir PATH=$(dirname "$ncclwatch"):$PATH

# The textfile collector.
recipe textfile > "$tmp/textfile.sh"
[[ -s "$tmp/textfile.sh" ]] || fail "no textfile recipe in docs/metrics.md"
export TEXTFILE_DIR=$tmp/textfile
mkdir "$TEXTFILE_DIR"
bash -euo pipefail "$tmp/textfile.sh" || fail "the textfile recipe failed"
files=("$TEXTFILE_DIR"/*)
[[ ${#files[@]} -eq 1 && "${files[0]}" == *.prom ]] || fail "the textfile folder holds: $(ls -a "$TEXTFILE_DIR")"
port=$(free_port)
prometheus-node-exporter --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$TEXTFILE_DIR" --web.listen-address="127.0.0.1:$port" > "$tmp/node.log" 2>&1 &
daemons+=($!)
scrape "http://127.0.0.1:$port/metrics" "$tmp/node.txt"
grep -q '^node_textfile_scrape_error 0' "$tmp/node.txt" || fail "node_exporter could not read the file: $(cat "$tmp/node.log")"
typed_with_job "$tmp/node.txt" "$job" "node_exporter"
echo "textfile recipe: node_exporter serves the counters with job_id"

# The Pushgateway.
recipe pushgateway > "$tmp/push.sh"
[[ -s "$tmp/push.sh" ]] || fail "no pushgateway recipe in docs/metrics.md"
port=$(free_port)
prometheus-pushgateway --web.listen-address="127.0.0.1:$port" > "$tmp/push.log" 2>&1 &
daemons+=($!)
export PUSHGATEWAY=http://127.0.0.1:$port
scrape "$PUSHGATEWAY/-/ready" /dev/null
bash -euo pipefail "$tmp/push.sh" || fail "the pushgateway recipe failed: $(cat "$tmp/push.log")"
scrape "$PUSHGATEWAY/metrics" "$tmp/push.txt"
typed_with_job "$tmp/push.txt" "$job" "Pushgateway"
echo "pushgateway recipe: the Pushgateway serves the counters with job_id"
echo "PASS"
