#!/usr/bin/env bash
# The golden check for changes that must not change behaviour: runs every
# subcommand of the built ncclwatch on every recording under testdata/ and
# writes each output (stdout, stderr and exit status) to a folder.
#
#   bash scripts/golden.sh save /tmp/golden-before     # on the commit before
#   bash scripts/golden.sh check /tmp/golden-before    # after: every output byte-identical
#
# Uses bazel-bin/tools/ncclwatch (built with -c opt here).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode="${1:-}"
dir="${2:-}"
if [[ "$mode" != save && "$mode" != check ]] || [[ -z "$dir" ]]; then
  echo "usage: $0 save|check DIR" >&2
  exit 2
fi

bazel build -c opt //tools:ncclwatch >/dev/null 2>&1 || { echo "golden: build failed" >&2; exit 2; }
nw="$PWD/bazel-bin/tools/ncclwatch"
out=$(mktemp -d "${TMPDIR:-/tmp}/golden.XXXXXX")
trap 'rm -rf "$out"' EXIT

# run NAME ARGS...: one invocation's stdout, stderr and exit status.
run() {
  local name="$1"
  shift
  local rc=0
  (cd "$out" && "$nw" "$@" >"$out/$name.out" 2>"$out/$name.err") || rc=$?
  echo "$rc" >"$out/$name.rc"
}

while IFS= read -r d; do
  tag=$(echo "${d#testdata/}" | tr '/' '_')
  abs="$PWD/$d"
  run "$tag.diagnose" diagnose "$abs"
  run "$tag.diagnose_json" diagnose --format=json "$abs"
  run "$tag.merge" merge "$abs"
  run "$tag.merge_json" merge --format=json "$abs"
  run "$tag.stats" stats "$abs"
  run "$tag.stats_json" stats --format=json "$abs"
  run "$tag.export" export --out "$out/$tag.export.json" "$abs"
  run "$tag.check" check --baseline "$out/$tag.stats_json.out" --junit "$out/$tag.check.xml" "$abs"
  first=$(find "$abs" -maxdepth 1 -name '*.ncclwatch' | sort | head -n 1)
  run "$tag.dump" dump --summary "$first"
  run "$tag.dump_records" dump "$first"
done < <(find testdata -name '*.ncclwatch' -printf '%h\n' | sort -u)

# Paths of this checkout and of the temporary folder are not behaviour, nor
# the order of keys in a JSON object (export's args come from a hash map).
sed -i -e "s|$PWD|ROOT|g" -e "s|$out|OUT|g" "$out"/*
python3 - "$out" <<'PY'
import json, pathlib, sys
for p in pathlib.Path(sys.argv[1]).glob("*.json"):
    try:
        p.write_text(json.dumps(json.loads(p.read_text()), sort_keys=True, indent=0) + "\n")
    except ValueError:
        pass  # not JSON: compared as it is
PY

if [[ "$mode" == save ]]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$out"/* "$dir"/
  echo "golden: saved $(ls "$dir" | wc -l) outputs to $dir"
else
  if diff -r "$dir" "$out" >"$out.diff" 2>&1; then
    echo "golden: all $(ls "$dir" | wc -l) outputs identical"
    rm -f "$out.diff"
  else
    echo "golden: outputs differ (diff in $out.diff):" >&2
    diff -rq "$dir" "$out" | head -n 20 >&2
    cut -c1-300 "$out.diff" | head -n 40 >&2
    exit 1
  fi
fi
