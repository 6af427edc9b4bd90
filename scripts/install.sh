#!/usr/bin/env bash
# Builds the release (bazel -c opt) and installs it under PREFIX:
#   PREFIX/lib/libnccl-profiler-ncclwatch.so   the plugin (glibc 2.17 and later, no libstdc++.so needed)
#   PREFIX/bin/ncclwatch                       the command (needs what it was built against: Debian 12's
#                                              protobuf and Abseil)
#   PREFIX/share/doc/ncclwatch/                README.md, BENCHMARKS.md, docs/, examples/
#
#   bash scripts/install.sh /opt/ncclwatch     # then NCCL_PROFILER_PLUGIN=/opt/ncclwatch/lib/libnccl-profiler-ncclwatch.so
#
# The files are those of scripts/release.sh's tarball, unpacked over PREFIX.
set -euo pipefail

if (($# != 1)) || [[ -z "$1" ]]; then
  echo "usage: scripts/install.sh PREFIX" >&2
  exit 2
fi
prefix=$1
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bazel build -c opt //release
mkdir -p "$prefix"
tar -C "$prefix" --strip-components=1 --no-same-owner -xzf bazel-out/k8-opt/bin/release/ncclwatch.tar.gz
echo "installed in $prefix:"
echo "  $prefix/lib/libnccl-profiler-ncclwatch.so"
echo "  $prefix/bin/ncclwatch"
echo "  $prefix/share/doc/ncclwatch/"
