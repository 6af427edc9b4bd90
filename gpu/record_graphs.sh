#!/usr/bin/env bash
# Records PyTorch jobs that replay a CUDA graph (gpu/torch_graph.py), 4 ranks on the one GPU
# (NCCL_HOSTID per rank, sockets), for testdata/torch/. Each run goes into
# OUTDIR/graph-<case>-<source>-4r/: the trace files, log.txt and status (exit status, seconds).
#
#   gpu/record_graphs.sh OUTDIR
#
# Cases: healthy (3 replays, then eager all-reduces), hang (rank 3 never launches the last
# replay; the job is ended after HANG_SEC, default 25), skip (rank 1 skips the first eager
# all-reduce after the replays). Sources as gpu/record_torch.sh: channels, events, proxy.
# Environment: NCCL_PROFILER_PLUGIN (default out/libnccl-profiler-ncclwatch.so), CASES,
# SOURCES, CAP (seconds per run, default 120). Runs go 3 at a time.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -eq 1 && "$1" != -* ]] || { sed -n '2,12p' "$0" >&2; exit 2; }
out="$1"
mkdir -p "$out" && out="$(cd "$out" && pwd)" || exit 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
plugin="${NCCL_PROFILER_PLUGIN:-$repo/out/libnccl-profiler-ncclwatch.so}"
[[ -f "$plugin" ]] || { echo "record_graphs.sh: no plugin at $plugin" >&2; exit 2; }
export NCCL_PROFILER_PLUGIN="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")"
cases="${CASES:-healthy hang skip}" sources="${SOURCES:-channels events proxy}" cap="${CAP:-120}"

one() {  # case source port
  local c=$1 src=$2 port=$3 d="$out/graph-$1-$2-4r" completions=$2 events=default args=()
  [[ $src == proxy ]] && completions=events events=default,proxyop,proxystep
  case $c in
    hang) args=(--hang-replay 3) ;;
    skip) args=(--skip-next 1) ;;
  esac
  mkdir -p "$d"
  local t0=$SECONDS
  # torch_graph.py takes its port from GRAPH_PORT (runs go side by side).
  env NCCLWATCH_DIR="$d" NCCLWATCH_STUCK_SEC=3 NCCLWATCH_COMPLETIONS="$completions" \
    NCCLWATCH_EVENTS="$events" GRAPH_PORT="$port" \
    timeout -k 10 "$cap" python3 "$here/torch_graph.py" 4 "${args[@]}" >"$d/log.txt" 2>&1
  echo "exit $? seconds $((SECONDS - t0))" >"$d/status"
}

port=29700
for c in $cases; do
  for s in $sources; do
    one "$c" "$s" $port &
    port=$((port + 1))
    while (( $(jobs -rp | wc -l) >= 3 )); do wait -n; done
  done
done
wait
for d in "$out"/graph-*; do echo "$(basename "$d"): $(cat "$d/status")"; done
