#!/usr/bin/env bash
# Builds tools/gpu/nccl_scenarios without Bazel, on the dev box or a GPU host.
#
#   tools/gpu/build.sh [OUT]        (default OUT: out/nccl_scenarios)
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
repo="$(cd "$here/../.." && pwd)"
OUT="${1:-$repo/out/nccl_scenarios}"
CUDA="${CUDA:-/usr/local/cuda}"
CXX="${CXX:-g++}"
multiarch="/usr/lib/$(uname -m)-linux-gnu"

die() { echo "build.sh: $*" >&2; exit 1; }

[[ -f "$CUDA/include/cuda_runtime.h" ]] || die "no cuda_runtime.h under CUDA=$CUDA"
cuda_lib=""
for d in "$CUDA/lib64" "$CUDA/lib" "$CUDA/targets/$(uname -m)-linux/lib"; do
  if compgen -G "$d/libcudart.so*" >/dev/null; then cuda_lib="$d"; break; fi
done
[[ -n "$cuda_lib" ]] || die "no libcudart.so under $CUDA"

# NCCL: explicit NCCL_HOME, else the system package, else the copy inside CUDA.
nccl_inc="" nccl_lib=""
find_lib() {  # prints the first directory among "$@" that holds libnccl.so*
  local d
  for d in "$@"; do
    if compgen -G "$d/libnccl.so*" >/dev/null; then echo "$d"; return 0; fi
  done
  return 1
}
if [[ -n "${NCCL_HOME:-}" ]]; then
  nccl_inc="$NCCL_HOME/include"
  nccl_lib="$(find_lib "$NCCL_HOME/lib64" "$NCCL_HOME/lib")" || die "no libnccl.so* under NCCL_HOME=$NCCL_HOME"
elif [[ -f /usr/include/nccl.h ]] && nccl_lib="$(find_lib "$multiarch" /usr/lib64 /usr/lib)"; then
  nccl_inc=/usr/include
elif [[ -f "$CUDA/include/nccl.h" ]] && nccl_lib="$(find_lib "$cuda_lib" "$CUDA/lib64" "$CUDA/lib")"; then
  nccl_inc="$CUDA/include"
elif pip_nccl="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)" &&
     [[ -f "$pip_nccl/include/nccl.h" ]] && nccl_lib="$(find_lib "$pip_nccl/lib")"; then
  nccl_inc="$pip_nccl/include"  # the nvidia-nccl-cu13 wheel that PyTorch uses
else
  die "NCCL not found (looked in /usr/include + $multiarch, in $CUDA and for the nvidia-nccl wheel); set NCCL_HOME"
fi
[[ -f "$nccl_inc/nccl.h" ]] || die "no nccl.h in $nccl_inc"

# The linker wants libnccl.so; distro runtime packages may only ship libnccl.so.2.
nccl_link=(-L"$nccl_lib" -lnccl)
if [[ ! -e "$nccl_lib/libnccl.so" ]]; then
  so2="$(compgen -G "$nccl_lib/libnccl.so.2*" | head -n1)"
  nccl_link=("$so2")
fi

hdr_version="$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$nccl_inc/nccl.h")"
echo "build.sh: CUDA $CUDA (libs $cuda_lib); NCCL $hdr_version headers $nccl_inc, libs $nccl_lib" >&2

mkdir -p "$(dirname "$OUT")"
set -x
"$CXX" -std=c++17 -O2 -g -Wall -Wextra -o "$OUT" "$here/nccl_scenarios.cc" \
  -I"$nccl_inc" -I"$CUDA/include" \
  "${nccl_link[@]}" -L"$cuda_lib" -lcudart -lpthread \
  -Wl,-rpath,"$nccl_lib" -Wl,-rpath,"$cuda_lib"
{ set +x; } 2>/dev/null
echo "build.sh: built $OUT" >&2
