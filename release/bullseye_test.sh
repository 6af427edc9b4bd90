#!/usr/bin/env bash
# The release tarball on an older system than the one it was built on: a
# Debian 11 root (glibc 2.31, no libprotobuf, no Abseil) made by debootstrap,
# cached at /var/cache/ncclwatch/bullseye (scripts/install_deps.sh makes it).
# Inside it, the tarball's command diagnoses a GPU recording, and the
# tarball's examples/torchrun.sh runs the fake NCCL host's demo job with the
# tarball's plugin, once ending well and once failing (the summaries' path):
# every ncclwatch step must give the verdict the build machine's command
# gives of the same files.
#
# The fake host is a test program of the build machine (it reads traces with
# libprotobuf); it runs in the root under the build machine's loader and
# libraries, copied beside it. Everything else there is Debian 11's.
#
# Needs root (chroot), or unprivileged user namespaces.
#
#   bullseye_test.sh TARBALL ARCH   (ARCH: x86_64 or aarch64, the tarball's)
set -euo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
tarball=$1 arch=$2
root=${NCCLWATCH_BULLSEYE_ROOT:-/var/cache/ncclwatch/bullseye-$arch}
[[ -e "$root/.ncclwatch-complete" ]] ||
  fail "no Debian 11 root at $root: scripts/install_deps.sh makes it (debootstrap bullseye)"
