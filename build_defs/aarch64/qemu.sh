#!/usr/bin/env bash
# qemu.sh PROGRAM ARGS...: PROGRAM, an aarch64 executable, run by qemu-user
# (Debian's qemu-user), its loader and libraries taken from the arm64
# multiarch packages (libc6:arm64 puts the loader at /lib/ld-linux-aarch64.so.1).
# Not from the cross toolchain's /usr/aarch64-linux-gnu: with that prefix
# qemu 7.2 hangs a dynamically linked program in its first pthread_create.
# Programs it executes run as the build machine runs them: x86-64 ones
# natively. A test that is no aarch64 executable (a shell script: it runs
# the aarch64 files it tests with qemu itself) runs as it is.
#
# One test cannot run under qemu 7.2: a child forked from a process with
# threads aborts in qemu's own code when it starts a thread
# ("qemu_plugin_vcpu_init_hook: assertion failed"), before any of ours
# runs. It runs on every other configuration.
emulator_cannot=(
  FaultTest.ForkedChildIsUnharmedAndWritesItsOwnFile
)
if [[ "$(basename "$1")" == fault_test ]]; then
  filter=$(IFS=:; echo "${emulator_cannot[*]}")
  case "${GTEST_FILTER:-*}" in
    *-*) export GTEST_FILTER="$GTEST_FILTER:$filter" ;;
    *) export GTEST_FILTER="${GTEST_FILTER:-*}-$filter" ;;
  esac
fi
if [[ "$(head -c 20 "$1" | od -An -tx1 | tr -d ' \n')" != 7f454c46020101*b700 ]]; then
  exec "$@"  # not a little-endian 64-bit ELF file for machine 183 (AArch64)
fi
exec qemu-aarch64 -L / "$@"
