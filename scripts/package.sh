#!/usr/bin/env bash
# Lays out an ncclwatch release and packs it: the tarball (relocatable: bin/,
# lib/, share/doc/ncclwatch/) and a Debian package (the same under /usr, the
# plugin in the multiarch library folder, where NCCL_PROFILER_PLUGIN=ncclwatch
# finds it without LD_LIBRARY_PATH). Run by the //release genrule, which
# hands it the built files; scripts/release.sh and scripts/install.sh run
# that. Needs tar, gzip and dpkg-deb (Debian's dpkg).
#
#   package.sh VERSION_H PLUGIN_SO NCCLWATCH_BIN OUT_TAR OUT_DEB DOC...
#
# The version is kPluginVersion in plugin/core/version.h (VERSION_H): one
# number for the plugin and the command, the one `ncclwatch --version` and
# every trace header carry.
set -euo pipefail

version_h=$1 so=$2 bin=$3 out_tar=$4 out_deb=$5
shift 5

version=$(sed -n 's/.*kPluginVersion\[\] = "\([^"]*\)".*/\1/p' "$version_h")
if [[ ! "$version" =~ ^[0-9][0-9A-Za-z.+~-]*$ ]]; then
  echo "package.sh: no release version in $version_h (kPluginVersion)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ncclwatch-package.XXXXXX")
trap 'rm -rf "$work"' EXIT

# stage ROOT LIBDIR: the files under ROOT, the plugin in ROOT/LIBDIR, each
# DOC (a path in the repository: README.md, docs/..., examples/...) under
# ROOT/share/doc/ncclwatch/ with that path.
stage() {
  local root=$1 libdir=$2 doc
  install -D -m 0755 "$so" "$root/$libdir/libnccl-profiler-ncclwatch.so"
  install -D -m 0755 "$bin" "$root/bin/ncclwatch"
  for doc in "${docs[@]}"; do
    local mode=0644
    [[ -x "$doc" ]] && mode=0755
    install -D -m "$mode" "$doc" "$root/share/doc/ncclwatch/$doc"
  done
}
docs=("$@")

name="ncclwatch-$version-linux-x86_64"
stage "$work/tar/$name" lib
# Reproducible: fixed owner, order and times.
tar -C "$work/tar" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "$name" | gzip -n -9 > "$out_tar"

deb=$work/deb
stage "$deb/usr" lib/x86_64-linux-gnu
# The .so is shared data for dpkg's purposes; the command needs what it was
# built against (Debian 12's protobuf and Abseil).
mkdir -p "$deb/DEBIAN"
size_kb=$(du -sk "$deb/usr" | cut -f1)
cat > "$deb/DEBIAN/control" <<CONTROL
Package: ncclwatch
Version: $version
Architecture: amd64
Maintainer: ncclwatch developers <dev@ncclwatch>
Installed-Size: $size_kb
Section: devel
Priority: optional
Depends: libc6 (>= 2.36), libstdc++6 (>= 12), libprotobuf32, libabsl20220623
Description: NCCL profiler plugin and hang diagnosis for distributed training
 libnccl-profiler-ncclwatch.so, an NCCL profiler plugin (NCCL 2.23 and later),
 streams every rank's NCCL events to a trace file and writes a stuck report
 when an operation stays in flight too long. The ncclwatch command reads the
 files of all ranks and says which rank, which operation and what went wrong.
CONTROL
find "$deb" -exec touch -h -d @0 {} +
dpkg-deb --root-owner-group -Zgzip --build "$deb" "$out_deb" > /dev/null
