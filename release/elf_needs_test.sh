#!/usr/bin/env bash
# What the released binaries need from the machine they run on, read with
# readelf from the files in the tarball and the Debian package: no shared
# library beyond libc, libm, libpthread, libdl and the loader, no symbol
# version past GLIBC_2.17 (no GLIBCXX_, CXXABI_ or GCC_: the C++ runtime is
# inside), and the architecture the package names. The command is linked
# fully static (tools/BUILD) and needs nothing; the plugin is loaded into
# NCCL's process and so links glibc dynamically, at its 2.17 versions
# (plugin/BUILD).
#
#   elf_needs_test.sh TARBALL DEB ARCH   (ARCH: x86_64 or aarch64)
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
tarball=$1 deb=$2
case $3 in
  x86_64) machine="Advanced Micro Devices X86-64" ;;
  aarch64) machine=AArch64 ;;
  *) fail "unknown architecture $3" ;;
esac
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/elf_needs_test.XXXXXX")
allowed=" libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1 "

# check FILE KIND: KIND is "static" (no dynamic section at all) or "shared".
check() {
  local file=$1 kind=$2 header dynamic versions newest v
  header=$(readelf -h "$file") || fail "$file is not ELF"
  grep -qE "^ *Machine: *$machine\$" <<< "$header" || fail "$file: $(grep Machine: <<< "$header"), want $machine"
  dynamic=$(readelf -d "$file")
  if [[ $kind == static ]]; then
    grep -q "There is no dynamic section" <<< "$dynamic" || fail "$file is linked dynamically: $dynamic"
    readelf -lW "$file" | grep -q "INTERP" && fail "$file asks for a program interpreter"
    return 0
  fi
  local needed
  needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' <<< "$dynamic")
  [[ -n "$needed" ]] || fail "$file needs no library at all: $dynamic"
  for lib in $needed; do
    [[ "$allowed" == *" $lib "* ]] || fail "$file needs $lib"
  done
  grep -qE "\((RPATH|RUNPATH)\)" <<< "$dynamic" && fail "$file carries a library path: $dynamic"
  # The versions it needs: "Name: GLIBC_2.17  Flags: none  Version: 3" lines
  # under .gnu.version_r.
  versions=$(readelf -V "$file" | sed -n 's/.*Name: \([A-Z_]*[0-9][0-9.]*\) .*Flags.*/\1/p' | sort -u)
  [[ -n "$versions" ]] || fail "$file needs no symbol version"
  for v in $versions; do
    [[ "$v" == GLIBC_* ]] || fail "$file needs $v: $(tr '\n' ' ' <<< "$versions")"
  done
  newest=$(sed 's/^GLIBC_//' <<< "$versions" | sort -V | tail -1)
  [[ "$(printf '%s\n2.17\n' "$newest" | sort -V | tail -1)" == 2.17 ]] ||
    fail "$file needs GLIBC_$newest: $(tr '\n' ' ' <<< "$versions")"
  echo "$file: needs $(tr '\n' ' ' <<< "$needed")at GLIBC_$newest at most"
}

mkdir "$tmp/tar" "$tmp/deb"
tar -C "$tmp/tar" -xzf "$tarball"
dpkg-deb -x "$deb" "$tmp/deb"
for prefix in "$tmp"/tar/* "$tmp/deb/usr"; do
  check "$prefix/bin/ncclwatch" static
  plugins=("$prefix"/lib/libnccl-profiler-ncclwatch.so "$prefix"/lib/*-linux-gnu/libnccl-profiler-ncclwatch.so)
  found=0
  for so in "${plugins[@]}"; do
    [[ -e "$so" ]] || continue
    check "$so" shared
    found=$((found + 1))
  done
  [[ $found -eq 1 ]] || fail "$prefix holds $found plugins"
done
echo "PASS: $(basename "$tarball") and $(basename "$deb") run on glibc 2.17 and later"
