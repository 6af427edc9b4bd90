#!/usr/bin/env bash
# Lays out an ncclwatch release and packs it: the tarball (relocatable: bin/,
# lib/, share/doc/ncclwatch/) and a Debian package (the same under /usr, the
# plugin in the multiarch library folder, where NCCL_PROFILER_PLUGIN=ncclwatch
# finds it without LD_LIBRARY_PATH). Run by the //release genrule, which
# hands it the built files; scripts/release.sh and scripts/install.sh run
# that. Needs tar, gzip, dpkg-deb (Debian's dpkg), readelf and strip
# (binutils; aarch64-linux-gnu-strip for an aarch64 build).
#
#   package.sh VERSION_H PLUGIN_SO NCCLWATCH_BIN OUT_TAR OUT_DEB FILE...
#
# Each FILE is a document (README.md, docs/..., examples/...), installed
# under share/doc/ncclwatch/ with its path, except these, told by name:
#   ncclwatch.1                   the man page (share/man/man1/, gzipped)
#   ncclwatch.bash-completion     bash's completion (share/bash-completion/completions/ncclwatch)
#   _ncclwatch                    zsh's (share/zsh/vendor-completions/ in the .deb,
#                                 share/zsh/site-functions/ in the tarball)
#   copyright                     the .deb's copyright (DEP-5)
#   ncclwatch.lintian-overrides   the .deb's lintian overrides
# (//tools:cli_docs_files writes the first three, packaging/debian holds the
# other two.)
#
# Every file is dated SOURCE_DATE_EPOCH (scripts/release.sh sets it to the
# last commit's time); without it, the release date CHANGELOG.md gives this
# version, when CHANGELOG.md is among the FILEs. The .deb's binaries are
# stripped (the tarball's keep their symbols, for stack traces).
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

docs=() man= bash_completion= zsh_completion= copyright= overrides= changelog_md=
for f in "$@"; do
  case $(basename "$f") in
    ncclwatch.1) man=$f ;;
    ncclwatch.bash-completion) bash_completion=$f ;;
    _ncclwatch) zsh_completion=$f ;;
    copyright) copyright=$f ;;
    ncclwatch.lintian-overrides) overrides=$f ;;
    *)
      docs+=("$f")
      [[ $(basename "$f") == CHANGELOG.md ]] && changelog_md=$f
      ;;
  esac
done

# The release's date: SOURCE_DATE_EPOCH, else CHANGELOG.md's "## [VERSION] - YYYY-MM-DD".
epoch=${SOURCE_DATE_EPOCH:-}
if [[ -z "$epoch" && -n "$changelog_md" ]]; then
  day=$(sed -n "s/^## \[$version\] - \([0-9]\{4\}-[0-9]\{2\}-[0-9]\{2\}\)\$/\1/p" "$changelog_md" | head -1)
  [[ -n "$day" ]] && epoch=$(date -u -d "$day" +%s)
fi
if [[ ! "$epoch" =~ ^[0-9]+$ ]] || ((epoch < 315532800)); then
  echo "package.sh: no release date: set SOURCE_DATE_EPOCH (the last commit's time), or give CHANGELOG.md with a '## [$version] - YYYY-MM-DD' entry" >&2
  exit 1
fi

# The architecture is the plugin's: x86-64 or aarch64 (--config=aarch64).
case $(readelf -h "$so" | sed -n 's/^ *Machine: *//p') in
  "Advanced Micro Devices X86-64") arch=x86_64 deb_arch=amd64 strip_tool=strip ;;
  AArch64) arch=aarch64 deb_arch=arm64 strip_tool=aarch64-linux-gnu-strip ;;
  *) echo "package.sh: $so is built for no architecture a release ships" >&2; exit 1 ;;
esac
multiarch=$arch-linux-gnu

work=$(mktemp -d "${TMPDIR:-/tmp}/ncclwatch-package.XXXXXX")
trap 'rm -rf "$work"' EXIT

