#!/usr/bin/env bash
# Records the CI benchmark job (gpu/ci_bench.py, 4 ranks on the one GPU) again and again, as it
# is and slowed by NCCL settings, for testdata/ci/. One run per folder:
# OUTDIR/<capture>/<kind>-<n>/ holds the trace files, truth-rank*.json (the job's own CUDA-event
# times of every call), log.txt and status.
#
#   gpu/record_ci.sh OUTDIR
#
# Environment: CAPTURES (default "channels events"), RUNS (plain runs per capture, default 10),
# SLOWED (slowed runs per setting and capture, default 2, spread over the plain ones), ITERS (default 200), FIRST and
# LAST (the first and last plain run number of this call, default 1 and RUNS, to split the runs
# over several calls with the same layout), BUDGET (seconds;
# no run starts after it, default 540). Runs go one at a time and interleaved (plain, slowed
# settings, next capture), so that drift on the machine falls on every kind alike. Slow settings:
# SETTINGS (default "ch1 simple": ch1 is NCCL_MAX_NCHANNELS=1, simple NCCL_PROTO=Simple), and DELAYS (default none): entries
# ROW:US, each a slowed kind delayROW-US (ci_bench.py --delay-row ROW --delay-us US). (NCCL_BUFFSIZE=65536 ran past the
# 120 s limit every time on an H100 over sockets: not a setting to slow a run by.)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -eq 1 && "$1" != -* ]] || { sed -n "2,17p" "$0" >&2; exit 2; }
out="$1"
mkdir -p "$out" && out="$(cd "$out" && pwd)" || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
plugin="${NCCL_PROFILER_PLUGIN:-$repo/out/libnccl-profiler-ncclwatch.so}"
export NCCL_PROFILER_PLUGIN="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")"
captures="${CAPTURES:-channels events}" runs="${RUNS:-10}" slowed="${SLOWED:-2}"
iters="${ITERS:-200}" budget="${BUDGET:-540}" first="${FIRST:-1}" last="${LAST:-${RUNS:-10}}" delays="${DELAYS:-}"
declare -A slow=([ch1]="NCCL_MAX_NCHANNELS=1" [simple]="NCCL_PROTO=Simple")

one() {  # capture kind n [VAR=value ...] [-- job args]
  local cap=$1 kind=$2 n=$3 d="$out/$1/$2-$3" vars=() args=()
  shift 3
  while (( $# )) && [[ "$1" != -- ]]; do vars+=("$1"); shift; done
  (( $# )) && shift && args=("$@")
  (( SECONDS < budget )) || { echo "skip $cap/$kind-$n: past the budget"; return; }
  mkdir -p "$d"
  local t0=$SECONDS
  env "${vars[@]}" NCCLWATCH_DIR="$d" NCCLWATCH_COMPLETIONS="$cap" \
    timeout -k 5 120 python3 "$here/ci_bench.py" 4 --iters "$iters" "${args[@]}" >"$d/log.txt" 2>&1
  echo "exit $? seconds $((SECONDS - t0)) settings ${vars[*]:-none} ${args[*]}" >"$d/status"
  echo "$cap/$kind-$n: $(cat "$d/status")"
}

# Slowed kinds, each SLOWED times, spread over the plain runs in turn.
read -ra kinds <<<"${SETTINGS-ch1 simple}"
for e in $delays; do kinds+=("delay${e%%:*}-${e#*:}"); done
total=$((slowed * ${#kinds[@]})) per=$(((slowed * ${#kinds[@]} + runs - 1) / runs))
for ((i = first, j = (first - 1) * per; i <= runs && i <= last; i++)); do
  for cap in $captures; do
    one "$cap" plain "$i"
    for ((k = j; k < j + per && k < total; k++)); do
      kind=${kinds[k % ${#kinds[@]}]} n=$((k / ${#kinds[@]} + 1))
      case $kind in
        delay*) e=${kind#delay}; one "$cap" "$kind" "$n" -- --delay-row "${e%%-*}" --delay-us "${e#*-}" ;;
        *) one "$cap" "$kind" "$n" "${slow[$kind]}" ;;
      esac
    done
  done
  j=$((j + per))
done
