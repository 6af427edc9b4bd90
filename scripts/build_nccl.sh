#!/usr/bin/env bash
# Builds NCCL releases from NVIDIA's public source, for sm_90 (H100/H200)
# only, so that a GPU run can load the plugin into each profiler API
# version. Nothing built here is committed: sources and libraries go under
# out/ (git-ignored), one folder per release, small enough to carry.
#
#   scripts/build_nccl.sh [--src GIT_DIR] [--jobs N] [--fresh] [--prepare] [VERSION ...]
#
# VERSION is a release (2.27.7) or a tag (v2.27.7-1); with none, one release
# per profiler API version. --src names a clone of NVIDIA/nccl (any clone with
# the tags); without it, the script clones https://github.com/NVIDIA/nccl.
#
# Toolkits: CUDA_HOME (default /usr/local/cuda) builds every release it can.
# NCCL before 2.27 does not build with CUDA 13 (its cudawrap.h names the
# unversioned PFN_cu* typedefs and cudaGetDriverEntryPoint, both gone in 13),
# so those releases take OLD_CUDA_HOME: by default Debian 12's
# nvidia-cuda-toolkit (CUDA 11.8, from the non-free component), whose nvcc
# takes g++-11 as its host compiler (`apt-get install nvidia-cuda-toolkit
# g++-11`). A library built with 11.8 runs on any newer driver.
#
# A build tree of the same commit is reused (make goes on where it stopped)
# unless --fresh; BUILD_INFO says whether objects of an earlier run were
# there (then `seconds` is this run's part only). --prepare only unpacks the sources
# into out/nccl-build/VERSION: carried to a machine without the clone (a GPU
# host with 16 cores), the script then builds them there without --src.
#
# ONLY_FUNCS (environment) is passed to NCCL's make: the device kernels to
# build, in the syntax of NCCL's src/device/generate.py (e.g. "AllReduce Sum
# f32 * *|SendRecv"). A job that calls a collective left out fails in NCCL;
# on 2 cores it turns an hour's build into minutes (BUILD_INFO says which).
#
# Each release gets out/nccl/VERSION/lib/libnccl.so.2 (stripped) and
# out/nccl/VERSION/BUILD_INFO (tag, commit, toolkit, seconds taken). A
# release that does not build is named with the tail of its log, and the
# script goes on to the next; the exit status is the number that failed.
set -uo pipefail

# Everything runs from main(), parsed whole before it starts: a build takes
# an hour, and bash would otherwise read an edited script mid-run.
main() {
cd "$(dirname "$0")/.."
ROOT=$PWD
SRC=""
JOBS=$(nproc)
FRESH=0
PREPARE=0
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
GENCODE="-gencode=arch=compute_90,code=sm_90"
VERSIONS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --src) SRC=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    --prepare) PREPARE=1; shift ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) VERSIONS+=("$1"); shift ;;
  esac
