#!/usr/bin/env bash
# The GPU evidence for the plugin, in one go on a 4-GPU machine:
#   1. default capture: healthy and skip (a hang the watchdog aborts);
#   2. network transport only (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1) with
#      NCCLWATCH_EVENTS=all: proxy and network events;
#   3. PyTorch torch.distributed (NCCL 2.28.9, profiler API v5), healthy;
#   4. a first, crude timing: healthy runs with no plugin / default / all,
#      interleaved (the real overhead benchmark is gpu/overhead.sh);
#   5. stuck reports: skip and kill with NCCLWATCH_STUCK_SEC=3 (the watchdog
#      fires at 10 s), and skip over the network transport with proxy capture.
# Usage: [PARTS="default net torch timing stuck"] gpu/plugin_evidence.sh OUTDIR
#        (needs out/libnccl-profiler-ncclwatch.so)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
out="${1:?usage: plugin_evidence.sh OUTDIR}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
so="$repo/out/libnccl-profiler-ncclwatch.so"
nvidia-smi -L | tee "$out/gpus.txt"
"$here/build.sh" "$repo/out/nccl_scenarios" >"$out/build.txt" 2>&1 || { cat "$out/build.txt"; exit 1; }
parts=" ${PARTS:-default net torch timing stuck} "
want() { [[ "$parts" == *" $1 "* ]]; }

want default && NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$here/run_scenarios.sh" -n 4 -s 20 -t 10 -p "$so" \
  -o "$out/default" healthy skip >"$out/default.log" 2>&1
want net && NCCLWATCH_EVENTS=all "$here/run_scenarios.sh" -n 4 -s 10 -t 10 -p "$so" --net -x "--sizes small" \
  -o "$out/net_all" healthy >"$out/net_all.log" 2>&1
if want stuck; then
  NCCLWATCH_STUCK_SEC=3 NCCL_DEBUG=WARN "$here/run_scenarios.sh" -n 4 -s 20 -t 10 -p "$so" \
    -o "$out/stuck" skip kill >"$out/stuck.log" 2>&1
  NCCLWATCH_STUCK_SEC=3 NCCLWATCH_EVENTS=default,proxyop,proxystep NCCL_DEBUG=WARN "$here/run_scenarios.sh" \
    -n 4 -s 10 -t 10 -p "$so" --net -x "--sizes small" -o "$out/stuck_net" skip >"$out/stuck_net.log" 2>&1
fi
want torch || exit 0
mkdir -p "$out/torch"
NCCL_PROFILER_PLUGIN="$so" NCCLWATCH_DIR="$out/torch" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT PYTHONUNBUFFERED=1 \
  timeout 300 torchrun --standalone --nproc_per_node=4 \
  "$here/torch_allreduce.py" --steps 20 --fr-dir "$out/torch/fr" >"$out/torch.log" 2>&1
echo "torch exit $?" >>"$out/torch.log"

# Crude timing, interleaved: 3 rounds of none / default / all.
want timing || exit 0
for round in 1 2 3; do
  for cfg in none default all; do
    d="$out/timing/$cfg-$round"; mkdir -p "$d"
    p="$so"; [[ $cfg == none ]] && p=none
    ev=default; [[ $cfg == all ]] && ev=all
    t0=$(date +%s%N)
    NCCLWATCH_EVENTS=$ev "$here/run_scenarios.sh" -n 4 -s 200 -t 30 -p "$p" -x "--sizes small --log-every 1000" \
      -o "$d" healthy >"$d/run.log" 2>&1
    t1=$(date +%s%N)
    echo "$cfg round $round: $(( (t1 - t0) / 1000000 )) ms, $(tail -1 "$d/summary.txt" 2>/dev/null)" | tee -a "$out/timing.txt"
  done
done
