#!/usr/bin/env bash
# The release as a user gets it: the tarball unpacked into a fresh folder and
# the Debian package extracted (dpkg-deb -x) into another, then run from
# there: the command diagnoses a GPU recording, and the plugin, named by
# NCCL_PROFILER_PLUGIN, records a job on the fake NCCL host.
# An aarch64 release (--config=aarch64) runs under qemu-user, the plugin
# loaded by the aarch64 demo job.
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/release_test.XXXXXX")
demo_job=$PWD/plugin/testing/demo_job
case $(readelf -h "$demo_job" | sed -n 's/^ *Machine: *//p') in
  AArch64) arch=aarch64 deb_arch=arm64 run=(qemu-aarch64 -L /) ;;
  *) arch=x86_64 deb_arch=amd64 run=() ;;
esac
[[ $arch == "$(uname -m)" ]] && run=()
skip_first="HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks); ranks 0,1,2 waited 8.5 s; rank 3 waits in AllGather #4 on comm 'tp' {2,3} (2 ranks)"

# check_command PREFIX: the command there gives testdata/gpu/skip's verdict.
check_command() {
  local prefix=$1 out status=0
  out=$("${run[@]}" "$prefix/bin/ncclwatch" diagnose testdata/gpu/skip) || status=$?
  [[ $status -eq 1 ]] || fail "$prefix/bin/ncclwatch diagnose testdata/gpu/skip: exit $status, want 1 (a problem)"
  [[ "$(head -1 <<< "$out")" == "$skip_first"* ]] || fail "first line: $(head -1 <<< "$out")"
}

# check_plugin TRACES VALUE [ENV...]: the demo job with NCCL_PROFILER_PLUGIN=VALUE
# loads it and leaves one trace file in TRACES, which the command reads.
check_plugin() {
  local traces=$1 value=$2 prefix=$3 out
  shift 3
  mkdir -p "$traces"
  out=$(env "$@" NCCL_PROFILER_PLUGIN="$value" NCCLWATCH_DIR="$traces" "${run[@]}" "$demo_job") ||
    fail "demo_job with NCCL_PROFILER_PLUGIN=$value: exit $?: $out"
  grep -qF "demo_job: NCCL_PROFILER_PLUGIN=$value" <<< "$out" || fail "demo_job did not load $value: $out"
  local files=("$traces"/*.ncclwatch)
  [[ ${#files[@]} -eq 1 && -s "${files[0]}" ]] || fail "no trace file in $traces: $(ls -la "$traces")"
  # The plugin's stuck report (NCCLWATCH_STUCK_SEC=1 in the demo) and its
  # release, read back by the installed command.
  "${run[@]}" "$prefix/bin/ncclwatch" dump "${files[0]}" > "$tmp/dump.txt" || fail "ncclwatch dump ${files[0]}: exit $?"
  grep -Eq " [1-9][0-9]* stuck reports" "$tmp/dump.txt" || fail "no stuck report: $(grep -m1 "^-- " "$tmp/dump.txt")"
  grep -qF "plugin_version: \"$version\"" "$tmp/dump.txt" || fail "the trace does not carry release $version"
}

# --- the tarball
mkdir "$tmp/tar"
tar -C "$tmp/tar" -xzf release/ncclwatch.tar.gz
top=("$tmp"/tar/*)
[[ ${#top[@]} -eq 1 ]] || fail "the tarball holds ${#top[@]} top folders"
name=$(basename "${top[0]}")
[[ "$name" =~ ^ncclwatch-([0-9][^-]*)-linux-$arch$ ]] || fail "top folder $name, want ncclwatch-VERSION-linux-$arch"
version=${BASH_REMATCH[1]}
prefix=${top[0]}
for f in bin/ncclwatch lib/libnccl-profiler-ncclwatch.so share/doc/ncclwatch/README.md \
  share/doc/ncclwatch/docs/ARCHITECTURE.md share/doc/ncclwatch/examples/torchrun.sh \
  share/doc/ncclwatch/examples/slurm.sbatch; do
  [[ -s "$prefix/$f" ]] || fail "the tarball has no $f"
done
[[ -x "$prefix/share/doc/ncclwatch/examples/torchrun.sh" ]] || fail "examples/torchrun.sh is not executable"
[[ "$("${run[@]}" "$prefix/bin/ncclwatch" --version)" == *"$version"* ]] || fail "ncclwatch --version: $("${run[@]}" "$prefix/bin/ncclwatch" --version)"
check_command "$prefix"
check_plugin "$tmp/traces-tar" "$prefix/lib/libnccl-profiler-ncclwatch.so" "$prefix"
# The variable is what picks the plugin: a path that is not there loads nothing.
if env NCCL_PROFILER_PLUGIN="$tmp/none.so" NCCLWATCH_DIR="$tmp" "${run[@]}" "$demo_job" > /dev/null 2>&1; then
  fail "demo_job ran with NCCL_PROFILER_PLUGIN=$tmp/none.so"
fi

# --- the Debian package
control=$(dpkg-deb -f release/ncclwatch.deb Package Version Architecture Maintainer Description)
grep -qx "Package: ncclwatch" <<< "$control" || fail "control: $control"
grep -qx "Version: $version" <<< "$control" || fail "control: $control"
grep -qx "Architecture: $deb_arch" <<< "$control" || fail "control: $control"
grep -q "^Maintainer: ." <<< "$control" || fail "control: $control"
grep -q "^Description: ." <<< "$control" || fail "control: $control"
mkdir "$tmp/deb"
dpkg-deb -x release/ncclwatch.deb "$tmp/deb"
usr=$tmp/deb/usr
libdir=$usr/lib/$arch-linux-gnu
[[ -s "$libdir/libnccl-profiler-ncclwatch.so" ]] || fail "the package has no plugin in /usr/lib/$arch-linux-gnu"
[[ -s "$usr/share/doc/ncclwatch/README.md" ]] || fail "the package has no README"
check_command "$usr"
# By name, as on a node where the package is installed (the multiarch folder
# is on the loader's path there; here LD_LIBRARY_PATH stands in for it).
check_plugin "$tmp/traces-deb" ncclwatch "$usr" LD_LIBRARY_PATH="$libdir"

echo "PASS: ncclwatch $version for $arch: tarball and Debian package"
