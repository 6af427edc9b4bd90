#!/usr/bin/env bash
# Records the PyTorch fault matrix (gpu/torch_faults.py under torchrun) with the ncclwatch
# plugin, for testdata/torch/. See testdata/torch/README.md.
#
#   gpu/record_torch.sh OUTDIR
#
# For every fault x completion source (channels, events) x rank count, one run into
# OUTDIR/<fault>-<source>-<n>r/: the trace files, fr/ (Flight Recorder dumps), log.txt,
# status (torchrun's exit status and the seconds it took) and torchfrtrace.txt (what
# torchfrtrace said about the dumps, when there are any). OUTDIR/manifest.txt: host, GPU,
# versions, plugin checksum. Runs JOBS (default 6) jobs at a time on the one GPU, each
# rank on cuda:0 with its own NCCL_HOSTID (--one-gpu), and caps each at CAP seconds.
#
# A source is a completion source (channels, events), or "proxy": CUDA events with NCCL's
# proxy operations and steps added (NCCLWATCH_EVENTS=default,proxyop,proxystep). The net-*
# faults run every rank over NET_PLUGIN (default out/libnccl-net-faulty.so, gpu/faulty_net.c,
# built by gpu/faulty_net_test.sh), which the fault rank arms; NCCL's NET log goes to log.txt.
#
# Environment: NCCL_PROFILER_PLUGIN (default out/libnccl-profiler-ncclwatch.so), NRANKS
# (default "4 8"), SOURCES (default "channels events"), FAULTS (default: all),
# JOBS, CAP (default 150), BUDGET (default 540: no run starts after that many seconds).
# NCCL_NVLS_ENABLE is forced to 0 for every child.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
[[ $# -eq 1 && "$1" != -* ]] || { sed -n '2,17p' "$0" >&2; exit 2; }
out="$1"
mkdir -p "$out" && out="$(cd "$out" && pwd)" || exit 2

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
plugin="${NCCL_PROFILER_PLUGIN:-$repo/out/libnccl-profiler-ncclwatch.so}"
[[ -f "$plugin" ]] || { echo "record_torch.sh: no plugin at $plugin" >&2; exit 2; }
export NCCL_PROFILER_PLUGIN="$(cd "$(dirname "$plugin")" && pwd)/$(basename "$plugin")"

nranks="${NRANKS:-4 8}" sources="${SOURCES:-channels events}" jobs="${JOBS:-6}"
cap="${CAP:-150}" budget="${BUDGET:-540}"
faults="${FAULTS:-$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import torch_faults; print(*torch_faults.FAULTS)' "$here")}"

frtrace=()
if command -v torchfrtrace >/dev/null; then frtrace=(torchfrtrace)
elif python3 -c 'import torch.distributed.flight_recorder.fr_trace' 2>/dev/null; then
  frtrace=(python3 -m torch.distributed.flight_recorder.fr_trace)
fi

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  python3 -c 'import torch; print("torch:", torch.__version__, "nccl:", ".".join(map(str, torch.cuda.nccl.version())))' 2>&1
  echo "plugin: $(sha256sum "$NCCL_PROFILER_PLUGIN" | cut -c1-16) $NCCL_PROFILER_PLUGIN"
  echo "git: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null)"
  echo "matrix: faults=[$faults] sources=[$sources] nranks=[$nranks]"
} >"$out/manifest.txt"

net_plugin="${NET_PLUGIN:-$repo/out/libnccl-net-faulty.so}"

one() {  # one run: FAULT SOURCE N
  local fault=$1 src=$2 n=$3 d="$out/$1-$2-$3r" t0=$SECONDS rc completions=$2 events=default
  local -a net=()
  [[ $src == proxy ]] && completions=events events=default,proxyop,proxystep
  if [[ $fault == net-* ]]; then
    [[ -f "$net_plugin" ]] || { echo "record_torch.sh: $fault needs $net_plugin" >&2; return; }
    net=(NCCL_NET_PLUGIN="$net_plugin" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET)
  fi
  mkdir -p "$d/fr"
  env "${net[@]}" NCCLWATCH_DIR="$d" NCCLWATCH_STUCK_SEC=3 NCCLWATCH_COMPLETIONS="$completions" NCCLWATCH_EVENTS="$events" \
    PYTHONUNBUFFERED=1 \
    timeout -k 10 "$cap" torchrun --standalone --nproc_per_node="$n" "$here/torch_faults.py" \
    --fault "$fault" --fault-rank "${FAULT_RANK:-1}" --one-gpu --fr-dir "$d/fr" >"$d/log.txt" 2>&1
  rc=$?
  echo "exit $rc after $((SECONDS - t0)) s" >"$d/status"
  if [[ ${#frtrace[@]} -gt 0 ]] && compgen -G "$d/fr/nccl_trace_rank_*" >/dev/null; then
    {
      echo "\$ torchfrtrace fr --prefix nccl_trace_rank_"
      timeout 60 "${frtrace[@]}" "$d/fr" --prefix nccl_trace_rank_ 2>&1; local r=$?
      echo "[exit $r]"
      if [[ $r != 0 ]]; then
        echo "\$ torchfrtrace fr --prefix nccl_trace_rank_ --allow-incomplete-ranks"
        timeout 60 "${frtrace[@]}" "$d/fr" --prefix nccl_trace_rank_ --allow-incomplete-ranks 2>&1
        echo "[exit $?]"
      fi
    } >"$d/torchfrtrace.txt"
  else
    echo "(no Flight Recorder dump was written)" >"$d/torchfrtrace.txt"
  fi
  echo "$fault-$src-${n}r: exit $rc, $((SECONDS - t0)) s" >&2
}

running=0
for n in $nranks; do
  for src in $sources; do
    for fault in $faults; do
      if ((SECONDS > budget)); then echo "budget spent: $fault-$src-${n}r not run" >&2; continue; fi
      one "$fault" "$src" "$n" &
      running=$((running + 1))
      if ((running >= jobs)); then wait -n; running=$((running - 1)); fi
    done
  done
done
wait
echo "done in $SECONDS s" >&2