demo_job=$PWD/plugin/testing/demo_job
work=$(mktemp -d "$root/tmp/ncclwatch-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
inside=${work#"$root"}

# chroot lives in /usr/sbin, which Bazel's test PATH leaves out.
PATH=$PATH:/usr/sbin:/sbin
enter=(chroot "$root")
[[ $(id -u) -eq 0 ]] || enter=(unshare --map-root-user chroot "$root")
# run CMD...: CMD inside the root, with a clean environment.
run() {
  "${enter[@]}" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/ "$@"
}

glibc=$(run getconf GNU_LIBC_VERSION) || fail "cannot enter $root"
[[ "$glibc" == "glibc 2.31" ]] || fail "the root's C library is $glibc, not Debian 11's glibc 2.31"
run test ! -e "/usr/lib/$arch-linux-gnu/libprotobuf.so.32" || fail "the root has libprotobuf"

mkdir "$work/prefix" "$work/host"
tar -C "$work/prefix" --strip-components=1 -xzf "$tarball"
here=$(mktemp -d "${TEST_TMPDIR:-/tmp}/bullseye_test.XXXXXX")
tar -C "$here" --strip-components=1 -xzf "$tarball"
ncclwatch=$here/bin/ncclwatch

# The fake host and what it needs of the build machine, run by that loader.
cp "$demo_job" "$work/host/demo_job"
loader=$(readelf -lW "$demo_job" | sed -n 's/.*Requesting program interpreter: \(.*\)]$/\1/p')
[[ -n "$loader" ]] || fail "demo_job names no loader"
cp -L "$loader" "$work/host/"
for lib in $(ldd "$demo_job" | sed -n 's/.* => \(\/[^ ]*\) .*/\1/p'); do
  cp -L "$lib" "$work/host/"
done
# And the build machine's glibc libraries that the plugin names and the
# host's program does not (libdl.so.2, libpthread.so.0): Debian 11's would
# not match the build machine's libc.
libc_dir=$(dirname "$(ldd "$demo_job" | sed -n 's/.*libc\.so\.6 => \(\/[^ ]*\) .*/\1/p')")
for lib in $(readelf -d "$here/lib/libnccl-profiler-ncclwatch.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'); do
  [[ -e "$work/host/$lib" || ! -e "$libc_dir/$lib" ]] || cp -L "$libc_dir/$lib" "$work/host/"
done
cat > "$work/host/job" << JOB
#!/bin/sh
exec $inside/host/$(basename "$loader") --library-path $inside/host $inside/host/demo_job "\$@"
JOB
cat > "$work/host/failing_job" << JOB
#!/bin/sh
$inside/host/job
exit 1
JOB
chmod +x "$work/host/job" "$work/host/failing_job"

# same_as_here INSIDE_OUTPUT FILE_OR_FOLDER: the verdict the command gave in
# the root is the one the build machine's gives of the same files.
same_as_here() {
  local got=$1 path=$2 want status=0
  want=$("$ncclwatch" diagnose "$root$path" 2>&1 | head -1) || :
  want=${want//"$root"/}
  [[ -n "$got" && "$got" == "$want" ]] || fail "in the root: '$got'; here: '$want'"
}

# --- the command itself: testdata/gpu/skip's hang.
cp -rL testdata/gpu/skip "$work/skip"
status=0
out=$(run "$inside/prefix/bin/ncclwatch" diagnose "$inside/skip" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "ncclwatch diagnose testdata/gpu/skip in the root: exit $status: $out"
[[ "$(head -1 <<< "$out")" == "HANG: rank 3 never joined AllReduce #4 on comm 'world' (4 ranks);"* ]] ||
  fail "ncclwatch diagnose testdata/gpu/skip in the root: $(head -1 <<< "$out")"
same_as_here "$(head -1 <<< "$out")" "$inside/skip"
echo "in Debian 11: $(head -1 <<< "$out")"

# --- torchrun.sh, the demo job ending well: watch and diagnose.
status=0
out=$(run NCCLWATCH_PREFIX="$inside/prefix" NCCLWATCH_JOB_ID=bullseye-1 NCCLWATCH_TRACES="$inside/ok" \
  bash "$inside/prefix/share/doc/ncclwatch/examples/torchrun.sh" "$inside/host/job" 2>&1) || status=$?
[[ $status -eq 0 ]] || fail "torchrun.sh in the root: exit $status: $out"
echo "$out" | grep "^ncclwatch"
files=("$work/ok/$(hostname)"/*.ncclwatch)
[[ ${#files[@]} -eq 1 && -s "${files[0]}" ]] || fail "the plugin left no trace: $(ls -laR "$work/ok")"
watch=$(sed -n 's/^ncclwatch watch: //p' <<< "$out")
[[ -n "$watch" && "$watch" == "$(head -1 "$work/ok/verdict.txt")" ]] || fail "watch gave no verdict: $out"
# The demo job's hang, whatever else watch says of it.
[[ "$watch" == *"AllReduce"* ]] || fail "watch: $watch"
diagnosis=$(head -1 "$work/ok/diagnosis.txt")
grep -qF "ncclwatch diagnose (exit " <<< "$out" || fail "torchrun.sh ran no diagnose: $out"
[[ "$diagnosis" == *"AllReduce"* ]] || fail "diagnose: $diagnosis"
same_as_here "$diagnosis" "$inside/ok"

# --- torchrun.sh, a failing job: summarize, then diagnose of the summaries.
status=0
out=$(run NCCLWATCH_PREFIX="$inside/prefix" NCCLWATCH_JOB_ID=bullseye-2 NCCLWATCH_TRACES="$inside/failed" \
  bash "$inside/prefix/share/doc/ncclwatch/examples/torchrun.sh" "$inside/host/failing_job" 2>&1) || status=$?
[[ $status -eq 1 ]] || fail "torchrun.sh with a failing job in the root: exit $status: $out"
echo "$out" | grep "^ncclwatch"
grep -qE "^ncclwatch summarize \(exit 0\): " <<< "$out" || fail "summarize failed in the root: $out"
diagnosis=$(head -1 "$work/failed/diagnosis.txt")
[[ "$diagnosis" == *"AllReduce"* ]] || fail "diagnose of the summaries: $diagnosis"
[[ "$(grep "^ncclwatch diagnose of the summaries (exit " <<< "$out")" == *"): $diagnosis" ]] ||
  fail "torchrun.sh did not print the diagnosis of the summaries: $out"
same_as_here "$diagnosis" "$inside/failed/summaries"

echo "PASS: the $arch tarball in Debian 11 ($glibc)"
