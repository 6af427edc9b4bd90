#!/bin/bash
# Seed corpora for the fuzz targets, made from the traces recorded on GPUs:
#   OUT/reader/    every testdata/gpu/*/*.ncclwatch file, one seed each
#   OUT/diagnose/  per scenario, its ranks' files joined in the diagnose
#                  fuzzer's split format (split.h: the 4-byte delimiter
#                  \xfe N C W between files, at most 4 files), plus each
#                  scenario's first two ranks alone (smaller seeds)
# Usage: tools/fuzz/make_seeds.sh [OUT]   (default /tmp/ncclwatch-seeds);
# run from the repository root. Nothing here is committed: the corpora are
# made again from testdata/ whenever needed.
set -euo pipefail
out=${1:-/tmp/ncclwatch-seeds}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out/reader" "$out/diagnose"
n=0
for dir in "$root"/testdata/gpu/*/; do
  scenario=$(basename "$dir")
  files=("$dir"*.ncclwatch)
  [ -e "${files[0]}" ] || continue
  i=0
  for f in "${files[@]}"; do
    cp "$f" "$out/reader/$scenario-$i"
    i=$((i + 1))
  done
  join() {
    local first=1
    for f in "$@"; do
      [ $first = 1 ] || printf '\xfeNCW'
      first=0
      cat "$f"
    done
  }
  join "${files[@]:0:4}" > "$out/diagnose/$scenario"
  join "${files[@]:0:2}" > "$out/diagnose/$scenario-2ranks"
  n=$((n + 1))
done
echo "seeds for $n scenarios: $(ls "$out/reader" | wc -l) in $out/reader, $(ls "$out/diagnose" | wc -l) in $out/diagnose"
