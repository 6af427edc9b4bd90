#!/usr/bin/env bash
# Records real ncclwatch traces of every nccl_scenarios scenario and of the
# PyTorch skip run, as test data for the trace tools. See gpu/README.md.
#
#   gpu/record_testdata.sh OUTDIR
#
# OUTDIR must not exist or be empty. Writes, sequentially:
#   OUTDIR/<scenario>/   trace files, log.txt, scenario.json   (every scenario of
#       --list-scenarios: 4 ranks, 8 steps, --sizes small, --timeout-sec 8,
#       NCCLWATCH_STUCK_SEC=3, default capture; net-stall with NCCL_P2P_DISABLE=1
#       NCCL_SHM_DISABLE=1 and NCCLWATCH_EVENTS=default,proxyop,proxystep)
#   OUTDIR/torch_skip/   traces, log.txt, fr/nccl_trace_rank_<r> (Flight Recorder),
#       torchfrtrace.txt and torchfrtrace_entries.txt when torchfrtrace is installed
#       (torch_allreduce.py, 4 processes, --skip-rank 3, --timeout-sec 10)
#   OUTDIR/summary.txt   each run's exit status against the expected one
#   OUTDIR/manifest.txt  host, GPUs, git revision, plugin and binary checksums
# About 4 minutes on 4 H200s; every run is also capped by timeout(1).
#
# Environment: NCCL_PROFILER_PLUGIN (else out/libnccl-profiler-ncclwatch.so, else
# bazel-bin/plugin/...), BIN (default out/nccl_scenarios, built if missing),
# NRANKS (default 4). NCCL_NVLS_ENABLE is forced to 0.
# Exit status: 0 when every run ended as expected, 1 otherwise, 2 on bad usage.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
die() { echo "record_testdata.sh: $*" >&2; exit 2; }

[[ $# -eq 1 && "$1" != -* ]] || { sed -n '2,28p' "$0" >&2; exit 2; }
out="$1"
if [[ -e "$out" && -n "$(ls -A "$out" 2>/dev/null)" ]]; then
  die "$out exists and is not empty; pick a new OUTDIR"
fi
mkdir -p "$out" || die "cannot create $out"
out="$(cd "$out" && pwd)"

nranks="${NRANKS:-4}" steps=8 timeout_sec=8 torch_timeout_sec=10
native_cap=90 torch_cap=180  # seconds per run, a backstop only

# NVLink multicast stays off, for us and every child process.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCLWATCH_EVENTS NCCLWATCH_DIR

plugin="${NCCL_PROFILER_PLUGIN:-}"
if [[ -z "$plugin" ]]; then
  for c in "$repo/out/libnccl-profiler-ncclwatch.so" "$repo/bazel-bin/plugin/libnccl-profiler-ncclwatch.so"; do
    if [[ -f "$c" ]]; then plugin="$c"; break; fi
  done
fi
[[ -n "$plugin" && -f "$plugin" ]] || die "no ncclwatch plugin (set NCCL_PROFILER_PLUGIN or put it in out/)"
NCCL_PROFILER_PLUGIN="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")"
export NCCL_PROFILER_PLUGIN

bin="${BIN:-$repo/out/nccl_scenarios}"
if [[ ! -x "$bin" ]]; then "$here/build.sh" "$bin" || die "build failed"; fi
mapfile -t scenarios < <("$bin" --list-scenarios | awk '/^[^ ]/ {print $1}')
[[ ${#scenarios[@]} -gt 0 ]] || die "$bin --list-scenarios listed nothing"

expected_status() {  # as in run_scenarios.sh ("any": 0 or 1)
  case "$1" in
    healthy|straggler|torch_healthy) echo 0 ;;
    count|dtype|func|root) echo any ;;
    *) echo 1 ;;
  esac
}

fails=0
summary="$out/summary.txt"
: >"$summary"
record() {  # name got want seconds
  local verdict=ok
  if [[ "$3" == any ]]; then
    [[ "$2" == 0 || "$2" == 1 ]] || verdict=UNEXPECTED
  elif [[ "$2" != "$3" ]]; then
    verdict=UNEXPECTED
  fi
  [[ $verdict == ok ]] || fails=$((fails + 1))
  printf '%-14s exit %-3s (expected %s) %4ss %s\n' "$1" "$2" "$3" "$4" "$verdict" | tee -a "$summary" >&2
}

{
  echo "date: $(date -Is)"
  echo "host: $(hostname)"
  echo "git: $(git -C "$repo" rev-parse HEAD 2>/dev/null)$(git -C "$repo" diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "plugin: $NCCL_PROFILER_PLUGIN $(sha256sum "$NCCL_PROFILER_PLUGIN" | cut -d' ' -f1)"
  echo "binary: $bin $(sha256sum "$bin" | cut -d' ' -f1)"
  echo "runs: nranks $nranks, steps $steps, --sizes small, --timeout-sec $timeout_sec, NCCLWATCH_STUCK_SEC=3"
  echo "gpus:"
  nvidia-smi -L 2>&1 | sed 's/^/  /'
  nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1 | sed 's/^/driver: /'
} >"$out/manifest.txt"

echo "record_testdata.sh: ${#scenarios[@]} scenarios + torch_skip into $out" >&2
for s in "${scenarios[@]}"; do
  d="$out/$s"
  mkdir -p "$d"
  env_extra=()
  if [[ $s == net-stall ]]; then
    env_extra=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "NCCLWATCH_EVENTS=default,proxyop,proxystep")
  fi
  echo "=== $s ${env_extra[*]}" >&2
  t0=$SECONDS
  # The ranks die with the parent (PR_SET_PDEATHSIG), so timeout(1) ends them too.
  env "${env_extra[@]}" NCCLWATCH_DIR="$d" NCCLWATCH_STUCK_SEC=3 \
    timeout -k 5 "$native_cap" "$bin" --nranks "$nranks" --scenario "$s" --steps "$steps" \
    --sizes small --timeout-sec "$timeout_sec" --init-timeout-sec 30 --out-dir "$d" \
    >"$d/log.txt" 2>&1
  got=$?
  grep -E '^\[parent\] (rank [0-9]+ \(pid|killing)' "$d/log.txt" | sed 's/^/    /' >&2
  record "$s" "$got" "$(expected_status "$s")" "$((SECONDS - t0))"
