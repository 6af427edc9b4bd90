#!/usr/bin/env bash
# Runs nccl_scenarios scenarios (and optionally the PyTorch script) with the
# ncclwatch plugin, one output folder per run, and checks each run's exit status
# against what the scenario should give. See gpu/README.md.
#
#   gpu/run_scenarios.sh [options] [scenario...|all]   (default: healthy straggler skip kill;
#                                                          all: every scenario of --list-scenarios)
#     -n N        ranks/GPUs (default 4)
#     -s S        steps (default 20)
#     -t T        watchdog timeout in seconds (default 10)
#     -o DIR      output root (default out/runs/<date-time>); run X writes DIR/X/
#     -p SO       plugin .so (default: $NCCL_PROFILER_PLUGIN, else
#                 out/libnccl-profiler-ncclwatch.so, else bazel-bin/plugin/...; "none": no plugin)
#     -b BIN      nccl_scenarios binary (default out/nccl_scenarios; built if missing)
#     -x ARGS     extra arguments for every nccl_scenarios run (e.g. "--sizes small")
#     --net       network transport only: NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (net-stall needs it)
#     --torch     also run torch_allreduce.py healthy and with a skipped all_reduce
#     --torch-only  only the PyTorch runs
# Exit status: 0 when every run ended as expected, else 1. count, dtype, func and root
# (mismatched NCCL calls: undefined, a hang or a completion) accept 0 or 1.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
nranks=4 steps=20 timeout=10 outroot="" plugin="${NCCL_PROFILER_PLUGIN:-}" bin="" extra=""
net=0 torch=0 native=1
scenarios=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) nranks="$2"; shift 2 ;;
    -s) steps="$2"; shift 2 ;;
    -t) timeout="$2"; shift 2 ;;
    -o) outroot="$2"; shift 2 ;;
    -p) plugin="$2"; shift 2 ;;
    -b) bin="$2"; shift 2 ;;
    -x) extra="$2"; shift 2 ;;
    --net) net=1; shift ;;
    --torch) torch=1; shift ;;
    --torch-only) torch=1; native=0; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "run_scenarios.sh: unknown option $1" >&2; exit 2 ;;
    *) scenarios+=("$1"); shift ;;
  esac
done
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=(healthy straggler skip kill)
outroot="${outroot:-$repo/out/runs/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$outroot"
outroot="$(cd "$outroot" && pwd)"

# NVLink multicast stays off, for us and every child process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [[ $net == 1 ]]; then export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1; fi

if [[ -z "$plugin" ]]; then
  for c in "$repo/out/libnccl-profiler-ncclwatch.so" "$repo/bazel-bin/plugin/libnccl-profiler-ncclwatch.so"; do
    if [[ -f "$c" ]]; then plugin="$c"; break; fi
  done
fi
if [[ "$plugin" == none || -z "$plugin" ]]; then
  unset NCCL_PROFILER_PLUGIN
  echo "run_scenarios.sh: no profiler plugin (runs produce no ncclwatch traces)" >&2
else
  [[ -f "$plugin" ]] || { echo "run_scenarios.sh: no plugin at $plugin" >&2; exit 2; }
  NCCL_PROFILER_PLUGIN="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")"
  export NCCL_PROFILER_PLUGIN
fi

if [[ $native == 1 ]]; then
  bin="${bin:-$repo/out/nccl_scenarios}"
  if [[ ! -x "$bin" ]]; then "$here/build.sh" "$bin" || exit 1; fi
  if [[ " ${scenarios[*]} " == *" all "* ]]; then
    mapfile -t scenarios < <("$bin" --list-scenarios | awk '/^[^ ]/ {print $1}')
  fi
fi

expected_status() {  # parent exit status a scenario should give ("any": 0 or 1)
  case "$1" in
    healthy|straggler) echo 0 ;;
    count|dtype|func|root) echo any ;;  # mismatched calls: NCCL may hang or complete
    *) echo 1 ;;
  esac
}

results=()
fails=0
record() {  # name got want
  local verdict=ok
  if [[ "$3" == any ]]; then
    if [[ "$2" != 0 && "$2" != 1 ]]; then verdict=UNEXPECTED; fails=$((fails + 1)); fi
  elif [[ "$2" != "$3" ]]; then
    verdict=UNEXPECTED; fails=$((fails + 1))
  fi
  results+=("$(printf '%-22s exit %-3s (expected %s) %s' "$1" "$2" "$3" "$verdict")")
}

echo "run_scenarios.sh: output in $outroot; NCCL_PROFILER_PLUGIN=${NCCL_PROFILER_PLUGIN:-(unset)}" >&2
if [[ $native == 1 ]]; then
  for s in "${scenarios[@]}"; do
    d="$outroot/$s"
    mkdir -p "$d"
    echo "=== $s ===" >&2
    # shellcheck disable=SC2086
    NCCLWATCH_DIR="$d" "$bin" --nranks "$nranks" --scenario "$s" --steps "$steps" \
      --timeout-sec "$timeout" --out-dir "$d" $extra 2>&1 | tee "$d/log.txt"
    record "$s" "${PIPESTATUS[0]}" "$(expected_status "$s")"
  done
fi

if [[ $torch == 1 ]]; then
  for t in torch_healthy torch_skip; do
    d="$outroot/$t"
    mkdir -p "$d"
    args=(--steps "$steps" --timeout-sec "$timeout" --fr-dir "$d/fr")
    want=0
    if [[ $t == torch_skip ]]; then args+=(--skip-rank $((nranks - 1))); want=1; fi
    echo "=== $t ===" >&2
    NCCLWATCH_DIR="$d" PYTHONUNBUFFERED=1 torchrun --standalone --nproc_per_node="$nranks" \
      "$here/torch_allreduce.py" "${args[@]}" 2>&1 | tee "$d/log.txt"
    got="${PIPESTATUS[0]}"
    [[ "$got" == 0 ]] || got=1  # torchrun's own status for a failed worker varies
    record "$t" "$got" "$want"
  done
fi

echo "=== summary ($outroot) ===" >&2
printf '%s\n' "${results[@]}" | tee "$outroot/summary.txt" >&2
[[ $fails == 0 ]]
