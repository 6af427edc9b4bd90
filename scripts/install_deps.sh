#!/usr/bin/env bash
# Installs the Debian 12 packages needed to build and test ncclwatch.
# Idempotent: does nothing (and never touches the network) when all packages
# are already installed; otherwise runs `apt-get update` once and installs
# only the missing ones.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap        # Bazel 4.2.3 (`bazel`); pulls default-jdk-headless,
                         # build-essential (g++-12), python3, unzip, zlib1g-dev
  default-jdk-headless   # JDK for the Bazel server (explicit, in case of --no-install-recommends)
  build-essential        # gcc/g++ 12, binutils (ld.gold used by Bazel's toolchain)
  protobuf-compiler      # /usr/bin/protoc (3.21), used by build_defs/proto.bzl
  libprotobuf-dev        # libprotobuf + headers, @system//:protobuf
  libabsl-dev            # Abseil 20220623, @system//:absl_*
  libgtest-dev           # @system//:gtest, :gtest_main
  libgmock-dev           # @system//:gmock, :gmock_main
  libbenchmark-dev       # @system//:benchmark, :benchmark_main
  libexpat1-dev          # @system//:expat (tests read back our JUnit XML)
  clang-14               # --config=asan / tsan / fuzz
  libclang-rt-14-dev     # sanitizer + libFuzzer runtimes for clang-14
  llvm-14                # llvm-symbolizer-14 for sanitizer stack traces
)

# Release checks: the metrics, the man page and the .deb.
PACKAGES+=(
  prometheus             # /usr/bin/promtool: //tools/stats:promtool_test
  man-db                 # man --warnings on the generated page: //tools:completion_test
  groff-base             # nroff, which man runs
  lintian                # the .deb checked: //release:lintian_test
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install_deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