done

# PyTorch: one rank skips an all_reduce; its watchdog times out and dumps the
# Flight Recorder.
d="$out/torch_skip"
mkdir -p "$d/fr"
launcher=()
if command -v torchrun >/dev/null; then
  launcher=(torchrun)
elif python3 -c 'import torch.distributed.run' 2>/dev/null; then
  launcher=(python3 -m torch.distributed.run)
fi
if [[ ${#launcher[@]} -eq 0 ]]; then
  echo "record_testdata.sh: no torchrun / PyTorch; skipping torch_skip" | tee "$d/log.txt" >&2
  fails=$((fails + 1))
else
  echo "=== torch_skip" >&2
  t0=$SECONDS
  NCCLWATCH_DIR="$d" NCCLWATCH_STUCK_SEC=3 PYTHONUNBUFFERED=1 \
    timeout -k 10 "$torch_cap" "${launcher[@]}" --standalone --nproc_per_node="$nranks" \
    "$here/torch_allreduce.py" --steps "$steps" --sizes small --skip-rank $((nranks - 1)) \
    --timeout-sec "$torch_timeout_sec" --fr-dir "$d/fr" >"$d/log.txt" 2>&1
  got=$?
  [[ $got == 0 ]] || got=1  # torchrun's own status for a failed worker varies
  record torch_skip "$got" 1 "$((SECONDS - t0))"
  # shellcheck disable=SC2012
  ls -l "$d/fr" | sed 's/^/    /' >&2

  # torchfrtrace DIR --prefix P: analysis (first mismatch per process group);
  # -j: just print the entries. The dumps are <fr>/nccl_trace_rank_<rank>.
  frtrace=()
  if command -v torchfrtrace >/dev/null; then
    frtrace=(torchfrtrace)
  elif python3 -c 'import torch.distributed.flight_recorder.fr_trace' 2>/dev/null; then
    frtrace=(python3 -m torch.distributed.flight_recorder.fr_trace)
  fi
  if [[ ${#frtrace[@]} -eq 0 ]]; then
    echo "record_testdata.sh: torchfrtrace not found; no analysis of the dumps" >&2
  elif ! compgen -G "$d/fr/nccl_trace_rank_*" >/dev/null; then
    echo "record_testdata.sh: no Flight Recorder dumps in $d/fr" >&2
  else
    {
      echo "\$ ${frtrace[*]} $d/fr --prefix nccl_trace_rank_"
      timeout 120 "${frtrace[@]}" "$d/fr" --prefix nccl_trace_rank_ 2>&1
      rc=$?
      echo "[exit $rc]"
      if [[ $rc != 0 ]]; then  # e.g. a rank without a dump
        echo "\$ ${frtrace[*]} $d/fr --prefix nccl_trace_rank_ --allow-incomplete-ranks"
        timeout 120 "${frtrace[@]}" "$d/fr" --prefix nccl_trace_rank_ --allow-incomplete-ranks 2>&1
        echo "[exit $?]"
      fi
    } >"$d/torchfrtrace.txt"
    {
      echo "\$ ${frtrace[*]} $d/fr --prefix nccl_trace_rank_ -j --allow-incomplete-ranks"
      timeout 120 "${frtrace[@]}" "$d/fr" --prefix nccl_trace_rank_ -j --allow-incomplete-ranks 2>&1
      echo "[exit $?]"
    } >"$d/torchfrtrace_entries.txt"
    echo "    torchfrtrace: $d/torchfrtrace.txt, $d/torchfrtrace_entries.txt" >&2
  fi
fi

echo "=== summary ($out, ${SECONDS} s)" >&2
cat "$summary" >&2
[[ $fails == 0 ]]
