#!/usr/bin/env bash
# Installs the Debian 12 packages needed to build and test ncclwatch, and
# makes the Debian 11 root that release/bullseye_test.sh runs the release in
# (debootstrap, about 150 MB, cached in /var/cache/ncclwatch).
# Idempotent: does nothing (and never touches the network) when all packages
# are already installed and the root is there; otherwise runs `apt-get
# update` once and installs only the missing ones, and makes the root once.
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
  libgoogle-perftools-dev  # libtcmalloc_minimal.a, the x86-64 command's allocator
  clang-14               # --config=asan / tsan / fuzz
  libclang-rt-14-dev     # sanitizer + libFuzzer runtimes for clang-14
  llvm-14                # llvm-symbolizer-14 for sanitizer stack traces
  debootstrap            # the Debian 11 root of release/bullseye_test.sh
)

# The cross toolchain and arm64 libraries of --config=aarch64
# (build_defs/aarch64), and qemu-user to run its tests.
PACKAGES+=(
  g++-aarch64-linux-gnu
  qemu-user
  libprotobuf-dev:arm64
  libabsl-dev:arm64
  libgtest-dev:arm64
  libgmock-dev:arm64
  libbenchmark-dev:arm64
  libexpat1-dev:arm64
)

# Release checks: the metrics, the man page and the .deb.
PACKAGES+=(
  prometheus             # /usr/bin/promtool: //tools/stats:prometheus_test
  prometheus-node-exporter  # the textfile recipe, run by //tools/stats:prometheus_test
  prometheus-pushgateway    # the Pushgateway recipe, likewise
  curl                      # which pushes and scrapes there
  libxml2-utils          # xmllint: //tools/text:safe_output_test reads check's JUnit back
  man-db                 # man --warnings on the generated page: //tools:completion_test
  groff-base             # nroff, which man runs
  lintian                # the .deb checked: //release:lintian_test
)

# Debian 11 (glibc 2.31), where release/bullseye_test.sh runs the release.
BULLSEYE_ROOT=/var/cache/ncclwatch/bullseye-x86_64

missing=()
for pkg in "${PACKAGES[@]}"; do
  # An unqualified name is the build machine's architecture's (with arm64
  # added, a bare name matches both), or an architecture-free package.
  [[ "$pkg" == *:* ]] || pkg_native=$pkg:$(dpkg --print-architecture)
  status=$(dpkg-query -W -f='${Status}' "${pkg_native:-$pkg}" 2>/dev/null ||
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  unset pkg_native
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

SUDO=()
if [[ $(id -u) -ne 0 ]] && command -v sudo > /dev/null 2>&1; then
  SUDO=(sudo)
fi

if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#PACKAGES[@]} packages already installed"
else
  if [[ $(id -u) -ne 0 && ${#SUDO[@]} -eq 0 ]]; then
    echo "install_deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The :arm64 packages install beside the build machine's (multiarch).
  dpkg --print-foreign-architectures | grep -qx arm64 || "${SUDO[@]}" dpkg --add-architecture arm64
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The root is complete once its stamp is there: debootstrap fills a
# temporary folder that is renamed only when it succeeded.
if [[ ! -e "$BULLSEYE_ROOT/.ncclwatch-complete" ]]; then
  echo "install_deps: making the Debian 11 root $BULLSEYE_ROOT (debootstrap bullseye)"
  "${SUDO[@]}" rm -rf "$BULLSEYE_ROOT.new"
  "${SUDO[@]}" mkdir -p "$(dirname "$BULLSEYE_ROOT")"
  "${SUDO[@]}" debootstrap --variant=minbase bullseye "$BULLSEYE_ROOT.new" http://deb.debian.org/debian > /dev/null
  # Test runs make their folders in its /tmp, as any user.
  "${SUDO[@]}" chmod 1777 "$BULLSEYE_ROOT.new/tmp"
  "${SUDO[@]}" touch "$BULLSEYE_ROOT.new/.ncclwatch-complete"
  "${SUDO[@]}" rm -rf "$BULLSEYE_ROOT"
  "${SUDO[@]}" mv "$BULLSEYE_ROOT.new" "$BULLSEYE_ROOT"
fi
