#!/usr/bin/env bash
# The generated bash completion, sourced into bash and asked as bash asks
# it (COMP_WORDS, COMP_CWORD), and the man page read by man with warnings
# on.
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
complete() { :; }  # the script registers itself; no interactive shell here
# shellcheck source=/dev/null
source tools/ncclwatch.bash-completion
ask() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _ncclwatch
  echo "${COMPREPLY[*]:-}"
}
[[ "$(ask ncclwatch di)" == "diagnose" ]] || fail "ncclwatch di: $(ask ncclwatch di)"
[[ "$(ask ncclwatch s)" == "stats summarize" ]] || fail "ncclwatch s: $(ask ncclwatch s)"
[[ "$(ask ncclwatch diagnose --f)" == "--format --fr" ]] || fail "diagnose --f: $(ask ncclwatch diagnose --f)"
[[ "$(ask ncclwatch check --j)" == "--junit --job" ]] || fail "check --j: $(ask ncclwatch check --j)"
# Not a flag: nothing, so that complete's -o default offers files.
[[ -z "$(ask ncclwatch diagnose tes)" ]] || fail "diagnose tes: $(ask ncclwatch diagnose tes)"
grep -q '^complete -o default -F _ncclwatch ncclwatch$' tools/ncclwatch.bash-completion || fail "no complete line"

warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l tools/ncclwatch.1 2>&1 > /dev/null) || fail "man -l: $warnings"
[[ -z "$warnings" ]] || fail "man's warnings: $warnings"
echo PASS
