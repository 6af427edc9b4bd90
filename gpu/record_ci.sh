#!/usr/bin/env bash
# Records the CI benchmark job (gpu/ci_bench.py, 4 ranks on the one GPU) again and again, as it
# is and slowed by NCCL settings, for testdata/ci/. One run per folder:
# OUTDIR/<capture>/<kind>-<n>/ holds the trace files, truth-rank*.json (the job's own CUDA-event
# times of every call), log.txt and status.
#
#   gpu/record_ci.sh OUTDIR
#
# Environment: CAPTURES (default "channels events"), RUNS (plain runs per capture, default 10),
# SLOWED (slowed runs per setting and capture, default 2), ITERS (default 200), FIRST (the first
# run number, to go on where a call stopped), BUDGET (seconds;
# no run starts after it, default 540). Runs go one at a time and interleaved (plain, slowed
# settings, next capture), so that drift on the machine falls on every kind alike. Slow settings:
# ch1 (NCCL_MAX_NCHANNELS=1), simple (NCCL_PROTO=Simple). (NCCL_BUFFSIZE=65536 ran past the
# 120 s limit every time on an H100 over sockets: not a setting to slow a run by.)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -eq 1 && "$1" != -* ]] || { sed -n "2,15p" "$0" >&2; exit 2; }
out="$1"
mkdir -p "$out" && out="$(cd "$out" && pwd)" || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
plugin="${NCCL_PROFILER_PLUGIN:-$repo/out/libnccl-profiler-ncclwatch.so}"
export NCCL_PROFILER_PLUGIN="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")"
captures="${CAPTURES:-channels events}" runs="${RUNS:-10}" slowed="${SLOWED:-2}"
iters="${ITERS:-200}" budget="${BUDGET:-540}" first="${FIRST:-1}"
declare -A slow=([ch1]="NCCL_MAX_NCHANNELS=1" [simple]="NCCL_PROTO=Simple")

one() {  # capture kind n [VAR=value]
  local cap=$1 kind=$2 n=$3 d="$out/$1/$2-$3"
  shift 3
  (( SECONDS < budget )) || { echo "skip $cap/$kind-$n: past the budget"; return; }
  mkdir -p "$d"
  local t0=$SECONDS
  env "$@" NCCLWATCH_DIR="$d" NCCLWATCH_COMPLETIONS="$cap" \
    timeout -k 5 120 python3 "$here/ci_bench.py" 4 --iters "$iters" >"$d/log.txt" 2>&1
  echo "exit $? seconds $((SECONDS - t0)) settings ${*:-none}" >"$d/status"
  echo "$cap/$kind-$n: $(cat "$d/status")"
}

for ((i = first; i <= runs; i++)); do
  for cap in $captures; do
    one "$cap" plain "$i"
    if (( i <= slowed )); then
      for s in ch1 simple; do one "$cap" "$s" "$i" "${slow[$s]}"; done
    fi
  done
done
