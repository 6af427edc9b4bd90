# Sourced by gpu/build.sh and gpu/overhead.sh: finds CUDA's and
# NCCL's headers and libraries the same way for both.
#
# In: CUDA (toolkit root), NCCL_HOME (optional), a `die` function.
# Out: cuda_lib, nccl_inc, nccl_lib, nccl_link (an array: linker arguments for
# NCCL), nccl_version (from nccl.h). NCCL: explicit NCCL_HOME, else the system
# package, else the copy inside CUDA, else the nvidia-nccl wheel PyTorch uses.

multiarch="/usr/lib/$(uname -m)-linux-gnu"

[[ -f "$CUDA/include/cuda_runtime.h" ]] || die "no cuda_runtime.h under CUDA=$CUDA"
cuda_lib=""
for d in "$CUDA/lib64" "$CUDA/lib" "$CUDA/targets/$(uname -m)-linux/lib"; do
  if compgen -G "$d/libcudart.so*" >/dev/null; then cuda_lib="$d"; break; fi
done
[[ -n "$cuda_lib" ]] || die "no libcudart.so under $CUDA"

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
  nccl_inc="$pip_nccl/include"
else
  die "NCCL not found (looked in /usr/include + $multiarch, in $CUDA and for the nvidia-nccl wheel); set NCCL_HOME"
fi
[[ -f "$nccl_inc/nccl.h" ]] || die "no nccl.h in $nccl_inc"

# The linker wants libnccl.so; distro runtime packages may only ship libnccl.so.2.
nccl_link=(-L"$nccl_lib" -lnccl)
if [[ ! -e "$nccl_lib/libnccl.so" ]]; then
  nccl_link=("$(compgen -G "$nccl_lib/libnccl.so.2*" | head -n1)")
fi
nccl_version="$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END {print v}' "$nccl_inc/nccl.h")"
