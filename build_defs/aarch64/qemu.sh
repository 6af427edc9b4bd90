#!/usr/bin/env bash
# qemu.sh PROGRAM ARGS...: PROGRAM, an aarch64 executable, run by qemu-user
# (Debian's qemu-user), its loader and C library taken from Debian's arm64
# cross libc (/usr/aarch64-linux-gnu), its other libraries from the arm64
# multiarch folders. Programs it executes run as the build machine runs
# them: x86-64 ones natively.
exec qemu-aarch64 -L /usr/aarch64-linux-gnu "$@"