# stage ROOT LIBDIR ZSHDIR: the files under ROOT, the plugin in ROOT/LIBDIR,
# each doc under ROOT/share/doc/ncclwatch/ with its path, the man page and
# the completions where man and the shells look.
stage() {
  local root=$1 libdir=$2 zshdir=$3 doc
  install -D -m 0755 "$so" "$root/$libdir/libnccl-profiler-ncclwatch.so"
  install -D -m 0755 "$bin" "$root/bin/ncclwatch"
  for doc in "${docs[@]}"; do
    local mode=0644
    [[ -x "$doc" ]] && mode=0755
    install -D -m "$mode" "$doc" "$root/share/doc/ncclwatch/$doc"
  done
  if [[ -n "$man" ]]; then
    mkdir -p "$root/share/man/man1"
    gzip -n -9 < "$man" > "$root/share/man/man1/ncclwatch.1.gz"
    chmod 0644 "$root/share/man/man1/ncclwatch.1.gz"
  fi
  [[ -z "$bash_completion" ]] ||
    install -D -m 0644 "$bash_completion" "$root/share/bash-completion/completions/ncclwatch"
  [[ -z "$zsh_completion" ]] || install -D -m 0644 "$zsh_completion" "$root/share/$zshdir/_ncclwatch"
}

name="ncclwatch-$version-linux-$arch"
stage "$work/tar/$name" lib zsh/site-functions
# Reproducible: fixed owner, order and times.
tar -C "$work/tar" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@"$epoch" -cf - "$name" |
  gzip -n -9 > "$out_tar"

deb=$work/deb
stage "$deb/usr" "lib/$multiarch" zsh/vendor-completions
# Debian's rules: binaries stripped, the copyright and a changelog beside
# the docs, overrides where lintian reads them.
"$strip_tool" --strip-unneeded --remove-section=.comment --remove-section=.note "$deb/usr/lib/$multiarch/libnccl-profiler-ncclwatch.so"
"$strip_tool" --remove-section=.comment --remove-section=.note "$deb/usr/bin/ncclwatch"
[[ -z "$copyright" ]] || install -m 0644 "$copyright" "$deb/usr/share/doc/ncclwatch/copyright"
[[ -z "$overrides" ]] || install -D -m 0644 "$overrides" "$deb/usr/share/lintian/overrides/ncclwatch"
maintainer=${NCCLWATCH_MAINTAINER:-The ncclwatch authors <ncclwatch@users.noreply.github.com>}
# A native package's changelog (its version has no Debian revision).
{
  echo "ncclwatch ($version) unstable; urgency=medium"
  echo
  echo "  * Release $version: see /usr/share/doc/ncclwatch/CHANGELOG.md."
  echo
  echo " -- $maintainer  $(date -u -R -d @"$epoch")"
} | gzip -n -9 > "$deb/usr/share/doc/ncclwatch/changelog.gz"
chmod 0644 "$deb/usr/share/doc/ncclwatch/changelog.gz"
# The .so is shared data for dpkg's purposes; the command needs what it was
# built against (Debian 12's protobuf and Abseil).
mkdir -p "$deb/DEBIAN"
size_kb=$(du -sk "$deb/usr" | cut -f1)
cat > "$deb/DEBIAN/control" <<CONTROL
Package: ncclwatch
Version: $version
Architecture: $deb_arch
Maintainer: $maintainer
Installed-Size: $size_kb
Section: devel
Priority: optional
Depends: libc6 (>= 2.17)
Description: NCCL profiler plugin and hang diagnosis for distributed training
 libnccl-profiler-ncclwatch.so, an NCCL profiler plugin (NCCL 2.23 and later),
 streams every rank's NCCL events to a trace file and writes a stuck report
 when an operation stays in flight too long. The ncclwatch command reads the
 files of all ranks and says which rank, which operation and what went wrong.
CONTROL
(cd "$deb" && find usr -type f | LC_ALL=C sort | xargs md5sum) > "$deb/DEBIAN/md5sums"
find "$deb" -exec touch -h -d @"$epoch" {} +
dpkg-deb --root-owner-group -Zgzip --build "$deb" "$out_deb" > /dev/null
