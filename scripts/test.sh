#!/usr/bin/env bash
# Builds and tests everything with Bazel (offline, Debian system packages).
#
#   bash scripts/test.sh                    # default config
#   bash scripts/test.sh --config=asan      # extra args go to `bazel test`
#
# Last line of output is exactly "N passed, N failed". Exit status is 0 only
# if the build succeeded and every test passed (zero tests is a success).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install_deps.sh || { echo "install_deps.sh failed" >&2; echo "0 passed, 1 failed"; exit 1; }

log=$(mktemp "${TMPDIR:-/tmp}/ncclwatch-test.XXXXXX")
trap 'rm -f "$log"' EXIT

# --keep_going: a target that fails to build does not hide the other results;
# such tests are reported as "FAILED TO BUILD" / "NO STATUS".
bazel test //... --test_output=errors --test_summary=short --keep_going "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# Summary lines look like
#   //pkg:name                                 (cached) PASSED in 0.1s
#   //pkg:name                                          FAILED in 2 out of 2 in 0.3s
#   //pkg:name                                          NO STATUS
#   //pkg:name                                          FAILED TO BUILD
# PASSED and FLAKY (passed on retry) count as passed, anything else as failed.
read -r passed failed < <(
  sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$log" | awk '
    /^(\/\/|@)[^ \t]+[ \t]+(\(cached\) )?(PASSED|FLAKY|FAILED|TIMEOUT|NO STATUS|INCOMPLETE|REMOTE FAILURE|BUILD FAILED|FAILED TO BUILD|TOOL HALTED)/ {
      label = $1
      line = $0
      sub(/^[^ \t]+[ \t]+(\(cached\) )?/, "", line)
      status[label] = (line ~ /^(PASSED|FLAKY)/) ? "pass" : "fail"
    }
    END {
      p = 0; f = 0
      for (l in status) { if (status[l] == "pass") p++; else f++ }
      print p, f
    }')

case "$rc" in
  0) ;;                                   # all built, all tests passed
  4) if ((passed + failed > 0)); then     # "no test targets" is fine when
       failed=$((failed > 0 ? failed : 1)) # there really are none
     else
       rc=0
     fi ;;
  *) # Build/test failure. If Bazel died before listing any failing test
     # (e.g. a BUILD file error), still report at least one failure.
     if ((failed == 0)); then failed=1; fi ;;
esac

echo "${passed} passed, ${failed} failed"
if ((rc != 0 || failed != 0)); then
  exit 1
fi
exit 0
