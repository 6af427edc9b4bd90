#!/usr/bin/env bash
# Builds and tests everything with Bazel (offline, Debian system packages):
# every test in the default configuration, then the plugin's and the tools'
# tests under AddressSanitizer+UBSan and the plugin's under ThreadSanitizer
# (clang-14; see .bazelrc), then the plugin's tests and the release's built
# for aarch64 and run under qemu-user (build_defs/aarch64).
#
#   bash scripts/test.sh                         # all three configurations
#   NCCLWATCH_TEST_CONFIGS=default bash scripts/test.sh   # just the default one
#   bash scripts/test.sh --test_filter=...       # extra args go to every `bazel test`
#
# The last line is exactly "N passed, N failed", summed over the
# configurations (a test counts once per configuration it ran in). Exit
# status is 0 only if every build succeeded and every test passed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install_deps.sh || { echo "install_deps.sh failed" >&2; echo "0 passed, 1 failed"; exit 1; }

configs="${NCCLWATCH_TEST_CONFIGS:-default asan tsan aarch64}"
total_passed=0
total_failed=0
overall=0

log=$(mktemp "${TMPDIR:-/tmp}/ncclwatch-test.XXXXXX")
trap 'rm -f "$log"' EXIT

# run_config NAME TARGETS... : one `bazel test`, its results added to the totals.
run_config() {
  local name="$1"
  shift
  local flags=()
  case "$name" in
    default) ;;
    aarch64) flags=(--config=aarch64) ;;
    *) flags=(--config="$name" --test_tag_filters=-no-sanitizer --build_tag_filters=-no-sanitizer) ;;
  esac
  echo "=== bazel test ${flags[*]} $* ($name)"
  # --keep_going: a target that fails to build does not hide the other results.
  bazel test "${flags[@]}" --test_output=errors --test_summary=short --keep_going "$@" "${extra[@]}" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  # Summary lines: "//pkg:name   (cached) PASSED in 0.1s", "... FAILED in ...",
  # "... NO STATUS", "... FAILED TO BUILD". PASSED and FLAKY count as passed.
  local passed failed
  read -r passed failed < <(
    sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$log" | awk '
      /^(\/\/|@)[^ \t]+[ \t]+(\(cached\) )?(PASSED|FLAKY|FAILED|TIMEOUT|NO STATUS|INCOMPLETE|REMOTE FAILURE|BUILD FAILED|FAILED TO BUILD|TOOL HALTED)/ {
        label = $1; line = $0
        sub(/^[^ \t]+[ \t]+(\(cached\) )?/, "", line)
        status[label] = (line ~ /^(PASSED|FLAKY)/) ? "pass" : "fail"
      }
      END { p = 0; f = 0; for (l in status) { if (status[l] == "pass") p++; else f++ }; print p, f }')
  case "$rc" in
    0) ;;
    4) if ((passed + failed > 0)); then failed=$((failed > 0 ? failed : 1)); else rc=0; fi ;;  # no test targets
    *) if ((failed == 0)); then failed=1; fi ;;  # died before listing a failing test (BUILD error)
  esac
  echo "--- $name: ${passed} passed, ${failed} failed"
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  if ((rc != 0 || failed != 0)); then overall=1; fi
}

extra=("$@")
for c in $configs; do
  case "$c" in
    default) run_config default //... ;;
    asan) run_config asan //plugin/... //tools/... ;;
    # The plugin's threads, and the tools': the merge's second reader
    # (summary_test, job_test), the straggler counts beside the finders
    # (every Diagnose: diagnose's tests, job_test's sampled stragglers) and
    # the fake RAS service beside its clients (client_test, ras_cli_test).
    tsan) run_config tsan //plugin/... //tools/summary:summary_test //tools/model:job_test \
      //tools/ras:client_test //tools:ras_cli_test \
      //tools/diagnose:diagnose_test //tools/diagnose:find_cycles_test //tools/diagnose:find_dead_test \
      //tools/diagnose:find_ended_test //tools/diagnose:find_late_test //tools/diagnose:find_mismatch_test \
      //tools/diagnose:find_missing_test //tools/diagnose:find_p2p_test //tools/diagnose:find_stragglers_test \
      //tools/diagnose:testdata_test ;;
    # The Debian 11 root is x86-64's: bullseye_test stays in the default run.
    aarch64) run_config aarch64 //plugin/... //release:release_test //release:elf_needs_test //packaging:lintian_test ;;
    *) echo "unknown configuration '$c'" >&2; overall=1; total_failed=$((total_failed + 1)) ;;
  esac
done

echo "${total_passed} passed, ${total_failed} failed"
exit "$overall"
