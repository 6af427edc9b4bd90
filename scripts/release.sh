#!/usr/bin/env bash
# Builds the release (bazel -c opt) for x86-64 and for aarch64
# (--config=aarch64) and writes into OUTDIR, for ARCH x86_64 and aarch64
# (Debian's DEB_ARCH amd64 and arm64):
#   ncclwatch-VERSION-linux-ARCH.tar.gz   bin/, lib/, share/doc/ncclwatch/ (unpack anywhere)
#   ncclwatch_VERSION_DEB_ARCH.deb        the same under /usr (the plugin in /usr/lib/ARCH-linux-gnu)
# Every file is dated the last commit's time (SOURCE_DATE_EPOCH), so that
# a release rebuilt from the same commit is the same bytes.
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
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2> /dev/null || true)}
[[ -n "$SOURCE_DATE_EPOCH" ]] || unset SOURCE_DATE_EPOCH  # no git: CHANGELOG.md's date
mkdir -p "$outdir"
made=()
for arch in x86_64 aarch64; do
  case $arch in
    x86_64) config=() bin=bazel-out/k8-opt/bin/release deb_arch=amd64 ;;
    aarch64) config=(--config=aarch64) bin=bazel-out/aarch64-opt/bin/release deb_arch=arm64 ;;
  esac
  bazel build -c opt "${config[@]}" --action_env=SOURCE_DATE_EPOCH //release
  cp -f "$bin/ncclwatch.tar.gz" "$outdir/ncclwatch-$version-linux-$arch.tar.gz"
  cp -f "$bin/ncclwatch.deb" "$outdir/ncclwatch_${version}_$deb_arch.deb"
  made+=("$outdir/ncclwatch-$version-linux-$arch.tar.gz" "$outdir/ncclwatch_${version}_$deb_arch.deb")
done
chmod 0644 "${made[@]}"
ls -l "${made[@]}"