done
# API v1 is 2.23, v2 2.24/2.25, v3 2.26, v4 2.27, v5 2.28, v6 2.29 and 2.30.
# 2.28 is left out: PyTorch's wheels and the GPU hosts already carry it.
[[ ${#VERSIONS[@]} -eq 0 ]] &&
  VERSIONS=(2.23.4 2.24.3 2.26.6 2.27.7 2.29.7 2.30.7)

prepared() { [[ -f $ROOT/out/nccl-build/$1/COMMIT ]]; }
all_prepared=1
for v in "${VERSIONS[@]}"; do
  v=${v#v}; v=${v%-*}
  prepared "$v" || all_prepared=0
done
if [[ -z $SRC && $all_prepared == 1 && $FRESH == 0 ]]; then
  :  # every tree is unpacked already: no clone needed
elif [[ -z $SRC ]]; then
  SRC=$ROOT/out/nccl-git
  if [[ ! -d $SRC ]]; then
    git clone --bare https://github.com/NVIDIA/nccl.git "$SRC" || {
      echo "build_nccl: cannot clone NVIDIA/nccl; pass --src with a local clone" >&2
      exit 1
    }
  fi
fi
OLD_CUDA_HOME=${OLD_CUDA_HOME:-/usr}

toolkit_version() {  # "13.0 (V13.0.88)"
  "$1/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p'
}

# Sets home, lib, cxx and toolkit for release $1, or fails saying why.
pick_toolkit() {
  local minor=${1#2.}; minor=${minor%%.*}
  home=$CUDA_HOME
  local major; major=$(toolkit_version "$home" | cut -d. -f1)
  if [[ -z $major ]]; then
    echo "no nvcc in $home/bin (set CUDA_HOME)"; return 1
  fi
  if (( minor < 27 && major >= 13 )); then
    home=$OLD_CUDA_HOME
    major=$(toolkit_version "$home" | cut -d. -f1)
    if [[ -z $major || $major -ge 13 ]]; then
      echo "NCCL 2.$minor needs a CUDA toolkit before 13 (set OLD_CUDA_HOME; on Debian 12: apt-get install nvidia-cuda-toolkit g++-11 from non-free)"
      return 1
    fi
  fi
  lib=$home/lib64
  [[ -d $lib ]] || lib=/usr/lib/x86_64-linux-gnu
  cxx=${CXX:-g++}
  # CUDA 11.x's nvcc refuses a host compiler newer than gcc 11.
  if (( major < 12 )) && command -v g++-11 >/dev/null; then cxx=g++-11; fi
  toolkit=$(toolkit_version "$home")
}

local failed=0
local v
for v in "${VERSIONS[@]}"; do
  tag=$v
  [[ $tag == v* ]] || tag="v$v-1"
  ver=${tag#v}; ver=${ver%-*}
  if [[ -n $SRC ]]; then
    commit=$(git -C "$SRC" rev-parse --verify -q "$tag^{commit}") || {
      echo "build_nccl: $ver: no tag $tag in $SRC" >&2
      failed=$((failed + 1)); continue
    }
  else
    commit=$(cat "$ROOT/out/nccl-build/$ver/COMMIT")
  fi
  why=$(pick_toolkit "$ver") || {
    echo "build_nccl: $ver: cannot build: $why" >&2
    failed=$((failed + 1)); continue
  }
  pick_toolkit "$ver" >/dev/null
  work=$ROOT/out/nccl-build/$ver
  dest=$ROOT/out/nccl/$ver
  rm -rf "$dest"
  if [[ $FRESH == 0 && -f $work/COMMIT && $(cat "$work/COMMIT") == "$commit" ]]; then
    :
  else
    rm -rf "$work"
    mkdir -p "$work/src"
    git -C "$SRC" archive "$commit" | tar -x -C "$work/src"
    echo "$commit" >"$work/COMMIT"
  fi
  if [[ $PREPARE == 1 ]]; then
    echo "build_nccl: $ver unpacked in $work/src"
    continue
  fi
  local resumed=no
  [[ -d $work/build/obj ]] && resumed=yes
  mkdir -p "$dest/lib"
  echo "build_nccl: $ver ($tag, ${commit:0:12}) with CUDA $toolkit from $home, $JOBS jobs"
  start=$(date +%s)
  # Only the shared library: the static one and the packages are not needed
  # to load a profiler plugin.
  # nvcc finds nvlink and the other tools on PATH: the chosen toolkit's
  # must come first, and CUDA_HOME's must not be there at all.
  local path
  path=$home/bin:$(tr ':' '\n' <<<"$PATH" | grep -vxF "$CUDA_HOME/bin" | paste -sd:)
  local only=()
  [[ -n ${ONLY_FUNCS:-} ]] && only=(ONLY_FUNCS="$ONLY_FUNCS")
  if PATH=$path make -C "$work/src" -j"$JOBS" src.lib \
       CUDA_HOME="$home" CUDA_LIB="$lib" CXX="$cxx" NVCC_GENCODE="$GENCODE" \
       BUILDDIR="$work/build" "${only[@]}" >"$work/build.log" 2>&1; then
    secs=$(( $(date +%s) - start ))
    so=$(readlink -f "$work/build/lib/libnccl.so.2")
    strip --strip-unneeded -o "$dest/lib/libnccl.so.2" "$so"
    cp -r "$work/build/include" "$dest/include"
    cat >"$dest/BUILD_INFO" <<EOF
release: $ver
tag: $tag
commit: $commit
cuda_toolkit: $toolkit ($home)
host_compiler: $($cxx --version | head -1)
gencode: $GENCODE
only_funcs: ${ONLY_FUNCS:-all}
jobs: $JOBS
host: $(uname -n) ($(nproc) cores)
seconds: $secs
resumed_earlier_build: $resumed
EOF
    echo "build_nccl: $ver built in ${secs} s: $(du -h "$dest/lib/libnccl.so.2" | cut -f1) stripped"
  else
    secs=$(( $(date +%s) - start ))
    echo "build_nccl: $ver FAILED after ${secs} s; the end of $work/build.log:" >&2
    grep -E 'error|Error' "$work/build.log" | head -20 >&2
    tail -5 "$work/build.log" >&2
    rm -rf "$dest"
    failed=$((failed + 1))
  fi
done
return $failed
}

main "$@"; exit $?
