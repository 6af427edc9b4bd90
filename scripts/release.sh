#!/usr/bin/env bash
# Builds the release (bazel -c opt) and writes into OUTDIR:
#   ncclwatch-VERSION-linux-x86_64.tar.gz   bin/, lib/, share/doc/ncclwatch/ (unpack anywhere)
#   ncclwatch_VERSION_amd64.deb             the same under /usr (the plugin in /usr/lib/x86_64-linux-gnu)
# VERSION is kPluginVersion in plugin/core/version.h, the release that
# `ncclwatch --version` prints and every trace header carries.
#
#   bash scripts/release.sh dist/
set -euo pipefail

if (($# != 1)) || [[ -z "$1" ]]; then
  echo "usage: scripts/release.sh OUTDIR" >&2
  exit 2
fi
outdir=$1
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=$(sed -n 's/.*kPluginVersion\[\] = "\([^"]*\)".*/\1/p' plugin/core/version.h)
[[ -n "$version" ]] || { echo "release.sh: no kPluginVersion in plugin/core/version.h" >&2; exit 1; }
bazel build -c opt //release
mkdir -p "$outdir"
cp -f bazel-out/k8-opt/bin/release/ncclwatch.tar.gz "$outdir/ncclwatch-$version-linux-x86_64.tar.gz"
cp -f bazel-out/k8-opt/bin/release/ncclwatch.deb "$outdir/ncclwatch_${version}_amd64.deb"
chmod 0644 "$outdir/ncclwatch-$version-linux-x86_64.tar.gz" "$outdir/ncclwatch_${version}_amd64.deb"
ls -l "$outdir/ncclwatch-$version-linux-x86_64.tar.gz" "$outdir/ncclwatch_${version}_amd64.deb"
