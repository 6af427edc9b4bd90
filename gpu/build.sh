#!/usr/bin/env bash
# Builds gpu/nccl_scenarios without Bazel, on the dev box or a GPU host.
#
#   gpu/build.sh [OUT]        (default OUT: out/nccl_scenarios)
#
# Environment:
#   CUDA       CUDA toolkit root (default /usr/local/cuda): cuda_runtime.h, libcudart
#   NCCL_HOME  NCCL root with include/nccl.h and lib/ or lib64/ (optional). Without it
#              the system NCCL (/usr/include + /usr/lib/x86_64-linux-gnu) is preferred,
#              then the one inside $CUDA.
#   CXX        compiler (default g++)
#
# The binary gets an rpath to the NCCL and CUDA library directories it was linked
# against, so it runs without LD_LIBRARY_PATH. LD_LIBRARY_PATH still wins if set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
OUT="${1:-$repo/out/nccl_scenarios}"
CUDA="${CUDA:-/usr/local/cuda}"
CXX="${CXX:-g++}"

die() { echo "build.sh: $*" >&2; exit 1; }

# shellcheck source=gpu/find_cuda_nccl.sh
source "$here/find_cuda_nccl.sh"
echo "build.sh: CUDA $CUDA (libs $cuda_lib); NCCL $nccl_version headers $nccl_inc, libs $nccl_lib" >&2

# The parent (nccl_scenarios.cc, with main) and the parts it links with.
srcs=("$here/nccl_scenarios.cc" "$here/scenario_ops.cc" "$here/scenario_rank.cc"
      "$here/scenario_table.cc" "$here/scenario_watchdog.cc")
mkdir -p "$(dirname "$OUT")"
set -x
"$CXX" -std=c++17 -O2 -g -Wall -Wextra -o "$OUT" "${srcs[@]}" \
  -I"$nccl_inc" -I"$CUDA/include" \
  "${nccl_link[@]}" -L"$cuda_lib" -lcudart -lpthread \
  -Wl,-rpath,"$nccl_lib" -Wl,-rpath,"$cuda_lib"
{ set +x; } 2>/dev/null
echo "build.sh: built $OUT" >&2
