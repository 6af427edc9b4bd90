#!/usr/bin/env bash
# Every command, in every format, on a job whose every string is hostile
# (hostile_job.cc: every C0 control, DEL, every C1 control, invalid UTF-8,
# U+FFFE, markup, a fake verdict line after a newline, names of a
# megabyte), read back with a strict parser of its format: text holds no
# control byte but newline and tab and no line passes for a verdict;
# JUnit passes xmllint; metrics pass promtool; JSON passes Python's
# parser with no raw control; Perfetto and merge's protobuf parse with
# libprotobuf. No line, or string, grows with the megabyte names.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
ncclwatch=$PWD/tools/ncclwatch
proto_strings=$PWD/tools/text/proto_strings
command -v xmllint > /dev/null || fail "no xmllint (libxml2-utils: scripts/install_deps.sh)"
command -v promtool > /dev/null || fail "no promtool (prometheus: scripts/install_deps.sh)"
python=$(command -v python3 || echo /usr/bin/python3)
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/safe_output_test.XXXXXX")
"$PWD/tools/text/hostile_job" "$tmp"
cd "$tmp"
# The longest line or string any output may hold: a few escaped names,
# each cut to 256 bytes; an uncut one would be a megabyte.
max=16384

# Text: no byte below 0x20 but newline and tab, no DEL, valid UTF-8 with
# no C1 control, no line that starts what a name holds after its newline,
# no line over $max.
check_text() {
  local what=$1 file=$2 line_max=${3:-$max}
  "$python" - "$file" "$line_max" << 'PY' || fail "$what: $(cat "$tmp/why")"
import re, sys
data = open(sys.argv[1], 'rb').read()
why = open('why', 'w')
try:
    text = data.decode('utf-8')
except UnicodeDecodeError as e:
    why.write('invalid UTF-8 at %d' % e.start); sys.exit(1)
bad = re.search('[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff\u202a-\u202e]', text)
if bad:
    why.write('raw U+%04X at %d' % (ord(bad.group()), bad.start())); sys.exit(1)
for n, line in enumerate(text.split('\n'), 1):
    if line.startswith('OK: the job finished'):
        why.write('line %d passes for a verdict: %r' % (n, line[:80])); sys.exit(1)
    if len(line) > int(sys.argv[2]):
        why.write('line %d of %d characters' % (n, len(line))); sys.exit(1)
PY
}

# JSON: Python's parser, no raw control (JSON escapes keep the values),
# no string over $max. $3: the longest line (export writes one line).
check_json() {
  local what=$1 file=$2
  check_text "$what" "$file" "${3:-$max}"
  "$python" - "$file" "$max" << 'PY' || fail "$what: $(cat "$tmp/why")"
import json, sys
why = open('why', 'w')
try:
    doc = json.load(open(sys.argv[1], encoding='utf-8'))
except ValueError as e:
    why.write('not JSON: %s' % e); sys.exit(1)
def walk(v):
    if isinstance(v, str):
        if len(v.encode('utf-8')) > 6 * int(sys.argv[2]):
            why.write('a string of %d characters' % len(v)); sys.exit(1)
    elif isinstance(v, dict):
        for k, x in v.items(): walk(k); walk(x)
    elif isinstance(v, list):
        for x in v: walk(x)
walk(doc)
PY
}

# $1: a name for the output; the rest: the command. Its stdout goes to
# out.$1, its stderr (always text) is checked too. Exit 0 to 3 are
# verdicts; anything else is a failure.
run() {
  local what=$1
  shift
  local status=0
  "$ncclwatch" "$@" > "out.$what" 2> "err.$what" || status=$?
  ((status <= 3)) || fail "$what: exit $status: $(head -c 2000 "err.$what")"
  check_text "$what (stderr)" "err.$what"
}

run diagnose diagnose traces
check_text diagnose out.diagnose
# The job's hang: rank 3 still inside AllReduce #4 that the others finished (a STUCK
# finding), or not joining #5 (a HANG one), as the finders read it.
grep -qE 'HANG|STUCK' out.diagnose || fail "diagnose found no hang: $(head -c 500 out.diagnose)"
grep -q 'world\\x00\\x01' out.diagnose || fail "diagnose does not show the name escaped"
grep -q '\.\.\.\[cut: ' out.diagnose || fail "diagnose shows no cut name"
run diagnose_json diagnose --format=json traces
check_json diagnose_json out.diagnose_json
run watch watch --timeout=5 traces
check_text watch out.watch
run watch_json watch --format=json --timeout=5 traces
check_json watch_json out.watch_json
run merge merge traces
check_text merge out.merge
run merge_json merge --format=json traces
check_json merge_json out.merge_json
run merge_pb merge --format=pb -o merge.pb traces
"$proto_strings" merge merge.pb "$max" || fail "merge --format=pb"
run export export traces
check_json export out.export 1000000
run perfetto export --format=perfetto -o trace.perfetto traces
"$proto_strings" perfetto trace.perfetto "$max" || fail "export --format=perfetto"
run stats stats traces
check_text stats out.stats
run stats_json stats --format=json traces
check_json stats_json out.stats_json
for fmt in prometheus openmetrics; do
  run "$fmt" stats --format="$fmt" traces
  check_text "$fmt" "out.$fmt"
  # promtool reads Prometheus' text format (its lint is of that format's
  # names); OpenMetrics escapes label values by the same rules.
  if [[ $fmt == prometheus ]]; then
    promtool check metrics < "out.$fmt" > lint.txt 2>&1 || fail "promtool on $fmt: $(cat lint.txt)"
  fi
  grep -q '^ncclwatch_calls_total{comm="world\\\\x00' "out.$fmt" || fail "$fmt: the name is not shown escaped"
done
cp out.stats_json base.json
run check check --baseline=base.json --junit=junit.xml traces
check_text check out.check
check_text junit junit.xml
xmllint --noout junit.xml || fail "xmllint on check's JUnit"
run check_json check --format=json --baseline=base.json traces
check_json check_json out.check_json
run dump dump traces
check_text dump out.dump
run summarize summarize -o summary.ncclwatch-summary traces
run dump_summary dump --summary summary.ncclwatch-summary
check_text dump_summary out.dump_summary
run diagnose_summary diagnose summary.ncclwatch-summary
check_text diagnose_summary out.diagnose_summary
echo "PASS"
